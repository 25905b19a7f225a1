"""MariaDB's own mysql-test-run (Debian's mariadb-test) over the stack.

One call of run() is one mtr run of chosen tests in one set-up:

  a  local datadir, no libcatcher
  b  local datadir, libcatcher in passthrough
  c  the stack: ganesha.nfsd with FSAL_PPL (Verify = true, no elision
     service), ppl-mount (hard, direct I/O), libcatcher in passthrough
  d  the stack eliding: FSAL_PPL with the elision service and Verify = true,
     libcatcher eliding
  e  stock FSAL_VFS (no PPL), ppl-mount, no libcatcher: what any NFS mount
     does, to tell the stack's faults from the mount's

Where mtr keeps things: everything under --vardir (the bootstrap datadir
`install.db`, each server's datadir `mysqld.N/data` -- copied from
install.db before a server starts on a fresh datadir, or bootstrapped in
place when the test's options need it (page size, undo tablespaces) --
logs, pid files, `tmp/` where tests copy files) and the sockets and the
servers' tmpdir under --tmpdir. mtr removes the vardir and creates it again
at start; --vardir is honoured as given (only the default `var` would be a
symlink made by --mem). So for the stack set-ups the vardir is a directory
on the mount (`MNT/var`: the export holds every datadir mtr makes, the
bootstrap included) and --tmpdir is a local directory (sockets must not be
on NFS, and the servers' tmpdir stays off the mount as a user would have
it). libcatcher learns the data directory from --datadir on mariadbd's
command line, which mtr does not pass (it is in mtr's my.cnf), so
LIBCATCHER_DATADIR names the vardir: every datadir mtr creates is under it.

mtr starts mariadbd itself, as its child, with --mysqld-env for the
environment. Ports come from --port-base (a block of 30 free ports on
127.0.0.1 chosen here), --parallel=1. Everything this module starts
(ganesha.nfsd, ppl-mount, mtr) is its direct child and is stopped by pid.

Per test, the report holds mtr's verdict, the storage node's log lines
written while the test ran that say something went wrong
(lib.stack.STORAGE_FAILURES; divergences counted apart), the pages the
storage node verified, and libcatcher's elided page writes: mtr prints a
test's result line after the test and its checks ran; at each result line
the storage node's new log lines and figures, and libcatcher's counters
(SIGUSR2 to the servers whose pid files are in the vardir, only when
libcatcher's handler is installed), are attributed to that test.
"""
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

from lib import paths, pmem  # noqa: E402
from lib.ganesha import Ganesha, free_port  # noqa: E402
from lib.stack import STORAGE_FAILURES, TOKEN, mount_class  # noqa: E402

MTR_DIR = "/usr/share/mysql/mysql-test"
MTR = os.path.join(MTR_DIR, "mariadb-test-run")


@dataclass(frozen=True)
class Setup:
    key: str
    title: str
    storage: str = None        # None: local datadir; "PPL" or "VFS": over ganesha.nfsd + ppl-mount
    catcher: str = None        # None: no LD_PRELOAD; "passthrough" or "elide"
    verify: bool = False       # FSAL_PPL Verify = true
    elision: bool = False      # FSAL_PPL runs the elision service


SETUPS = {
    "a": Setup("a", "local datadir, no libcatcher"),
    "b": Setup("b", "local datadir, libcatcher passthrough", catcher="passthrough"),
    "c": Setup("c", "stack: FSAL_PPL Verify=true, libcatcher passthrough", storage="PPL",
               catcher="passthrough", verify=True),
    "d": Setup("d", "stack eliding: FSAL_PPL elision + Verify=true, libcatcher elide", storage="PPL",
               catcher="elide", verify=True, elision=True),
    "e": Setup("e", "stock FSAL_VFS + ppl-mount, no libcatcher", storage="VFS"),
}


@dataclass
class TestResult:
    name: str                       # suite.test or suite.test 'combination'
    status: str                     # pass, fail, skipped, disabled
    ms: int = None
    comment: str = ""
    detail: list = field(default_factory=list)      # mtr's lines after a failure
    storage_failures: list = field(default_factory=list)  # storage-node lines (STORAGE_FAILURES)
    divergences: int = 0
    verified: int = None            # pages the storage node compared (identical) while the test ran
    elided: int = None              # libcatcher's elided page writes while the test ran
    unexplained: int = None         # page writes verify mode could not compare, for no known reason
    unexplained_lines: list = field(default_factory=list)  # the storage node's lines about them
    at: float = None                # seconds from the run's start to the test's result line

    def reason(self):
        """One line that says why the test failed (mtr's own words)."""
        pats = (r"mysqltest: At line \d+: .*", r"^At line \d+: .*", r"mysqltest: .*", r"Failed to start mysqld.*",
                r"Server \[.*\] (crashed|failed|died).*", r".*[Tt]imeout.*", r".*timed out.*",
                r"Found warnings/errors in server log file.*", r".*Assertion .* failed.*", r".*\[ERROR\].*",
                r".*Result (content|length) mismatch.*", r".*crash.*", r".*failed.*")
        for p in pats:
            for line in [self.comment] + self.detail:
                m = re.search(p, line)
                if m:
                    why = m.group(0).strip()
                    if why.startswith(("Found warnings", "Failed to start")):
                        first = next((x.strip() for x in self.detail if re.search(r"\[ERROR\]|Assertion", x)), "")
                        why += (" -- " + first) if first else ""
                    return why[:300]
        return (self.comment or "").strip()[:300]


@dataclass
class RunResult:
    setup: Setup
    command: list
    started: float
    seconds: float = 0.0
    tests: dict = field(default_factory=dict)       # name -> TestResult, in mtr's order
    outside: list = field(default_factory=list)     # storage failure lines not attributed to a test
    storage_summary: dict = None                    # the storage node's last figures (ppl-inspect live)
    stats_line: str = ""                            # its "PPL: stats at unexport" line
    catcher_total: dict = None                      # libcatcher's counters summed over every server
    aborted: str = None                             # why the run did not finish normally
    mtr_rc: int = None
    mtr_tail: str = ""
    workdir: str = ""
    build: str = ""                                 # the project build it ran with (build_info())
    segment_notes: list = field(default_factory=list)  # why each segment ended early

    def counts(self):
        c = {}
        for t in self.tests.values():
            c[t.status] = c.get(t.status, 0) + 1
        return c

    def to_json(self):
        d = {k: getattr(self, k) for k in ("command", "started", "seconds", "outside", "storage_summary",
                                            "stats_line", "catcher_total", "aborted", "mtr_rc", "workdir",
                                            "build", "segment_notes")}
        d["setup"] = self.setup.key
        d["tests"] = [t.__dict__ for t in self.tests.values()]
        return d

    @classmethod
    def from_json(cls, d):
        r = cls(SETUPS[d["setup"]], d["command"], d["started"])
        for k in ("seconds", "outside", "storage_summary", "stats_line", "catcher_total", "aborted", "mtr_rc",
                  "workdir", "build", "segment_notes"):
            setattr(r, k, d.get(k))
        if r.aborted and "there were failing test cases" in r.aborted:
            r.aborted = None        # saved by a harness that took mtr's normal end for an abort
        for t in d["tests"]:
            r.tests[t["name"]] = TestResult(**t)
        return r


def build_info():
    """The build directory and the source it was built from (its commit,
    when the source is a git checkout or holds a .commit file)."""
    try:
        d = paths.build_dir()
    except RuntimeError as e:
        return str(e)
    src = "?"
    try:
        with open(os.path.join(d, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    src = line.split("=", 1)[1].strip()
    except OSError:
        pass
    commit = ""
    if os.path.exists(os.path.join(src, ".commit")):
        with open(os.path.join(src, ".commit")) as f:
            commit = f.read().strip()[:12]
    else:
        try:
            r = subprocess.run(["git", "-C", src, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                               text=True, timeout=10)
            commit = r.stdout.strip()
            dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            if dirty:
                commit += " with uncommitted changes"
        except (OSError, subprocess.TimeoutExpired):
            pass
    return f"{d} from {src}" + (f" at {commit}" if commit else "")


# "innodb.innodb-wl5522 'strict_full_crc32'   [ pass ]   4407"
RESULT = re.compile(r"^(?:worker\[\d+\] )?(?P<name>[\w-]+\.[\w.-]+(?: '[^']*')?)\s+(?:w\d+\s+)?"
                    r"\[ (?P<status>pass|fail|skipped|disabled|retry-pass|retry-fail) \]\s*(?P<rest>.*)$")


def port_base():
    """An mtr --port-base whose 30 ports (baseport = (base/10 - 1000) * 30
    + 10000) are all free on 127.0.0.1 now, below the ephemeral range."""
    for _ in range(200):
        thread = random.randint(50, 700)
        base = 10000 + thread * 30
        if all(_port_free(p) for p in range(base, base + 30)):
            return (thread + 1000) * 10
    raise RuntimeError("no block of 30 free ports for mtr")


def _port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pool_dir():
    """A new directory for a storage node's pool: on tmpfs (/dev/shm), the
    stand-in for NVDIMM (DESIGN.md), or under PPL_MTR_PMEM if set. On a
    disk-backed file system every persist of the pool is an msync to disk:
    the checkpoint gate then takes about 10 ms to settle the pages a flush
    just elided, and MariaDB's tests that sample "Last checkpoint at" right
    after a flush (innodb.log_file_name, alter_kill, doublewrite: their
    no_checkpoint_start.inc) find the checkpoint written only after their
    sample and skip themselves ("Extra checkpoint"). With the pool where it
    belongs the gate takes well under a millisecond (tests/mtr/README.md)."""
    return tempfile.mkdtemp(prefix="ppl-mtr-pool-", dir=os.environ.get("PPL_MTR_PMEM") or pmem.tmpfs_dir())


class StorageNode:
    """ganesha.nfsd (FSAL_PPL over VFS, or stock VFS) on a private export,
    and ppl-mount of it (hard, direct I/O), both direct children."""

    def __init__(self, base, setup, pool_size="64M", mount_options=("--hard", "--direct-io")):
        self.base = base
        self.mount_options = list(mount_options)
        self.setup = setup
        self.export = os.path.join(base, "export")
        self.mnt = os.path.join(base, "mnt")
        os.makedirs(self.export)
        os.makedirs(self.mnt)
        self.pool = None
        self.pool_dir = None
        self.port = None
        build = paths.build_dir()
        if setup.storage == "PPL":
            self.pool_dir = pool_dir()
            self.pool = os.path.join(self.pool_dir, "ppl.pool")
            # mtr's tests use pages of up to 64 KiB: the doublewrite slots
            # through which the storage node materializes pages must hold them
            subprocess.run([paths.tool("ppl-inspect"), "pool", "create", self.pool, "--identity", self.export,
                            "--size", pool_size, "--dw-page-size", "65536"], check=True, capture_output=True)
            extra = "Verify = true;" if setup.verify else ""
            if pmem.on_tmpfs(self.pool):
                extra += " Allow_Volatile_Pool = true;"  # tmpfs stands in for NVDIMM
            service = ""
            if setup.elision:
                self.port = free_port()
                service = f'Elision_Port = {self.port}; Elision_Token = "{TOKEN}"; Elision_Clients = "127.0.0.1";'
            fsal = (f'FSAL {{ Name = PPL; Pool_Path = "{self.pool}"; Stats_Interval = 0; {service} {extra} '
                    f'FSAL {{ Name = VFS; }} }}')
            self.g = Ganesha(os.path.join(base, "ganesha"), self.export, fsal=fsal,
                             plugins_dir=os.path.join(build, "ganesha-fsal-ppl", "plugins"))
        else:
            self.g = Ganesha(os.path.join(base, "ganesha"), self.export)
        self.mount = None
        self._log_off = 0

    def start(self):
        self.g.start()
        self.mount = mount_class()(paths.tool("ppl-mount"), self.g.url(), self.mnt,
                                    options=self.mount_options, log=os.path.join(self.base, "ppl-mount.log"))
        self.mount.start()

    def stop(self):
        if self.mount:
            if self.g.proc is None or self.g.proc.poll() is not None:
                self.kill_mount()       # a hard mount of a dead server would not unmount
            self.mount.stop()
            self.mount = None
        if self.g.proc:
            self.g.stop()
        if self.pool_dir:
            shutil.rmtree(self.pool_dir, ignore_errors=True)
            self.pool_dir = None

    def dead(self):
        """Why the storage node or the mount is gone, or None."""
        p = self.g.proc
        if p is not None and p.poll() is not None:
            try:
                with open(self.g.stderr, errors="replace") as f:
                    err = " ".join(f.read().split()[-30:])
            except OSError:
                err = ""
            return f"the storage node (ganesha.nfsd) died with status {p.returncode}" + (f": {err}" if err else "")
        m = self.mount.proc if self.mount else None
        if m is not None and m.poll() is not None:
            return f"ppl-mount died with status {m.returncode}"
        return None

    def kill_mount(self):
        """SIGKILL ppl-mount by pid: the kernel aborts the FUSE connection."""
        if self.mount:
            self.mount.kill9()

    def new_log_lines(self):
        """The storage node's log lines written since the last call."""
        try:
            with open(self.g.log, errors="replace") as f:
                f.seek(self._log_off)
                text = f.read()
        except OSError:
            return []
        cut = text.rfind("\n") + 1      # keep a partial last line for next time
        self._log_off += len(text[:cut].encode(errors="replace"))
        return text[:cut].splitlines()

    def live(self):
        """The storage node's figures (ppl-inspect live POOL stats), or None."""
        if not self.pool or not self.g.proc:
            return None
        try:
            r = subprocess.run([paths.tool("ppl-inspect"), "live", self.pool, "stats", "--json"],
                               capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None


def catcher_env(setup, stats_dir, datadir_root, elision_port=None):
    lib = os.path.join(paths.build_dir(), "libcatcher", "libcatcher.so")
    # ld.so ignores a preload it cannot open (one line in the server's
    # error log): the set-up would then run without libcatcher and look
    # like a pass
    if not os.path.isabs(lib) or not os.path.isfile(lib):
        raise RuntimeError(f"libcatcher {lib} is missing (or not an absolute path): build it first")
    env = {"LD_PRELOAD": lib,
           "LIBCATCHER_MODE": setup.catcher, "LIBCATCHER_DATADIR": datadir_root,
           "LIBCATCHER_STATS_FILE": os.path.join(stats_dir, "catcher.%p.json"),
           "LIBCATCHER_TIMEOUT_MS": "2000"}
    if elision_port:
        env["LIBCATCHER_SERVER"] = f"127.0.0.1:{elision_port}"
        env["LIBCATCHER_TOKEN"] = TOKEN
    return env


def _catcher_handler_installed(pid):
    """libcatcher installs its SIGUSR2 handler only where the disposition is
    the default; never signal a process that would die of it."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGUSR2 - 1)))
    except OSError:
        pass
    return False


def _is_our_mariadbd(pid, vardir):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        return False
    return bool(cmd) and os.path.basename(cmd[0]).startswith((b"mariadbd", b"mysqld")) and \
        any(vardir.encode() in a for a in cmd)


def _server_pids(vardir):
    """mariadbd processes whose command line names this vardir (mtr passes
    --defaults-file=VARDIR/my.cnf), from /proc: never reads the mount."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit() and _is_our_mariadbd(int(d), vardir):
            pids.append(int(d))
    return pids


class CatcherCounters:
    """libcatcher's counters over every mariadbd of the run: each writes
    catcher.PID.json at exit and on SIGUSR2."""

    def __init__(self, stats_dir, vardir):
        self.dir = stats_dir
        self.vardir = vardir

    def refresh(self, timeout=3.0):
        for pid in _server_pids(self.vardir):
            if not _catcher_handler_installed(pid):
                continue
            path = os.path.join(self.dir, f"catcher.{pid}.json")
            before = os.stat(path).st_mtime_ns if os.path.exists(path) else None
            try:
                os.kill(pid, signal.SIGUSR2)
            except OSError:
                continue
            deadline = time.time() + timeout
            while time.time() < deadline:
                if os.path.exists(path) and os.stat(path).st_mtime_ns != before:
                    break
                time.sleep(0.02)

    def total(self):
        tot = {"elided": 0, "pages": 0, "writes": 0, "servers": 0}
        try:
            names = os.listdir(self.dir)
        except OSError:
            return tot
        for n in names:
            if not (n.startswith("catcher.") and n.endswith(".json")):
                continue
            try:
                with open(os.path.join(self.dir, n)) as f:
                    s = json.load(f)
            except (OSError, ValueError):
                continue
            t = s.get("total") or {}
            tot["servers"] += 1
            for k in ("elided", "pages", "writes"):
                tot[k] += int(t.get(k, 0))
        return tot


def mtr_command(vardir, tmpdir, tests, suite=None, env=None, testcase_timeout=5, extra=()):
    cmd = [MTR, f"--vardir={vardir}", f"--tmpdir={tmpdir}", f"--port-base={port_base()}", "--parallel=1",
           "--force", "--max-test-fail=0", "--retry=1", f"--testcase-timeout={testcase_timeout}"]
    for k, v in (env or {}).items():
        cmd.append(f"--mysqld-env={k}={v}")
    if suite:
        cmd.append(f"--suite={suite}")
    cmd += list(extra)
    cmd += list(tests)
    return cmd


def _stop_mtr(proc, vardir, node=None):
    """mtr by pid: SIGINT (it stops its servers), then SIGKILL; then any
    server it left (a mariadbd whose command line names this vardir, found
    in /proc: the mount may hang), by pid. If mtr does not exit, the mount
    is killed (processes blocked on a dead storage node wake up)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                if node is not None:
                    node.kill_mount()
                proc.wait()
    for pid in _server_pids(vardir):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run(setup, tests, workdir, suite=None, timeout=3600, testcase_timeout=5, progress=None, extra=(),
        on_test=None, stop=None, resume=True):
    """Run mtr on `tests` (names as mtr takes them) or a whole `suite` in
    `setup` (a Setup or its key), under `workdir` (created; local disk).
    Returns a RunResult (also saved as workdir/result.json, after every
    test). `progress(line)` gets one line per test, `on_test(result)` is
    called after each test; `stop`, a threading.Event, ends the run early
    (mtr stopped by pid, what finished is kept).

    When mtr stops before every test ran -- the storage node or the mount
    died (the test that was running is failed with that reason), or mtr
    gave up ("Not all tests completed", e.g. a bootstrap that failed) --
    and `resume` is on, the tests that have no result yet run again in a
    new segment: a new storage node, a new mount, a new mtr (and
    bootstrap) in workdir/segN. `timeout` bounds the whole run."""
    if isinstance(setup, str):
        setup = SETUPS[setup]
    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    result = RunResult(setup, [], time.time(), workdir=workdir, build=build_info())
    deadline = time.time() + timeout
    expected = list_tests(tests, suite, os.path.join(workdir, "list"), extra) if resume else None
    todo = list(tests)
    seg = 0
    while True:
        seg += 1
        segdir = workdir if seg == 1 else os.path.join(workdir, f"seg{seg}")
        before = len(result.tests)
        _segment(setup, todo, None if seg > 1 else suite, segdir, result, deadline, testcase_timeout, progress,
                 extra, on_test, stop)
        # a stop reaches mtr too when the signal went to the whole process
        # group: mtr's own "Not all tests completed" is then no reason to go on
        if (not resume or expected is None or result.aborted in ("stopped by the user", TIMEOUT_MSG)
                or (stop is not None and stop.is_set())):
            if stop is not None and stop.is_set():
                result.aborted = "stopped by the user"
            break
        done = {base_key(n) for n in result.tests}
        todo = [mtr_arg(n) for n in expected if base_key(n) not in done]
        if not todo:
            break
        if len(result.tests) == before:
            # nothing ran: fail the first test rather than loop
            first = expected[[base_key(n) for n in expected].index(base_key(todo[0]))]
            result.tests[first] = TestResult(first, "fail", comment="mtr ran nothing in this segment: "
                                             + (result.segment_notes[-1] if result.segment_notes else "?"),
                                             at=round(time.time() - result.started, 1))
            todo = todo[1:]
            if not todo:
                break
        if time.time() >= deadline:
            result.aborted = TIMEOUT_MSG
            break
        result.aborted = None
        if progress:
            progress(f"[{setup.key}] resuming with {len(todo)} test(s) in a new segment (new storage node, mount "
                     f"and mtr): {result.segment_notes[-1] if result.segment_notes else ''}")
    result.seconds = time.time() - result.started
    save(result)
    return result


TIMEOUT_MSG = "the harness's timeout ran out; mtr stopped"


def base_key(name):
    """(suite.test, combinations) of a result name or an mtr argument."""
    name = name.replace(" (again)", "")
    m = re.match(r"^(\S+?) '([^']*)'$", name)
    if m:
        return m.group(1), frozenset(m.group(2).split(","))
    b, *c = name.split(",")
    return b, frozenset(c)


def mtr_arg(name):
    """An mtr argument naming exactly this result ("suite.test,c1,c2")."""
    b, c = base_key(name)
    return ",".join([b, *sorted(c)])


def list_tests(tests, suite, workdir, extra=()):
    """The test names (as mtr reports them) mtr would run: mtr --dry-run on
    a local scratch vardir."""
    os.makedirs(workdir, exist_ok=True)
    cmd = mtr_command(os.path.join(workdir, "var"), os.path.join(workdir, "tmp"), tests, suite=suite,
                      extra=[*extra, "--dry-run"])
    r = subprocess.run(cmd, cwd=MTR_DIR, capture_output=True, text=True, errors="replace", timeout=600)
    names = [line.strip() for line in r.stdout.splitlines()
             if re.match(r"^[\w-]+\.[\w.-]+( '[^']*')?$", line.strip())]
    return names or None


def _segment(setup, tests, suite, workdir, result, deadline, testcase_timeout, progress, extra, on_test, stop):
    os.makedirs(workdir, exist_ok=True)
    tmpdir = os.path.join(workdir, "tmp")
    stats_dir = os.path.join(workdir, "catcher")
    os.makedirs(stats_dir, exist_ok=True)
    node = None
    if setup.storage:
        node = StorageNode(os.path.join(workdir, "storage"), setup)
        vardir = os.path.join(node.mnt, "var")
    else:
        vardir = os.path.join(workdir, "var")
    env = None
    if setup.catcher:
        # the vardir exists (mtr creates it) before any server starts;
        # libcatcher canonicalizes it then
        env = catcher_env(setup, stats_dir, os.path.realpath(vardir) if not node else
                          os.path.join(os.path.realpath(node.mnt), "var"), node.port if node else None)
    # a resumed segment keeps the order of the first one's --dry-run list
    cmd = mtr_command(vardir, tmpdir, tests, suite=suite, env=env, testcase_timeout=testcase_timeout,
                      extra=list(extra) + (["--noreorder"] if result.command else []))
    if not result.command:
        result.command = cmd
    counters = CatcherCounters(stats_dir, vardir) if setup.catcher else None
    base_elided = (result.catcher_total or {}).get("elided", 0)
    out_path = os.path.join(workdir, "mtr.out")
    proc = None
    died = []
    try:
        if node:
            node.start()
            node.new_log_lines()    # start-up lines are not any test's
        with open(out_path, "w") as out:
            proc = subprocess.Popen(cmd, cwd=MTR_DIR, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
            done = threading.Event()
            watcher = threading.Thread(target=_watch, args=(done, stop, deadline, proc, vardir, result, node, died),
                                       daemon=True)
            watcher.start()

            def each(r):
                r.seconds = time.time() - r.started
                if counters:
                    r.catcher_total = dict(counters.total())
                    r.catcher_total["elided"] += base_elided
                save(r)
                if on_test:
                    on_test(r)
            try:
                _follow(proc, out, result, node, counters, progress, each, died, prev_elided_base=0)
            finally:
                done.set()
            proc.wait()
            result.mtr_rc = proc.returncode
    finally:
        if proc is not None:
            _stop_mtr(proc, vardir, node)
        if node:
            result.storage_summary = _add_verify(result.storage_summary, node.live())
            node.stop()
            lines = node.new_log_lines()
            _attribute_outside(result, lines)
            for line in lines:
                if "PPL: stats at unexport" in line:
                    result.stats_line = line.strip()
        if counters:
            result.catcher_total = dict(counters.total())
            result.catcher_total["elided"] += base_elided
            if result.tests and not any(n.startswith("catcher.") for n in os.listdir(stats_dir)):
                # every mariadbd writes its counters at exit: none means
                # libcatcher was never loaded, and nothing of this set-up
                # tested it
                note = ("libcatcher wrote no counters: no mariadbd of this set-up loaded it (see "
                        "'cannot be preloaded' in the servers' error logs)")
                result.segment_notes.append(note)
                result.aborted = result.aborted or note
        result.seconds = time.time() - result.started
    try:
        with open(out_path, errors="replace") as f:
            tail = f.readlines()[-15:]
            result.mtr_tail = "".join(tail)
    except OSError:
        tail = []
    # mtr's own last words when it gave up before every test ran ("there
    # were failing test cases" is its normal end after a failure)
    note = died[0] if died else next((x.strip() for x in tail if "Not all tests completed" in x
                                      or ("*** ERROR" in x and "there were failing test cases" not in x)), "")
    if note:
        result.segment_notes.append(note)
        if died:
            last = list(result.tests)[-1] if result.tests else "(none)"
            result.outside.append(f"{note} (after the result of {last}; the tests without a result ran again "
                                  "in a new segment)")
        if not result.aborted:
            result.aborted = note
    save(result)


def _add_verify(acc, live):
    """Verify counts summed over segments (each has its own storage node)."""
    if not live:
        return acc
    if not acc:
        return live
    out = dict(live)
    v1, v2 = (acc.get("verify") or {}), (live.get("verify") or {})
    if v1 or v2:
        out["verify"] = _sum(v1, v2)
    return out


def _sum(a, b):
    """Two figure dicts added key by key; dicts inside (counts by cause)
    likewise."""
    out = {}
    for k in set(a) | set(b):
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) or isinstance(y, dict):
            out[k] = _sum(x or {}, y or {})
        else:
            out[k] = (x or 0) + (y or 0)
    return out


def save(result):
    path = os.path.join(result.workdir, "result.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result.to_json(), f, indent=1)
    os.replace(path + ".tmp", path)


def load(workdir):
    with open(os.path.join(workdir, "result.json")) as f:
        return RunResult.from_json(json.load(f))


def _watch(done, stop, deadline, proc, vardir, result, node, died):
    """Ends the segment early: the user's stop, the run's deadline, or the
    storage node or the mount dying (then the mount is killed first: the
    processes blocked on it wake up with an error)."""
    while not done.wait(1):
        if proc.poll() is not None:
            return
        why = None
        if stop is not None and stop.is_set():
            why = "stopped by the user"
        elif time.time() >= deadline:
            why = TIMEOUT_MSG
        elif node is not None:
            why = node.dead()
            if why:
                died.append(why)
        if why:
            if not died:
                result.aborted = why
            if node is not None and died:
                node.kill_mount()
            _stop_mtr(proc, vardir, node)
            return


# the storage node's lines about unexplained page writes kept per test: the
# node logs the first PPL_VERIFY_SAID_MAX of each cause, then only counts
UNEXPLAINED_LINES = 5


def _failures(lines):
    return [line.strip() for line in lines if any(w in line for w in STORAGE_FAILURES)]


def _attribute_outside(result, lines):
    bad = _failures(lines)
    if bad:
        result.outside.extend(bad[:50])


def _follow(proc, out, result, node, counters, progress, each, died, prev_elided_base=0):
    current = None
    prev_elided = counters.total()["elided"] if counters else 0
    prev_verified = prev_unexplained = None
    if node:
        live = node.live()
        prev_verified = ((live or {}).get("verify") or {}).get("identical")
        prev_unexplained = ((live or {}).get("verify") or {}).get("unexplained")
    for line in proc.stdout:
        out.write(line)
        out.flush()
        m = RESULT.match(line.rstrip("\n"))
        if not m:
            if current is not None and current.status in ("fail", "retry-fail") and len(current.detail) < 80:
                s = line.rstrip("\n")
                if s.strip():
                    current.detail.append(s)
            continue
        name, status, rest = m.group("name"), m.group("status"), m.group("rest").strip()
        t = TestResult(name=name, status=status, at=round(time.time() - result.started, 1))
        if status in ("pass", "retry-pass") and rest.split()[:1] and rest.split()[0].isdigit():
            t.ms = int(rest.split()[0])
        else:
            t.comment = rest
        if node:
            lines = node.new_log_lines()
            bad = _failures(lines)
            t.storage_failures = bad[:30]
            t.divergences = sum(1 for x in lines if "divergence" in x)
            live = node.live()
            v = ((live or {}).get("verify") or {}).get("identical")
            if v is not None and prev_verified is not None:
                t.verified = v - prev_verified
            prev_verified = v if v is not None else prev_verified
            u = ((live or {}).get("verify") or {}).get("unexplained")
            if u is not None and prev_unexplained is not None:
                t.unexplained = u - prev_unexplained
            prev_unexplained = u if u is not None else prev_unexplained
            t.unexplained_lines = [x.split(" :FSAL :", 1)[-1].strip() for x in lines
                                   if "not compared (" in x][:UNEXPLAINED_LINES]
        if counters:
            counters.refresh()
            e = counters.total()["elided"]
            t.elided = e - prev_elided
            prev_elided = e
        if name in result.tests:        # a retry: keep the last verdict
            name = f"{name} (again)"
            t.name = name
        if current is not None:
            if progress:
                progress(format_progress(result, current))
            each(result)
        result.tests[name] = t
        current = t
    # a failure's detail follows its result line: its progress line waits for it
    if current is not None:
        if progress:
            progress(format_progress(result, current))
        each(result)


def format_progress(result, t):
    n = list(result.tests).index(t.name) + 1
    extra = []
    if t.storage_failures:
        extra.append(f"{len(t.storage_failures)} storage failure line(s)")
    if t.divergences:
        extra.append(f"{t.divergences} divergence(s)")
    if t.elided:
        extra.append(f"{t.elided} elided")
    if t.verified:
        extra.append(f"{t.verified} verified")
    why = f"  {t.reason()}" if t.status not in ("pass",) else ""
    return (f"[{result.setup.key}] {n:4d} {t.at or 0:6.0f}s {t.name:50s} {t.status:8s}"
            f"{(' (' + ', '.join(extra) + ')') if extra else ''}{why}")


def verdict_ok(t):
    """A test result that counts as passing over the stack."""
    return t.status in ("pass", "skipped", "disabled") and not t.storage_failures and not t.divergences
