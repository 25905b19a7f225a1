"""Real MariaDB 10.11 with LD_PRELOAD=libcatcher.so against a storage node
that refuses every elision (ppl-elision-ref --mode nack), in each of
MariaDB's three I/O modes, again with that server killed mid-run, and once
with it frozen (SIGSTOP) mid-run.

What must hold (DESIGN I1: a refused or failed question means "write"):
- sysbench runs without errors, CHECK TABLE passes, and after a restart
  without libcatcher the tables hold exactly what they held before;
- libcatcher saw every data-file write InnoDB made: its count of writes to
  InnoDB page files lies between Innodb_data_writes read just before and
  just after the stats dump (both count one per pwrite call, io_uring SQE
  or libaio iocb; redo writes are plain pwrite() calls InnoDB does not
  count there, so they are compared separately), and the writes went
  through the I/O interface of the mode under test;
- nothing was elided, every refusal is accounted for, and every question
  the server answered was counted as its NACK.
"""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from lib import paths
from lib.mariadb import assert_checked
from lib.mariadb import MariaDB

MODES = {
    "io_uring": ([], "io_uring"),
    "libaio": (["--innodb-linux-aio=aio"], "libaio"),
    "sync": (["--innodb-use-native-aio=0"], "pwrite"),
}
SERVER_OPTIONS = ["--innodb-buffer-pool-size=24M", "--innodb-log-file-size=48M"]
TABLES, TABLE_SIZE, RUN_SECONDS = 2, 4000, 12


def sanitized(build):
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return "PPL_SANITIZE:BOOL=ON" in f.read()
    except OSError:
        return False


@pytest.fixture(scope="module")
def catcher(build_dir):
    if sanitized(build_dir):
        # An ASan-instrumented libcatcher needs the ASan runtime loaded
        # first; preloading that into Debian's uninstrumented mariadbd
        # tests ASan, not libcatcher. The C test covers the sanitizer run.
        pytest.skip("MariaDB runs only with the normal build's libcatcher.so")
    lib = os.path.join(build_dir, "libcatcher", "libcatcher.so")
    if not os.path.exists(lib):
        raise RuntimeError(f"{lib} missing: build the project first")
    return lib, paths.tool("ppl-elision-ref")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """One freshly installed datadir, copied for each test."""
    base = tmp_path_factory.mktemp("template")
    db = MariaDB(str(base), options=SERVER_OPTIONS)
    db.install()
    return db.datadir


class RefServer:
    def __init__(self, tool, base):
        self.port_file = os.path.join(base, "ref.port")
        self.stats_file = os.path.join(base, "ref.stats")
        self.proc = subprocess.Popen(
            [tool, "--mode", "nack", "--nack-reason", "not_durable", "--port", "0", "--port-file",
             self.port_file, "--stats-file", self.stats_file, "--token", "t0ken"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(os.path.join(base, "ref.err"), "w"))
        deadline = time.time() + 10
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("ppl-elision-ref did not start")
            time.sleep(0.05)
        with open(self.port_file) as f:
            self.port = int(f.read())

    def stop(self):
        """Clean stop by pid; returns the server's counters."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        stats = {}
        with open(self.stats_file) as f:
            for line in f:
                k, v = line.split()
                stats[k] = int(v)
        return stats

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def status(db, *names):
    out = db.sql("SHOW GLOBAL STATUS WHERE Variable_name IN (%s)" % ",".join(f"'{n}'" for n in names))
    vals = dict(line.split("\t") for line in out.strip().splitlines())
    return {n: int(vals[n]) for n in names}


def quiesce(db, timeout=60):
    """Flush every dirty page and wait until InnoDB stops writing pages."""
    db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0.001")
    db.sql("SET GLOBAL innodb_max_dirty_pages_pct=0")
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        s = status(db, "Innodb_buffer_pool_pages_dirty", "Innodb_data_writes")
        if s["Innodb_buffer_pool_pages_dirty"] == 0 and last == s["Innodb_data_writes"]:
            return
        last = s["Innodb_data_writes"]
        time.sleep(1)
    raise AssertionError("InnoDB kept writing pages for %d s after the workload" % timeout)


def dump_stats(db, path, timeout=10):
    """SIGUSR2 to mariadbd (by pid) makes libcatcher write its stats file."""
    if os.path.exists(path):
        os.unlink(path)
    db.proc.send_signal(signal.SIGUSR2)
    deadline = time.time() + timeout
    while not os.path.exists(path):
        assert db.proc.poll() is None, "mariadbd died on SIGUSR2:\n" + db.tail_log()
        assert time.time() < deadline, "libcatcher wrote no stats file on SIGUSR2"
        time.sleep(0.05)
    with open(path) as f:
        return json.load(f)


def table_checksums(db):
    # (fully qualified names: MariaDB.sql(db=...) puts --database before --no-defaults)
    out = db.sql("CHECKSUM TABLE " + ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1)))
    return out


def check_tables(db):
    assert_checked(db.sql("CHECK TABLE " + ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1))))


PAGE_CLASSES = ("ibd", "ibdata", "undo", "temp", "other")


def run_case(tmp_path, catcher, template, mode, fault):
    """fault: None, "kill" (SIGKILL the server mid-run) or "hang" (SIGSTOP
    it mid-run: connections stay open and questions go unanswered, so
    every one must give up after LIBCATCHER_TIMEOUT_MS)."""
    lib, ref_tool = catcher
    extra, style = MODES[mode]
    base = str(tmp_path)
    shutil.copytree(template, os.path.join(base, "data"))
    ref = RefServer(ref_tool, base)
    stats_file = os.path.join(base, "catcher.json")
    env = {
        "LD_PRELOAD": lib,
        "LIBCATCHER_SERVER": f"127.0.0.1:{ref.port}",
        "LIBCATCHER_TOKEN": "t0ken",
        "LIBCATCHER_TIMEOUT_MS": "200",
        "LIBCATCHER_STATS_FILE": stats_file,
        "LIBCATCHER_LOG_INTERVAL": "2",
        # no LIBCATCHER_DATADIR: libcatcher takes --datadir from mariadbd's command line
    }
    db = MariaDB(base, options=SERVER_OPTIONS + extra, env=env)
    db.start()
    db_pid = db.proc.pid
    try:
        log = open(db.errlog).read()
        if mode == "io_uring":
            assert "Using io_uring" in log, "MariaDB did not use io_uring:\n" + log[-2000:]
        if mode == "libaio":
            assert "Using Linux native AIO" in log, log[-2000:]

        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_read_write", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        # flush continuously, so that pages are written (and asked about)
        # all through the run, before and after a kill of the server
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0.001")
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct=0")
        cmd = ["sysbench", "oltp_read_write", "--db-driver=mysql", f"--mysql-socket={db.socket}",
               "--mysql-user=root", "--mysql-db=sbtest", f"--tables={TABLES}", f"--table-size={TABLE_SIZE}",
               "--threads=2", f"--time={RUN_SECONDS}", "--report-interval=0", "run"]
        bench = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if fault:
            time.sleep(RUN_SECONDS / 3)
            if fault == "kill":
                ref.kill()  # by pid, mid-run
            else:
                ref.proc.send_signal(signal.SIGSTOP)
        out, _ = bench.communicate(timeout=RUN_SECONDS + 120)
        assert bench.returncode == 0, out[-3000:]
        assert "transactions:" in out and " 0 (0.00 per sec.)" not in out.split("transactions:")[1][:40], out

        check_tables(db)
        quiesce(db)
        before = status(db, "Innodb_data_writes", "Innodb_pages_written", "Innodb_dblwr_pages_written")
        mid = dump_stats(db, stats_file)
        after = status(db, "Innodb_data_writes", "Innodb_pages_written", "Innodb_dblwr_pages_written")
        sums = table_checksums(db)
    finally:
        db.stop()

    if fault == "hang":
        ref.proc.send_signal(signal.SIGCONT)
    server = ref.stop() if fault != "kill" else None
    with open(stats_file) as f:
        final = json.load(f)  # written by libcatcher at mariadbd's exit

    assert mid["mode"] == "elide" and mid["pid"] == db_pid, mid
    cls = mid["classes"]
    page_writes = sum(cls[c]["writes"] for c in PAGE_CLASSES)
    # every InnoDB data-file write went through libcatcher, and no other
    assert before["Innodb_data_writes"] <= page_writes <= after["Innodb_data_writes"], (before, after, mid)
    # ... through the interface of the mode under test
    styles = mid["styles"]
    async_writes = styles["io_uring"] + styles["libaio"]
    if style == "pwrite":
        assert async_writes == 0, styles
    else:
        assert styles[style] > 0 and styles[style] >= async_writes, styles
    # redo: plain pwrite() calls to ib_logfile0, one or more per commit group
    assert cls["redo"]["writes"] > 0 and cls["redo"]["elided"] == 0
    # every page InnoDB wrote was seen as a page: flushed pages (to their
    # home, temporary tablespace included) plus their doublewrite copies
    pages = sum(cls[c]["pages"] for c in PAGE_CLASSES)
    flushed = lambda s: s["Innodb_pages_written"] + s["Innodb_dblwr_pages_written"]
    assert flushed(before) <= pages <= flushed(after), (pages, before, after)
    dblwr = cls["ibdata"]["refused"].get("doublewrite", 0)
    assert before["Innodb_dblwr_pages_written"] <= dblwr <= after["Innodb_dblwr_pages_written"], (dblwr, before)
    # and every page write that could be elided was asked about (no server
    # verdict other than NACK exists here): the rest are the doublewrite
    # copies and the temporary tablespace, never elided
    asked = sum(cls[c]["refused"].get(r, 0) for c in ("ibd", "ibdata", "undo")
                for r in ("nack_not_durable", "unavailable", "connection_lost", "timeout"))
    local = sum(v for c in ("ibd", "ibdata", "undo") for r, v in cls[c]["refused"].items()
                if r not in ("nack_not_durable", "unavailable", "connection_lost", "timeout", "doublewrite"))
    assert local == 0, mid  # InnoDB never wrote a page that failed our checks
    assert asked + dblwr + cls["temp"]["pages"] == pages, mid

    tot = final["total"]
    assert tot["elided"] == 0 and tot["bytes_not_sent"] == 0, tot
    assert tot["errors"] == 0, tot
    home = sum(final["classes"][c]["pages"] for c in ("ibd", "ibdata", "undo"))
    home_refused = sum(final["classes"][c]["refused_total"] for c in ("ibd", "ibdata", "undo"))
    assert home_refused == home > 0, final  # every page of a page file was written
    # the temporary tablespace (and any file unlinked while open) is written
    # under a reason of its own, never asked about; the redo log is no page
    never = {c: final["classes"][c]["refused"].get("never_elided", 0) for c in ("temp", "other")}
    assert all(final["classes"][c]["refused_total"] == never[c] >= final["classes"][c]["pages"]
               for c in never), final
    assert final["classes"]["redo"]["refused_total"] == 0, final
    assert tot["refused_total"] == home_refused + sum(never.values()), final
    refused = tot["refused"]
    log = open(db.errlog).read()
    assert "libcatcher[%d]: writes " % db_pid in log, "no periodic stats line in the error log"
    if fault is None:
        # the server's count of answered questions is ours, exactly
        assert refused.get("nack_not_durable", 0) == server["verdict.not_durable"] > 0, (refused, server)
        assert server["verdict.ack"] == 0
        assert server["connections"] >= 1 and server["refused_hello"] == 0
    else:
        assert refused.get("nack_not_durable", 0) > 0, refused  # before the fault
        lost = sum(refused.get(k, 0) for k in ("unavailable", "connection_lost", "timeout"))
        assert lost > 0, refused  # after it
        if fault == "hang":
            assert refused.get("timeout", 0) > 0, refused
        assert "elision server 127.0.0.1:%d: " % ref.port in log

    # nothing lost: restart without libcatcher, same data, tables check
    plain = MariaDB(base, options=SERVER_OPTIONS + extra)
    plain.start()
    try:
        check_tables(plain)
        assert table_checksums(plain) == sums
        assert "libcatcher[" not in open(plain.errlog).read().split("ready for connections")[-1]
    finally:
        plain.stop()


@pytest.mark.parametrize("mode", list(MODES))
def test_nack_all(tmp_path, catcher, template, mode):
    run_case(tmp_path, catcher, template, mode, fault=None)


@pytest.mark.parametrize("mode", list(MODES))
def test_server_killed_mid_run(tmp_path, catcher, template, mode):
    run_case(tmp_path, catcher, template, mode, fault="kill")


def test_server_hangs_mid_run(tmp_path, catcher, template):
    run_case(tmp_path, catcher, template, "io_uring", fault="hang")
