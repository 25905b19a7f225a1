"""Verify mode (Verify = true): every full page write MariaDB sends is first
compared byte for byte with the page the storage node rebuilds at that
page's LSN from the data file and the redo it parsed (DESIGN I4). With
elision off every page write arrives, so this checks the rebuild against
InnoDB itself, page by page, under sysbench's write workloads: thousands
of pages compared, zero divergences."""
import re

import pytest

from lib.stack import Stack, require_stack, verify_counts
from lib.mariadb import assert_checked

TABLES, TABLE_SIZE = 2, 4000
OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
WORKLOADS = ("oltp_insert", "oltp_update_index", "oltp_write_only", "oltp_read_write")


@pytest.mark.parametrize("ingest", ["in-reply", "behind"])
def test_verify_mode_zero_divergences(tmp_path, ingest):
    """ingest=behind: Ingest_Behind = true, with the storage node's
    elision service and pool on (libcatcher still only counts): every page
    write compared with the log parsed behind the replies."""
    require_stack()
    # libcatcher only counts: every page write reaches the storage node
    behind = ingest == "behind"
    s = Stack(tmp_path, options=OPTIONS, catcher_mode="passthrough", storage_elision=behind,
              fsal_extra="Verify = true;" + (" Ingest_Behind = true;" if behind else ""))
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        # flush steadily, so pages are written while their redo is pending
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0.001")
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct=0")
        for w in WORKLOADS:
            db.sysbench(w, "run", "--time=5", tables=TABLES, table_size=TABLE_SIZE)
        assert_checked(db.sql("CHECK TABLE " + ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1))))
        db.stop()
    finally:
        s.stop()
    log = s.storage_log()
    assert "Verify=on" in log
    assert ("Ingest_Behind=yes" in log) == behind
    if behind:  # the final stats line: the queue was used, and is empty at the stop
        assert re.search(r"ingest behind the replies: 0 write\(s\) of 0 B waiting \(at most [1-9]", log), log[-3000:]
    counts = verify_counts(log)
    assert counts, log[-3000:]
    v = counts[-1]
    divergences = re.findall(r"divergence \(verify\).*", log)
    assert v["diverged"] == 0 and not divergences, divergences[:5]
    assert v["same"] > 1000, v["text"]
    # every page write not compared has a cause that says why the log
    # cannot describe it; none is a page ahead of its log or a record the
    # index lost
    assert v["unexplained"] == 0, v["text"]
