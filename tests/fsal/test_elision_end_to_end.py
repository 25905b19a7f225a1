"""The whole path: MariaDB with LD_PRELOAD=libcatcher.so, its datadir on
ppl-mount, FSAL_PPL with the elision service on. Page writes the storage
node can rebuild are dropped by libcatcher; what must hold (DESIGN I1, I4,
I5, I6):
- sysbench runs, pages are elided, CHECK TABLE passes and the tables read
  back the same after a MariaDB restart (its reads come back rebuilt);
- ganesha.nfsd killed with SIGKILL during load while MariaDB keeps running
  on the hard mount, and restarted: the load goes on (libcatcher writes
  pages while nobody answers), the tables check and read back the same
  after a MariaDB restart (the restarted node ingests the log at once, so
  pages elided before the crash are rebuilt);
- ganesha.nfsd killed with SIGKILL and restarted: the same data;
- finally, with the stack gone, a plain MariaDB opened on the export's
  directory itself (the storage node's files alone) finds the same rows:
  every elided page reached its data file (materialized before MariaDB's
  checkpoints could pass its records) or is recovered from the log."""
import os
import shutil
import subprocess
import threading
import time

import pytest

from lib import paths
from lib.ganesha import Ganesha, free_port
from lib.mariadb import MariaDB
from lib.stack import catcher_stats
from test_mariadb_over_ppl import ppl_mount_class

TABLES, TABLE_SIZE = 2, 6000
OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0", "--innodb-use-native-aio=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]


def checksums(db):
    return db.sql("CHECKSUM TABLE " + ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1)))


def check_tables(db):
    out = db.sql("CHECK TABLE " + ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1)))
    rows = [line.split("\t") for line in out.strip().splitlines()]
    assert rows and all(r[-1] == "OK" for r in rows if r[2] == "status"), out


def test_elision_end_to_end(tmp_path, build_dir):
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        pytest.fail("needs /dev/fuse and fusermount3 (see DESIGN.md, Clients)")
    lib = os.path.join(build_dir, "libcatcher", "libcatcher.so")
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        if "PPL_SANITIZE:BOOL=ON" in f.read():
            pytest.skip("MariaDB runs only with the normal build's libcatcher.so")
    plugins = os.path.join(build_dir, "ganesha-fsal-ppl", "plugins")
    export = tmp_path / "export"
    export.mkdir()
    pool = tmp_path / "pmem" / "ppl.pool"
    pool.parent.mkdir()
    subprocess.run([paths.tool("ppl-inspect"), "pool", "create", str(pool), "--identity", str(export),
                    "--size", "16M"], check=True, capture_output=True)
    port = free_port()
    fsal = (f'FSAL {{ Name = PPL; Pool_Path = "{pool}"; Stats_Interval = 0; Elision_Port = {port}; '
            f'Elision_Token = "t0ken"; Elision_Clients = "127.0.0.1"; FSAL {{ Name = VFS; }} }}')
    g = Ganesha(tmp_path / "ganesha", export, fsal=fsal, plugins_dir=plugins)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    datadir = os.path.join(mountpoint, "datadir")
    stats = str(tmp_path / "catcher.json")
    env = {"LD_PRELOAD": lib, "LIBCATCHER_SERVER": f"127.0.0.1:{port}", "LIBCATCHER_TOKEN": "t0ken",
           "LIBCATCHER_TIMEOUT_MS": "2000", "LIBCATCHER_STATS_FILE": stats, "LIBCATCHER_MODE": "elide"}
    db = MariaDB(str(tmp_path / "mariadb"), datadir=datadir, options=OPTIONS, env=env)
    os.makedirs(db.base)
    mount = None
    logs = []
    try:
        g.start()
        mount = ppl_mount_class()(paths.tool("ppl-mount"), g.url(), str(mountpoint), options=["--hard", "--direct-io"],
                                  log=str(tmp_path / "ppl-mount.log"))
        mount.start()
        db.install()
        db.start()
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0.001")
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct=0")
        db.sysbench("oltp_write_only", "run", "--time=15", tables=TABLES, table_size=TABLE_SIZE)
        check_tables(db)
        before = checksums(db)
        s = catcher_stats(db, stats)
        elided = sum(c["elided"] for c in s["classes"].values())
        assert elided > 100, s

        db.stop()                      # a clean shutdown: MariaDB's last checkpoint goes through the gate
        db.start()
        assert checksums(db) == before
        check_tables(db)
        db.sysbench("oltp_write_only", "run", "--time=8", tables=TABLES, table_size=TABLE_SIZE)
        before = checksums(db)

        # The storage node crashes under load; MariaDB waits on the hard mount.
        failure = []

        def load():
            try:
                db.sysbench("oltp_write_only", "run", "--time=12", tables=TABLES, table_size=TABLE_SIZE)
            except Exception as exc:  # reported below, in the test's thread
                failure.append(exc)
        t = threading.Thread(target=load)
        t.start()
        time.sleep(4)
        g.kill9()
        logs.append(g.log_text())
        g.start()
        t.join(timeout=300)
        assert not t.is_alive() and not failure, failure
        check_tables(db)
        before = checksums(db)
        db.stop()
        db.start()
        assert checksums(db) == before
        check_tables(db)

        db.stop()
        mount.stop()
        g.kill9()                      # a storage-node crash
        logs.append(g.log_text())
        g.start()
        mount = ppl_mount_class()(paths.tool("ppl-mount"), g.url(), str(mountpoint), options=["--hard", "--direct-io"],
                                  log=str(tmp_path / "ppl-mount.log"))
        mount.start()
        db.start()
        assert checksums(db) == before
        check_tables(db)
        db.stop()
    finally:
        db.kill()
        if mount:
            mount.stop()
        g.stop()
    logs.append(g.log_text())
    text = "\n".join(logs)
    assert "cannot be rebuilt" not in text and "redo ingest stopped" not in text
    assert "could not be materialized" not in text and "is refused" not in text

    # The storage node's files alone, read by a plain MariaDB.
    local = MariaDB(str(tmp_path / "local"), datadir=os.path.join(export, "datadir"), options=OPTIONS)
    os.makedirs(local.base)
    local.start()
    try:
        assert checksums(local) == before
        check_tables(local)
    finally:
        local.stop()
