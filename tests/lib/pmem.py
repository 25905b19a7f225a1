"""Where a storage node's pool goes when there is no NVDIMM: a file on
tmpfs stands in for it (DESIGN.md), with Allow_Volatile_Pool = true so the
store uses it as it would persistent memory. A pool on a disk-backed file
system works too, but every persist is then an msync to disk."""
import os


def on_tmpfs(path):
    """Whether path's directory is on a tmpfs (a power loss empties it)."""
    d = os.path.dirname(os.path.abspath(path))
    best = ("", "")
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            mnt = fields[1]
            if (d == mnt or d.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
                best = (mnt, fields[2])
    return best[1] == "tmpfs"


def tmpfs_dir():
    """/dev/shm if it is a tmpfs, else None."""
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1] == "/dev/shm" and fields[2] == "tmpfs":
                return "/dev/shm"
    return None
