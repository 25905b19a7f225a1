#!/usr/bin/env python3
"""Benchmark: ppl-replay against mariadb-backup --prepare on the same backup.

Makes a backup whose redo log holds at least --min-log-gb of oltp_write_only
redo (the backup copy is throttled so that it lasts while the workload
writes), copies it twice, and times mariadb-backup --prepare on one copy and
ppl-replay on the other, in one run; prints both throughputs and their
ratio, and checks the two results are page-identical.

Not a test: it takes minutes and needs a few GB of disk."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from lib import paths  # noqa: E402
from lib.mariadb import MariaDB  # noqa: E402
from lib.oracle import compare_dirs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--min-log-gb", type=float, default=1.0)
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--table-size", type=int, default=50000)
    ap.add_argument("--throttle", type=int, default=1, help="mariadb-backup --throttle (IO pairs/s)")
    ap.add_argument("--prepare-memory", default="2G", help="mariadb-backup --prepare --use-memory")
    ap.add_argument("--workdir", help="default: a new temp dir (removed afterwards)")
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="ppl-bench-replay-")
    db = MariaDB(os.path.join(work, "server"),
                 options=["--innodb-log-file-size=4G", "--innodb-buffer-pool-size=1G",
                          "--innodb-flush-log-at-trx-commit=0"])
    db.install()
    db.start()
    try:
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=a.tables, table_size=a.table_size)
        load = subprocess.Popen(
            ["sysbench", "oltp_write_only", "--db-driver=mysql", f"--mysql-socket={db.socket}",
             "--mysql-user=root", "--mysql-db=sbtest", f"--tables={a.tables}", f"--table-size={a.table_size}",
             "--threads=4", "--time=0", "run"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        backup = os.path.join(work, "backup")
        t = time.time()
        r = subprocess.run(["mariadb-backup", "--no-defaults", "--backup", f"--target-dir={backup}",
                            f"--socket={db.socket}", "--user=root", f"--datadir={db.datadir}",
                            f"--throttle={a.throttle}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        print(f"backup took {time.time() - t:.0f} s", flush=True)
        load.terminate()
        load.wait()
        if r.returncode:
            sys.exit("mariadb-backup --backup failed:\n" + r.stdout[-3000:])
    finally:
        db.stop()
    log_bytes = os.path.getsize(os.path.join(backup, "ib_logfile0"))
    print(f"backup log: {log_bytes / 1e9:.2f} GB", flush=True)
    if log_bytes < a.min_log_gb * 1e9:
        sys.exit(f"log smaller than {a.min_log_gb} GB: lower --throttle or raise --table-size")
    prepared, replayed = os.path.join(work, "prepared"), os.path.join(work, "replayed")
    shutil.copytree(backup, prepared)
    shutil.copytree(backup, replayed)
    shutil.rmtree(backup)
    subprocess.run(["sync"])
    t = time.time()
    r = subprocess.run(["mariadb-backup", f"--defaults-file={prepared}/backup-my.cnf", "--prepare",
                        f"--use-memory={a.prepare_memory}",
                        f"--target-dir={prepared}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    prep_s = time.time() - t
    if r.returncode:
        sys.exit("prepare failed:\n" + r.stdout[-3000:])
    subprocess.run(["sync"])
    t = time.time()
    rr = subprocess.run([paths.tool("ppl-replay"), "--json", replayed], stdout=subprocess.PIPE, text=True)
    rep_s = time.time() - t
    if rr.returncode:
        sys.exit("ppl-replay failed")
    s = json.loads(rr.stdout)
    compared, diffs, problems = compare_dirs(prepared, replayed)
    mb = s["log_bytes"] / 1e6
    print(f"redo applied: {mb:.0f} MB, {s['records']} records, {s['pages_written']} pages written")
    print(f"mariadb-backup --prepare: {prep_s:.2f} s, {mb / prep_s:.1f} MB/s")
    print(f"ppl-replay:               {rep_s:.2f} s, {mb / rep_s:.1f} MB/s "
          f"(parse {s['parse_s']:.2f} s, apply {s['apply_s']:.2f} s)")
    print(f"ratio: ppl-replay is {prep_s / rep_s:.2f}x faster")
    print(f"pages compared {compared}, differing {len(diffs)}, file problems {len(problems)}")
    if not a.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if diffs or problems else 0


if __name__ == "__main__":
    sys.exit(main())
