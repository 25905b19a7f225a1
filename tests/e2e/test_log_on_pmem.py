"""Log_On_Pmem (issue 18, item 3) over the whole stack: MariaDB's commits
wait for the pool's log area, not for the storage node's disk, and an
acknowledged commit survives the storage node's death even when the log
file lost every byte its sync had not covered.

With `Log_On_Pmem = true` the storage node answers a log WRITE as stable
(FILE_SYNC) once its bytes are durable in the pool, so ppl-mount sends no
COMMIT for the log; the log file is synced behind (store_pmemlog.c). The
test makes that sync fail (the test plugin's fault switch), so the pool
holds the only durable copy of the last commits; kills ganesha.nfsd;
zeroes, in the export's ib_logfile0, every range the pool says the file
may lack (what a power loss may do to a page cache); starts the node
again, which writes them back before it serves; then kills MariaDB and
starts it again: its recovery reads the log through the stack and every
acknowledged ledger row is there."""
import json
import os
import shutil
import subprocess
import tempfile
import time

from lib import paths
from lib.ledger import OPTIONS, Ledger
from lib.mariadb import assert_checked
from lib.stack import Stack, require_stack


def wait_acked(ledger, n, timeout=120):
    deadline = time.monotonic() + timeout
    while len(ledger.acked) < n and time.monotonic() < deadline:
        assert ledger.is_alive(), "the ledger lost its server"
        time.sleep(0.05)
    assert len(ledger.acked) >= n, f"{len(ledger.acked)} commits in {timeout} s"


def test_commits_survive_a_log_file_that_lost_its_unsynced_writes(tmp_path):
    require_stack()
    shm = tempfile.mkdtemp(prefix="ppl-logpmem-", dir="/dev/shm")
    s = Stack(tmp_path / "stack", options=OPTIONS, pool_size="64M", pool_dir=shm, plugins="plugins-crash",
              fsal_extra="Log_On_Pmem = true; Allow_Volatile_Pool = true;")
    ledger = None
    try:
        s.start()
        s.db.sql("CREATE DATABASE crash; CREATE TABLE crash.ledger (id BIGINT PRIMARY KEY, v INT) ENGINE=InnoDB")
        ledger = Ledger(s.db, 1)
        ledger.start()
        wait_acked(ledger, 200)
        x = s.live("stats")["log_on_pmem"]
        assert x["writes"] >= 200 and x["synced_in_reply"] == 0 and x["syncs_behind"] > 0, x

        # from now on the log file's sync fails: the pool alone keeps the commits
        r = s.live("fault", "sync:log:EIO")
        assert r.get("armed") == "sync:log:EIO", r
        first = len(ledger.acked)
        wait_acked(ledger, first + 300)
        x = s.live("stats")["log_on_pmem"]
        assert x["sync_failures"] > 0 and x["area_used"] > 0, x
        s.g.kill9()
        acked_before_kill = list(ledger.acked)

        info = json.loads(subprocess.run([paths.tool("ppl-inspect"), "pool", "info", s.pool, "--json"],
                                         capture_output=True, text=True, check=True).stdout)
        ranges = info["log_pending_ranges"]
        assert len(ranges) >= 300, (len(ranges), info["log_pending"])
        logfile = os.path.join(s.export, "datadir", "ib_logfile0")
        assert all(rg["fileid"] == os.stat(logfile).st_ino for rg in ranges)
        with open(logfile, "r+b") as f:
            nonzero = 0
            for rg in ranges:       # the file holds them now (its page cache)
                f.seek(rg["offset"])
                nonzero += any(f.read(rg["len"]))
            for rg in ranges:
                f.seek(rg["offset"])
                f.write(bytes(rg["len"]))
        assert nonzero == len(ranges), (nonzero, len(ranges))

        s.restart_storage()
        log = s.g.log_text(since_start=True)
        assert "written into" in log and "again and synced" in log, log[-3000:]
        # MariaDB goes on where it waited
        wait_acked(ledger, len(acked_before_kill) + 100)
        ledger.stop_event.set()
        ledger.join(60)
        acked = ledger.acked
        # MariaDB dies too: its recovery reads the log the node put back
        s.db.proc.kill()
        s.db.proc.wait()
        s.db.start()
        n = int(s.db.sql(f"SELECT COUNT(*) FROM crash.ledger WHERE id BETWEEN {acked[0]} AND {acked[-1]}"))
        assert n == len(acked), f"{len(acked) - n} acknowledged ledger rows lost"
        assert_checked(s.db.sql("CHECK TABLE crash.ledger"))
        x = s.live("stats")["log_on_pmem"]
        assert x["writes"] > 0 and x["sync_failures"] == 0, x
        s.stop()
        s.assert_storage_clean()
    finally:
        if ledger:
            ledger.stop_event.set()
        s.stop()
        shutil.rmtree(shm, ignore_errors=True)
