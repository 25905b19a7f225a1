"""What the crash tests count on: a ledger client whose acknowledged
commits must all survive, TPC-C beside it, and the checks after a crash
(every acknowledged row there, CHECK TABLE, TPC-C's consistency
conditions). Shared by tests/e2e/test_crash_ledger.py (crashes at random
moments) and tests/lib/crashpoints.py (crashes at named points)."""
import subprocess
import threading

from lib import tpcc
from lib.mariadb import assert_checked

# A small buffer pool and log, and pages flushed at once: many page writes
# to elide, frequent checkpoints to gate.
OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
           "--innodb-max-dirty-pages-pct=1", "--innodb-max-dirty-pages-pct-lwm=0.001"]


class Ledger(threading.Thread):
    """One mariadb client, one INSERT at a time (autocommit): an id counts
    as acknowledged once the SELECT after its INSERT printed it."""

    def __init__(self, db, start_id):
        super().__init__(daemon=True)
        self.db, self.next_id = db, start_id
        self.acked = []
        self.stop_event = threading.Event()

    def run(self):
        p = subprocess.Popen(["mariadb", "--no-defaults", "-uroot", f"--socket={self.db.socket}", "-N", "-B", "-n",
                              "crash"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, bufsize=1)
        try:
            while not self.stop_event.is_set():
                i = self.next_id
                p.stdin.write(f"INSERT INTO ledger VALUES ({i}, {i % 977}); SELECT {i};\n")
                p.stdin.flush()
                line = p.stdout.readline()
                if line.strip() != str(i):
                    return                      # the server went away: i is in doubt
                self.acked.append(i)
                self.next_id = i + 1
        except (BrokenPipeError, OSError):
            return
        finally:
            try:
                p.stdin.close()
            except OSError:
                pass
            p.kill()
            p.wait()


def tpcc_run(db, seconds):
    """A TPC-C run; returns sysbench's result (a run that mariadbd's crash
    cuts short fails; the checks after the crash are what count)."""
    return tpcc.run(db, "run", *tpcc.SCALE, "--threads=2", f"--time={seconds}",
                    "--mysql-ignore-errors=1213,1205", check=False, timeout=seconds + 300)


class Load:
    """TPC-C runs of `seconds` one after another until stop(); a run that
    fails (mariadbd itself never goes away here) is kept in `failed`."""

    def __init__(self, db, seconds=5):
        self.db, self.seconds, self.failed = db, seconds, []
        self.going = threading.Event()
        self.going.set()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.going.is_set():
            r = tpcc_run(self.db, self.seconds)
            if r.returncode != 0:
                self.failed.append(r.stdout[-2000:] + r.stderr[-2000:])

    def stop(self, timeout=120):
        self.going.clear()
        self.thread.join(timeout)


def prepare(db):
    """Returns the number of TPC-C orders after the population."""
    db.sql("CREATE DATABASE tpcc")
    tpcc.run(db, "prepare", *tpcc.SCALE, "--rand-seed=11")
    db.sql("CREATE DATABASE crash")
    db.sql("CREATE TABLE crash.ledger (id BIGINT PRIMARY KEY, v INT) ENGINE=InnoDB")
    return orders(db)


def orders(db):
    return int(db.sql("SELECT COUNT(*) FROM tpcc.orders").strip())


def check(db, acked):
    if acked:
        # ids are handed out one after another: a contiguous run is
        # counted by range (a list of 100,000 ids is slow to parse)
        contiguous = acked[-1] - acked[0] + 1 == len(acked) and acked == sorted(acked)
        where = (f"id BETWEEN {acked[0]} AND {acked[-1]}" if contiguous
                 else f"id IN ({','.join(map(str, acked))})")
        n = int(db.sql(f"SELECT COUNT(*) FROM crash.ledger WHERE {where}").strip())
        assert n == len(acked), f"{len(acked) - n} acknowledged ledger rows lost"
    assert_checked(db.sql("CHECK TABLE crash.ledger"))
    tpcc.verify(db)


def final_check(db, populated, acked):
    """TPC-C ran, and a clean restart reads back what the crashes left."""
    assert orders(db) > populated + 100, "TPC-C hardly ran beside the ledger"
    before = db.sql("CHECKSUM TABLE crash.ledger")
    db.stop()
    db.start()
    assert db.sql("CHECKSUM TABLE crash.ledger") == before
    check(db, acked)
    db.stop()
