"""The storage node serves exactly the pages MariaDB's own recovery makes.

A backup is taken from a private MariaDB while sysbench writes (so its
data files are older than its log). Its data files go into an FSAL_PPL
export; its redo log is then written over NFS, as MariaDB writes a log:
the header and checkpoint blocks, then the records in order. Every page
read back over NFS must equal the page `mariadb-backup --prepare` makes
from a copy of the same backup (InnoDB's recovery is the oracle); pages
that only the log creates past a file's end are not served yet and are
counted, not compared."""
import os
import re
import shutil
import subprocess

from lib import paths
from lib.ganesha import Ganesha
from lib.mariadb import MariaDB
from lib.oracle import compare_dirs, data_files

from _libnfs import Client


def make_backup(base):
    opts = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=32M",
            "--innodb-flush-log-at-trx-commit=1", "--innodb-max-dirty-pages-pct=5",
            "--innodb-max-dirty-pages-pct-lwm=1"]
    db = MariaDB(os.path.join(base, "server"), options=opts)
    db.install()
    db.start()
    try:
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=2, table_size=5000)
        db.stop()
        db.start()   # a checkpoint: the backup starts from data files that hold the tables
        load = subprocess.Popen(
            ["sysbench", "oltp_write_only", "--db-driver=mysql", f"--mysql-socket={db.socket}",
             "--mysql-user=root", "--mysql-db=sbtest", "--tables=2", "--table-size=5000", "--threads=2",
             "--time=12", "--rand-seed=3", "run"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        backup = os.path.join(base, "backup")
        r = subprocess.run(["mariadb-backup", "--no-defaults", "--backup", f"--target-dir={backup}",
                            f"--socket={db.socket}", "--user=root", f"--datadir={db.datadir}", "--throttle=4"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert r.returncode == 0, r.stdout[-3000:]
        _out, err = load.communicate(timeout=120)
        assert load.returncode == 0, err[-2000:]
    finally:
        db.stop()
    return backup


def test_pages_read_over_nfs_equal_prepare(tmp_path):
    backup = make_backup(str(tmp_path))
    prepared = str(tmp_path / "prepared")
    shutil.copytree(backup, prepared)
    r = subprocess.run(["mariadb-backup", f"--defaults-file={prepared}/backup-my.cnf", "--prepare",
                        f"--target-dir={prepared}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout[-3000:]

    export = tmp_path / "export"
    shutil.copytree(backup, export, ignore=shutil.ignore_patterns("ib_logfile0"))
    assert not any(n.endswith(".new") for _d, _s, files in os.walk(export) for n in files)
    with open(os.path.join(backup, "ib_logfile0"), "rb") as f:
        log = f.read()
    (tmp_path / "pmem").mkdir()
    fsal = (f'FSAL {{ Name = PPL; Pool_Path = "{tmp_path}/pmem/ppl.pool"; Stats_Interval = 0; '
            f'FSAL {{ Name = VFS; }} }}')
    plugins = os.path.join(paths.build_dir(), "ganesha-fsal-ppl", "plugins")
    served = tmp_path / "served"
    with Ganesha(tmp_path / "ganesha", export, fsal=fsal, plugins_dir=plugins).start() as g:
        with Client(g.url("")) as c:
            fh = c.open("ib_logfile0", os.O_RDWR | os.O_CREAT)
            c.ftruncate(fh, len(log))           # InnoDB creates its log at full size
            chunk = 64 << 10
            for off in range(0, len(log), chunk):
                c.pwrite(fh, log[off:off + chunk], off)
            c.fsync(fh)
            c.close_file(fh)
            for rel in data_files(str(export)):
                os.makedirs(os.path.dirname(served / rel), exist_ok=True)
                with open(served / rel, "wb") as out:
                    out.write(c.read_file(rel))
    logtext = g.log_text()       # the final stats line is written at unexport
    engine = re.findall(r"\| (engine: .*)", logtext)[-1]
    assert "redo ingest started at the checkpoint LSN" in logtext, logtext[-3000:]
    assert "redo ingest stopped" not in logtext and "cannot be rebuilt" not in logtext, logtext[-3000:]
    rebuilt = int(re.search(r"pages rebuilt (\d+)", engine).group(1))
    assert rebuilt > 50, engine               # the log really had work for the reads

    compared, diffs, problems = compare_dirs(prepared, str(served))
    assert compared > 500
    assert diffs == [], "\n".join(diffs[:20])
    # Files the log extends past their end in the backup: the tail pages
    # exist only after recovery (not served by this stage of the FSAL).
    for p in problems:
        assert re.search(r": size \d+ after prepare, \d+ after replay", p), p
