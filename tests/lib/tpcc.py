"""TPC-C for sysbench (tpcc/tpcc.lua), as the tests drive it: a small
scale that loads in seconds, its commands, and the checks a database must
pass after any run or crash (CHECK TABLE and the specification's
consistency conditions, section 3.3)."""
import os
import subprocess

from lib import paths
from lib.mariadb import assert_checked

TPCC = os.path.join(paths.REPO, "tpcc", "tpcc.lua")
TABLES = ("warehouse", "district", "customer", "history", "new_orders", "orders", "order_line", "item", "stock")
SCALE = ["--scale=1", "--items=4000", "--customers=300"]


def run(db, command, *args, database="tpcc", check=True, timeout=900):
    """`sysbench tpcc.lua ... COMMAND` against db; asserts success unless
    check=False. Returns the CompletedProcess."""
    r = subprocess.run(["sysbench", TPCC, f"--mysql-socket={db.socket}", "--mysql-user=root",
                        f"--mysql-db={database}", *args, command], capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def names(database="tpcc"):
    return ",".join(f"{database}.{t}" for t in TABLES)


def verify(db, scale=SCALE, database="tpcc"):
    """CHECK TABLE passes and every consistency condition holds; returns
    the tables' CHECKSUM TABLE output."""
    assert_checked(db.sql("CHECK TABLE " + names(database)))
    out = run(db, "check", *scale, database=database).stdout
    assert "all consistency conditions hold" in out, out[-3000:]
    return db.sql("CHECKSUM TABLE " + names(database))
