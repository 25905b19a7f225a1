"""The whole stack (MariaDB + libcatcher eliding, ppl-mount, FSAL_PPL) in
MariaDB's three write paths -- io_uring (asked inside the submit, or with
LIBCATCHER_URING_DEFER=N by libcatcher's own thread), libaio and
synchronous writes --
and with 4 KiB pages, with DDL running beside sysbench (DROP and CREATE
under the same names, TRUNCATE, ALTER TABLE ADD INDEX, BLOBs larger than a
page). In each: libcatcher saw the writes through the interface asked for
and elided pages; CHECK TABLE passes; every table reads back the same after
a clean MariaDB restart (its reads are served by the storage node,
rebuilt); the storage node logged no rebuild failure, stopped ingest or
divergence."""

import pytest

from lib.oracle import DDLLoad
from lib.stack import Stack, require_stack

TABLES, TABLE_SIZE = 2, 3000
BASE = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
        "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
        "--innodb-max-dirty-pages-pct=1", "--innodb-max-dirty-pages-pct-lwm=0.001"]
MODES = {
    "io_uring": (["--innodb-use-native-aio=1", "--innodb-linux-aio=io_uring"], "io_uring"),
    "io_uring_deferred": (["--innodb-use-native-aio=1", "--innodb-linux-aio=io_uring"], "io_uring"),
    "libaio": (["--innodb-use-native-aio=1", "--innodb-linux-aio=aio"], "libaio"),
    "sync": (["--innodb-use-native-aio=0"], "pwrite"),
}


def all_tables(db):
    out = db.sql("SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables "
                 "WHERE table_schema IN ('sbtest', 'ddl') AND engine = 'InnoDB' ORDER BY 1")
    return out.split()


def check(db):
    return db.checked(all_tables(db))


@pytest.mark.parametrize("mode,page_size", [("io_uring", 16384), ("io_uring_deferred", 16384), ("libaio", 16384),
                                            ("sync", 16384), ("io_uring", 4096)])
def test_io_mode(tmp_path, mode, page_size):
    require_stack()
    options, style = MODES[mode]
    deferred = mode == "io_uring_deferred"
    s = Stack(tmp_path, options=BASE + options, page_size=page_size,
              catcher_env={"LIBCATCHER_URING_DEFER": "4"} if deferred else None)
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        db.sql("CREATE DATABASE ddl")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        ddl = DDLLoad(db, 10, seed=page_size + len(mode))
        ddl.start()
        db.sysbench("oltp_write_only", "run", "--time=10", tables=TABLES, table_size=TABLE_SIZE)
        ddl.join(120)
        assert ddl.error is None and ddl.rounds > 0, ddl.error
        stats = s.catcher_stats()
        page_classes = [stats["classes"][c] for c in ("ibd", "ibdata", "undo")]
        assert stats["styles"][style] > 0, stats["styles"]
        assert sum(c["elided"] for c in page_classes) > 50, stats
        # completed by libcatcher's thread only when asked for
        assert (stats["elision"]["deferred_writes"] > 50) == deferred, stats["elision"]
        before = check(db)
        db.stop()
        db.start()
        assert check(db) == before
        db.stop()
    finally:
        s.stop()
    s.assert_storage_clean()
