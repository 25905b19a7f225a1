"""The whole path: MariaDB with LD_PRELOAD=libcatcher.so, its datadir on
ppl-mount, FSAL_PPL with the elision service on. Page writes the storage
node can rebuild are dropped by libcatcher; what must hold (DESIGN I1, I4,
I5, I6):
- sysbench runs, pages are elided, CHECK TABLE passes and the tables read
  back the same after a MariaDB restart (its reads come back rebuilt);
- ganesha.nfsd killed with SIGKILL during load while MariaDB keeps running
  on the hard mount, and restarted: the load goes on (libcatcher writes
  pages while nobody answers), the tables check and read back the same
  after a MariaDB restart (the restarted node ingests the log at once, so
  pages elided before the crash are rebuilt);
- ganesha.nfsd killed with SIGKILL and restarted: the same data;
- finally, with the stack gone, a plain MariaDB opened on the export's
  directory itself (the storage node's files alone) finds the same rows:
  every elided page reached its data file (materialized before MariaDB's
  checkpoints could pass its records) or is recovered from the log."""
import os

import pytest

from lib.mariadb import MariaDB, assert_checked
from lib.stack import Stack, require_stack

TABLES, TABLE_SIZE = 2, 6000
OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0", "--innodb-use-native-aio=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]


def checksums(db):
    return db.sql("CHECKSUM TABLE " + ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1)))


def check_tables(db):
    assert_checked(db.sql("CHECK TABLE " + ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1))))


@pytest.mark.parametrize("ingest", ["in-reply", "behind"])
def test_elision_end_to_end(tmp_path, ingest):
    """ingest=behind: the same with Ingest_Behind = true, log WRITEs
    answered before they are parsed (applier/src/store_behind.c)."""
    require_stack()
    s = Stack(tmp_path, options=OPTIONS, fsal_extra="Ingest_Behind = true;" if ingest == "behind" else "")
    db = s.db
    try:
        s.start()
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0.001")
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct=0")
        db.sysbench("oltp_write_only", "run", "--time=15", tables=TABLES, table_size=TABLE_SIZE)
        check_tables(db)
        before = checksums(db)
        stats = s.catcher_stats()
        elided = sum(c["elided"] for c in stats["classes"].values())
        assert elided > 100, stats

        db.stop()                      # a clean shutdown: MariaDB's last checkpoint goes through the gate
        db.start()
        assert checksums(db) == before
        check_tables(db)
        db.sysbench("oltp_write_only", "run", "--time=8", tables=TABLES, table_size=TABLE_SIZE)
        before = checksums(db)

        # The storage node crashes under load; MariaDB waits on the hard mount.
        s.sysbench_through_storage_crash(12, 4, TABLES, TABLE_SIZE)
        check_tables(db)
        before = checksums(db)
        db.stop()
        db.start()
        assert checksums(db) == before
        check_tables(db)

        # A storage-node crash with nothing mounted, then everything again.
        db.stop()
        s.mount.stop()
        s.mount = None
        s.crash_storage()
        s.mount_up()
        db.start()
        assert checksums(db) == before
        check_tables(db)
        db.stop()
    finally:
        s.stop()
    s.assert_storage_clean()

    # The storage node's files alone, read by a plain MariaDB.
    local = MariaDB(str(tmp_path / "local"), datadir=os.path.join(s.export, "datadir"), options=OPTIONS)
    os.makedirs(local.base)
    local.start()
    try:
        assert checksums(local) == before
        check_tables(local)
    finally:
        local.stop()
