"""Redo coverage (DESIGN I7, issue 15 scenarios 1, 3, 5 and 6), on the whole
stack (MariaDB with LD_PRELOAD=libcatcher.so on ppl-mount, FSAL_PPL over
FSAL_VFS), each with libcatcher eliding and in passthrough with the storage
node's verify mode on (every page write compared with the rebuild):

1. IMPORT TABLESPACE: a table exported (FLUSH TABLES ... FOR EXPORT, its
   .ibd and .cfg copied away through the mount), dropped, created again,
   discarded and imported from the copies has its rows, its primary key and
   passes CHECK TABLE, before and after a MariaDB restart. The imported
   file is not covered by the redo the storage node parsed for the dropped
   table's space; its pages must be served as IMPORT wrote them.
2. Temporary tables and the intermediate #sql tables of ALTER ... COPY and
   OPTIMIZE TABLE (libcatcher must write every page of them, in every
   I/O path; the temporary tablespace is not covered by the redo).
3. 32 KiB and 64 KiB pages: a short oltp_write_only and a restart; the
   storage node serves every read, nothing diverges, CHECK TABLE passes.
5. Undo tablespaces removed at a restart (innodb_undo_tablespaces 2 -> 0,
   after a slow shutdown): records of the removed spaces are never
   materialized, no checkpoint is refused, MariaDB stops cleanly.
6. A datadir made elsewhere and copied onto the export through the mount:
   redo ingest starts cleanly once MariaDB runs on it (nothing "damaged",
   pages verified or elided); then the datadir is removed and installed
   again under the same export, and ingest follows it without a restart of
   ganesha.nfsd.
"""
import os
import re
import shutil
import signal
import subprocess

import pytest

from lib.mariadb import MariaDB, assert_checked
from lib.stack import STORAGE_FAILURES, Stack, require_stack, verify_counts

MODES = ("elide", "passthrough")
BASE = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
        "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
        "--innodb-max-dirty-pages-pct=1", "--innodb-max-dirty-pages-pct-lwm=0.001"]
TABLES, TABLE_SIZE = 2, 3000
# MariaDB's default, lazy flushing (see test_import_tablespace)
LAZY = ["--innodb-max-dirty-pages-pct=90", "--innodb-max-dirty-pages-pct-lwm=0"]
# Lines the storage node writes when something went wrong, beyond
# lib.stack.STORAGE_FAILURES: a page it could not write back, a log it
# could not follow.
UNCOVERED = ("cannot be materialized", "redo log damaged")


def make_stack(tmp_path, catcher_mode, options=(), page_size=16384):
    """The stack in one of libcatcher's modes; in passthrough every page
    write reaches the storage node, which compares it with its rebuild."""
    fsal_extra = "Verify = true;" if catcher_mode == "passthrough" else ""
    # a pool made with ppl-inspect's defaults: its doublewrite slots hold
    # pages of every size InnoDB has
    return Stack(tmp_path, options=list(BASE) + list(options), catcher_mode=catcher_mode, page_size=page_size,
                 fsal_extra=fsal_extra)


def storage_lines(s, *words):
    return [line for line in s.storage_log().splitlines() if any(w in line for w in words)]


def assert_covered(s):
    """Called after s.stop(), also when the test failed (then the storage
    node's failure lines are reported along with the test's own error):
    what s.assert_storage_clean() checks, and no page the node could not
    write back nor log it could not follow. Up to three lines of each
    kind."""
    kinds = STORAGE_FAILURES + UNCOVERED
    bad = {}
    for line in storage_lines(s, *kinds):
        kind = next(w for w in kinds if w in line)
        bad.setdefault(kind, []).append(line)
    assert not bad, "\n".join(f"{len(v)} line(s) with {k!r}:\n" + "\n".join(v[:3]) for k, v in bad.items())


def assert_verified(s, catcher_mode, at_least=1):
    """In passthrough (verify mode): the storage node's unexport stats
    line counts no divergence, and at least `at_least` page writes were
    compared identical with the rebuild (so ingest really ran)."""
    if catcher_mode != "passthrough":
        return
    log = s.storage_log()
    assert "Verify=on" in log
    counts = verify_counts(log)
    assert counts, log[-3000:]
    same = sum(v["same"] for v in counts)
    diverged = sum(v["diverged"] for v in counts)
    divergences = re.findall(r"divergence \(verify\).*", log)
    assert diverged == 0 and not divergences, (diverged, divergences[:5])
    assert same >= at_least, [v["text"] for v in counts]


def check_tables(db, tables):
    assert_checked(db.sql("CHECK TABLE " + ",".join(tables)))


def sb_tables():
    return [f"sbtest.sbtest{i}" for i in range(1, TABLES + 1)]


def log_size(db):
    try:
        return os.path.getsize(db.errlog)
    except OSError:
        return 0


def errlog_since(db, offset):
    try:
        with open(db.errlog, errors="replace") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return ""


MARIADB_FAILURES = ("[FATAL]", "Assertion", "Retry attempts for reading partial data failed",
                    "Database page corruption", "Data structure corruption", "is corrupted", "got signal")


def assert_mariadb_clean(db, offset):
    bad = [line for line in errlog_since(db, offset).splitlines() if any(w in line for w in MARIADB_FAILURES)]
    assert not bad, "\n".join(bad[:10])


def stop_clean(db, offset, timeout=120):
    """A clean shutdown by pid (SIGTERM): mariadbd must exit 0 and its
    error log (since `offset`) must hold no fatal error and say
    'Shutdown complete'."""
    p = db.proc
    assert p is not None and p.poll() is None, "mariadbd is not running:\n" + db.tail_log()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        db.proc = None
        raise AssertionError("mariadbd did not stop in time:\n" + db.tail_log())
    db.proc = None
    text = errlog_since(db, offset)
    assert rc == 0, f"mariadbd exited with {rc}:\n" + text[-3000:]
    assert_mariadb_clean(db, offset)
    assert "Shutdown complete" in text, text[-3000:]


def space_ids(db, name):
    out = db.sql(f"SELECT space FROM information_schema.innodb_sys_tables WHERE name = '{name}'")
    return {int(x) for x in out.split()}


# ---------------------------------------------------------------- scenario 1

class Session:
    """One client session held open (FLUSH TABLES ... FOR EXPORT holds its
    lock, and its .cfg file exists, only while the session that took it
    lives)."""

    def __init__(self, db):
        self.p = subprocess.Popen(["mariadb", "--no-defaults", "-uroot", f"--socket={db.socket}", "-N", "-B",
                                   "--unbuffered"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)

    def run(self, statement, marker):
        self.p.stdin.write(f"{statement};\nSELECT '{marker}';\n")
        self.p.stdin.flush()
        seen = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise AssertionError(f"session ended before {marker}: {''.join(seen)}")
            if line.strip() == marker:
                return "".join(seen)
            seen.append(line)

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(30) == 0


def rows_of(db):
    out = db.sql("SELECT id, v FROM imp.t1 ORDER BY id")
    return [tuple(line.split("\t")) for line in out.splitlines() if line]


def assert_imported(db, expected):
    got = rows_of(db)
    assert len(got) == len(expected), f"{len(got)} rows after IMPORT, {len(expected)} exported"
    assert got == expected, [(a, b) for a, b in zip(got, expected) if a != b][:5]
    with pytest.raises(RuntimeError, match="Duplicate entry"):
        db.sql("INSERT INTO imp.t1 VALUES (1, 'dup')")
    check_tables(db, ["imp.t1"])


@pytest.mark.parametrize("rows", [6, 2000], ids=["6rows", "2000rows"])
@pytest.mark.parametrize("catcher_mode", MODES)
def test_import_tablespace(tmp_path, catcher_mode, rows):
    require_stack()
    # MariaDB's default, lazy flushing (as in its own test suite): the new
    # table's pages are still dirty, their redo pending on the storage
    # node, when DISCARD drops them and IMPORT writes the copied pages
    s = make_stack(tmp_path, catcher_mode, options=LAZY)
    db = s.db
    width = 20 if rows <= 6 else 200
    saved = tmp_path / "exported"
    saved.mkdir()
    schema = f"CREATE TABLE imp.t1 (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR({width})) ENGINE=InnoDB"
    tdir = os.path.join(db.datadir, "imp")
    try:
        s.start()
        offset = 0
        db.sql("CREATE DATABASE imp")
        db.sql(schema)
        if rows <= 6:
            db.sql("INSERT INTO imp.t1 (v) VALUES " + ",".join(f"('value {i}')" for i in range(1, rows + 1)))
        else:
            for start in range(0, rows, 500):
                db.sql("INSERT INTO imp.t1 (v) VALUES " + ",".join(
                    f"(CONCAT('row {i} ', REPEAT(SHA1({i}), 4)))" for i in range(start + 1, start + 501)))
        expected = rows_of(db)
        assert len(expected) == rows
        old_spaces = space_ids(db, "imp/t1")

        session = Session(db)
        session.run("FLUSH TABLES imp.t1 FOR EXPORT", "locked")
        for name in ("t1.ibd", "t1.cfg"):   # through the mount, as a user would
            shutil.copy(os.path.join(tdir, name), saved / name)
        session.run("UNLOCK TABLES", "unlocked")
        session.close()
        assert os.path.getsize(saved / "t1.ibd") >= (4 if rows <= 6 else 16) * db.page_size

        db.sql("DROP TABLE imp.t1")
        db.sql(schema)
        db.sql("ALTER TABLE imp.t1 DISCARD TABLESPACE")
        for name in ("t1.ibd", "t1.cfg"):
            shutil.copy(saved / name, os.path.join(tdir, name))
        db.sql("ALTER TABLE imp.t1 IMPORT TABLESPACE")
        spaces = old_spaces | space_ids(db, "imp/t1")

        assert_imported(db, expected)
        stop_clean(db, offset)
        offset = log_size(db)
        db.start()               # every page of t1 now read from the storage node
        assert_imported(db, expected)
        stop_clean(db, offset)
    finally:
        s.stop()
        assert_covered(s)   # also when the test failed above: the storage node's side of it
    stale = [line for line in storage_lines(s, "older than the page in its file")
             if any(f"page {sp}:" in line for sp in spaces)]
    assert not stale, "\n".join(stale[:10])
    assert_verified(s, catcher_mode)


# ---------------------------------------------------------------- scenario 2

# every I/O path while eliding (where a dropped write would lose pages);
# passthrough with verify mode in MariaDB's default one
@pytest.mark.parametrize("catcher_mode,aio", [("elide", "io_uring"), ("elide", "aio"), ("elide", "none"),
                                              ("passthrough", "io_uring")])
def test_temporary_and_intermediate_tables(tmp_path, catcher_mode, aio):
    require_stack()
    io = {"io_uring": [], "aio": ["--innodb-linux-aio=aio"], "none": ["--innodb-use-native-aio=0"]}[aio]
    # a small buffer pool: temporary pages are written and read back
    s = make_stack(tmp_path, catcher_mode, options=["--innodb-buffer-pool-size=8M"] + io)
    db = s.db
    try:
        s.start()
        offset = 0
        db.sql("CREATE DATABASE tmpt")
        script = ";".join([
            "CREATE TEMPORARY TABLE t1 (a INT NOT NULL AUTO_INCREMENT, b VARCHAR(200), PRIMARY KEY(a)) "
            "ENGINE=InnoDB",
            "INSERT INTO t1 (b) SELECT REPEAT('x', 200) FROM seq_1_to_40000",
            "CREATE TABLE p1 (a INT PRIMARY KEY, b VARCHAR(200)) ENGINE=InnoDB",
            "INSERT INTO p1 SELECT a, b FROM t1",
            "ALTER TABLE p1 ADD COLUMN c INT DEFAULT 7, ALGORITHM=COPY",
            "OPTIMIZE TABLE p1",
            "SELECT COUNT(*), SUM(LENGTH(b)) FROM t1",
            "SELECT COUNT(*), SUM(LENGTH(b)), SUM(c) FROM p1",
        ])
        out = db.sql(script, db="tmpt").split("\n")
        assert "40000\t8000000" in out, out
        assert "40000\t8000000\t280000" in out, out
        check_tables(db, ["tmpt.p1"])
        before = db.sql("CHECKSUM TABLE tmpt.p1")
        stop_clean(db, offset)
        offset = log_size(db)
        db.start()              # p1's pages read back from the storage node
        assert db.sql("CHECKSUM TABLE tmpt.p1") == before
        check_tables(db, ["tmpt.p1"])
        stop_clean(db, offset)
    finally:
        s.stop()
        assert_covered(s)
    assert_verified(s, catcher_mode)


# ---------------------------------------------------------------- scenario 3

@pytest.mark.parametrize("page_size", [32768, 65536], ids=["32k", "64k"])
@pytest.mark.parametrize("catcher_mode", MODES)
def test_large_pages(tmp_path, catcher_mode, page_size):
    require_stack()
    # "innodb_page_size=65536 requires innodb_buffer_pool_size >= 21 MiB" (MariaDB 10.11)
    s = make_stack(tmp_path, catcher_mode, options=["--innodb-buffer-pool-size=24M"], page_size=page_size)
    db = s.db
    try:
        s.start()
        offset = 0
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        db.sysbench("oltp_write_only", "run", "--time=10", tables=TABLES, table_size=TABLE_SIZE)
        check_tables(db, sb_tables())
        before = db.sql("CHECKSUM TABLE " + ",".join(sb_tables()))
        live = s.live("stats")
        assert live["page_size"] == page_size, live
        stop_clean(db, offset)
        offset = log_size(db)
        db.start()
        assert db.sql("CHECKSUM TABLE " + ",".join(sb_tables())) == before
        check_tables(db, sb_tables())
        db.sysbench("oltp_write_only", "run", "--time=5", tables=TABLES, table_size=TABLE_SIZE)
        check_tables(db, sb_tables())
        stop_clean(db, offset)
    finally:
        s.stop()
        assert_covered(s)   # also when the test failed above: the storage node's side of it
    # the applier rebuilds pages of every InnoDB size: writes were compared
    assert_verified(s, catcher_mode)


# ---------------------------------------------------------------- scenario 5

UNDO_FILES = ("undo001", "undo002")


@pytest.mark.parametrize("catcher_mode", MODES)
def test_undo_tablespaces_removed(tmp_path, catcher_mode):
    require_stack()
    s = make_stack(tmp_path, catcher_mode, options=["--innodb-undo-tablespaces=2"])
    db = s.db
    try:
        s.start()
        offset = 0
        assert all(os.path.exists(os.path.join(db.datadir, f)) for f in UNDO_FILES), os.listdir(db.datadir)
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        db.sysbench("oltp_write_only", "run", "--time=8", tables=TABLES, table_size=TABLE_SIZE)
        # a slow shutdown empties the undo logs: only then may MariaDB
        # change their number at the next start
        db.sql("SET GLOBAL innodb_fast_shutdown=0")
        stop_clean(db, offset)

        db.options = [o for o in db.options if not o.startswith("--innodb-undo-tablespaces")]
        db.options.append("--innodb-undo-tablespaces=0")
        offset = log_size(db)
        db.start()
        text = errlog_since(db, offset)
        # MariaDB 10.11 (srv_undo_tablespaces_reinit): the undo logs are
        # moved back into the system tablespace and undo001-002 deleted
        assert "Reinitializing innodb_undo_tablespaces= 0 from 2" in text, text[-3000:]
        assert not any(os.path.exists(os.path.join(db.datadir, f)) for f in UNDO_FILES), os.listdir(db.datadir)
        assert db.sql("SELECT @@innodb_undo_tablespaces").strip() == "0"
        db.sysbench("oltp_write_only", "run", "--time=8", tables=TABLES, table_size=TABLE_SIZE)
        check_tables(db, sb_tables())
        before = db.sql("CHECKSUM TABLE " + ",".join(sb_tables()))
        stop_clean(db, offset)
        offset = log_size(db)
        db.start()
        assert db.sql("CHECKSUM TABLE " + ",".join(sb_tables())) == before
        check_tables(db, sb_tables())
        stop_clean(db, offset)
    finally:
        s.stop()
        assert_covered(s)   # also when the test failed above: the storage node's side of it
    assert_verified(s, catcher_mode)


# ---------------------------------------------------------------- scenario 6

def ingest_progress(s, catcher_mode):
    """The storage node's figures that only move while its redo ingest
    runs: the LSN parsed, and the page writes it could judge (elided ones
    with libcatcher eliding; compared identical with the rebuild in
    verify mode)."""
    live = s.live("stats")
    judged = live["elision"]["acked"] if catcher_mode == "elide" else live["verify"]["identical"]
    return live, judged


def load_and_check_ingest(s, catcher_mode, seconds=10):
    db = s.db
    before, judged_before = ingest_progress(s, catcher_mode)
    db.sysbench("oltp_write_only", "run", f"--time={seconds}", tables=TABLES, table_size=TABLE_SIZE)
    after, judged_after = ingest_progress(s, catcher_mode)
    assert after["ingest"] == "running", after
    assert after["datadir"] == os.path.join(s.export, "datadir"), after
    assert after["parsed_lsn"] > before["parsed_lsn"], (before["parsed_lsn"], after["parsed_lsn"])
    assert after["redo"]["log_bytes"] > before["redo"]["log_bytes"], (before["redo"], after["redo"])
    assert judged_after > judged_before, (judged_before, judged_after, after)
    check_tables(db, sb_tables())


@pytest.mark.parametrize("catcher_mode", MODES)
def test_datadir_copied_onto_export(tmp_path, catcher_mode):
    require_stack()
    s = make_stack(tmp_path, catcher_mode)
    db = s.db
    # a datadir made elsewhere, by a server without the stack, stopped cleanly
    local = MariaDB(str(tmp_path / "local"), datadir=str(tmp_path / "local-datadir"), page_size=db.page_size,
                    options=db.options)
    os.makedirs(local.base)
    local.install()
    local.start()
    try:
        local.sql("CREATE DATABASE sbtest")
        local.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        local.sysbench("oltp_write_only", "run", "--time=3", tables=TABLES, table_size=TABLE_SIZE)
        copied = local.sql("CHECKSUM TABLE " + ",".join(sb_tables()))
        stop_clean(local, 0)
    finally:
        local.kill()
    try:
        s.g.start()
        s.mount_up()
        # copied onto the export through the mount, as a migration or mtr does
        shutil.copytree(local.datadir, db.datadir)
        offset = 0
        db.start()
        assert db.sql("CHECKSUM TABLE " + ",".join(sb_tables())) == copied
        load_and_check_ingest(s, catcher_mode)
        if catcher_mode == "elide":
            stats = s.catcher_stats()
            assert sum(stats["classes"][c]["elided"] for c in ("ibd", "ibdata", "undo")) > 0, stats
        before = db.sql("CHECKSUM TABLE " + ",".join(sb_tables()))
        stop_clean(db, offset)
        offset = log_size(db)
        db.start()
        assert db.sql("CHECKSUM TABLE " + ",".join(sb_tables())) == before
        stop_clean(db, offset)

        # the datadir removed and made again in its place, ganesha.nfsd
        # still running
        shutil.rmtree(db.datadir)
        db.install()
        offset = log_size(db)
        db.start()
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        load_and_check_ingest(s, catcher_mode)
        before = db.sql("CHECKSUM TABLE " + ",".join(sb_tables()))
        stop_clean(db, offset)
        offset = log_size(db)
        db.start()
        assert db.sql("CHECKSUM TABLE " + ",".join(sb_tables())) == before
        check_tables(db, sb_tables())
        stop_clean(db, offset)
    finally:
        s.stop()
        assert_covered(s)   # also when the test failed above: the storage node's side of it
    assert_verified(s, catcher_mode)
