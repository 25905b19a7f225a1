"""TPC-C for sysbench (tpcc/tpcc.lua) on a private MariaDB: the population
and a run keep the specification's consistency conditions, the check
catches a database that breaks one, and a single-threaded run with a fixed
seed and clock is deterministic (the end-to-end tests compare table
checksums between a run over the stack and the same run on a local
datadir)."""
import pytest

from lib import tpcc as tpcc_lib
from lib.mariadb import MariaDB

TABLES = ", ".join(tpcc_lib.TABLES)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = MariaDB(str(tmp_path_factory.mktemp("tpcc")), options=["--innodb-buffer-pool-size=64M"])
    d.install()
    d.start()
    yield d
    d.stop()


def tpcc(db, database, command, *args, check=True):
    return tpcc_lib.run(db, command, *args, database=database, check=check, timeout=600)


def test_run_keeps_consistency_and_check_catches_damage(db):
    db.sql("CREATE DATABASE t1")
    scale = ["--scale=2", "--items=2000", "--customers=300", "--rand-seed=1"]
    tpcc(db, "t1", "prepare", *scale)
    assert db.sql("SELECT COUNT(*) FROM t1.stock").strip() == "4000"
    assert db.sql("SELECT COUNT(*) FROM t1.new_orders").strip() == str(2 * 10 * 90)   # 30% of 300 per district
    assert "all consistency conditions hold" in tpcc(db, "t1", "check", *scale).stdout
    r = tpcc(db, "t1", "run", *scale, "--threads=2", "--time=8", "--mysql-ignore-errors=1213,1205")
    counts = [line for line in r.stdout.splitlines() if line.startswith("tpcc thread")]
    assert len(counts) == 2 and all("new_order" in c for c in counts)
    out = tpcc(db, "t1", "check", *scale).stdout
    assert out.count("PASS") == 11, out
    # a district whose next order id disagrees with its orders (condition 2)
    db.sql("UPDATE t1.district SET d_next_o_id = d_next_o_id + 5 WHERE d_w_id = 1 AND d_id = 3")
    # a payment recorded in the warehouse but not in the history (conditions 1, 8)
    db.sql("UPDATE t1.warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 2")
    r = tpcc(db, "t1", "check", *scale, check=False)
    assert r.returncode != 0
    assert "condition  2 (D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)): FAIL" in r.stdout
    assert "condition  1 (W_YTD = sum(D_YTD)): FAIL" in r.stdout
    assert "condition  8 (W_YTD = sum(H_AMOUNT)): FAIL" in r.stdout
    assert "condition  4 (sum(O_OL_CNT) = rows in ORDER-LINE): PASS" in r.stdout
    tpcc(db, "t1", "cleanup")
    assert db.sql("SHOW TABLES FROM t1").strip() == ""


def test_single_threaded_run_is_deterministic(db):
    sums = []
    for name in ("da", "db"):
        db.sql(f"CREATE DATABASE {name}")
        scale = ["--scale=1", "--items=1000", "--customers=100", "--rand-seed=11",
                 "--fixed-time=2026-01-01 00:00:00"]
        tpcc(db, name, "prepare", *scale)
        tpcc(db, name, "run", *scale[:-2], "--rand-seed=5", "--fixed-time=2026-01-01 00:00:00",
             "--threads=1", "--events=400", "--time=0")
        sums.append(db.sql(f"USE {name}; CHECKSUM TABLE {TABLES}").replace(f"{name}.", ""))
    assert sums[0] == sums[1]
    assert "new_orders" in sums[0]
    # and the run changed something: a fresh population differs
    db.sql("CREATE DATABASE dc")
    tpcc(db, "dc", "prepare", "--scale=1", "--items=1000", "--customers=100", "--rand-seed=11",
         "--fixed-time=2026-01-01 00:00:00")
    assert db.sql(f"USE dc; CHECKSUM TABLE {TABLES}").replace("dc.", "") != sums[0]
