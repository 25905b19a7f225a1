"""The per-page log pool under pressure, with the whole stack (MariaDB +
libcatcher eliding, ppl-mount, FSAL_PPL): a 1 MiB pool (about 8000 blocks
of 64 B, up to 2 KiB per page) smaller than the records of the pages
sysbench keeps changing, so that pages are kept in the pool at MariaDB's
checkpoints (records appended instead of a page write), pages over the
cap are materialized, and the pool fills
(the cleaner and foreground reclamation materialize pages to make room).
MariaDB's checkpoint writes are held while the acknowledged pages below
them settle, then pass (the log-wrap guard, I3).
A storage-node crash in the middle puts the pool's records back into the
index. `ppl-inspect live` shows the running node's figures and a kept
page's records, and refuses to forget a space whose file is there. Correctness: CHECK TABLE, the same checksums across a MariaDB
restart, and after a clean stop of the storage node a plain MariaDB on its
datadir alone sees the same tables (a clean stop materializes what the
pool kept)."""
import json
import os
import re
import subprocess

from lib import paths
from lib.mariadb import MariaDB
from lib.stack import Stack, require_stack

TABLES, TABLE_SIZE = 4, 20000
OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
           "--innodb-max-dirty-pages-pct=1", "--innodb-max-dirty-pages-pct-lwm=0.001"]


def tables(db):
    return ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1))


def check(db):
    return db.checked(tables(db).split(","))


def pool_figures(text):
    """The figures of the last 'pool stats' line."""
    lines = [line for line in text.splitlines() if "PPL: pool stats" in line]
    assert lines, "no pool stats line in the storage node's log"
    line = lines[-1]

    def num(pattern):
        m = re.search(pattern, line)
        assert m, f"{pattern!r} not in {line}"
        return int(m.group(1))
    # over the cap: pages kept marked with their records in the log, and
    # pages materialized because the pool had no room to mark them
    return {"appended": num(r"(\d+) record\(s\) appended"),
            "over_cap": num(r"(\d+) page\(s\) over the cap kept") + num(r"materialized over the cap (\d+)"),
            "full": num(r"when the pool was full (\d+)"), "cleaner": num(r"by the cleaner (\d+)")}


def dump(x):
    """The whole of a live answer in a failure message (pytest shortens
    a dict's repr)."""
    return json.dumps(x, indent=1, sort_keys=True)


def load_until_pool_fills(s, rounds=24):
    """sysbench in 5 s rounds until the running node's pool has pages and
    has been full or cleaned; its last `ppl-inspect live stats`."""
    for _ in range(rounds):
        s.db.sysbench("oltp_write_only", "run", "--time=5", tables=TABLES, table_size=TABLE_SIZE)
        live = s.live("stats")
        pool = live["pool"]
        if pool["pages"] > 0 and pool["materialized_pool_full"] + pool["materialized_by_cleaner"] > 0:
            return live
    raise AssertionError(f"the pool did not fill in {rounds} rounds of 5 s: " + dump(live))


def test_small_pool_keeps_fills_and_comes_back(tmp_path):
    require_stack()
    # doublewrite slots for 16 KiB pages only: the default 64 KiB slots
    # alone would take 2 MiB
    s = Stack(tmp_path, options=OPTIONS, pool_size="1M",
              pool_args=["--max-per-page", "2048", "--dw-page-size", "16384"],
              fsal_extra="Apply_Threads = 2; Max_Per_Page = 2048;")
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        s.sysbench_through_storage_crash(25, 12, TABLES, TABLE_SIZE)
        # The restarted node's own figures must show the pool filling (its
        # counters start at zero with it). How much a timed run does
        # depends on the machine's load, so the load goes on in short
        # rounds until the pool has been full or cleaned, not for a fixed
        # time.
        live = load_until_pool_fills(s)
        assert os.stat(s.pool + ".ctl").st_mode & 0o777 == 0o600  # the owner's only
        assert live["ingest"] == "running" and live["elision"]["acked"] > 0, dump(live)
        # the checkpoint gate (I3): MariaDB's checkpoint writes since the
        # restart were held while acknowledged pages below them that the
        # full pool could not keep were written to their files, and then
        # went through (the load above completed; ingest runs)
        assert live["elision"]["checkpoints_held"] > 0, dump(live)
        # one kept page's records, read from the running node (MariaDB is
        # idle, but a page can still leave the pool: try the oldest few)
        pages = [s.live("page", p) for p in live["pool"]["oldest_pages"][:4]]
        assert any(p["pool"] and p["pool"]["records"] + p["pool"]["dram_records"] > 0 and p["pending"]
                   and p["pending"]["mtrs"] and all(m["records"] for m in p["pending"]["mtrs"])
                   for p in pages), dump(pages)
        # forget-space, the one live command that changes a running
        # store, refuses a space whose file is there: nothing is dropped
        space = db.sql("SELECT SPACE FROM information_schema.INNODB_SYS_TABLES WHERE NAME='sbtest/sbtest1'")
        r = subprocess.run([paths.tool("ppl-inspect"), "live", s.pool, "forget-space", space.strip()],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "is there" in r.stderr, (r.returncode, r.stdout, r.stderr)
        after = s.live("stats")
        assert after["spaces_missing"] == 0 and after["spaces_dropped"] == live["spaces_dropped"], dump(after)
        stats = s.catcher_stats()
        assert sum(stats["classes"][c]["elided"] for c in ("ibd", "ibdata", "undo")) > 100, stats
        before = db.same_across_restart(tables(db).split(","))
        s.stop()
        text = s.storage_log()
        s.assert_storage_clean()
    finally:
        s.stop()

    # "N page(s) (space:page, ...) with N record(s) before the checkpoint LSN N put back from the pool"
    assert re.search(r"\d+ page\(s\)(?: \([^)]*\))? with \d+ record\(s\) before the (?:checkpoint|restart point) LSN \d+ put back "
                     r"from the pool", text), \
        "the restarted storage node put nothing back from the pool"
    f = pool_figures(text)
    assert f["appended"] > 0, f
    assert f["over_cap"] > 0, f
    assert f["full"] + f["cleaner"] > 0, f

    # The storage node's files alone, after its clean stop.
    local = MariaDB(str(tmp_path / "local"), datadir=os.path.join(s.export, "datadir"), options=OPTIONS)
    os.makedirs(local.base)
    local.start()
    try:
        assert check(local) == before
    finally:
        local.stop()
