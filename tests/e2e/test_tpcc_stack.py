"""TPC-C (tpcc/tpcc.lua) over the whole stack, checked three ways:

- elision on: a single-threaded run with a fixed seed and clock leaves
  exactly the tables (CHECKSUM TABLE) the same run leaves on a local
  datadir without the stack; CHECK TABLE and the specification's
  consistency conditions pass, also after a clean MariaDB restart (its
  reads served by the storage node, rebuilt);
- the storage node refuses everything (no elision service on its side):
  libcatcher writes every page, the result is the same, nothing elided;
- verify mode: with every page write arriving in full, each is compared
  byte for byte with the storage node's rebuild at its LSN: zero
  divergences.
"""

import pytest

from lib import tpcc
from lib.mariadb import MariaDB
from lib.stack import Stack, require_stack, verify_counts

OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
           "--innodb-max-dirty-pages-pct=1", "--innodb-max-dirty-pages-pct-lwm=0.001"]
SCALE = tpcc.SCALE
POPULATE = SCALE + ["--rand-seed=11", "--fixed-time=2026-01-01 00:00:00"]
RUN = SCALE + ["--rand-seed=5", "--fixed-time=2026-01-01 00:00:00", "--threads=1", "--events=1500", "--time=0"]


def workload(db):
    """Population and run; returns the tables' checksums."""
    db.sql("CREATE DATABASE tpcc")
    tpcc.run(db, "prepare", *POPULATE)
    tpcc.run(db, "run", *RUN)
    return tpcc.verify(db)


@pytest.fixture(scope="module")
def local_sums(tmp_path_factory):
    """The same run on a local datadir, no stack."""
    db = MariaDB(str(tmp_path_factory.mktemp("tpcc-local")), options=OPTIONS)
    db.install()
    db.start()
    try:
        return workload(db)
    finally:
        db.stop()


def page_classes(stats, key):
    return sum(stats["classes"][c][key] for c in ("ibd", "ibdata", "undo"))


@pytest.mark.parametrize("storage", ["elide", "refuse"])
def test_tpcc_over_the_stack_equals_a_local_run(tmp_path, local_sums, storage):
    require_stack()
    s = Stack(tmp_path, options=OPTIONS, storage_elision=storage == "elide")
    try:
        s.start()
        assert workload(s.db) == local_sums
        stats = s.catcher_stats()
        s.db.stop()
        s.db.start()
        assert tpcc.verify(s.db) == local_sums
        if storage == "elide":
            assert page_classes(stats, "elided") > 100, stats
        else:
            assert page_classes(stats, "elided") == 0, stats
            assert page_classes(stats, "pages") > 100 and page_classes(stats, "refused_total") > 100, stats
        s.db.stop()
        s.stop()
        s.assert_storage_clean()
    finally:
        s.stop()


def test_tpcc_verify_mode_zero_divergences(tmp_path, local_sums):
    require_stack()
    s = Stack(tmp_path, options=OPTIONS, catcher_mode="passthrough", storage_elision=False,
              fsal_extra="Verify = true;")
    try:
        s.start()
        assert workload(s.db) == local_sums
        s.db.stop()
        s.stop()
        s.assert_storage_clean()
    finally:
        s.stop()
    counts = verify_counts(s.storage_log())
    assert counts, s.storage_log()[-3000:]
    v = counts[-1]
    assert v["same"] > 500 and v["diverged"] == 0 and v["unexplained"] == 0, v["text"]
