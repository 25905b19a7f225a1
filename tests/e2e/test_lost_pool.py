"""A lost pool is never silent (issue 21, item 5), tried as a new user
would: a load with elision leaves page records kept in the pool past
MariaDB's checkpoint, ganesha.nfsd is killed, the pool file is lost (as a
tmpfs pool is at a reboot). Making a new pool for the export is refused,
and so is starting the export on one made anyway, each saying what was
lost and what to do -- before, MariaDB came up on the older pages, CHECK
TABLE said OK and committed changes were gone. The same pool put back
serves everything, and after its clean stop a new pool may serve."""
import os
import shutil
import subprocess

from lib import paths
from lib.mariadb import assert_checked
from lib.stack import Stack, require_stack

OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
           "--innodb-max-dirty-pages-pct=1", "--innodb-max-dirty-pages-pct-lwm=0.001"]
TABLES = "sbtest.sbtest1,sbtest.sbtest2"


def create_pool(s, path):
    return subprocess.run([paths.tool("ppl-inspect"), "pool", "create", path, "--identity", s.export,
                           "--size", "16M"], capture_output=True, text=True, timeout=60)


def test_lost_pool_is_refused_and_never_served(tmp_path):
    require_stack()
    s = Stack(tmp_path, options=OPTIONS)
    try:
        s.start()
        s.db.sql("CREATE DATABASE sbtest")
        s.db.sysbench("oltp_write_only", "prepare", tables=2, table_size=5000)
        s.db.sysbench("oltp_write_only", "run", "--time=8", tables=2, table_size=5000, threads=2)
        sums = s.db.sql(f"CHECKSUM TABLE {TABLES}")
        kept = s.live("stats")["pool"]["pages"]
        assert kept > 0, "the load left no page in the pool: the loss below would prove nothing"
        s.db.kill()
        s.mount.stop()
        s.mount = None
        s.g.kill9()

        saved = str(tmp_path / "saved.pool")
        shutil.move(s.pool, saved)  # the pool is lost
        r = create_pool(s, s.pool)
        assert r.returncode != 0 and "no clean stop drained" in r.stderr, r.stdout + r.stderr
        assert "restore it from a backup" in r.stderr and ".ppl-pool" in r.stderr, r.stderr
        assert not os.path.exists(s.pool)

        # A pool made anyway (for another path, moved into place): the export refuses it.
        other = str(tmp_path / "other.pool")
        marker = os.path.join(s.export, ".ppl-pool")
        with open(marker) as f:
            text = f.read()
        os.rename(marker, marker + ".aside")
        assert create_pool(s, other).returncode == 0
        os.rename(marker + ".aside", marker)
        with open(marker) as f:
            assert f.read() == text
        shutil.move(other, s.pool)
        s.g.start(expect_export=False)
        line = s.g.wait_log(r"PPL: export \S+ refused: [^\n]*", timeout=30)
        assert line and "no clean stop drained" in line.group(0), s.g.tail_log()
        s.g.stop()

        # The pool put back: everything as MariaDB committed it.
        os.unlink(s.pool)
        shutil.move(saved, s.pool)
        s.g.start()
        s.mount_up()
        s.db.start()
        assert s.db.sql(f"CHECKSUM TABLE {TABLES}") == sums
        assert_checked(s.db.sql(f"CHECK TABLE {TABLES}"))
        s.db.stop()
        s.mount.stop()
        s.mount = None
        s.g.stop()
        with open(marker) as f:
            assert "state drained" in f.read()
        os.unlink(s.pool)
        assert create_pool(s, s.pool).returncode == 0  # drained: a new pool may serve
        s.assert_storage_clean()
    finally:
        s.stop()
