"""A private MariaDB server for tests: its own datadir, socket and pid,
started as a direct child of the test process and stopped by pid.
Networking is off; clients use the UNIX socket."""
import os
import shutil
import signal
import subprocess
import time

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"



# How long one statement of a test may take (MariaDB.sql).
SQL_TIMEOUT_S = 900


def check_table_problems(out):
    """The lines of CHECK TABLE's output that say a table is not sound
    (empty: every table checked OK). MariaDB ends each table's rows with
    `status OK`, or, when InnoDB finds its B-tree corrupt, with `error
    Corrupt` after warnings that say what it found (sql_admin.cc): a
    check that looks only at `status` rows passes a corrupt table."""
    rows = [line.split("\t") for line in out.strip().splitlines() if line.strip()]
    if not rows:
        return ["CHECK TABLE printed nothing"]
    last = {}
    for r in rows:
        last[r[0]] = r
    bad = ["\t".join(r) for r in rows if len(r) < 4 or r[2] == "error"]
    bad += ["\t".join(r) for r in last.values() if r[2:] != ["status", "OK"] and "\t".join(r) not in bad]
    return bad


def assert_checked(out):
    """CHECK TABLE's output says OK for every table it names."""
    bad = check_table_problems(out)
    assert not bad, "CHECK TABLE found problems:\n" + "\n".join(bad) + "\n--- whole output:\n" + out

class MariaDB:
    def __init__(self, base, page_size=16384, options=(), env=None, datadir=None):
        self.base = base
        self.datadir = datadir or os.path.join(base, "data")
        self.socket = os.path.join(base, "mysqld.sock")
        self.pidfile = os.path.join(base, "mysqld.pid")
        self.errlog = os.path.join(base, "error.log")
        self.page_size = page_size
        self.options = list(options)
        self.env = env
        self.proc = None

    def common_args(self):
        return [
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--innodb-page-size={self.page_size}",
            "--user=root",
        ]

    def install(self):
        os.makedirs(self.datadir, exist_ok=True)
        out = subprocess.run(
            ["mariadb-install-db", *self.common_args(), "--auth-root-authentication-method=normal",
             "--skip-test-db", *self.options],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if out.returncode != 0:
            raise RuntimeError("mariadb-install-db failed:\n" + out.stdout[-4000:])

    def start(self, extra=(), timeout=120, poll=0.2):
        """Returns once the server answers a ping, checked every `poll` s."""
        args = [MARIADBD, *self.common_args(), f"--socket={self.socket}", f"--pid-file={self.pidfile}",
                f"--log-error={self.errlog}", "--skip-networking", "--skip-grant-tables=0",
                *self.options, *extra]
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited with {self.proc.returncode}:\n{self.tail_log()}")
            if os.path.exists(self.socket) and self.ping():
                return
            time.sleep(poll)
        self.kill()
        raise RuntimeError("mariadbd did not come up in time:\n" + self.tail_log())

    def ping(self):
        r = subprocess.run(["mariadb-admin", "--no-defaults", "-uroot", f"--socket={self.socket}", "ping"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0

    def sql(self, statement, db=None, check=True):
        # A statement longer than one argument may be (128 KiB on Linux:
        # a ledger's thousands of ids) goes through stdin instead of -e.
        long = len(statement) > 65536
        args = ["mariadb", "--no-defaults", "-uroot", f"--socket={self.socket}", "-N", "-B"]
        if not long:
            args += ["-e", statement]
        if db:
            args.insert(2, f"--database={db}")  # --no-defaults must stay first
        # Bounded: a storage node that stops serving must fail the test
        # that waits on it, not hang the suite (no statement here takes
        # minutes).
        r = subprocess.run(args, input=statement if long else None, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=SQL_TIMEOUT_S)
        if check and r.returncode != 0:
            raise RuntimeError(f"SQL failed: {statement[:200]}\n{r.stderr}")
        return r.stdout

    def sysbench(self, test, *args, tables=4, table_size=2000, threads=2, db="sbtest", timeout=600):
        cmd = ["sysbench", test, "--db-driver=mysql", f"--mysql-socket={self.socket}", "--mysql-user=root",
               f"--mysql-db={db}", f"--tables={tables}", f"--table-size={table_size}", f"--threads={threads}",
               *args]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("sysbench failed: " + " ".join(cmd) + "\n" + r.stdout[-4000:])
        return r.stdout

    def checked(self, tables):
        """CHECK TABLE on tables (a list of db.table) must say OK for each;
        returns their CHECKSUM TABLE, to compare across a restart."""
        assert_checked(self.sql("CHECK TABLE " + ",".join(tables)))
        return self.sql("CHECKSUM TABLE " + ",".join(tables))

    def same_across_restart(self, tables):
        """The tables check, and check with the same checksums after a
        clean restart (whose reads a storage node serves rebuilt); the
        server is left stopped. Returns the checksums."""
        before = self.checked(tables)
        self.stop()
        self.start()
        assert self.checked(tables) == before, "table checksums changed across a restart"
        self.stop()
        return before

    def stop(self, timeout=120):
        """Clean shutdown by pid (SIGTERM), waiting for the child."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self):
        """Crash: SIGKILL by pid."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def tail_log(self, n=40):
        try:
            with open(self.errlog) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no error log)"
