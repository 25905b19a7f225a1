#!/usr/bin/env python3
"""Benchmark: how fast InnoDB gets its dirty pages out, local vs the stack.

Issue 18, item 4 asks why InnoDB's checkpoint trails further over the
stack (bench-recovery.py: 4.4x the dirty pages at a crash). This runs the
same load as bench-recovery (sysbench oltp_write_only, 4 threads, a 16 MiB
buffer pool) on a local datadir and over the stack (pool on /dev/shm, as
deployed), and over --seconds in the middle of the load reads InnoDB's own
counters: pages flushed per second, waits for a free page, commits, and
the dirty pages at the end. Prints a Markdown table. Not a test.

usage: PPL_BUILD_DIR=build scripts/bench-flush-rate.py [--seconds 15] [--tables 4] [--table-size 50000]
"""
import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from lib.mariadb import MariaDB  # noqa: E402
from lib.stack import Stack, require_stack  # noqa: E402

OPTIONS = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=96M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
COUNTERS = ("Innodb_buffer_pool_pages_flushed", "Innodb_buffer_pool_wait_free", "Innodb_buffer_pool_pages_dirty",
            "Com_commit")


def counters(db):
    names = ",".join(f"'{c}'" for c in COUNTERS)
    out = db.sql(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
    return {line.split()[0]: int(line.split()[1]) for line in out.splitlines()}


def measure(db, a):
    db.sql("CREATE DATABASE sbtest")
    db.sysbench("oltp_write_only", "prepare", tables=a.tables, table_size=a.table_size)
    load = threading.Thread(target=lambda: db.sysbench("oltp_write_only", "run", f"--time={a.seconds + 10}",
                                                       tables=a.tables, table_size=a.table_size, threads=4),
                            daemon=True)
    load.start()
    time.sleep(5)
    before, t0 = counters(db), time.monotonic()
    time.sleep(a.seconds)
    after, dt = counters(db), time.monotonic() - t0
    load.join(120)
    rate = {k: (after[k] - before[k]) / dt for k in COUNTERS}
    return rate, after["Innodb_buffer_pool_pages_dirty"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=50000)
    a = ap.parse_args()
    require_stack()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-flush-rate-") as tmp:
        db = MariaDB(os.path.join(tmp, "local"), options=OPTIONS)
        db.install()
        db.start()
        try:
            rows.append(("local datadir", *measure(db, a)))
        finally:
            db.stop()
        pmem = tempfile.mkdtemp(prefix="bench-flush-rate-", dir="/dev/shm")
        s = Stack(os.path.join(tmp, "stack"), options=OPTIONS, pool_size="256M", pool_dir=pmem,
                  fsal_extra="Allow_Volatile_Pool = true;")
        try:
            s.start()
            rows.append(("over the stack (eliding)", *measure(s.db, a)))
            s.db.stop()
        finally:
            s.stop()
            shutil.rmtree(pmem, ignore_errors=True)
    print(f"\nsysbench oltp_write_only, {a.tables} x {a.table_size} rows, 4 threads, {a.seconds} s measured in "
          f"the middle of the load; {' '.join(OPTIONS)}\n")
    print("| datadir | pages flushed/s | waits for a free page/s | commits/s | pages flushed per commit | "
          "dirty pages at the end (of 1,024) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r, dirty in rows:
        print(f"| {name} | {r['Innodb_buffer_pool_pages_flushed']:.0f} | {r['Innodb_buffer_pool_wait_free']:.0f} | "
              f"{r['Com_commit']:.0f} | {r['Innodb_buffer_pool_pages_flushed'] / max(1.0, r['Com_commit']):.2f} | "
              f"{dirty} |")


if __name__ == "__main__":
    main()
