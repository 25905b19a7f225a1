#!/usr/bin/env python3
"""The project's main job at this stage: a recovery without a server.

Runs sysbench and DDL on a private MariaDB while mariadb-backup copies it,
then recovers two copies of the backup, one with mariadb-backup --prepare
(InnoDB's own recovery) and one with ppl-replay, prints both speeds and
checks that every page came out identical."""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from lib.oracle import run_oracle  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=int, default=40, help="workload duration (default 40)")
    ap.add_argument("--page-size", type=int, default=16384, choices=(4096, 8192, 16384))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ppl-demo-")
    try:
        print(f"workload: sysbench oltp_read_write/update_index/insert/delete + DDL for {a.seconds}s, "
              f"backup taken during it (work dir {work})", flush=True)
        r = run_oracle(work, page_size=a.page_size, load_seconds=a.seconds)
        s = json.loads(r["replay"])
        mb = s["log_bytes"] / 1e6
        print()
        print(f"{'':28}{'mariadb-backup --prepare':>26}{'ppl-replay':>14}")
        print(f"{'redo applied (MB)':28}{mb:>26.1f}{mb:>14.1f}")
        print(f"{'wall time (s)':28}{r['prepare_s']:>26.2f}{r['replay_s']:>14.2f}")
        print(f"{'throughput (MB/s of redo)':28}{mb / r['prepare_s']:>26.1f}{mb / r['replay_s']:>14.1f}")
        print(f"{'speed-up':28}{'':>26}{r['prepare_s'] / r['replay_s']:>13.1f}x")
        print()
        print(f"ppl-replay: {s['mtrs']} mini-transactions, {s['records']} records, "
              f"{s['pages_touched']} pages touched, {s['pages_written']} written")
        print("records by type: " + ", ".join(f"{k} {v}" for k, v in sorted(s["records_by_type"].items())))
        print(f"pages compared: {r['compared']}, differing: {len(r['diffs'])}")
        for d in r["diffs"][:20] + r["problems"]:
            print("  " + d)
        return 0 if not r["diffs"] and not r["problems"] else 1
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
