"""Exactness against InnoDB's own recovery.

A sysbench + DDL workload runs on a private MariaDB 10.11; mariadb-backup
--backup copies it meanwhile. One copy of the backup is prepared by
mariadb-backup --prepare (InnoDB's recovery code), the other replayed by
ppl-replay; every page of every data file must be identical.

Left out of the comparison, with the line of MariaDB that writes them
outside the redo log: the doublewrite buffer pages of ibdata1
(buf0dblwr.cc, buf_dblwr_t::flush_buffered_writes writes page copies there
with plain I/O; see lib/oracle.py doublewrite_pages). Nothing else."""
import json

import pytest

from lib.oracle import run_oracle

CONFIGS = [
    pytest.param(16384, 0, id="16k"),
    pytest.param(4096, 0, id="4k"),
    pytest.param(16384, 2, id="16k-undo2"),
    pytest.param(32768, 0, id="32k"),
    pytest.param(65536, 0, id="64k"),
]


@pytest.mark.parametrize("page_size,undo", CONFIGS)
def test_replay_equals_prepare(tmp_path, page_size, undo):
    r = run_oracle(str(tmp_path), page_size=page_size, undo_tablespaces=undo, load_seconds=25)
    stats = json.loads(r["replay"])
    print(f"log {r['log_size']} bytes, {stats['mtrs']} mtrs, {stats['records']} records, "
          f"{stats['pages_written']} pages written, {stats['mtrs_skipped_by_lsn']} mtrs skipped by page LSN; prepare {r['prepare_s']:.2f}s replay {r['replay_s']:.2f}s; "
          f"{r['compared']} pages compared, {r['ddl_rounds']} DDL rounds")
    print("records by type:", stats["records_by_type"])
    # The workload must really have exercised the record kinds that matter.
    kinds = stats["records_by_type"]
    for k in ("WRITE", "INIT_PAGE", "INSERT_HEAP_DYNAMIC", "DELETE_ROW_FORMAT_DYNAMIC", "UNDO_APPEND",
              "FILE_CREATE", "FILE_DELETE"):
        assert kinds.get(k, 0) > 0, f"workload produced no {k} records"
    assert stats["pages_written"] > 100
    # Data files copied under load hold pages newer than parts of the log:
    # the page-LSN rule of recovery must have been exercised.
    assert stats["mtrs_skipped_by_lsn"] > 0
    assert r["compared"] > 1000
    # Every page the log changed was offered for elision with the oracle's
    # LSN and checksum, and every one was accepted.
    assert stats["elide_asked"] > 100
    assert stats["elide_acked"] == stats["elide_asked"], stats
    assert not r["problems"], "\n".join(r["problems"])
    assert not r["diffs"], f"{len(r['diffs'])} differing pages:\n" + "\n".join(r["diffs"][:50])
