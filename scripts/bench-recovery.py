#!/usr/bin/env python3
"""Benchmark: MariaDB's crash recovery time with and without the stack.

Two set-ups, the same MariaDB options and the same load:

  local   mariadbd on a local datadir;
  stack   mariadbd with LD_PRELOAD=libcatcher.so (eliding) on ppl-mount,
          over ganesha.nfsd with FSAL_PPL over FSAL_VFS (tests/lib/stack.py).

Each set-up prepares sysbench oltp_write_only, then --crashes times: runs
the load for --seconds, kills mariadbd with SIGKILL in the middle of it,
and times its restart until it answers a ping, checked every 10 ms: InnoDB's
crash recovery reads and applies the log from the last checkpoint, over NFS
for the stack, against pages the storage node rebuilds where their writes
were elided. The pages to recover are InnoDB's own count ("To recover: N
pages" in its error log). Just before each kill, InnoDB's checkpoint age
(its LSN minus "Last checkpoint at", SHOW ENGINE INNODB STATUS) and its
dirty pages are sampled, and once a second during the load: how far the
checkpoint trails is what recovery has to read and apply.

--full-log is the worst case: a 32 MiB log, a 128 MiB buffer pool,
adaptive flushing off and innodb_io_capacity=100, so that the checkpoint
age grows until the log is nearly full. --pmem DIR puts the stack's pool
there (default /dev/shm, a tmpfs standing in for NVDIMM, as deployed;
--pmem "" leaves it on the run's own file system, where every persist is
an msync). --log-on-pmem adds a third set-up: the stack with Log_On_Pmem.

Prints a Markdown table. Not a test.

usage: PPL_BUILD_DIR=build scripts/bench-recovery.py [--crashes N] [--seconds S]
                                                     [--tables N] [--table-size N]
                                                     [--full-log] [--pmem DIR] [--log-on-pmem]
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from lib.mariadb import MariaDB  # noqa: E402
from lib.stack import Stack, require_stack  # noqa: E402

OPTIONS = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=96M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
FULL_LOG = ["--innodb-buffer-pool-size=128M", "--innodb-log-file-size=32M", "--innodb-doublewrite=0",
            "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1", "--innodb-adaptive-flushing=OFF",
            "--innodb-io-capacity=100", "--innodb-max-dirty-pages-pct=90"]


def checkpoint_age(db):
    """(LSN - last checkpoint, dirty pages) now, or None."""
    try:
        st = db.sql("SHOW ENGINE INNODB STATUS")
        dirty = db.sql("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'").split()
    except Exception:
        return None
    st = st.replace("\\n", "\n")
    lsn = re.search(r"Log sequence number\s+(\d+)", st)
    ck = re.search(r"Last checkpoint at\s+(\d+)", st)
    if not lsn or not ck:
        return None
    return int(lsn.group(1)) - int(ck.group(1)), int(dirty[-1]) if dirty else 0


def crash_loop(db, a, label):
    db.sql("CREATE DATABASE sbtest")
    db.sysbench("oltp_write_only", "prepare", tables=a.tables, table_size=a.table_size)
    times, pages, ages, dirty, trail = [], [], [], [], []
    for k in range(a.crashes):
        def load():
            try:
                db.sysbench("oltp_write_only", "run", f"--time={a.seconds * 2}", tables=a.tables,
                            table_size=a.table_size, threads=4)
            except Exception:
                pass  # killed with the server
        t = threading.Thread(target=load, daemon=True)
        t.start()
        deadline = time.monotonic() + a.seconds
        while time.monotonic() < deadline - 1:
            time.sleep(1)
            s = checkpoint_age(db)
            if s:
                trail.append(s[0])
        time.sleep(max(0.0, deadline - time.monotonic()))
        s = checkpoint_age(db)
        db.kill()
        if s:
            ages.append(s[0])
            dirty.append(s[1])
        t.join(120)
        size = os.path.getsize(db.errlog)
        t0 = time.time()
        db.start(timeout=600, poll=0.01)
        times.append(time.time() - t0)
        with open(db.errlog, errors="replace") as f:
            f.seek(size)
            text = f.read()
        m = re.search(r"To recover: (\d+) pages", text)
        pages.append(int(m.group(1)) if m else 0)
        print(f"{label}: crash {k + 1}: restart {times[-1]:.2f} s, {pages[-1]} pages to recover, checkpoint "
              f"age at the kill {ages[-1] if ages else '?'} B, dirty pages {dirty[-1] if dirty else '?'}", flush=True)
    return times, pages, ages, dirty, trail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--crashes", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=20, help="load before each crash (default 20)")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=50000)
    ap.add_argument("--full-log", action="store_true", help="let the checkpoint age grow to the log's size")
    ap.add_argument("--pmem", default="/dev/shm", help="the stack's pool directory (\"\": the run's own)")
    ap.add_argument("--log-on-pmem", action="store_true", help="also the stack with Log_On_Pmem = true")
    a = ap.parse_args()
    require_stack()
    options = FULL_LOG if a.full_log else OPTIONS
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp:
        db = MariaDB(os.path.join(tmp, "local"), options=options)
        db.install()
        db.start()
        try:
            results["local datadir"] = crash_loop(db, a, "local")
        finally:
            db.stop()
        stacks = [("over the stack (eliding)", "")]
        if a.log_on_pmem:
            stacks.append(("over the stack, Log_On_Pmem", "Log_On_Pmem = true;"))
        for name, extra in stacks:
            pmem = tempfile.mkdtemp(prefix="bench-recovery-", dir=a.pmem) if a.pmem else None
            volatile = "Allow_Volatile_Pool = true;" if a.pmem else ""
            s = Stack(os.path.join(tmp, name.split()[-1].strip("(),")), options=options, pool_size="256M",
                      pool_dir=pmem, fsal_extra=volatile + extra)
            try:
                s.start()
                results[name] = crash_loop(s.db, a, "stack")
                s.db.stop()
            finally:
                s.stop()
                if pmem:
                    shutil.rmtree(pmem, ignore_errors=True)
            s.assert_storage_clean()
    print(f"\nsysbench oltp_write_only, {a.tables} tables x {a.table_size} rows, 4 threads; mariadbd killed "
          f"with SIGKILL after {a.seconds} s of load, {a.crashes} times; restart = until it answers a ping; "
          f"options {' '.join(options)}; the stack's pool in {a.pmem or 'the run directory'}\n")
    print("| datadir | restart median | min | max | pages to recover (median) | checkpoint age at the kill, "
          "median MB | dirty pages at the kill (median) | checkpoint age during the load, median MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, (times, pages, ages, dirty, trail) in results.items():
        med = (lambda v: statistics.median(v) if v else 0)
        print(f"| {name} | {statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s | "
              f"{int(statistics.median(pages))} | {med(ages) / 1e6:.1f} | {int(med(dirty))} | "
              f"{med(trail) / 1e6:.1f} |")


if __name__ == "__main__":
    main()
