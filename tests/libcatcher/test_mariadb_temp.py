"""Files libcatcher must never elide, with real MariaDB 10.11 on a LOCAL
datadir (issue 15, item 2): the temporary tablespace (ibtmp1) and the
#sql*.ibd intermediate tables of ALTER TABLE ... ALGORITHM=COPY and
OPTIMIZE TABLE.

Until libcatcher gave every write a complete plan, a write to one of these
files through io_uring or libaio was judged on uninitialised verdicts
(0 means ACK) and could be pointed at /dev/null: `CREATE TEMPORARY TABLE`
failed with errno 126 even in passthrough mode. Here, in each of MariaDB's
three I/O modes and with libcatcher in passthrough, eliding against the
reference server (which NACKs and logs every question) and eliding with no
server at all:
- temporary tables are created, filled beyond the buffer pool (so their
  pages are written to ibtmp1), altered and read back with the right rows;
- a normal table goes through ALTER ... ALGORITHM=COPY and OPTIMIZE TABLE
  and keeps its rows; CHECK TABLE passes;
- libcatcher counted the temp-class writes under `never_elided`, elided
  nothing, and never asked about a page of the temporary tablespace;
- after a restart without libcatcher the normal table checks and holds the
  same checksum (nothing was lost on disk).
"""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from lib import paths
from lib.mariadb import check_table_problems
from lib.mariadb import MariaDB

MODES = {
    "io_uring": ([], "io_uring"),
    "libaio": (["--innodb-linux-aio=aio"], "libaio"),
    "sync": (["--innodb-use-native-aio=0"], "pwrite"),
}
# A buffer pool smaller than the temporary data, so that its pages are
# evicted, i.e. written to ibtmp1 through the I/O mode under test.
SERVER_OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=48M"]
TEMP_SPACE = 0xFFFFFFFE  # SRV_TMP_SPACE_ID
TEMP_ROWS, NORMAL_ROWS = 12000, 4000


def sanitized(build):
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return "PPL_SANITIZE:BOOL=ON" in f.read()
    except OSError:
        return False


@pytest.fixture(scope="module")
def catcher(build_dir):
    if sanitized(build_dir):
        pytest.skip("MariaDB runs only with the normal build's libcatcher.so (see test_mariadb_nack.py)")
    lib = os.path.join(build_dir, "libcatcher", "libcatcher.so")
    if not os.path.exists(lib):
        raise RuntimeError(f"{lib} missing: build the project first")
    return lib, paths.tool("ppl-elision-ref")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    base = tmp_path_factory.mktemp("template")
    db = MariaDB(str(base), options=SERVER_OPTIONS)
    db.install()
    return db.datadir


class RefServer:
    """ppl-elision-ref refusing every question and logging each one."""

    def __init__(self, tool, base):
        self.port_file = os.path.join(base, "ref.port")
        self.stats_file = os.path.join(base, "ref.stats")
        self.log = os.path.join(base, "ref.log")
        self.proc = subprocess.Popen(
            [tool, "--mode", "nack", "--nack-reason", "not_durable", "--port", "0", "--port-file",
             self.port_file, "--stats-file", self.stats_file, "--log", self.log, "--token", "t0ken"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(os.path.join(base, "ref.err"), "w"))
        deadline = time.time() + 10
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("ppl-elision-ref did not start")
            time.sleep(0.05)
        with open(self.port_file) as f:
            self.port = int(f.read())

    def terminate(self):
        """By pid; it writes its counters on the way out."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def results(self):
        with open(self.stats_file) as f:
            stats = dict((k, int(v)) for k, v in (line.split() for line in f))
        with open(self.log) as f:
            asked = [int(line.split()[0]) for line in f if line.strip()]
        return stats, asked


def dead_port():
    """A loopback port nothing listens on."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# One client session: temporary tables live only as long as it.
SESSION = f"""
CREATE DATABASE d;
USE d;
CREATE TEMPORARY TABLE t1 (a INT NOT NULL AUTO_INCREMENT, PRIMARY KEY(a)) ENGINE=InnoDB;
INSERT INTO t1 VALUES (), (), ();
CREATE TEMPORARY TABLE t2 (a INT NOT NULL AUTO_INCREMENT PRIMARY KEY, b VARCHAR(1000)) ENGINE=InnoDB;
INSERT INTO t2 (b) SELECT REPEAT(CHAR(65 + seq % 26), 1000) FROM seq_1_to_{TEMP_ROWS};
ALTER TABLE t2 ADD COLUMN c INT NOT NULL DEFAULT 7, ALGORITHM=COPY;
UPDATE t2 SET b = REPEAT('z', 900) WHERE a % 3 = 0;
SELECT 'temp', COUNT(*), SUM(LENGTH(b)), SUM(c), (SELECT COUNT(*) FROM t1) FROM t2;
CHECK TABLE t2;
CREATE TABLE n1 (a INT NOT NULL AUTO_INCREMENT PRIMARY KEY, b VARCHAR(1000), k INT, KEY(k)) ENGINE=InnoDB;
INSERT INTO n1 (b, k) SELECT REPEAT(CHAR(97 + seq % 26), 800), seq % 100 FROM seq_1_to_{NORMAL_ROWS};
ALTER TABLE n1 ADD COLUMN c INT NOT NULL DEFAULT 3, ALGORITHM=COPY;
DELETE FROM n1 WHERE a % 2 = 0;
OPTIMIZE TABLE n1;
ALTER TABLE n1 DROP INDEX k, ALGORITHM=COPY;
SELECT 'normal', COUNT(*), SUM(LENGTH(b)), SUM(c), SUM(k) FROM n1;
CHECK TABLE n1;
"""

TEMP_EXPECTED = ["temp", str(TEMP_ROWS), str(TEMP_ROWS * 1000 - (TEMP_ROWS // 3) * 100), str(TEMP_ROWS * 7), "3"]


def normal_expected():
    odd = [s for s in range(1, NORMAL_ROWS + 1) if s % 2]
    return ["normal", str(len(odd)), str(800 * len(odd)), str(3 * len(odd)), str(sum(s % 100 for s in odd))]


def rows_of(out):
    return [line.split("\t") for line in out.strip().splitlines()]


def check_ok(rows, table):
    mine = [r for r in rows if r[0].endswith(table) and r[1] == "check"]
    assert mine and not check_table_problems("\n".join("\t".join(r) for r in mine)), rows


SETUPS = ("passthrough", "elide-ref", "elide-noserver")


@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("mode", list(MODES))
def test_temporary_and_copy_tables(tmp_path, catcher, template, mode, setup):
    lib, ref_tool = catcher
    extra, style = MODES[mode]
    base = str(tmp_path)
    shutil.copytree(template, os.path.join(base, "data"))
    ref = RefServer(ref_tool, base) if setup == "elide-ref" else None
    stats_file = os.path.join(base, "catcher.json")
    env = {
        "LD_PRELOAD": lib,
        "LIBCATCHER_MODE": "passthrough" if setup == "passthrough" else "elide",
        "LIBCATCHER_SERVER": f"127.0.0.1:{ref.port if ref else dead_port()}",
        "LIBCATCHER_TOKEN": "t0ken",
        "LIBCATCHER_TIMEOUT_MS": "200",
        "LIBCATCHER_STATS_FILE": stats_file,
    }
    db = MariaDB(base, options=SERVER_OPTIONS + extra, env=env)
    try:
        db.start()
        db_pid = db.proc.pid
        log = open(db.errlog).read()
        if mode == "io_uring":
            assert "Using io_uring" in log, log[-2000:]
        if mode == "libaio":
            assert "Using Linux native AIO" in log, log[-2000:]
        rows = rows_of(db.sql(SESSION))
        assert ["temp"] + TEMP_EXPECTED[1:] in rows, rows
        assert normal_expected() in rows, rows
        check_ok(rows, "t2")
        check_ok(rows, "n1")
        checksum = db.sql("CHECKSUM TABLE d.n1")
    finally:
        db.stop()
        if ref:
            ref.terminate()
    server, asked = ref.results() if ref else (None, None)
    with open(stats_file) as f:
        st = json.load(f)  # written by libcatcher at mariadbd's exit
    assert st["pid"] == db_pid and st["mode"] == ("passthrough" if setup == "passthrough" else "elide"), st

    cls = st["classes"]
    temp = cls["temp"]
    # the temporary data went through the mode under test, to temp files
    assert temp["writes"] > 0 and temp["pages"] > 0, st
    if style == "pwrite":
        assert st["styles"]["io_uring"] + st["styles"]["libaio"] == 0, st
    else:
        assert st["styles"][style] > 0, st
    # ... and every one of their writes was written, under its own reason
    assert temp["elided"] == 0 and temp["errors"] == 0, temp
    assert temp["refused_total"] == temp["refused"].get("never_elided", 0) >= temp["pages"], temp
    assert st["total"]["elided"] == 0 and st["total"]["errors"] == 0, st
    if setup == "passthrough":
        assert st["elision"]["questions"] == 0, st
    if setup == "elide-ref":
        # the storage node was asked about page files, never the temporary tablespace
        assert asked and TEMP_SPACE not in asked, asked[:20]
        assert server["verdict.ack"] == 0
    if setup == "elide-noserver":
        home = cls["ibd"]["refused"]
        assert home.get("unavailable", 0) > 0, st

    # nothing lost on disk: the same table without libcatcher
    plain = MariaDB(base, options=SERVER_OPTIONS + extra)
    plain.start()
    try:
        check_ok(rows_of(plain.sql("CHECK TABLE d.n1")), "n1")
        assert plain.sql("CHECKSUM TABLE d.n1") == checksum
        assert normal_expected() in rows_of(plain.sql("SELECT 'normal', COUNT(*), SUM(LENGTH(b)), SUM(c), "
                                                      "SUM(k) FROM d.n1"))
    finally:
        plain.stop()
