"""Where the tests find the project's build products."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_dir():
    # absolute: servers the tests start (mariadbd with LD_PRELOAD) run in
    # other directories, where a relative path names nothing
    d = os.path.abspath(os.environ.get("PPL_BUILD_DIR") or os.path.join(REPO, "build"))
    if not os.path.isdir(d):
        raise RuntimeError(f"build directory {d} missing: run scripts/test.sh (or cmake -B build) first")
    return d


def tool(name):
    """Path of a built executable, searched in the build tree."""
    for root, _dirs, files in os.walk(build_dir()):
        if name in files:
            p = os.path.join(root, name)
            if os.access(p, os.X_OK):
                return p
    raise RuntimeError(f"{name} not found under {build_dir()}: build the project first")
