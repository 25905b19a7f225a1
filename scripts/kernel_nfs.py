"""The storage node's export mounted by the kernel's NFS client, where the
host has one; the scripts fall back to ppl-mount (FUSE) where it has not,
as on this project's machines (DESIGN.md, "Clients").

    ok, why = available()            # (True, "") or (False, the reason)
    m = KernelNfsMount(host, port, mnt_port, pseudo, mountpoint)
    m.start()                        # mount -t nfs (NFSv3 over TCP, hard)
    m.mounted()                      # still listed in /proc/self/mounts
    m.stop()                         # umount; lazily if busy; idempotent

A kernel mount is not a process: there is no pid to keep or signal, and
stop() undoes exactly the mount start() made, by its mount point."""
import os
import platform
import shutil
import subprocess
import time


def available():
    """Whether `mount -t nfs` can work here: the mount helper from
    nfs-common, and the nfs filesystem in the kernel or as a module."""
    if not shutil.which("mount.nfs"):
        return False, "mount.nfs is missing (Debian package nfs-common)"
    with open("/proc/filesystems") as f:
        if any(line.split()[-1:] == ["nfs"] for line in f):
            return True, ""
    if os.path.isdir(f"/lib/modules/{platform.release()}/kernel/fs/nfs"):
        return True, ""       # mount loads the module on demand
    return False, "this kernel has no NFS client (nfs is not in /proc/filesystems and there is no nfs module)"


def _listed(mountpoint):
    mp = os.path.realpath(mountpoint)
    with open("/proc/self/mounts") as f:
        return any(len(fl) > 2 and fl[1] == mp and fl[2].startswith("nfs") for fl in (line.split() for line in f))


class KernelNfsMount:
    def __init__(self, host, port, mnt_port, pseudo, mountpoint):
        self.source = f"{host}:{pseudo}"
        # NFSv3 over TCP on the server's private ports; no NLM (the test and
        # demo servers run without it; MariaDB locks only within its
        # process); hard, so that a storage-node restart is waited out.
        self.options = (f"vers=3,proto=tcp,port={port},mountport={mnt_port},mountproto=tcp,nolock,hard")
        self.mountpoint = mountpoint
        self.proc = None   # nothing runs in user space for a kernel mount

    def start(self, timeout=30):
        r = subprocess.run(["mount", "-t", "nfs", "-o", self.options, self.source, self.mountpoint],
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0 or not _listed(self.mountpoint):
            raise RuntimeError(f"mount -t nfs -o {self.options} {self.source} {self.mountpoint} failed "
                               f"(exit {r.returncode}): {r.stderr.strip() or r.stdout.strip()}; "
                               "--client ppl-mount uses the FUSE client instead")

    def mounted(self):
        return _listed(self.mountpoint)

    def stop(self, timeout=30):
        if not _listed(self.mountpoint):
            return
        subprocess.run(["umount", self.mountpoint], capture_output=True, timeout=timeout)
        deadline = time.time() + timeout
        while _listed(self.mountpoint) and time.time() < deadline:
            time.sleep(0.2)
        if _listed(self.mountpoint):
            # Busy (a process still has a file open): detach it now; the
            # kernel finishes the unmount once the last user is gone.
            subprocess.run(["umount", "-l", self.mountpoint], capture_output=True, timeout=timeout)
