"""Verify mode (Verify = true): every full page write MariaDB sends is first
compared byte for byte with the page the storage node rebuilds at that
page's LSN from the data file and the redo it parsed (DESIGN I4). With
elision off every page write arrives, so this checks the rebuild against
InnoDB itself, page by page, under sysbench's write workloads: thousands
of pages compared, zero divergences."""
import os
import re
import shutil

import pytest

from lib import paths
from lib.ganesha import Ganesha
from lib.mariadb import MariaDB
from test_mariadb_over_ppl import ppl_mount_class

TABLES, TABLE_SIZE = 2, 4000
OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1"]
WORKLOADS = ("oltp_insert", "oltp_update_index", "oltp_write_only", "oltp_read_write")


def test_verify_mode_zero_divergences(tmp_path):
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        pytest.fail("needs /dev/fuse and fusermount3 (see DESIGN.md, Clients)")
    plugins = os.path.join(paths.build_dir(), "ganesha-fsal-ppl", "plugins")
    export = tmp_path / "export"
    export.mkdir()
    (tmp_path / "pmem").mkdir()
    fsal = (f'FSAL {{ Name = PPL; Pool_Path = "{tmp_path}/pmem/ppl.pool"; Stats_Interval = 0; Verify = true; '
            f'FSAL {{ Name = VFS; }} }}')
    g = Ganesha(tmp_path / "ganesha", export, fsal=fsal, plugins_dir=plugins)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    db = MariaDB(str(tmp_path / "mariadb"), datadir=os.path.join(mountpoint, "datadir"), options=OPTIONS)
    os.makedirs(db.base)
    mount = None
    try:
        g.start()
        mount = ppl_mount_class()(paths.tool("ppl-mount"), g.url(), str(mountpoint), options=["--direct-io"],
                                  log=str(tmp_path / "ppl-mount.log"))
        mount.start()
        db.install()
        db.start()
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        # flush steadily, so pages are written while their redo is pending
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0.001")
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct=0")
        for w in WORKLOADS:
            db.sysbench(w, "run", "--time=5", tables=TABLES, table_size=TABLE_SIZE)
        out = db.sql("CHECK TABLE " + ",".join(f"sbtest.sbtest{i}" for i in range(1, TABLES + 1)))
        assert all(line.split("\t")[-1] == "OK" for line in out.strip().splitlines()
                   if line.split("\t")[2] == "status"), out
        db.stop()
    finally:
        db.kill()
        if mount:
            mount.stop()
        g.stop()
    log = g.log_text()
    assert "Verify=on" in log
    m = re.search(r"PPL: stats at unexport .*verify: (\d+) page writes identical to the rebuild, (\d+) diverged, "
                  r"(\d+) not comparable", log)
    assert m, log[-3000:]
    same, diverged, skipped = map(int, m.groups())
    divergences = re.findall(r"divergence \(verify\).*", log)
    assert diverged == 0 and not divergences, divergences[:5]
    assert same > 1000, m.group(0)
