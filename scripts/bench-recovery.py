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
pages" in its error log).

Prints a Markdown table. Not a test.

usage: PPL_BUILD_DIR=build scripts/bench-recovery.py [--crashes N] [--seconds S]
                                                     [--tables N] [--table-size N]
"""
import argparse
import os
import re
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


def crash_loop(db, a, label):
    db.sql("CREATE DATABASE sbtest")
    db.sysbench("oltp_write_only", "prepare", tables=a.tables, table_size=a.table_size)
    times, pages = [], []
    for k in range(a.crashes):
        def load():
            try:
                db.sysbench("oltp_write_only", "run", f"--time={a.seconds * 2}", tables=a.tables,
                            table_size=a.table_size, threads=4)
            except Exception:
                pass  # killed with the server
        t = threading.Thread(target=load, daemon=True)
        t.start()
        time.sleep(a.seconds)
        db.kill()
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
        print(f"{label}: crash {k + 1}: restart {times[-1]:.2f} s, {pages[-1]} pages to recover", flush=True)
    return times, pages


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--crashes", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=20, help="load before each crash (default 20)")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=50000)
    a = ap.parse_args()
    require_stack()
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp:
        db = MariaDB(os.path.join(tmp, "local"), options=OPTIONS)
        db.install()
        db.start()
        try:
            results["local datadir"] = crash_loop(db, a, "local")
        finally:
            db.stop()
        s = Stack(os.path.join(tmp, "stack"), options=OPTIONS, pool_size="256M")
        try:
            s.start()
            results["over the stack (eliding)"] = crash_loop(s.db, a, "stack")
            s.db.stop()
        finally:
            s.stop()
        s.assert_storage_clean()
    print(f"\nsysbench oltp_write_only, {a.tables} tables x {a.table_size} rows, 4 threads; mariadbd killed "
          f"with SIGKILL after {a.seconds} s of load, {a.crashes} times; restart = until it answers a ping\n")
    print("| datadir | restart median | min | max | pages to recover (median) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (times, pages) in results.items():
        print(f"| {name} | {statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s | "
              f"{int(statistics.median(pages))} |")


if __name__ == "__main__":
    main()
