#!/usr/bin/env python3
"""How long MariaDB's checkpoint trails its last page flush over the stack.

MariaDB's page cleaner empties the flush list, then fsyncs the data files
and writes its checkpoint block into ib_logfile0; the storage node's
checkpoint gate runs inside that WRITE (it settles every elided page whose
records the checkpoint passes). A client that sees 0 dirty pages and reads
"Last checkpoint at" in that window sees the old checkpoint: MariaDB's own
tests that sample it after a flush (no_checkpoint_start.inc) then skip
themselves on "Extra checkpoint". This measures the window the way they
see it, in rounds: create tables, insert, set innodb_max_dirty_pages_pct=0,
poll the dirty-page count until 0, then poll "Last checkpoint at" until it
moves (or 5 s pass: it had already moved). With --strace, also the time
mariadbd's pwrite of each checkpoint block took (strace -T).

    PPL_BUILD_DIR=$PWD/build scripts/bench-checkpoint-lag.py --mode elide --rounds 6
    PPL_BUILD_DIR=$PWD/build scripts/bench-checkpoint-lag.py --mode elide --pmem /dev/shm --strace

MariaDB runs with mtr's InnoDB settings (8 MiB buffer pool, 10 MiB log,
innodb_lru_scan_depth=100). Every process is a child of this script,
stopped by pid; everything lives under a new directory in --dir.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from lib.stack import Stack  # noqa: E402

MTR_INNODB = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=10M", "--innodb-lru-scan-depth=100",
              "--innodb-log-buffer-size=2M", "--innodb-write-io-threads=2", "--innodb-read-io-threads=2"]
# a checkpoint block: 64 bytes at 4096 or 8192 of ib_logfile0 (MariaDB 10.8+)
CKPT_WRITE = re.compile(r"pwrite64\((\d+), .*, (?:4096|8192)\) = \d+ <([0-9.]+)>")


def checkpoint(db):
    return int(re.search(r"Last checkpoint at\s+(\d+)", db.sql("SHOW ENGINE INNODB STATUS")).group(1))


def dirty(db):
    out = db.sql("SELECT variable_value FROM information_schema.global_status "
                 "WHERE variable_name='INNODB_BUFFER_POOL_PAGES_DIRTY'")
    return int(out.split()[-1])


def one_round(db, i):
    for t in ("u1", "u2", "u3", "u4"):
        db.sql(f"CREATE TABLE {t}_{i}(a INT PRIMARY KEY) ENGINE=InnoDB", db="test")
        db.sql(f"INSERT INTO {t}_{i} VALUES (1),(2),(3)", db="test")
    db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0.0")
    db.sql("SET GLOBAL innodb_max_dirty_pages_pct=0.0")
    while dirty(db) != 0:
        time.sleep(0.005)
    clean = time.time()
    seen = checkpoint(db)
    lag = None
    while time.time() - clean < 5:
        if checkpoint(db) != seen:
            lag = time.time() - clean
            break
        time.sleep(0.005)
    db.sql("SET GLOBAL innodb_max_dirty_pages_pct=90.0")
    return lag


def ib_logfile_fds(pid):
    fds = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").endswith("/ib_logfile0"):
                fds.add(fd)
        except OSError:
            pass
    return fds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("elide", "passthrough"), default="elide", help="libcatcher's mode")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--pmem", help="directory for the pool (default: the run's directory, on its disk)")
    ap.add_argument("--strace", action="store_true", help="time mariadbd's checkpoint block writes")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the run's directory is made")
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix=f"ckpt-lag-{a.mode}-", dir=a.dir)
    pool_dir = tempfile.mkdtemp(prefix="ckpt-lag-pool-", dir=a.pmem) if a.pmem else None
    from lib import pmem
    extra = "Allow_Volatile_Pool = true;" if pool_dir and pmem.on_tmpfs(os.path.join(pool_dir, "x")) else ""
    s = Stack(base, options=MTR_INNODB, catcher_mode=a.mode, pool_dir=pool_dir, fsal_extra=extra)
    tracer = None
    lags = []
    try:
        s.start()
        s.db.sql("CREATE DATABASE IF NOT EXISTS test")
        trace = os.path.join(base, "strace.txt")
        if a.strace:
            tracer = subprocess.Popen(["strace", "-f", "-T", "-e", "trace=pwrite64", "-o", trace,
                                       "-p", str(s.db.proc.pid)], stderr=subprocess.DEVNULL)
            time.sleep(1)
        for i in range(a.rounds):
            lag = one_round(s.db, i)
            lags.append(lag)
            print(f"round {i}: " + ("checkpoint already written when dirty pages reached 0" if lag is None
                                    else f"checkpoint written {lag * 1000:.0f} ms after dirty pages reached 0"),
                  flush=True)
            time.sleep(1.5)
        late = [x for x in lags if x is not None]
        print(f"{a.mode}, pool {'in ' + a.pmem if a.pmem else 'on the run directory disk'}: "
              f"{len(late)} of {len(lags)} rounds saw the checkpoint trail the flush"
              + (f" (by {', '.join(f'{x * 1000:.0f}' for x in late)} ms)" if late else ""))
        if tracer:
            fds = ib_logfile_fds(s.db.proc.pid)
            tracer.terminate()
            tracer.wait(timeout=10)
            tracer = None
            with open(trace) as f:
                ms = [float(m.group(2)) * 1000 for m in map(CKPT_WRITE.search, f) if m and m.group(1) in fds]
            if ms:
                print(f"checkpoint block writes: {len(ms)}, {min(ms):.2f}-{max(ms):.2f} ms, "
                      f"median {sorted(ms)[len(ms) // 2]:.2f} ms")
        held = s.live("stats").get("elision", {})
        print(f"storage node: checkpoints held {held.get('checkpoints_held')}, "
              f"checkpoint wait {held.get('checkpoint_wait_s')} s")
    finally:
        if tracer:
            tracer.terminate()
            tracer.wait(timeout=10)
        s.stop()
        if pool_dir:
            shutil.rmtree(pool_dir, ignore_errors=True)
    print(f"files: {base}")


if __name__ == "__main__":
    main()
