"""Crashes under load with the whole stack (MariaDB + libcatcher eliding,
ppl-mount, FSAL_PPL): nothing a client saw committed is lost (DESIGN I1,
I2, I6).

A ledger client inserts one row per transaction and records every insert
MariaDB acknowledged, while TPC-C (tpcc/tpcc.lua, two threads) runs beside
it.

Compute node: ten times, mariadbd is killed with SIGKILL and started again:
InnoDB's own crash recovery runs over NFS against the pages the storage
node serves (rebuilt from the redo it holds for pages whose writes were
elided).

Storage node: ten times, ganesha.nfsd is killed with SIGKILL and started
again while mariadbd keeps running on the hard mount: the storage node
recovers its pmem pool, re-reads the log from MariaDB's checkpoint, and
serves the pages MariaDB reads back and the elision answers from there.

After every crash every acknowledged ledger row is there, CHECK TABLE
passes and the TPC-C consistency conditions hold; at the end the tables read back the same after a clean restart,
and the storage node never logged a rebuild failure, a stopped ingest or
a divergence."""
import random
import threading
import time

from lib.ledger import OPTIONS, Ledger, Load, check, final_check, prepare, tpcc_run
from lib.stack import Stack, require_stack

CRASHES = 10


def tpcc_in_background(db, seconds):
    t = threading.Thread(target=tpcc_run, args=(db, seconds), daemon=True)
    t.start()
    return t


def test_compute_crashes_lose_nothing(tmp_path):
    require_stack()
    rnd = random.Random(7)
    s = Stack(tmp_path, options=OPTIONS)
    acked = []
    recovery = []
    try:
        s.start()
        populated = prepare(s.db)
        next_id = 1
        for k in range(CRASHES):
            ledger = Ledger(s.db, next_id)
            ledger.start()
            load = tpcc_in_background(s.db, 6)
            deadline = time.time() + 60       # the crash comes once the ledger is committing
            while not ledger.acked and ledger.is_alive() and time.time() < deadline:
                time.sleep(0.05)
            assert ledger.acked, f"crash point {k}: the ledger committed nothing in 60 s"
            time.sleep(rnd.uniform(1.0, 3.0))
            s.db.kill()
            ledger.join(30)
            load.join(60)
            t0 = time.time()
            s.db.start()
            recovery.append(time.time() - t0)
            acked += ledger.acked
            next_id = ledger.next_id + 1
            check(s.db, acked)
            load.join(60)
        final_check(s.db, populated, acked)
    finally:
        s.stop()
    s.assert_storage_clean()
    print(f"{len(acked)} acknowledged ledger rows kept over {CRASHES} mariadbd crashes; MariaDB crash "
          f"recovery over the stack took {min(recovery):.1f}..{max(recovery):.1f} s")


def test_storage_crashes_lose_nothing(tmp_path):
    require_stack()
    rnd = random.Random(11)
    s = Stack(tmp_path, options=OPTIONS)
    acked = []
    try:
        s.start()
        populated = prepare(s.db)
        ledger = Ledger(s.db, 1)
        ledger.start()
        load = Load(s.db)
        for k in range(CRASHES):
            seen = len(ledger.acked)
            deadline = time.time() + 60       # each crash comes while the ledger is committing
            while len(ledger.acked) == seen and ledger.is_alive() and time.time() < deadline:
                time.sleep(0.05)
            assert ledger.is_alive() and len(ledger.acked) > seen, \
                f"crash point {k}: the ledger stopped committing (mariadbd gone?)"
            time.sleep(rnd.uniform(0.5, 2.0))
            s.crash_storage()
            check(s.db, list(ledger.acked))
        # MariaDB went on through every crash, without a restart of its own
        assert ledger.is_alive(), "the ledger client lost its server"
        ledger.stop_event.set()
        ledger.join(60)
        load.stop()
        assert not load.failed, \
            f"{len(load.failed)} TPC-C run(s) failed across the storage crashes:\n{load.failed[0]}"
        acked = ledger.acked
        final_check(s.db, populated, acked)
    finally:
        s.stop()
    s.assert_storage_clean()
    print(f"{len(acked)} acknowledged ledger rows kept over {CRASHES} ganesha.nfsd crashes under load")
