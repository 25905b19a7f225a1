"""Run ppl-mount in the foreground as a direct child: start, wait until the
kernel lists the mount, unmount with fusermount3 -u, and kill by pid only
if the process is still alive after that."""
import os
import signal
import subprocess
import time


def is_mounted(mountpoint):
    # abspath, not realpath: realpath stats the mount point itself, which
    # waits forever on a hard mount whose server is gone
    mp = os.path.abspath(mountpoint)
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[1] == mp and fields[2].startswith("fuse"):
                return True
    return False


class PplMount:
    def __init__(self, binary, url, mountpoint, options=(), log=None):
        self.binary = binary
        self.url = url
        self.mountpoint = mountpoint
        self.options = list(options)
        self.log = log or (mountpoint.rstrip("/") + ".log")
        self.proc = None

    def start(self, timeout=30):
        logf = open(self.log, "ab")
        env = dict(os.environ)
        # Only has an effect on an ASan build (PPL_SANITIZE=ON).
        env.setdefault("LSAN_OPTIONS", "suppressions=" + os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "lsan.supp"))
        self.proc = subprocess.Popen([self.binary, self.url, self.mountpoint, "-f", *self.options],
                                     stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env)
        logf.close()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ppl-mount exited with {self.proc.returncode}:\n{self.tail_log()}")
            if is_mounted(self.mountpoint):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("ppl-mount did not mount in time:\n" + self.tail_log())

    def kill9(self):
        """Crash the client: SIGKILL by pid. The mount stays, dead, until stop()."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout=30):
        """fusermount3 -u (lazily if busy), then wait; SIGKILL by pid as a last resort."""
        if is_mounted(self.mountpoint):
            r = subprocess.run(["fusermount3", "-u", self.mountpoint],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if r.returncode != 0 and is_mounted(self.mountpoint):
                subprocess.run(["fusermount3", "-u", "-z", self.mountpoint],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def tail_log(self, n=40):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"
