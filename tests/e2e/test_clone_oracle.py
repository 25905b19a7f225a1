"""A clone equals MariaDB's own recovery, page for page (issue 20).

Over the whole stack with the log archive on, while sysbench writes: the
storage node makes a base copy, then `mariadb-backup --backup` copies the
running server through the mount as a user would, and its
`--prepare` (InnoDB's recovery: the oracle) makes a datadir at the
backup's end LSN. `ppl-inspect clone --at` that same LSN, from the base
and the archive, must hold the same bytes in every page in use (the doublewrite area of
ibdata1 aside, which mariadb-backup copies as a file and prepare leaves
alone, and the pages the extent descriptors call free, whose leftover
bytes each copy took at another time)."""
import json
import os
import re
import subprocess
import threading
import time

from lib import paths
from lib.oracle import compare_dirs, prepare, take_backup
from lib.stack import Stack, require_stack

OPTIONS = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=32M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
           "--innodb-max-dirty-pages-pct=5", "--innodb-max-dirty-pages-pct-lwm=1"]
TABLES, TABLE_SIZE = 2, 5000


def backup_end_lsn(target):
    with open(os.path.join(target, "xtrabackup_checkpoints")) as f:
        text = f.read()
    m = re.search(r"^last_lsn\s*=\s*(\d+)", text, re.M)
    assert m, text
    return int(m.group(1))


def test_clone_equals_prepare_of_a_backup(tmp_path):
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
        writer = threading.Thread(target=db.sysbench, args=("oltp_write_only", "run", "--time=20",
                                                            "--rand-seed=5"),
                                  kwargs={"tables": TABLES, "table_size": TABLE_SIZE}, daemon=True)
        writer.start()
        time.sleep(2)
        base = tmp_path / "base"
        r = subprocess.run([paths.tool("ppl-inspect"), "live", s.pool, "backup", str(base), "--wait", "--json"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        b = json.loads(r.stdout)["backup"]
        backup = tmp_path / "backup"
        take_backup(db, str(backup), throttle=20)
        writer.join(timeout=300)
        end = backup_end_lsn(str(backup))
        assert end > b["end_lsn"], (end, b)
        # the archive holds the log once MariaDB's log file holds it
        # durably and the storage node knows its last write is final (the
        # next write says so): the backup read the log's last bytes, and
        # nothing commits any more, so commit a little more
        db.sql("CREATE TABLE sbtest.tick (i INT) ENGINE=InnoDB")
        deadline = time.monotonic() + 30
        while s.live("stats")["archive"]["durable_lsn"] < end and time.monotonic() < deadline:
            db.sql("INSERT INTO sbtest.tick VALUES (1)")
            time.sleep(0.2)
        assert s.live("stats")["archive"]["durable_lsn"] >= end
        prepare(str(backup))
        clone = tmp_path / "clone"
        r = subprocess.run([paths.tool("ppl-inspect"), "clone", "--base", str(base), "--at", str(end), str(clone)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr + r.stdout
        # free pages hold leftovers of whenever each copy read them (a page
        # the log frees is written by neither recovery): not compared
        compared, diffs, problems = compare_dirs(str(backup), str(clone), skip_free=True)
        assert compared > 300, compared
        assert not problems, problems[:10]
        assert not diffs, f"{len(diffs)} of {compared} pages differ from --prepare's: " + "\n".join(diffs[:10])
        s.assert_storage_clean()
    finally:
        s.stop()
