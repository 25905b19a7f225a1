#!/usr/bin/env python3
"""Kills the storage node at each of its named crash points in turn
(applier/include/ppl/crash.h), under load, and checks after every crash
that nothing acknowledged was lost (tests/lib/crashpoints.py says how).

    scripts/crash-points.py                      # the full run: every point at 6 hit counts
    scripts/crash-points.py --hits 2 --points gate_settled,dw_staged
    scripts/crash-points.py --report tests/crash/REPORT-$(date +%F).md

Needs the build with the crash-point plugin (scripts/test.sh or `ninja -C
build` makes build/ganesha-fsal-ppl/plugins-crash). Every process is a
child of this script, stopped by pid; everything lives under a new
directory in --dir, removed at the end unless --keep or a check failed.
Prints one line per crash: the point and hit count, how it was armed
(live: over the running node's socket; restart: in a restarted node's
environment), whether the node died there, the seconds to reach it and
the seconds its restart and checks took.
"""
import argparse
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from lib import crashpoints  # noqa: E402

FULL_HITS = "1,2,3,5,8,13"


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hits", default=FULL_HITS, help=f"hit counts of every live point (default {FULL_HITS})")
    ap.add_argument("--restart-hits", default="1", help="hit counts of the points a start passes (default 1)")
    ap.add_argument("--points", help="only these points (comma-separated names from ppl/crash.h)")
    ap.add_argument("--reach-timeout", type=float, default=45, help="seconds to wait for an armed point")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the run's directory is made")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory")
    ap.add_argument("--report", help="also write the results as a Markdown report to this file")
    return ap.parse_args()


def report(path, args, results, started, elapsed, load, head):
    crashed = [r for r in results if r.crashed]
    with open(path, "w") as f:
        f.write(f"# Crash points: {len(crashed)} crashes of the storage node\n\n")
        f.write(f"`scripts/crash-points.py {' '.join(sys.argv[1:])}` at {head}, started {started} UTC, "
                f"{elapsed / 60:.1f} min; load average before: {load}.\n\n")
        f.write(f"{len(results)} (point, hit) tried, {len(crashed)} crashed there, "
                f"{len(results) - len(crashed)} not reached within {args.reach_timeout:.0f} s. After every "
                "crash: every acknowledged ledger row there, CHECK TABLE OK on every table, TPC-C's "
                "consistency conditions held; at the end the same after a clean MariaDB restart, and no "
                "failure line in the storage node's log.\n\n")
        f.write("| point | hit | armed | crashed | s to reach | s to restart and check |\n|---|---|---|---|---|---|\n")
        for r in results:
            f.write(f"| {r.point} | {r.n} | {r.how} | {'yes' if r.crashed else 'not reached'} | "
                    f"{r.seconds:.1f} | {r.check_s:.1f} |\n")


def main():
    args = parse()
    hits = [int(x) for x in args.hits.split(",") if x]
    restart_hits = [int(x) for x in args.restart_hits.split(",") if x]
    names = crashpoints.points()
    chosen = args.points.split(",") if args.points else names
    unknown = [p for p in chosen if p not in names]
    if unknown:
        sys.exit(f"crash-points: no such point(s): {', '.join(unknown)} (known: {', '.join(names)})")
    todo = [(p, n) for p, n in crashpoints.plan(hits, restart_hits) if p in chosen]
    base = tempfile.mkdtemp(prefix="ppl-crash-points-", dir=args.dir)
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    load = open("/proc/loadavg").read().split()[:3]
    # the commit the run's build was made from, read before it starts
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    print(f"crash-points: {len(todo)} crashes planned; working in {base}", flush=True)
    d = crashpoints.Driver(base, log=lambda line: print(line, flush=True), reach_timeout=args.reach_timeout)
    t0 = time.time()
    ok = False

    def stopped(signum, _frame):
        # SIGTERM or SIGHUP (a timeout, a closed terminal): unwind through
        # the driver's clean-up, which stops every child by pid.
        raise SystemExit(f"crash-points: stopped by signal {signum}")
    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGHUP, stopped)
    try:
        d.run(todo, before_each=lambda i: print(f"[{i + 1}/{len(todo)}] ", end="", flush=True))
        ok = True
    finally:
        elapsed = time.time() - t0
        crashed = sum(r.crashed for r in d.results)
        print(f"crash-points: {crashed} crashes at named points, {len(d.results) - crashed} not reached, "
              f"{len(d.ledger.acked) if d.ledger else 0} acknowledged ledger rows kept, {elapsed / 60:.1f} min"
              + ("" if ok else f"; FAILED, the run's directory is kept: {base}"), flush=True)
        if args.report:
            report(args.report, args, d.results, started, elapsed, " ".join(load), head)
        if ok and not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
