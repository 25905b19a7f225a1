"""Base copies and point-in-time clones (issue 20) over the whole stack:
MariaDB with libcatcher eliding, ppl-mount, FSAL_PPL with its log archive.

A ledger client inserts one row per transaction and notes, for each id,
the wall-clock time before it sent the INSERT and after MariaDB
acknowledged the commit; sysbench writes beside it. Halfway, the storage
node makes a base copy (`ppl-inspect live POOL backup DEST --wait`): the
compute node takes no part. Then `ppl-inspect clone --at TIME` makes
datadirs at several times after the copy, and an unmodified mariadbd
starts on each (it rolls back what was uncommitted then): every row
acknowledged before the time is there, no row sent after it is, CHECK
TABLE passes. A clone at the archive's end after the load stopped has the
live database's CHECKSUM TABLE. A time before the copy finished is
refused with the window in the message."""
import datetime
import json
import os
import shutil
import subprocess
import threading
import time

from lib import paths
from lib.mariadb import MariaDB, assert_checked
from lib.stack import Stack, require_stack

OPTIONS = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=32M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
TABLES, TABLE_SIZE = 2, 4000


class TimedLedger(threading.Thread):
    """One client, one autocommit INSERT at a time: for each id the wall
    clock before it was sent and after its commit was acknowledged."""

    def __init__(self, db):
        super().__init__(daemon=True)
        self.db = db
        self.rows = []          # (id, sent_ns, acked_ns)
        self.stop_event = threading.Event()

    def run(self):
        p = subprocess.Popen(["mariadb", "--no-defaults", "-uroot", f"--socket={self.db.socket}", "-N", "-B", "-n",
                              "ledger"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, bufsize=1)
        i = 1
        try:
            while not self.stop_event.is_set():
                sent = time.time_ns()
                p.stdin.write(f"INSERT INTO ledger VALUES ({i}, {sent}); SELECT {i};\n")
                p.stdin.flush()
                if p.stdout.readline().strip() != str(i):
                    return
                self.rows.append((i, sent, time.time_ns()))
                i += 1
        finally:
            p.stdin.close()
            p.wait(timeout=30)


def utc(ns):
    t = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def inspect(*args, check=True, cwd=None):
    r = subprocess.run([paths.tool("ppl-inspect"), *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    if check:
        assert r.returncode == 0, r.stderr + r.stdout
    return r


def ids_in(db):
    out = db.sql("SELECT id FROM ledger.ledger")
    return {int(x) for x in out.split()}


def refusals(tmp_path, base, archive, end_lsn):
    """Each a clear error, and no clone left behind: a base still being
    copied (no manifest), a damaged segment, a missing segment, and an
    archive whose retention removed what the base needs."""
    def refused(base_dir, arch, why, name):
        dest = tmp_path / name
        r = inspect("clone", "--base", str(base_dir), "--archive", str(arch), "--at", str(end_lsn), str(dest),
                    check=False)
        assert r.returncode != 0 and why in r.stderr, r.stderr
        assert not os.path.exists(dest), r.stderr

    unfinished = tmp_path / "unfinished-base"
    shutil.copytree(base, unfinished)
    os.unlink(unfinished / "ppl-base.json")
    refused(unfinished, archive, "not a finished base copy", "from-unfinished")
    segs = sorted(x for x in os.listdir(archive) if x.startswith("seg-"))
    assert len(segs) >= 4, segs
    damaged = tmp_path / "damaged-archive"
    shutil.copytree(archive, damaged)
    with open(damaged / segs[-2], "r+b") as f:
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0x20]))
    refused(base, damaged, segs[-2], "damaged")
    missing = tmp_path / "missing-archive"
    shutil.copytree(archive, missing)
    os.unlink(missing / segs[-2])
    refused(base, missing, "missing", "from-missing")
    pruned = tmp_path / "pruned-archive"
    shutil.copytree(archive, pruned)
    for name in segs[:len(segs) - 2]:
        os.unlink(pruned / name)
    refused(base, pruned, "no longer reaches back to the base's start", "from-pruned")


def test_clones_at_points_in_time(tmp_path):
    require_stack()
    archive = tmp_path / "archive"
    archive.mkdir()
    s = Stack(tmp_path / "stack", options=OPTIONS,
              fsal_extra=f'Archive_Path = "{archive}"; Archive_Segment_Size = 1048576;')
    clones = []
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE ledger; CREATE TABLE ledger.ledger (id INT PRIMARY KEY, sent BIGINT) ENGINE=InnoDB;"
               "CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE, timeout=900)
        ledger = TimedLedger(db)
        ledger.start()
        writer = threading.Thread(target=db.sysbench, args=("oltp_write_only", "run", "--time=14"),
                                  kwargs={"tables": TABLES, "table_size": TABLE_SIZE, "threads": 2}, daemon=True)
        writer.start()
        time.sleep(3)
        base = tmp_path / "base"
        # the operator's form: waits for the copy, DEST relative to the caller
        r = inspect("backup", s.pool, "base", "--json", cwd=tmp_path)
        b = json.loads(r.stdout)["backup"]
        assert b["state"] == "done" and b["end_lsn"] >= b["start_lsn"] > 0, b
        assert os.path.exists(base / "ppl-base.json")
        done_ns = b["finished_ns"]
        targets = []
        for wait in (1.5, 3.0):
            time.sleep(wait)
            targets.append(time.time_ns())
        writer.join(timeout=120)
        ledger.stop_event.set()
        ledger.join(timeout=60)
        assert len(ledger.rows) > 200, len(ledger.rows)
        live_sum = db.sql("CHECKSUM TABLE ledger.ledger")
        time.sleep(1)  # the archive thread flushes every 100 ms once the log is synced
        end_lsn = s.live("stats")["archive"]["durable_lsn"]

        # a time before the copy finished: refused, with the window
        r = inspect("clone", "--base", str(base), "--at", utc(b["started_ns"] - 5 * 10**9),
                    str(tmp_path / "too-early"), check=False)
        assert r.returncode == 1 and "outside what this base and archive give" in r.stderr, r.stderr
        assert not os.path.exists(tmp_path / "too-early")

        for k, t in enumerate(targets + [None]):
            dest = tmp_path / f"clone{k}"
            at = str(end_lsn) if t is None else utc(t)
            r = inspect("clone", "--base", str(base), "--at", at, str(dest))
            assert "start mariadbd on it" in r.stdout, r.stdout
            c = MariaDB(tmp_path / f"server{k}", datadir=str(dest), options=OPTIONS)
            os.makedirs(c.base)
            clones.append(c)
            c.start()
            have = ids_in(c)
            assert_checked(c.sql("CHECK TABLE ledger.ledger, sbtest.sbtest1, sbtest.sbtest2"))
            if t is None:
                assert c.sql("CHECKSUM TABLE ledger.ledger") == live_sum
            else:
                # utc() keeps milliseconds: the clone's time is t rounded down
                cut = t // 10**6 * 10**6
                assert cut > done_ns
                lost = [i for i, sent, acked in ledger.rows if acked < cut and i not in have]
                extra = [i for i, sent, acked in ledger.rows if sent > cut and i in have]
                assert not lost, f"clone at {utc(t)} lacks acknowledged rows {lost[:10]}"
                assert not extra, f"clone at {utc(t)} holds rows sent after it {extra[:10]}"
                assert have, "the clone holds no row at all"
            c.stop()
        log = s.storage_log()
        assert "base copy" in log and "done" in log
        s.stop()
        s.assert_storage_clean()
        refusals(tmp_path, base, archive, end_lsn)
    finally:
        for c in clones:
            c.kill()
        s.stop()
