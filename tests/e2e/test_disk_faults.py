"""The storage node's disk failing under a running MariaDB (issue 21,
item 1), through the test plugin's disk-fault switch (ppl/fault.h: every
READ, WRITE and COMMIT of the export's files, and every read, write and
sync of the store's own materializations, can be made to fail or to be
slow; `ppl-inspect live POOL fault SPEC` arms it).

For each fault, what MariaDB sees is an error it handles or a wait, never
a success for a write that did not happen; the storage node says what
failed and what to do; and once the fault is gone, and MariaDB is
started again if it stopped, every acknowledged ledger row is there,
CHECK TABLE passes and TPC-C's consistency conditions hold:

- a full disk (ENOSPC on every write of the data files): the store's
  materializations fail, so elision stops (the storage node takes no more
  pages whose only copy would be their records); MariaDB's own page
  writes fail and it retries them, commits wait, until its checkpoint
  needs a page the disk would not take: that checkpoint write is refused
  and MariaDB stops. When space is back, pages are written, elision
  resumes, and (MariaDB started again if it had stopped) commits go on;
- EIO on a log write, and on a sync of the log: MariaDB stops (InnoDB's
  fatal error), and its recovery over the stack loses nothing;
- the pool's file (on a disk, msync) failing to sync: no page is elided
  or kept in the pool any more until the storage node is restarted;
- a slow disk (every operation 20 ms late): MariaDB slows down, nothing
  fails.

All share one stack (one TPC-C load through it), in order."""
import re
import time

import pytest

from lib.ledger import OPTIONS, Ledger, Load, check, prepare
from lib.stack import Stack, require_stack


class Rig:
    """The stack with the test plugin, TPC-C and a ledger running on it;
    MariaDB started again when a fault stopped it."""

    def __init__(self, base):
        self.s = Stack(base, options=OPTIONS, pool_size="1M",
                       pool_args=["--max-per-page", "2048", "--dw-page-size", "16384"],
                       fsal_extra="Apply_Threads = 2; Max_Per_Page = 2048;", plugins="plugins-crash")
        self.ledger = self.load = None
        self.next_id = 1
        self.acked = []

    def start(self):
        self.s.start()
        prepare(self.s.db)

    def go(self):
        """The ledger and TPC-C under way, the ledger committing."""
        self.ledger = Ledger(self.s.db, self.next_id)
        self.ledger.start()
        self.load = Load(self.s.db)
        self.wait_commits(10)

    def wait_commits(self, n, timeout=120):
        seen = len(self.ledger.acked)
        deadline = time.monotonic() + timeout
        while len(self.ledger.acked) < seen + n and time.monotonic() < deadline:
            assert self.ledger.is_alive(), "the ledger lost its server"
            time.sleep(0.1)
        assert len(self.ledger.acked) >= seen + n, f"the ledger made {len(self.ledger.acked) - seen} commits " \
                                                   f"in {timeout} s"

    def halt(self):
        """Stops the ledger and the load; keeps what the ledger had acked."""
        self.ledger.stop_event.set()
        self.load.stop()
        self.ledger.join(60)
        self.acked += self.ledger.acked
        self.next_id = self.ledger.next_id + 1

    def arm(self, spec):
        r = self.s.live("fault", spec)
        assert r.get("armed") == spec, r
        return r

    def clear(self):
        """Ends the fault; returns what was armed."""
        return self.s.live("fault", "clear")["cleared"]

    def fault(self):
        return self.s.live("fault")

    def wait_hit(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            f = self.fault()
            if f["hits"] > 0:
                return f
            time.sleep(0.1)
        raise AssertionError(f"the fault was never met in {timeout} s: {self.fault()}")

    def wait_mariadb_gone(self, timeout=60):
        deadline = time.monotonic() + timeout
        while self.s.db.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.s.db.proc.poll() is not None

    def mariadb_log_since(self, offset):
        with open(self.s.db.errlog, errors="replace") as f:
            f.seek(offset)
            return f.read()

    def mariadb_log_size(self):
        with open(self.s.db.errlog, "rb") as f:
            return f.seek(0, 2)

    def storage_log_since(self, offset):
        return self.s.g.log_text()[offset:]

    def elision(self):
        return self.s.live("stats")["elision"]

    def checked(self):
        """Every acknowledged row, CHECK TABLE, TPC-C's conditions."""
        check(self.s.db, self.acked)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    require_stack()
    r = Rig(tmp_path_factory.mktemp("disk-faults"))
    try:
        r.start()
        yield r
        # A full disk makes checkpoints wait or be refused ("is refused",
        # "could not be materialized"): expected here. Never a page served
        # wrong, a rebuild failing or ingest stopping.
        bad = [line for line in r.s.storage_log().splitlines()
               if any(w in line for w in ("cannot be rebuilt", "READ fails", "redo ingest stopped",
                                          "cannot be materialized", "divergence"))]
        assert not bad, "\n".join(bad[:10])
    finally:
        if r.ledger:
            r.ledger.stop_event.set()
        if r.load:
            r.load.going.clear()
        r.s.stop()


def test_full_disk_stops_elision_and_loses_nothing(rig):
    rig.go()
    slog, mlog = len(rig.s.g.log_text()), rig.mariadb_log_size()
    rig.arm("write:data:ENOSPC")
    rig.wait_hit()
    # The store's materializations fail: it stops eliding, or MariaDB's
    # next checkpoint, which needs a page the disk would not take, is
    # refused and MariaDB stops (whichever comes first).
    deadline = time.monotonic() + 60
    while (not rig.elision()["disk_failing"] and rig.s.db.proc.poll() is None
           and time.monotonic() < deadline):
        time.sleep(0.2)
    assert rig.elision()["disk_failing"], f"no materialization failed on the full disk in 60 s: {rig.elision()}"
    time.sleep(1)
    acked = rig.elision()["acked"]
    time.sleep(5)
    e = rig.elision()
    assert e["disk_failing"] and e["acked"] == acked, f"pages elided on a full disk: {acked} -> {e}"
    log = rig.storage_log_since(slog)
    assert re.search(r"the disk fails: an? (open|read|write|sync) failed for page \d+:\d+ of \S+: No space "
                     r"left on device\. Elision is stopped", log), log[-3000:]
    assert "Free space on the export's file system" in log
    if rig.s.db.proc.poll() is None:
        # MariaDB waits: its page writes fail with ENOSPC, it retries them
        assert re.search(r"a WRITE of \S+ \(\d+ bytes at offset \d+\) failed in the export's file system: "
                         r"No space left on device", log), log[-3000:]
    else:
        # told why: its checkpoint write failed, refused by the gate
        assert re.search(r"the checkpoint write \(LSN \d+\) is refused", log), log[-3000:]
        assert re.search(r'pwrite\("ib_logfile0"\) returned -1, operating system error 5',
                         rig.mariadb_log_since(mlog))
    # Space is back: pages are written, elision resumes, and (MariaDB
    # started again if it stopped) commits go on.
    assert rig.clear() == "write:data:ENOSPC"
    if rig.s.db.proc.poll() is not None:
        rig.halt()
        rig.s.db.kill()
        rig.s.db.start()
        rig.go()
    rig.wait_commits(50)
    deadline = time.monotonic() + 60
    while rig.elision()["disk_failing"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not rig.elision()["disk_failing"], "elision did not resume once the disk had space"
    assert "elision resumes" in rig.storage_log_since(slog)
    rig.halt()
    rig.checked()


@pytest.mark.parametrize("spec,what", [
    ("write:log:EIO:1", r'pwrite\("ib_logfile0"\) returned -1, operating system error 5'),
    ("sync:log:EIO:1", r"fdatasync\(\) returned 5"),
], ids=["log-write-EIO", "log-sync-EIO"])
def test_log_error_stops_mariadb_and_loses_nothing(rig, spec, what):
    if rig.s.db.proc is None or rig.s.db.proc.poll() is not None:
        rig.s.db.kill()
        rig.s.db.start()
    rig.go()
    slog, mlog = len(rig.s.g.log_text()), rig.mariadb_log_size()
    rig.arm(spec)
    rig.wait_hit()
    assert rig.wait_mariadb_gone(), "mariadbd went on after its log write failed"
    assert re.search(what, rig.mariadb_log_since(mlog)), rig.mariadb_log_since(mlog)[-3000:]
    op = "WRITE" if spec.startswith("write") else "COMMIT"
    assert re.search(rf"a {op} of ib_logfile0 \(\d+ bytes at offset \d+\) failed in the export's file "
                     r"system: Input/output error", rig.storage_log_since(slog))
    assert rig.fault()["fault"] == "", "a fault of one call is over once met"
    rig.halt()
    rig.s.db.kill()
    rig.s.db.start()
    rig.checked()


def test_pool_sync_error_stops_elision_until_restart(rig):
    """The pool's file on a disk (msync) fails to sync: nothing it took
    since can be counted on, so no page is elided or kept in it any more
    (the gate writes pages into their files), MariaDB goes on writing its
    pages itself; a restart of the storage node once the device is fixed
    brings elision back."""
    if rig.s.db.proc is None or rig.s.db.proc.poll() is not None:
        rig.s.db.kill()
        rig.s.db.start()
    rig.go()
    slog = len(rig.s.g.log_text())
    rig.arm("sync:pool:EIO")
    rig.wait_hit()
    deadline = time.monotonic() + 60
    while "could not be made durable" not in rig.storage_log_since(slog) and time.monotonic() < deadline:
        time.sleep(0.2)
    log = rig.storage_log_since(slog)
    assert re.search(r"the pool's file could not be made durable \(msync: Input/output error\).*No page is "
                     r"elided any more", log), log[-3000:]
    assert rig.s.live("stats")["pool"]["persist_error"] == "Input/output error"
    time.sleep(1)
    acked = rig.elision()["acked"]
    rig.wait_commits(100)
    assert rig.elision()["acked"] == acked, "pages elided after the pool failed to sync"
    assert rig.s.db.proc.poll() is None
    assert rig.clear() == "sync:pool:EIO"
    # the device fixed: a clean restart of the storage node (MariaDB waits
    # on the hard mount meanwhile) and elision is back
    rig.s.g.stop()
    rig.s.restart_storage()
    rig.wait_commits(50)
    deadline = time.monotonic() + 60
    while rig.elision()["acked"] == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert rig.elision()["acked"] > 0, "no page elided after the restart"
    rig.halt()
    rig.checked()


def test_slow_disk_slows_mariadb_and_fails_nothing(rig):
    if rig.s.db.proc is None or rig.s.db.proc.poll() is not None:
        rig.s.db.kill()
        rig.s.db.start()
    rig.go()
    rig.arm("any:any:20ms")
    rig.wait_hit()
    time.sleep(8)
    assert rig.s.db.proc.poll() is None, "mariadbd stopped on a slow disk"
    assert rig.fault()["hits"] > 10
    assert rig.clear() == "any:any:20ms"
    rig.wait_commits(50)
    rig.halt()
    assert not rig.load.failed, rig.load.failed[0]
    rig.checked()
