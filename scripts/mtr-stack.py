#!/usr/bin/env python3
"""MariaDB's own mysql-test-run over the stack, in up to five set-ups.

  scripts/mtr-stack.py --subset ci --setups a,c,d          # the CI subset
  scripts/mtr-stack.py --suite innodb --setups a,b,c,d,e   # the whole suite
  scripts/mtr-stack.py --setups c innodb.innodb-wl5522     # chosen tests
  scripts/mtr-stack.py --report-from DIR [DIR...]          # a report from saved runs

Set-ups (tests/mtr/runner.py): a local datadir; b local + libcatcher
passthrough; c FSAL_PPL with Verify = true + libcatcher passthrough; d FSAL_PPL
eliding with Verify = true + libcatcher elide; e stock FSAL_VFS, no
libcatcher. Each set-up is one mtr run (--parallel=1, private ports), one
after the other, with its own storage node and mount; every process is a
child of this script, stopped by pid. A progress line per test; after each
test the set-up's results are saved (WORKDIR/SETUP/result.json) and the
markdown report (--report, default tests/mtr/REPORT.md with --suite, else
WORKDIR/REPORT.md) is rewritten, so a run stopped with Ctrl-C or SIGTERM
keeps what finished. Needs PPL_BUILD_DIR (default: build/) for libcatcher,
FSAL_PPL, ppl-mount and ppl-inspect.
"""
import argparse
import os
import shlex
import signal
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from mtr import report, runner, subset  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tests", nargs="*", help="mtr test names (suite.test[,combination])")
    ap.add_argument("--suite", help="run a whole mtr suite (e.g. innodb)")
    ap.add_argument("--subset", choices=["ci", "open"],
                    help="the CI subset, or the chosen tests that are not in CI yet (tests/mtr/subset.py)")
    ap.add_argument("--setups", default="a,c,d", help="comma-separated set-ups among a,b,c,d,e (default a,c,d)")
    ap.add_argument("--workdir", help="where the runs go (local disk; default /tmp/mtr-stack-PID)")
    ap.add_argument("--report", help="markdown report to write")
    ap.add_argument("--timeout", type=float, default=6 * 3600, help="seconds per set-up before mtr is stopped")
    ap.add_argument("--testcase-timeout", type=int, default=10, help="mtr --testcase-timeout (minutes)")
    ap.add_argument("--big-test", action="store_true", help="pass --big-test to mtr")
    ap.add_argument("--isolate", action="store_true",
                    help="one mtr run (and a fresh storage node and mount) per test: a failure cannot cascade into "
                         "the next tests (slow: a bootstrap per test)")
    ap.add_argument("--note", default="", help="a paragraph put at the top of the report")
    ap.add_argument("--report-from", nargs="+", metavar="DIR",
                    help="write the report from saved set-up directories (each holding result.json) and exit")
    a = ap.parse_args()

    if a.report_from:
        runs = []
        for d in a.report_from:
            r = runner.load(d)
            same = next((x for x in runs if x.setup.key == r.setup.key), None)
            if same is None:
                runs.append(r)
                continue
            # runs of the same set-up (e.g. more tests later) are merged
            same.tests.update(r.tests)
            same.seconds += r.seconds
            same.outside += r.outside
            same.aborted = same.aborted or r.aborted
            if r.catcher_total:
                tot = same.catcher_total or {}
                same.catcher_total = {k: tot.get(k, 0) + v for k, v in r.catcher_total.items()}
            same.storage_summary = runner._add_verify(same.storage_summary, r.storage_summary)
            if r.build and r.build != same.build:
                same.build = f"{same.build}; {r.build}" if same.build else r.build
        path = a.report or os.path.join(ROOT, "tests", "mtr", "REPORT.md")
        cmds = sorted({r.setup.key + ": " + " ".join(shlex.quote(x) for x in r.command[:1] + ["..."]) for r in runs})
        report.write(path, runs, command=_invocation(),
                     notes="\n\n".join(x for x in (a.note, _partial_note(runs)) if x))
        print(f"report: {path} ({', '.join(cmds)})")
        return 0

    setups = [s.strip() for s in a.setups.split(",") if s.strip()]
    for s in setups:
        if s not in runner.SETUPS:
            ap.error(f"unknown set-up {s!r}: choose among {','.join(runner.SETUPS)}")
    tests = list(a.tests)
    if a.subset == "ci":
        tests += subset.CI
    elif a.subset == "open":
        if not subset.OPEN and not tests:
            print("subset.OPEN is empty: every chosen test passes over the stack (tests/mtr/subset.py)")
            return 0
        tests += list(subset.OPEN)
    if not tests and not a.suite:
        ap.error("name tests, --subset ci or --suite SUITE")
    workdir = os.path.abspath(a.workdir or f"/tmp/mtr-stack-{os.getpid()}")
    os.makedirs(workdir, exist_ok=True)
    path = a.report or (os.path.join(ROOT, "tests", "mtr", "REPORT.md") if a.suite
                        else os.path.join(workdir, "REPORT.md"))
    extra = (["--big-test"] if a.big_test else []) + os.environ.get("PPL_MTR_EXTRA", "").split()
    command = _invocation()

    stop = threading.Event()

    def on_signal(_sig, _frame):
        print("stopping: mtr is stopped by pid, what finished goes into the report", flush=True)
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    runs = []
    last = [0.0]

    def rewrite(current, force=False):
        if not force and time.time() - last[0] < 30:
            return
        last[0] = time.time()
        report.write(path, runs + ([current] if current is not None else []), command=command,
                     notes="\n\n".join(x for x in (a.note, _partial_note(runs + ([current] if current is not None
                                                                                else []))) if x))

    print(f"mtr over the stack: set-ups {','.join(setups)}; "
          f"{'suite ' + a.suite if a.suite else str(len(tests)) + ' tests'}; workdir {workdir}; report {path}",
          flush=True)
    for key in setups:
        if stop.is_set():
            break
        t0 = time.time()
        print(f"== set-up {key}: {runner.SETUPS[key].title}", flush=True)
        if a.isolate:
            r = isolated(key, tests, os.path.join(workdir, key), a, extra, rewrite, stop)
        else:
            r = runner.run(key, tests, os.path.join(workdir, key), suite=a.suite, timeout=a.timeout,
                           testcase_timeout=a.testcase_timeout, progress=lambda line: print(line, flush=True),
                           extra=extra, on_test=rewrite, stop=stop)
        runs.append(r)
        c = r.counts()
        print(f"== set-up {key} done in {(time.time() - t0) / 60:.1f} min: {len(r.tests)} tests, "
              + ", ".join(f"{v} {k}" for k, v in sorted(c.items()))
              + (f"; {r.aborted}" if r.aborted else ""), flush=True)
        rewrite(None, force=True)
    rewrite(None, force=True)
    print(f"report: {path}", flush=True)
    bad = [(r.setup.key, t.name) for r in runs for t in r.tests.values() if not runner.verdict_ok(t)]
    return 1 if bad else 0


def isolated(key, tests, workdir, a, extra, rewrite, stop):
    """Each test in its own mtr run with its own storage node; the results
    merged into one RunResult (saved as workdir/result.json)."""
    if a.suite:
        raise SystemExit("--isolate takes named tests or --subset, not --suite")
    os.makedirs(workdir, exist_ok=True)
    merged = runner.RunResult(runner.SETUPS[key], ["(one mtr run per test)"], time.time(), workdir=workdir,
                              build=runner.build_info())
    t0 = time.time()
    for i, test in enumerate(tests):
        if stop.is_set():
            merged.aborted = "stopped by the user"
            break
        r = runner.run(key, [test], os.path.join(workdir, f"{i:03d}"), timeout=a.timeout,
                       testcase_timeout=a.testcase_timeout, extra=extra, stop=stop, resume=False)
        for t in r.tests.values():
            t.at = round(time.time() - t0, 1)
            merged.tests[t.name] = t
            print(runner.format_progress(merged, t), flush=True)
        if not r.tests:
            print(f"[{key}] {test}: mtr reported nothing ({r.aborted or 'rc ' + str(r.mtr_rc)})", flush=True)
        merged.outside += [f"{test}: {x}" for x in r.outside]
        if r.catcher_total:
            tot = merged.catcher_total or {}
            merged.catcher_total = {k: tot.get(k, 0) + v for k, v in r.catcher_total.items()}
        if r.storage_summary and r.storage_summary.get("verify"):
            v = (merged.storage_summary or {}).get("verify", {})
            merged.storage_summary = {"verify": {k: v.get(k, 0) + n for k, n in r.storage_summary["verify"].items()}}
        merged.seconds = time.time() - t0
        runner.save(merged)
        rewrite(merged)
    merged.mtr_rc = 0 if merged.aborted is None else None
    merged.seconds = time.time() - t0
    runner.save(merged)
    return merged


def _invocation():
    env = os.environ.get("PPL_BUILD_DIR")
    args, skip = [], False
    for x in sys.argv[1:]:
        if skip:
            args.append("TEXT")     # the note is in the report itself
            skip = False
            continue
        skip = x == "--note"
        args.append(x if x.startswith("--note=") is False else "--note=TEXT")
    return ((f"PPL_BUILD_DIR={env} " if env else "") + "scripts/mtr-stack.py "
            + " ".join(shlex.quote(x) for x in args))


def _partial_note(runs):
    unfinished = [r.setup.key for r in runs if r.aborted or r.mtr_rc is None]
    if not unfinished:
        return ""
    return ("**Partial:** set-up(s) " + ", ".join(unfinished) + " did not finish (stopped or still running when "
            "this was written); their tables hold the tests that finished.")


if __name__ == "__main__":
    sys.exit(main())
