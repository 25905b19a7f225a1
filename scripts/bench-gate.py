#!/usr/bin/env python3
"""How long MariaDB's checkpoints wait for the storage node, under a load
through the stack (a benchmark, never a test).

Issue 17's trial, on one machine: TPC-C (tpcc/tpcc.lua) loaded *through
the stack* with a small buffer pool, then run for --seconds (the pool on
tmpfs with Allow_Volatile_Pool = true, standing in for NVDIMM); once with
libcatcher eliding and once with it writing every page (full writes),
each from a new stack. For each phase it prints the wall time, TPS for the
run, and the storage node's figures: checkpoint writes held by the gate
and for how long, pages materialized, records kept in the pool.

    PPL_BUILD_DIR=build scripts/bench-gate.py --warehouses 2 --seconds 60

Everything runs as direct children (tests/lib/stack.py), stopped by pid;
the work directory is removed unless --keep."""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from lib import tpcc  # noqa: E402
from lib.stack import Stack  # noqa: E402

FIGURES = ("checkpoints_held", "checkpoint_wait_s", "log_wraps_held", "log_wrap_wait_s", "materialized", "pool_kept",
           "spilled_kept", "settled_ahead", "pages_rebuilt", "mtrs_applied")


def engine_figures(s):
    """The store's counters (`ppl-inspect live POOL stats --json`), wherever
    in its objects they are."""
    found = {}

    def walk(o):
        for k, v in o.items():
            if isinstance(v, dict):
                walk(v)
            elif k in FIGURES or k == "pages_kept":
                found["pool_kept" if k == "pages_kept" else k] = v
    walk(s.live("stats"))
    missing = [k for k in FIGURES if k not in found]
    if missing:
        raise SystemExit(f"ppl-inspect live stats has no {missing}: is the elision service on?")
    return {k: found[k] for k in FIGURES}


def diff(a, b):
    return {k: round(b[k] - a[k], 3) for k in a}


def one(a, mode, base):
    options = [f"--innodb-buffer-pool-size={a.buffer_pool_mb}M", f"--innodb-log-file-size={a.log_mb}M",
               "--innodb-doublewrite=0", "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
    pool_dir = tempfile.mkdtemp(prefix="bench-gate-pool-", dir=a.pool_dir) if a.pool_dir else None
    extra = f"Apply_Threads = {a.apply_threads};" + (" Allow_Volatile_Pool = true;" if a.allow_volatile else "")
    s = Stack(os.path.join(base, mode), options=options, catcher_mode=mode, pool_size=f"{a.pool_mb}M",
              fsal_extra=extra, pool_dir=pool_dir)
    out = {"mode": mode}
    try:
        s.start()
        s.db.sql("CREATE DATABASE tpcc")
        scale = [f"--scale={a.warehouses}", f"--threads={a.threads}"]
        f0, t0 = engine_figures(s), time.time()
        tpcc.run(s.db, "prepare", *scale, timeout=3600)
        f1, t1 = engine_figures(s), time.time()
        out["load"] = {"seconds": round(t1 - t0, 1), **diff(f0, f1)}
        print(f"{mode}: loaded {a.warehouses} warehouse(s) in {t1 - t0:.1f} s: {out['load']}", flush=True)
        r = tpcc.run(s.db, "run", *scale, f"--time={a.seconds}", "--report-interval=10", timeout=a.seconds + 600)
        f2, t2 = engine_figures(s), time.time()
        m = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", r.stdout)
        out["run"] = {"seconds": round(t2 - t1, 1), "transactions": int(m.group(1)) if m else None,
                      "tps": float(m.group(2)) if m else None, **diff(f1, f2)}
        print(f"{mode}: ran {a.seconds} s: {out['run']}", flush=True)
        s.db.stop()
        s.stop()
        s.assert_storage_clean()
    finally:
        s.stop()
        if pool_dir:
            shutil.rmtree(pool_dir, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warehouses", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--buffer-pool-mb", type=int, default=16)
    ap.add_argument("--log-mb", type=int, default=96)
    ap.add_argument("--pool-mb", type=int, default=256)
    ap.add_argument("--apply-threads", type=int, default=2)
    ap.add_argument("--pool-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="where the pool lives: a tmpfs standing in for NVDIMM (default /dev/shm), a DAX "
                         "mount, or '' for the work directory (a disk: every persist is an msync)")
    ap.add_argument("--no-allow-volatile", dest="allow_volatile", action="store_false",
                    help="leave Allow_Volatile_Pool unset (builds from before it existed)")
    ap.add_argument("--modes", default="elide,passthrough",
                    help="libcatcher modes to run, in order (passthrough: every page written in full)")
    ap.add_argument("--work", help="work directory (kept)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    base = a.work or tempfile.mkdtemp(prefix="bench-gate-")
    os.makedirs(base, exist_ok=True)
    try:
        rows = [one(a, mode, base) for mode in a.modes.split(",")]
    finally:
        if not a.work and not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\n{'mode':<12} {'phase':<5} {'wall s':>8} {'TPS':>8} {'ckpt held':>10} {'held s':>8} "
          f"{'held %':>7} {'wraps held':>10} {'wrap s':>7} {'materialized':>13} {'pool kept':>10} "
          f"{'over cap':>9} {'rebuilt':>8} {'mtrs/rebuild':>12}")
    for r in rows:
        for phase in ("load", "run"):
            p = r[phase]
            pct = 100.0 * p["checkpoint_wait_s"] / p["seconds"] if p["seconds"] else 0.0
            tps = f"{p['tps']:.1f}" if p.get("tps") else "-"
            per = f"{p['mtrs_applied'] / p['pages_rebuilt']:.1f}" if p["pages_rebuilt"] else "-"
            print(f"{r['mode']:<12} {phase:<5} {p['seconds']:>8.1f} {tps:>8} {p['checkpoints_held']:>10} "
                  f"{p['checkpoint_wait_s']:>8.2f} {pct:>6.1f}% {p['log_wraps_held']:>10} "
                  f"{p['log_wrap_wait_s']:>7.2f} {p['materialized']:>13} {p['pool_kept']:>10} "
                  f"{p['spilled_kept']:>9} {p['pages_rebuilt']:>8} {per:>12}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
