"""The whole stack for tests: ganesha.nfsd with FSAL_PPL over FSAL_VFS and
the elision service on a private port (its pool made for the export),
ppl-mount of the export (hard, direct I/O), and MariaDB on the mount with
LD_PRELOAD=libcatcher.so. Every process is a direct child of the test,
stopped by pid.

    s = Stack(tmp_path, options=[...], catcher_mode="elide", page_size=16384)
    s.start()                 # storage node, mount, mariadb-install-db, mariadbd
    s.db                      # lib.mariadb.MariaDB (sql, sysbench, stop, kill, start)
    s.crash_storage()         # SIGKILL ganesha.nfsd, start it again on the same ports
    s.catcher_stats()         # libcatcher's counters now (SIGUSR2)
    s.live("stats")           # the storage node's figures (ppl-inspect live)
    s.stop()                  # everything, idempotent
    s.storage_log()           # every ganesha.nfsd log of the test so far
    s.assert_storage_clean()  # no rebuild failure, stopped ingest or refused checkpoint logged
"""
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

from lib import paths
from lib.ganesha import Ganesha, free_port
from lib.mariadb import MariaDB


def mount_class():
    """ppl-mount's runner (tests/ppl_mount/_mount.py): foreground child,
    unmounted with fusermount3, killed by pid only as a last resort."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "ppl_mount_runner", os.path.join(paths.REPO, "tests", "ppl_mount", "_mount.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.PplMount


def catcher_stats(db, path, timeout=10):
    """libcatcher's counters now: SIGUSR2 makes mariadbd's libcatcher
    rewrite its stats file at path."""
    if os.path.exists(path):
        os.unlink(path)
    db.proc.send_signal(signal.SIGUSR2)
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise AssertionError(f"libcatcher wrote no stats file {path} after SIGUSR2")
        time.sleep(0.05)
    with open(path) as f:
        return json.load(f)


TOKEN = "stack-test-token"
# Lines the storage node writes only when something went wrong.
STORAGE_FAILURES = ("cannot be rebuilt", "READ fails", "redo ingest stopped", "could not be materialized",
                    "cannot be materialized", "is refused", "divergence")


VERIFY_LINE = re.compile(r"PPL: stats at unexport .*?verify: (\d+) page writes identical to the rebuild, (\d+) "
                         r"diverged, (\d+) not comparable(?: \(([^;)]*); unexplained (\d+)\))?")


def verify_counts(log):
    """Verify mode's counts in each stats line at unexport of a storage
    node's log: [{"same", "diverged", "skipped", "unexplained", "causes"}]
    (causes: {name: count} of the page writes not compared)."""
    out = []
    for m in VERIFY_LINE.finditer(log):
        causes = {}
        for part in (m.group(4) or "").split(", "):
            if part:
                name, n = part.rsplit(" ", 1)
                causes[name] = int(n)
        out.append({"same": int(m.group(1)), "diverged": int(m.group(2)), "skipped": int(m.group(3)),
                    "unexplained": int(m.group(5) or 0), "causes": causes, "text": m.group(0)})
    return out


def require_stack():
    """In a test that runs the whole stack: fails without FUSE (ppl-mount
    needs it), skips on a sanitizer build (MariaDB can preload only the
    normal build's libcatcher.so)."""
    import pytest  # here: scripts import this module without pytest
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        pytest.fail("needs /dev/fuse and fusermount3 (see DESIGN.md, Clients)")
    with open(os.path.join(paths.build_dir(), "CMakeCache.txt")) as f:
        if "PPL_SANITIZE:BOOL=ON" in f.read():
            pytest.skip("MariaDB runs only with the normal build's libcatcher.so")


class Stack:
    def __init__(self, base, options=(), catcher_mode="elide", page_size=16384, fsal_extra="", pool_size="16M",
                 storage_elision=True, pool_args=(), mount_options=("--hard", "--direct-io"), pool_dir=None,
                 plugins="plugins", catcher_env=None):
        """storage_elision=False: the storage node runs no elision service
        (libcatcher's questions find nothing listening, so it writes every
        page itself). mount_options: ppl-mount's; without --direct-io,
        files opened without O_DIRECT go through the client's page cache,
        as on a kernel NFS mount. pool_dir: where the pool is made (default
        BASE/pmem, on the test's file system: every persist an msync; a
        tmpfs emulates NVDIMM). plugins: the Plugins_Dir under the build's
        ganesha-fsal-ppl/ ("plugins-crash": the plugin with the store's
        named crash points, ppl/crash.h)."""
        base = str(base)
        build = paths.build_dir()
        self.base = base
        self.export = os.path.join(base, "export")
        os.makedirs(self.export)
        self.pool = pool = os.path.join(pool_dir or os.path.join(base, "pmem"), "ppl.pool")
        os.makedirs(os.path.dirname(pool), exist_ok=True)
        subprocess.run([paths.tool("ppl-inspect"), "pool", "create", pool, "--identity", self.export,
                        "--size", pool_size, *pool_args], check=True, capture_output=True)
        self.elision_port = port = free_port()
        service = (f'Elision_Port = {port}; Elision_Token = "{TOKEN}"; Elision_Clients = "127.0.0.1";'
                   if storage_elision else "")
        fsal = (f'FSAL {{ Name = PPL; Pool_Path = "{pool}"; Stats_Interval = 0; {service} {fsal_extra} '
                f'FSAL {{ Name = VFS; }} }}')
        self.g = Ganesha(os.path.join(base, "ganesha"), self.export, fsal=fsal,
                         plugins_dir=os.path.join(build, "ganesha-fsal-ppl", plugins))
        self.mnt = os.path.join(base, "mnt")
        os.makedirs(self.mnt)
        self.stats = os.path.join(base, "catcher.json")
        env = {"LD_PRELOAD": os.path.join(build, "libcatcher", "libcatcher.so"), "LIBCATCHER_MODE": catcher_mode,
               "LIBCATCHER_SERVER": f"127.0.0.1:{port}", "LIBCATCHER_TOKEN": TOKEN,
               "LIBCATCHER_TIMEOUT_MS": "2000", "LIBCATCHER_STATS_FILE": self.stats, **(catcher_env or {})}
        self.db = MariaDB(os.path.join(base, "mariadb"), datadir=os.path.join(self.mnt, "datadir"),
                          page_size=page_size, options=options, env=env)
        os.makedirs(self.db.base)
        self.mount = None
        self.mount_options = list(mount_options)
        self._logs = []

    def start(self, install=True):
        self.g.start()
        self.mount_up()
        if install:
            self.db.install()
        self.db.start()

    def mount_up(self):
        self.mount = mount_class()(paths.tool("ppl-mount"), self.g.url(), self.mnt,
                                    options=self.mount_options, log=os.path.join(self.base, "ppl-mount.log"))
        self.mount.start()

    def crash_storage(self):
        """SIGKILL ganesha.nfsd and start it again on the same ports; the
        hard mount and MariaDB wait for it meanwhile."""
        self.g.kill9()
        self.restart_storage()

    def restart_storage(self, env=None):
        """Starts ganesha.nfsd again on the same ports after it died (its
        log so far is kept for assert_storage_clean); env: environment
        for this start only."""
        self._logs.append(self.g.log_text())
        self.g.env = env
        try:
            self.g.start()
        finally:
            self.g.env = None

    def sysbench_through_storage_crash(self, seconds, crash_after, tables, table_size):
        """sysbench oltp_write_only for `seconds`, with ganesha.nfsd killed
        and started again `crash_after` seconds in. MariaDB waits on the
        hard mount meanwhile, so the run must succeed."""
        failure = []

        def load():
            try:
                self.db.sysbench("oltp_write_only", "run", f"--time={seconds}", tables=tables,
                                 table_size=table_size)
            except Exception as exc:  # raised below, in the caller's thread
                failure.append(exc)
        t = threading.Thread(target=load)
        t.start()
        time.sleep(crash_after)
        self.crash_storage()
        t.join(timeout=300)
        assert not t.is_alive() and not failure, failure

    def catcher_stats(self, timeout=10):
        return catcher_stats(self.db, self.stats, timeout)

    def live(self, *request):
        """The storage node's answer to `ppl-inspect live POOL REQUEST...`."""
        r = subprocess.run([paths.tool("ppl-inspect"), "live", self.pool, *request, "--json"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def stop(self):
        # SIGKILL mariadbd first but reap it after the mount is gone: its
        # exit closes files on the mount, and with the storage node dead
        # (a failed crash test) the hard mount would hold it there forever.
        if self.db.proc and self.db.proc.poll() is None:
            self.db.proc.kill()
        if self.mount:
            self.mount.stop()
            self.mount = None
        self.db.kill()
        if self.g.proc:
            self.g.stop()
            self._logs.append(self.g.log_text())

    def storage_log(self):
        return "\n".join(self._logs + ([self.g.log_text()] if self.g.proc else []))

    def assert_storage_clean(self):
        text = self.storage_log()
        bad = [line for line in text.splitlines() if any(w in line for w in STORAGE_FAILURES)]
        assert not bad, "\n".join(bad[:10])
