"""The exactness oracle: MariaDB's own recovery (mariadb-backup --prepare)
against ppl-replay on copies of the same backup, compared page by page.

A backup taken while a workload runs holds data files copied at different
moments plus the redo written meanwhile; --prepare applies that redo with
InnoDB's code. Applying the same redo to a second copy with ppl-replay must
give byte-identical pages."""
import os
import random
import shutil
import struct
import subprocess
import threading
import time

from lib import paths
from lib.mariadb import MariaDB

FIL_PAGE_OFFSET = 4
FIL_PAGE_TYPE = 24
FIL_PAGE_SPACE_ID = 34
FSP_SPACE_FLAGS = 38 + 16

PAGE_TYPES = {17855: "INDEX", 17854: "RTREE", 2: "UNDO_LOG", 3: "INODE", 4: "IBUF_FREE_LIST", 0: "ALLOCATED",
              5: "IBUF_BITMAP", 6: "SYS", 7: "TRX_SYS", 8: "FSP_HDR", 9: "XDES", 10: "BLOB", 18: "INSTANT"}


def page_size_of(path):
    with open(path, "rb") as f:
        head = f.read(FSP_SPACE_FLAGS + 4)
    flags = struct.unpack(">I", head[FSP_SPACE_FLAGS:FSP_SPACE_FLAGS + 4])[0]
    if not flags & 0x10:
        raise ValueError(f"{path}: not a full_crc32 tablespace (flags {flags:#x})")
    return 1 << ((flags & 0xF) + 9)


def data_files(root):
    """Relative paths of page files, with mariadb-backup's NAME.new shown as NAME.ibd."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if name.endswith(".ibd") or name.startswith("ibdata") or (
                    name.startswith("undo") and name[4:5].isdigit()):
                out.setdefault(rel, os.path.join(dirpath, name))
            elif name.endswith(".new"):
                out[rel[:-4] + ".ibd"] = os.path.join(dirpath, name)
    return out


def doublewrite_pages(page_size):
    """ibdata1 pages of the doublewrite buffer.

    MariaDB 10.11.18 storage/innobase/buf/buf0dblwr.cc, in
    buf_dblwr_t::flush_buffered_writes(), lines 668-678:
    `os_aio(request, write_buf, os_offset_t{block1.page_no()} <<
    srv_page_size_shift, ...)` writes copies of the pages being flushed into
    the two extents that buf_dblwr_t::create() reserved, starting at the
    second extent of the system tablespace. Those are plain file writes with
    no redo, and --prepare never touches them (measured: see DESIGN.md), so
    what the backup copied there is not comparable."""
    extent = {4096: 256, 8192: 128, 16384: 64, 32768: 64, 65536: 64}[page_size]
    return range(extent, 3 * extent)


# InnoDB's extent descriptors (storage/innobase/include/fsp0fsp.h): on
# every page_size-th page, after the space header (FSP_HEADER_OFFSET 38 +
# FSP_HEADER_SIZE 112), 40-byte XDES entries: XDES_STATE at 20, then two
# bits per page of the extent (XDES_FREE_BIT first), least significant
# bit first.
XDES_ARR_OFFSET, XDES_SIZE, XDES_STATE, XDES_BITMAP = 150, 40, 20, 24
FSP_FREE_LIMIT = 38 + 12


def extent_pages(page_size):
    return {4096: 256, 8192: 128}.get(page_size, 64)


def free_pages(path, page_size):
    """Pages the tablespace's extent descriptors say are free: their bytes
    are whatever was last written there, and neither InnoDB's recovery nor
    a rebuild gives them any meaning."""
    free = set()
    ext = extent_pages(page_size)
    size = os.path.getsize(path) // page_size
    with open(path, "rb") as f:
        head = f.read(page_size)
        limit = struct.unpack(">I", head[FSP_FREE_LIMIT:FSP_FREE_LIMIT + 4])[0]
        for desc in range(0, size, page_size):
            f.seek(desc * page_size)
            page = f.read(page_size)
            for k in range(page_size // ext):
                first = desc + k * ext
                if first >= size:
                    break
                entry = XDES_ARR_OFFSET + k * XDES_SIZE
                state = struct.unpack(">I", page[entry + XDES_STATE:entry + XDES_STATE + 4])[0]
                for i in range(ext):
                    n = first + i
                    if n >= size:
                        break
                    bit = 2 * i
                    is_free = (page[entry + XDES_BITMAP + bit // 8] >> (bit % 8)) & 1
                    if n >= limit or state in (0, 1) or is_free:
                        free.add(n)
    return free


def compare_dirs(prepared, replayed, skip_free=False):
    """Returns (pages compared, list of differences, list of file problems).
    skip_free: leave out pages the prepared copy's extent descriptors call
    free (two copies made at different times hold different leftovers
    there; a page the log frees is written by neither recovery)."""
    a, b = data_files(prepared), data_files(replayed)
    diffs, problems, compared = [], [], 0
    for rel in sorted(set(a) | set(b)):
        if rel not in a or rel not in b:
            problems.append(f"{rel}: only in {'prepared' if rel in a else 'replayed'} copy")
            continue
        ps = page_size_of(a[rel])
        skip = set(doublewrite_pages(ps)) if os.path.basename(rel) == "ibdata1" else set()
        if skip_free:
            skip |= free_pages(a[rel], ps)
        with open(a[rel], "rb") as fa, open(b[rel], "rb") as fb:
            size_a, size_b = os.fstat(fa.fileno()).st_size, os.fstat(fb.fileno()).st_size
            if size_a != size_b:
                problems.append(f"{rel}: size {size_a} after prepare, {size_b} after replay")
            page_no = 0
            while True:
                pa, pb = fa.read(ps), fb.read(ps)
                if not pa and not pb:
                    break
                if page_no not in skip and pa and pb:
                    compared += 1
                    if pa != pb:
                        first = next(i for i in range(min(len(pa), len(pb))) if pa[i] != pb[i])
                        space = struct.unpack(">I", pa[FIL_PAGE_SPACE_ID:FIL_PAGE_SPACE_ID + 4])[0]
                        ptype = struct.unpack(">H", pa[FIL_PAGE_TYPE:FIL_PAGE_TYPE + 2])[0]
                        lsn_a, lsn_b = (struct.unpack(">Q", p[16:24])[0] for p in (pa, pb))
                        diffs.append(f"{rel}: space {space} page {page_no} type {PAGE_TYPES.get(ptype, ptype)} "
                                     f"first difference at byte {first} (page LSN {lsn_a} after prepare, "
                                     f"{lsn_b} in the other copy)")
                page_no += 1
    return compared, diffs, problems


class DDLLoad(threading.Thread):
    """DDL and BLOB traffic beside sysbench: CREATE/DROP/TRUNCATE TABLE,
    ALTER TABLE ADD INDEX, secondary indexes, rows larger than a page."""

    def __init__(self, db, seconds, seed=1):
        super().__init__(daemon=True)
        self.db, self.seconds, self.rnd = db, seconds, random.Random(seed)
        self.error = None
        self.rounds = 0

    def run(self):
        try:
            end = time.time() + self.seconds
            db = self.db
            db.sql("CREATE TABLE IF NOT EXISTS ddl.blobs (id INT PRIMARY KEY AUTO_INCREMENT, "
                   "k INT, b LONGBLOB, t TEXT, KEY(k)) ENGINE=InnoDB")
            i = 0
            while time.time() < end:
                i += 1
                t = f"ddl.t{i % 3}"
                db.sql(f"DROP TABLE IF EXISTS {t}")
                db.sql(f"CREATE TABLE {t} (id INT PRIMARY KEY, a INT, c VARCHAR(200), KEY(a)) ENGINE=InnoDB")
                rows = ",".join(f"({n},{self.rnd.randint(0, 10**6)},REPEAT('x',{self.rnd.randint(1, 200)}))"
                                for n in range(300))
                db.sql(f"INSERT INTO {t} VALUES {rows}")
                db.sql(f"ALTER TABLE {t} ADD INDEX ic (c(20))")
                db.sql(f"UPDATE {t} SET a=a+1 WHERE id % 7 = 0")
                db.sql(f"DELETE FROM {t} WHERE id % 11 = 0")
                if i % 2 == 0:
                    db.sql(f"TRUNCATE TABLE {t}")
                    db.sql(f"INSERT INTO {t} VALUES (1,1,'a'),(2,2,'b')")
                size = self.rnd.choice([20000, 70000, 200000])
                db.sql(f"INSERT INTO ddl.blobs (k,b,t) VALUES ({i}, REPEAT(CHAR(65+{i % 26}),{size}), "
                       f"REPEAT('y',{size // 10}))")
                db.sql(f"UPDATE ddl.blobs SET b=REPEAT('z',{size // 2}) WHERE k={max(1, i - 3)}")
                db.sql(f"DELETE FROM ddl.blobs WHERE k < {i - 8}")
                self.rounds += 1
        except Exception as e:  # reported by the test, not swallowed
            self.error = e


# mariadb-backup 10.11 lists the tablespaces by reading the directory and
# then opens each file; a table the DDL load drops in between fails the whole
# backup ("Failed to validate first page of the file ..."). That is a race
# inside the backup tool, not a result: such a backup is retried from scratch.
_LISTING_RACE = "Failed to validate first page of the file"
_BACKUP_ATTEMPTS = 4


def take_backup(db, target, throttle):
    """mariadb-backup --backup of a running server into target; a slow copy
    (--throttle, I/O operations per second) lets more log be written while
    it runs."""
    for attempt in range(1, _BACKUP_ATTEMPTS + 1):
        r = subprocess.run(["mariadb-backup", "--no-defaults", "--backup", f"--target-dir={target}",
                            f"--socket={db.socket}", "--user=root", f"--datadir={db.datadir}",
                            f"--throttle={throttle}"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0:
            return
        if _LISTING_RACE not in r.stdout or attempt == _BACKUP_ATTEMPTS:
            raise RuntimeError(f"mariadb-backup --backup failed (attempt {attempt}):\n" + r.stdout[-3000:])
        shutil.rmtree(target, ignore_errors=True)


def prepare(target):
    """mariadb-backup --prepare of a copy of a backup, in place: the oracle.
    backup-my.cnf carries the page size and undo settings the backup needs."""
    r = subprocess.run(["mariadb-backup", f"--defaults-file={target}/backup-my.cnf", "--prepare",
                        f"--target-dir={target}"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError("mariadb-backup --prepare failed:\n" + r.stdout[-3000:])


def buffer_pool_for(page_size):
    """MariaDB refuses innodb_page_size=64k with a buffer pool under 20 MiB
    (MDEV-28471). 32K and 64K pages get 768 pages (16M is 1024 of 16 KiB):
    still small enough that pages are evicted and written at many LSNs
    while the backup runs."""
    return "16M" if page_size <= 16384 else f"{page_size * 768 // (1 << 20)}M"


def run_oracle(base, page_size=16384, undo_tablespaces=0, load_seconds=30, tables=4, table_size=10000,
               throttle=10):
    """Runs workload + backup, prepares one copy, replays the other; returns a dict of results."""
    # A small buffer pool and eager page flushing: the data files the backup
    # copies then hold pages at many different LSNs, some newer than parts
    # of the copied log, so the LSN rules of recovery really matter.
    opts = [f"--innodb-undo-tablespaces={undo_tablespaces}",
            f"--innodb-buffer-pool-size={buffer_pool_for(page_size)}",
            "--innodb-log-file-size=64M", "--innodb-flush-log-at-trx-commit=1",
            "--innodb-max-dirty-pages-pct=5", "--innodb-max-dirty-pages-pct-lwm=1"]
    db = MariaDB(os.path.join(base, "server"), page_size=page_size, options=opts)
    db.install()
    db.start()
    try:
        db.sql("CREATE DATABASE sbtest; CREATE DATABASE ddl")
        db.sysbench("oltp_read_write", "prepare", tables=tables, table_size=table_size)
        # A clean restart checkpoints: the backup then starts from data files
        # that hold the tables, not from an empty server.
        db.stop()
        db.start()
        ddl = DDLLoad(db, load_seconds)
        ddl.start()
        sb_cmds = []
        for test in ("oltp_read_write", "oltp_update_index", "oltp_insert", "oltp_delete"):
            sb_cmds.append(subprocess.Popen(
                ["sysbench", test, "--db-driver=mysql", f"--mysql-socket={db.socket}", "--mysql-user=root",
                 "--mysql-db=sbtest", f"--tables={tables}", f"--table-size={table_size}", "--threads=1",
                 f"--time={load_seconds}", "--rand-seed=7", "run"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        time.sleep(min(5, load_seconds / 4))
        backup = os.path.join(base, "backup")
        take_backup(db, backup, throttle)
        for p in sb_cmds:
            _out, err = p.communicate(timeout=load_seconds + 120)
            if p.returncode != 0:
                raise RuntimeError(f"sysbench failed: {err[-2000:]}")
        ddl.join(timeout=load_seconds + 120)
        if ddl.error:
            raise RuntimeError(f"DDL load failed: {ddl.error}")
    finally:
        db.stop()

    prepared = os.path.join(base, "prepared")
    replayed = os.path.join(base, "replayed")
    shutil.copytree(backup, prepared)
    shutil.copytree(backup, replayed)
    t = time.time()
    prepare(prepared)
    prepare_s = time.time() - t
    t = time.time()
    # --elide-against: before rebuilding each page, the storage engine is
    # asked whether it can reproduce the prepared page (its LSN and
    # checksum), as libcatcher asks the storage node.
    rr = subprocess.run([paths.tool("ppl-replay"), "--json", "--elide-against", prepared, replayed],
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    replay_s = time.time() - t
    if rr.returncode != 0:
        raise RuntimeError("ppl-replay failed:\n" + rr.stderr[-3000:])
    compared, diffs, problems = compare_dirs(prepared, replayed)
    # The streaming mode (no index, pages rebuilt as the log is read) on a
    # third copy must agree too.
    streamed = os.path.join(base, "streamed")
    shutil.copytree(backup, streamed)
    rs = subprocess.run([paths.tool("ppl-replay"), "--stream", streamed], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    if rs.returncode != 0:
        raise RuntimeError("ppl-replay --stream failed:\n" + rs.stderr[-3000:])
    compared_s, diffs_s, problems_s = compare_dirs(prepared, streamed)
    diffs += [f"(--stream) {d}" for d in diffs_s]
    problems += [f"(--stream) {p}" for p in problems_s]
    return {"compared": compared, "diffs": diffs, "problems": problems, "replay": rr.stdout,
            "prepare_s": prepare_s, "replay_s": replay_s, "ddl_rounds": ddl.rounds,
            "log_size": os.path.getsize(os.path.join(backup, "ib_logfile0"))}
