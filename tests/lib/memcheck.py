"""ganesha.nfsd under valgrind's memcheck, for the tests of FSAL_PPL.

The plugin cannot run under the sanitizers: ganesha.nfsd dlopen()s its
FSALs with RTLD_DEEPBIND, which their runtimes refuse, and with libasan
preloaded and DEEPBIND taken away it hangs at start-up in glibc's gettext
lock (seen 2026-11-25). Memcheck needs neither an instrumented binary nor
a change to how plugins are loaded.

    wrapper = command(log_dir)    # Ganesha(..., wrapper=wrapper)
    errors(log_dir)               # [[lines of one report], ...]
    assert_clean(log_dir)         # memcheck ran and reported nothing
"""
import os
import re
import shutil

# Known errors of ganesha.nfsd and libntirpc themselves, not of FSAL_PPL.
SUPPRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memcheck.supp")
_LINE = re.compile(r"^==\d+== ?(.*)$")
# The first line of every kind of report memcheck makes, leaks included
# (only definite ones: --errors-for-leak-kinds=definite).
_ERROR = re.compile(r"Invalid (read|write|free)|Conditional jump|Use of uninitialised|Syscall param|"
                    r"Mismatched free|Source and destination overlap|Argument '.*' of function|"
                    r".* are definitely lost")


def command(log_dir):
    if not shutil.which("valgrind"):
        raise RuntimeError("valgrind missing: run scripts/setup.sh")
    return ["valgrind", "--tool=memcheck", "--leak-check=full", "--errors-for-leak-kinds=definite",
            "--num-callers=40", f"--suppressions={SUPPRESSIONS}", f"--log-file={log_dir}/memcheck.%p"]


def errors(log_dir):
    """The errors in memcheck's logs (one file per process), each as the
    lines of its report."""
    found = []
    for name in sorted(os.listdir(log_dir)):
        report = None
        with open(os.path.join(log_dir, name), errors="replace") as f:
            for line in f:
                m = _LINE.match(line)
                if not m:
                    continue
                text = m.group(1).rstrip()
                if _ERROR.match(text):
                    report = [text]
                    found.append(report)
                elif report is not None:
                    if text:
                        report.append(text)
                    else:
                        report = None
    return found


def summary(log_dir):
    """Memcheck's closing lines, to show that it ran and what it saw."""
    lines = []
    for name in sorted(os.listdir(log_dir)):
        with open(os.path.join(log_dir, name), errors="replace") as f:
            lines += [line.strip() for line in f if "total heap usage" in line or "ERROR SUMMARY" in line]
    return lines


def assert_clean(log_dir):
    """Memcheck ran to the end at least once (a server killed with SIGKILL
    writes no summary) and reported no error."""
    assert len(summary(log_dir)) >= 2, "memcheck did not run"
    found = errors(log_dir)
    assert found == [], f"{len(found)} memcheck error(s); the first:\n" + "\n".join(found[0][:40])
