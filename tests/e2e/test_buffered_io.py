"""Buffered data files over a caching mount (issue 15, item 4).

With innodb_flush_method=fsync MariaDB opens its data files without
O_DIRECT, and a mount that caches pages on the client (ppl-mount without
--direct-io, like a kernel NFS client by default) keeps them in its page
cache. A write libcatcher drops never reaches that cache: the old page
stays there and InnoDB reads it back ("Index for table 'sbtest2' is
corrupt" within 20 s of sysbench with a 6 MiB buffer pool, before the
rule). libcatcher now elides only writes on descriptors that bypass the
client's cache, writes every other page, counts it as `buffered_io` and
says once in MariaDB's error log what to change.

The whole stack, eliding and in passthrough: sysbench oltp_read_write for
20 s with a buffer pool far below the data, then CHECK TABLE of every
table, then a restart (reads served by the storage node) and CHECK TABLE
again with the same checksums; the storage node logged no failure, and
libcatcher's counters say why nothing was elided.
"""
import pytest

from lib.stack import Stack, require_stack

TABLES, TABLE_SIZE, SECONDS = 2, 12000, 20
OPTIONS = ["--innodb-buffer-pool-size=6M", "--innodb-log-file-size=16M", "--innodb-flush-method=fsync",
           "--innodb-flush-log-at-trx-commit=1", "--innodb-max-dirty-pages-pct=1",
           "--innodb-max-dirty-pages-pct-lwm=0.001"]
ADVICE = "innodb_flush_method=O_DIRECT"
PAGE_CLASSES = ("ibd", "ibdata", "undo")


def check(db):
    return db.checked([f"sbtest.sbtest{i}" for i in range(1, TABLES + 1)])


@pytest.mark.parametrize("catcher_mode", ["elide", "passthrough"])
def test_buffered_data_files_on_a_caching_mount(tmp_path, catcher_mode):
    require_stack()
    s = Stack(tmp_path, options=OPTIONS, catcher_mode=catcher_mode, mount_options=["--hard"])
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_read_write", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        db.sysbench("oltp_read_write", "run", f"--time={SECONDS}", "--report-interval=0", tables=TABLES,
                    table_size=TABLE_SIZE)
        before = check(db)
        stats = s.catcher_stats()
        first_log = open(db.errlog).read()
        db.stop()
        db.start()
        assert check(db) == before
        db.stop()
        log = open(db.errlog).read()
    finally:
        s.stop()
    s.assert_storage_clean()

    classes = [stats["classes"][c] for c in PAGE_CLASSES]
    pages = sum(c["pages"] for c in classes)
    assert pages > 1000, stats  # the buffer pool kept writing pages out
    assert stats["total"]["elided"] == 0, stats
    reasons = {}
    for c in classes:
        for r, n in c["refused"].items():
            reasons[r] = reasons.get(r, 0) + n
    # decided before the mode and the descriptor are looked at
    earlier = {"unaligned", "page_size_unknown", "unsupported_format", "unsupported_op"}
    main = "buffered_io" if catcher_mode == "elide" else "passthrough"
    assert set(reasons) <= earlier | {main}, reasons
    assert reasons.get(main, 0) >= 0.9 * pages, (reasons, pages)
    if catcher_mode == "elide":
        # not one question: no data file bypasses the client's cache
        assert stats["elision"]["questions"] == 0, stats
        # said once per mariadbd process, however many pages
        assert first_log.count(ADVICE) == 1, [line for line in first_log.splitlines() if ADVICE in line]
        assert log.count(ADVICE) <= 2
    else:
        assert ADVICE not in log
