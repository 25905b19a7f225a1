"""The log archive (Archive_Path) over the whole stack: MariaDB with
libcatcher eliding, ppl-mount, FSAL_PPL archiving.

Under a sysbench write load with the storage node killed and started again
halfway, the archive keeps MariaDB's log as one unbroken chain of checked
records (`ppl-inspect archive` reads every one), and after MariaDB's clean
shutdown it holds the log up to MariaDB's last LSN: only what MariaDB's log
file held durably, nothing lost at the crash (a torn last record is cut at
the restart and taken again from the log). The storage node says what it
holds at start and in its stats, and never stops archiving here."""
import json
import os
import re
import subprocess
import time

from lib import paths
from lib.stack import Stack, require_stack

OPTIONS = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
TABLES, TABLE_SIZE = 2, 8000


def log_sequence_number(db):
    out = db.sql("SHOW ENGINE INNODB STATUS")
    m = re.search(r"Log sequence number\s+(\d+)", out.replace("\\n", "\n"))
    assert m, out[:2000]
    return int(m.group(1))


def archive_info(path):
    r = subprocess.run([paths.tool("ppl-inspect"), "archive", str(path), "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def wait_durable(s, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        a = s.live("stats").get("archive") or {}
        if a.get("durable_lsn", 0) > 0:
            return a
        time.sleep(0.5)
    raise AssertionError(f"the archive never became durable: {s.live('stats').get('archive')}")


def test_archive_keeps_the_log_through_a_storage_crash(tmp_path):
    require_stack()
    archive = tmp_path / "archive"
    archive.mkdir()
    s = Stack(tmp_path / "stack", options=OPTIONS,
              fsal_extra=f'Archive_Path = "{archive}"; Archive_Segment_Size = 1048576;')
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE, timeout=900)
        live = wait_durable(s)
        assert live["stopped"] is False, live
        s.sysbench_through_storage_crash(seconds=12, crash_after=5, tables=TABLES, table_size=TABLE_SIZE)
        db.sysbench("oltp_write_only", "run", "--time=3", tables=TABLES, table_size=TABLE_SIZE)
        last = log_sequence_number(db)
        db.stop()  # clean: MariaDB syncs its log to the end
        s.stop()
        info = archive_info(archive)
        assert info["end_lsn"] >= last, (info, last)
        assert info["segments"] >= 2 and info["records"] > 10000, info
        log = s.storage_log()
        assert "log archive" in log and "goes on from there" in log, log[-3000:]
        assert "PPL: archive stats at unexport" in log
        assert not re.search(r"log archive .* stops", log), [x for x in log.splitlines() if "archive" in x][:5]
        s.assert_storage_clean()
    finally:
        s.stop()
