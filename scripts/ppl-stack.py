#!/usr/bin/env python3
"""Start and stop the pushdown stack on one machine, for your own use of it.

  scripts/ppl-stack.py up [--dir DIR] [options]   # runs until `down` (or Ctrl-C)
  scripts/ppl-stack.py down [--dir DIR]           # stops what `up` started; idempotent
  scripts/ppl-stack.py status [--dir DIR]

`up` starts, as its own direct children, the storage node (ganesha.nfsd
with FSAL_PPL over FSAL_VFS, configured from ganesha.conf.example, the pmem
pool on tmpfs or --pmem DIR), mounts its export (with the kernel's NFS
client where the host has one, else with ppl-mount; --client), and starts
the compute node (mariadbd with config/my.cnf and LD_PRELOAD=libcatcher.so;
mariadb-install-db first when the datadir is new). It writes their pids
under DIR/pids, prints how to connect, and stays in the foreground
supervising them: if one dies, the others are stopped. `down` sends SIGTERM
to `up` by its pid file (after checking that the pid is still that
process); `up` then stops mariadbd cleanly, unmounts and stops ganesha.nfsd,
and removes its pid files. Nothing else is ever signalled.

The storage node's files (export/, its pool identity) stay in DIR, so `up`
again restarts on the same data: the restarted storage node ingests the
log before it serves anything. With --netns everything runs in a private
network namespace (the two-node mode; --link-rate shapes its loopback)."""
import argparse
import hashlib
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pplnode  # noqa: E402
from pplnode import Compute  # noqa: E402

TOKEN_FILE = "elision.token"


def pid_alive(pid, marker):
    """Whether pid is alive and still the process we started (its command
    line holds marker): a stale pid file never signals a stranger."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def write_pid(path, pid):
    with open(path, "w") as f:
        f.write(f"{pid}\n")


def token(d):
    path = os.path.join(d, TOKEN_FILE)
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(16).hex() + "\n")
    with open(path) as f:
        return f.read().strip()


class Stopping(Exception):
    pass


def up(a):
    d = a.dir
    pids = os.path.join(d, "pids")
    os.makedirs(pids, exist_ok=True)
    me = os.path.join(pids, "ppl-stack.pid")
    other = read_pid(me)
    if other and other != os.getpid() and pid_alive(other, "ppl-stack.py"):
        raise SystemExit(f"the stack in {d} is already up (pid {other}); `scripts/ppl-stack.py down --dir {d}` "
                         "stops it")
    write_pid(me, os.getpid())
    if a.inner:
        pplnode.inside_netns()
    export = os.path.join(d, "export")
    mnt = os.path.join(d, "mnt")
    os.makedirs(export, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    secret = token(d)
    # one pool per state directory, found again by `up` after a restart
    pool = os.path.join(a.pmem, "ppl-stack-" + hashlib.sha1(os.path.realpath(d).encode()).hexdigest()[:12] + ".pool")
    g, port = pplnode.storage_node(d, export, pool, a.pool_mb * 1024 * 1024, secret,
                                   stats_interval=a.stats_interval)
    env = pplnode.catcher_env(a.catcher, port, secret, os.path.join(d, "libcatcher.%p.json"))
    del env["LIBCATCHER_TOKEN"]                  # from the file: not in /proc/PID/environ
    env["LIBCATCHER_TOKEN_FILE"] = os.path.join(d, TOKEN_FILE)
    db = Compute(os.path.join(d, "mariadb"), datadir=os.path.join(mnt, "data"), page_size=a.page_size,
                 options=[f"--innodb-buffer-pool-size={a.buffer_pool_mb}M"], env=env)
    os.makedirs(db.base, exist_ok=True)
    mount = None

    def on_term(_sig, _frame):
        raise Stopping()
    signal.signal(signal.SIGTERM, on_term)
    try:
        g.start()
        write_pid(os.path.join(pids, "ganesha.pid"), g.pid)
        mount = pplnode.mount_export(a.client, g, mnt, os.path.join(d, "ppl-mount.log"))
        if mount.proc:
            write_pid(os.path.join(pids, "ppl-mount.pid"), mount.proc.pid)
        how = f"ppl-mount pid {mount.proc.pid}" if mount.proc else "kernel NFS client"
        if not os.path.exists(os.path.join(db.datadir, "mysql")):
            print(f"new datadir {db.datadir}: mariadb-install-db", flush=True)
            db.install()
        db.start()
        write_pid(os.path.join(pids, "mariadbd.pid"), db.proc.pid)
        print(f"up: storage node ganesha.nfsd pid {g.pid} (export {export}, log {g.log}, pool {pool}, elision "
              f"port {port}); {how} on {mnt}; mariadbd pid {db.proc.pid} "
              f"(libcatcher {a.catcher}, error log {db.errlog}).\n"
              f"connect: mariadb -uroot --socket={db.socket}\n"
              f"stop:    scripts/ppl-stack.py down --dir {d}", flush=True)
        while True:
            for name, proc in (("ganesha.nfsd", g.proc), ("ppl-mount", mount.proc), ("mariadbd", db.proc)):
                if proc is not None and proc.poll() is not None:
                    print(f"{name} exited with {proc.returncode}; stopping the rest", file=sys.stderr, flush=True)
                    raise Stopping()
            if mount.proc is None and not mount.mounted():
                print(f"the NFS mount on {mnt} is gone; stopping the rest", file=sys.stderr, flush=True)
                raise Stopping()
            time.sleep(0.5)
    except (Stopping, KeyboardInterrupt):
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # one orderly stop
        db.stop()
        if mount:
            mount.stop()
        g.stop()
        for name in ("mariadbd.pid", "ppl-mount.pid", "ganesha.pid", "ppl-stack.pid"):
            try:
                os.unlink(os.path.join(pids, name))
            except OSError:
                pass
        print("down: mariadbd stopped, export unmounted, ganesha.nfsd stopped", flush=True)


def down(a, timeout=180):
    me = os.path.join(a.dir, "pids", "ppl-stack.pid")
    pid = read_pid(me)
    if not pid or not pid_alive(pid, "ppl-stack.py"):
        print(f"not running ({a.dir})")
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + timeout
    while pid_alive(pid, "ppl-stack.py"):
        if time.time() > deadline:
            raise SystemExit(f"ppl-stack.py pid {pid} still running after {timeout} s; see its output")
        time.sleep(0.2)
    print("stopped")


def status(a):
    pids = os.path.join(a.dir, "pids")
    markers = {"ppl-stack.pid": "ppl-stack.py", "ganesha.pid": "ganesha.nfsd", "ppl-mount.pid": "ppl-mount",
               "mariadbd.pid": "mariadbd"}
    up_any = False
    for name, marker in markers.items():
        pid = read_pid(os.path.join(pids, name))
        alive = bool(pid) and pid_alive(pid, marker)
        up_any |= alive
        print(f"{marker:14} {'pid ' + str(pid) if alive else 'not running'}")
    sys.exit(0 if up_any else 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("up", "down", "status"))
    ap.add_argument("--dir", default="/var/lib/ppl-stack", help="state directory (default /var/lib/ppl-stack)")
    ap.add_argument("--catcher", default="elide", choices=("elide", "passthrough", "off"),
                    help="libcatcher mode (default elide)")
    ap.add_argument("--buffer-pool-mb", type=int, default=128)
    ap.add_argument("--page-size", type=int, default=16384, choices=(4096, 8192, 16384, 32768, 65536))
    ap.add_argument("--pool-mb", type=int, default=256, help="pmem pool size (default 256)")
    ap.add_argument("--pmem", help="directory for the pool: a DAX mount, or tmpfs (default /dev/shm)")
    ap.add_argument("--stats-interval", type=int, default=60, help="seconds between PPL stats lines (default 60)")
    ap.add_argument("--client", default="auto", choices=pplnode.CLIENTS,
                    help="NFS client: the kernel's, ppl-mount (FUSE), or auto (the kernel's where there is one; "
                    "default)")
    ap.add_argument("--netns", action="store_true", help="run in a private network namespace (two-node mode)")
    ap.add_argument("--link-rate", help="with --netns: shape the link, e.g. 1gbit")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    a = ap.parse_args()
    a.dir = os.path.abspath(a.dir)
    if a.command == "down":
        return down(a)
    if a.command == "status":
        return status(a)
    a.pmem = a.pmem or pplnode.tmpfs_dir() or a.dir
    a.client = pplnode.choose_client(a.client)
    if a.netns and not a.inner:
        os.makedirs(os.path.join(a.dir, "pids"), exist_ok=True)
        rc = pplnode.run_in_netns(f"ppl-stack-{os.getpid()}", a.link_rate,
                                  [sys.executable, os.path.abspath(__file__), "--inner", *argv])
        if rc is None:
            raise SystemExit("--netns: no private network namespace could be made (root and iproute2 needed)")
        sys.exit(rc)
    up(a)


if __name__ == "__main__":
    main()
