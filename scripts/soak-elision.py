#!/usr/bin/env python3
"""Soak the whole stack with elision on, longer and more often than the
test suite does, in the situations that have broken it:

  --ddl                 DROP/CREATE/TRUNCATE/ALTER TABLE ADD INDEX and BLOBs
                        beside sysbench (in the suite: tests/e2e/test_io_modes.py)
  --storage-crashes N   ganesha.nfsd killed with SIGKILL N times under load
                        while MariaDB keeps running on the hard mount (in
                        the suite: tests/e2e/test_crash_ledger.py, ten)

Each round: a fresh stack (tests/lib/stack.py), sysbench oltp_write_only,
then CHECK TABLE on every table. Prints one line per round and a summary;
exits 1 if any round failed, keeping that round's directory (MariaDB's
error log, ganesha.nfsd's log) for a look.

  PPL_BUILD_DIR=build python3 scripts/soak-elision.py --ddl --rounds 5
  PPL_BUILD_DIR=build python3 scripts/soak-elision.py --storage-crashes 10"""
import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from lib.oracle import DDLLoad  # noqa: E402
from lib.stack import Stack  # noqa: E402

OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
           "--innodb-max-dirty-pages-pct=1", "--innodb-max-dirty-pages-pct-lwm=0.001"]
AIO = {"io_uring": ["--innodb-use-native-aio=1", "--innodb-linux-aio=io_uring"],
       "libaio": ["--innodb-use-native-aio=1", "--innodb-linux-aio=aio"],
       "sync": ["--innodb-use-native-aio=0"]}


def one_round(base, a):
    s = Stack(base, options=OPTIONS + AIO[a.aio])
    problems = []
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        db.sql("CREATE DATABASE ddl")
        db.sysbench("oltp_write_only", "prepare", tables=2, table_size=3000)
        ddl = DDLLoad(db, a.seconds) if a.ddl else None
        if ddl:
            ddl.start()
        failure = []

        def load():
            try:
                db.sysbench("oltp_write_only", "run", f"--time={a.seconds}", tables=2, table_size=3000)
            except Exception as exc:
                failure.append(str(exc)[-400:])
        t = threading.Thread(target=load)
        t.start()
        for _ in range(a.storage_crashes):
            time.sleep(a.seconds / (a.storage_crashes + 1))
            s.crash_storage()
        t.join(600)
        problems += failure
        if ddl:
            ddl.join(600)
            if ddl.error:
                problems.append(f"DDL: {str(ddl.error)[-400:]}")
        tables = db.sql("SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables "
                        "WHERE table_schema IN ('sbtest', 'ddl') AND engine = 'InnoDB'", check=False).split()
        if tables:
            out = db.sql("CHECK TABLE " + ",".join(tables), check=False)
            problems += [line for line in out.splitlines() if line.split("\t")[2:3] == ["status"]
                         and line.split("\t")[-1] != "OK"]
            if not out.strip():
                problems.append("CHECK TABLE: no answer (mariadbd gone?)")
    except Exception as exc:
        problems.append(str(exc)[-400:])
    finally:
        s.stop()
    try:
        s.assert_storage_clean()
    except AssertionError as exc:
        problems.append(f"storage node: {str(exc)[:400]}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ddl", action="store_true")
    ap.add_argument("--storage-crashes", type=int, default=0)
    ap.add_argument("--aio", default="io_uring", choices=sorted(AIO))
    ap.add_argument("--seconds", type=int, default=10, help="load per round (default 10)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ppl-soak-")
    failed = 0
    for r in range(1, a.rounds + 1):
        base = os.path.join(work, f"round{r}")
        problems = one_round(base, a)
        if problems:
            failed += 1
            print(f"round {r}: FAILED ({base})\n  " + "\n  ".join(p.replace("\n", " ")[:300] for p in problems),
                  flush=True)
        else:
            print(f"round {r}: ok", flush=True)
            shutil.rmtree(base, ignore_errors=True)
    print(f"{a.rounds - failed} of {a.rounds} rounds passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
