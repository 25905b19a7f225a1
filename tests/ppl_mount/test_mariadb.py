"""MariaDB 10.11 with its datadir on ppl-mount: install, sysbench
oltp_read_write, CHECK TABLE, clean restart, and a crash restart."""
import os

import pytest

from lib.mariadb import MariaDB

OPTIONS = [
    "--innodb-buffer-pool-size=64M",
    "--innodb-log-file-size=32M",
    "--innodb-flush-method=O_DIRECT",
    "--innodb-flush-log-at-trx-commit=1",
]


@pytest.fixture
def db(tmp_path, mnt):
    m = MariaDB(str(tmp_path / "mariadb"), datadir=os.path.join(mnt, "datadir"), options=OPTIONS)
    os.makedirs(m.base, exist_ok=True)
    m.install()
    yield m
    m.kill()


def test_sysbench_check_restart(db, mnt, backing):
    db.start()
    db.sql("CREATE DATABASE sbtest")
    db.sysbench("oltp_read_write", "prepare", tables=2, table_size=2000)
    out = db.sysbench("oltp_read_write", "--time=8", "--report-interval=0", "run",
                      tables=2, table_size=2000, threads=4)
    tps = [line for line in out.splitlines() if "transactions:" in line]
    assert tps and int(tps[0].split()[1]) > 0, out[-2000:]
    for t in ("sbtest1", "sbtest2"):
        assert db.sql(f"CHECK TABLE sbtest.{t}").split("\t")[-1].strip() == "OK"
    checksum = db.sql("CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2")
    # The tablespace files are really on the server.
    assert os.path.getsize(os.path.join(backing, "datadir", "sbtest", "sbtest1.ibd")) > 0

    db.stop()
    db.start()
    assert db.sql("CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2") == checksum

    # Crash (SIGKILL) with committed transactions in flight, then recovery.
    db.sql("CREATE TABLE sbtest.k (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB")
    for i in range(50):
        db.sql(f"INSERT INTO sbtest.k VALUES ({i}, REPEAT('x', 64))")
    db.kill()
    db.start()
    assert db.sql("SELECT COUNT(*) FROM sbtest.k").strip() == "50"
    for t in ("sbtest1", "sbtest2", "k"):
        assert db.sql(f"CHECK TABLE sbtest.{t}").split("\t")[-1].strip() == "OK"

    # DDL that renames, rebuilds and deletes tablespace files on the mount.
    db.sql("ALTER TABLE sbtest.k ADD COLUMN w INT NOT NULL DEFAULT 7, FORCE")
    db.sql("TRUNCATE TABLE sbtest.sbtest2")
    db.sql("RENAME TABLE sbtest.k TO sbtest.k2")
    assert db.sql("SELECT COUNT(*), SUM(w) FROM sbtest.k2").split() == ["50", "350"]
    db.sql("DROP TABLE sbtest.k2")
    assert not os.path.exists(os.path.join(backing, "datadir", "sbtest", "k2.ibd"))
    assert db.sql("SELECT COUNT(*) FROM sbtest.sbtest2").strip() == "0"
    db.stop()
    with open(db.errlog) as f:
        errors = [line for line in f if "[ERROR]" in line]
    assert not errors, errors
