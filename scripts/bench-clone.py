#!/usr/bin/env python3
"""Benchmark (issue 20): a point-in-time clone from the storage node
against mariadb-backup, and what a base copy costs the compute node.

Over the whole stack with the log archive on (tests/lib/stack.py: mariadbd
with libcatcher eliding on ppl-mount, ganesha.nfsd with FSAL_PPL), sysbench
oltp_write_only is prepared (--tables x --table-size) and run for
--seconds. Then, with the load stopped:

  base copy   `ppl-inspect backup POOL DEST`: its time, and the
              compute node's CPU (mariadbd and ppl-mount) and ppl-mount's
              I/O bytes (its NFS socket and /dev/fuse) during it, against an
              idle window just before;
  clone       `ppl-inspect clone --at <archive's end>` from that base;
  backup      `mariadb-backup --backup` of the running server through the
              mount, then `--prepare`: what a user runs today for the same
              result.

Prints a Markdown table with the command and the load average. Not a test.

usage: PPL_BUILD_DIR=build scripts/bench-clone.py [--tables N] [--table-size N] [--seconds S]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from lib import paths  # noqa: E402
from lib.stack import Stack, require_stack  # noqa: E402

OPTIONS = ["--innodb-buffer-pool-size=64M", "--innodb-log-file-size=96M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def compute_cpu(s):
    return cpu_seconds(s.db.proc.pid) + cpu_seconds(s.mount.proc.pid)


def mount_io(s):
    """Bytes ppl-mount moved through read and write calls: its NFS socket
    and /dev/fuse (the compute node's traffic to the storage node)."""
    with open(f"/proc/{s.mount.proc.pid}/io") as f:
        io = dict(line.split(": ") for line in f.read().splitlines())
    return int(io["rchar"]) + int(io["wchar"])


def timed(cmd, **kw):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}{r.stdout[-2000:]}")
    return time.monotonic() - t0, r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--table-size", type=int, default=50000)
    ap.add_argument("--seconds", type=int, default=60, help="sysbench run before the measurements")
    ap.add_argument("--work", help="work directory (default: a temporary one, removed)")
    a = ap.parse_args()
    require_stack()
    work = a.work or tempfile.mkdtemp(prefix="ppl-bench-clone-")
    archive = os.path.join(work, "archive")
    os.makedirs(archive)
    s = Stack(os.path.join(work, "stack"), options=OPTIONS, pool_size="256M",
              fsal_extra=f'Archive_Path = "{archive}";')
    rows = []
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        t_load, _ = timed(["sysbench", "oltp_write_only", "--db-driver=mysql", f"--mysql-socket={db.socket}",
                           "--mysql-user=root", "--mysql-db=sbtest", f"--tables={a.tables}",
                           f"--table-size={a.table_size}", "--threads=4", "prepare"], timeout=7200)
        db.sysbench("oltp_write_only", "run", f"--time={a.seconds}", tables=a.tables, table_size=a.table_size,
                    threads=4, timeout=a.seconds + 600)
        data = sum(os.path.getsize(os.path.join(dp, f)) for dp, _d, fs in os.walk(db.datadir) for f in fs)

        # an idle window, then the base copy, the same length
        base = os.path.join(work, "base")
        c0, r0 = compute_cpu(s), mount_io(s)
        t0 = time.monotonic()
        time.sleep(5)
        idle_s = time.monotonic() - t0
        c1, r1 = compute_cpu(s), mount_io(s)
        t_base, _ = timed([paths.tool("ppl-inspect"), "backup", s.pool, base, "--json"],
                          timeout=7200)
        c2, r2 = compute_cpu(s), mount_io(s)
        rows.append(("base copy (storage node)", t_base, f"compute node meanwhile: CPU {c2 - c1:.2f} s, ppl-mount "
                     f"I/O {r2 - r1} B (an idle {idle_s:.1f} s before: {c1 - c0:.2f} s, {r1 - r0} B)"))

        db.sql("CREATE TABLE sbtest.tick (i INT) ENGINE=InnoDB")
        db.sql("INSERT INTO sbtest.tick VALUES (1)")
        time.sleep(1)
        end = s.live("stats")["archive"]["durable_lsn"]
        clone = os.path.join(work, "clone")
        t_clone, r = timed([paths.tool("ppl-inspect"), "clone", "--base", base, "--at", str(end), clone],
                           timeout=7200)
        rows.append(("clone at the archive's end from that base", t_clone, r.stdout.strip()[:200]))

        backup = os.path.join(work, "backup")
        c3 = compute_cpu(s)
        t_backup, _ = timed(["mariadb-backup", "--no-defaults", "--backup", f"--target-dir={backup}",
                             f"--socket={db.socket}", "--user=root", f"--datadir={db.datadir}"], timeout=7200)
        c4 = compute_cpu(s)
        t_prepare, _ = timed(["mariadb-backup", f"--defaults-file={backup}/backup-my.cnf", "--prepare",
                              f"--target-dir={backup}"], timeout=7200)
        rows.append(("mariadb-backup --backup (compute node, through the mount)", t_backup,
                     f"compute CPU of mariadbd and ppl-mount meanwhile {c4 - c3:.2f} s (mariadb-backup's own "
                     "not counted)"))
        rows.append(("mariadb-backup --prepare", t_prepare, ""))
        db.stop()
    finally:
        s.stop()
    print(f"bench-clone, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; command: "
          f"`{' '.join(sys.argv)}`; load average {os.getloadavg()[0]:.2f}; datadir {data / 1e6:.0f} MB "
          f"({a.tables} x {a.table_size} rows, prepared in {t_load:.0f} s)\n")
    print("| step | seconds | notes |\n| --- | ---: | --- |")
    for name, secs, note in rows:
        print(f"| {name} | {secs:.1f} | {note} |")
    print(f"\nclone from the storage node: {t_base + t_clone:.1f} s (base copy + clone) against "
          f"{t_backup + t_prepare:.1f} s for mariadb-backup --backup + --prepare")
    if not a.work:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
