"""The storage node under valgrind's memcheck, with MariaDB on top.

The whole stack (MariaDB + libcatcher eliding, ppl-mount, FSAL_PPL) with
ganesha.nfsd running under memcheck: sysbench writes while the storage
node ingests the log, answers elision questions, materializes pages and
rebuilds the ones MariaDB reads back; then ganesha.nfsd is killed with
SIGKILL and started again (pool recovery, log re-read) under load.
Memcheck must report nothing: no invalid access, no use of uninitialised
bytes, no definite leak once the restarted server is stopped. The data
must be right as well (CHECK TABLE, the same checksums after a MariaDB
restart), and pages must really have been elided, or the run proved
little. lib/memcheck.py says why memcheck and not the sanitizers."""
import re

from lib import memcheck
from lib.stack import Stack, require_stack

TABLES, TABLE_SIZE = 2, 6000
OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
NAMES = ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1))


def test_storage_node_under_memcheck(tmp_path):
    require_stack()
    logs = tmp_path / "memcheck"
    logs.mkdir()
    s = Stack(tmp_path / "stack", options=OPTIONS, pool_size="64M")
    s.g.wrapper = memcheck.command(logs)
    try:
        s.start()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        db.sysbench("oltp_write_only", "run", "--time=20", tables=TABLES, table_size=TABLE_SIZE, threads=2)
        s.crash_storage()
        db.sysbench("oltp_write_only", "run", "--time=10", tables=TABLES, table_size=TABLE_SIZE, threads=2)
        checks = db.sql(f"CHECK TABLE {NAMES}")
        assert checks.count("\tOK") == TABLES, checks
        before = db.sql(f"CHECKSUM TABLE {NAMES}")
        db.stop()
        db.start()        # its reads come back rebuilt by the storage node
        assert db.sql(f"CHECKSUM TABLE {NAMES}") == before
        s.db.stop()
    finally:
        s.stop()
    s.assert_storage_clean()
    engine = re.findall(r"\| engine: .*", s.storage_log())
    acked = sum(int(a) for a in re.findall(r"elision: \d+ asked, (\d+) acked", "\n".join(engine)))
    assert acked > 500, engine[-1:]
    memcheck.assert_clean(logs)
