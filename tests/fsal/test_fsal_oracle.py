"""After a restart the storage node serves exactly the pages MariaDB's own
recovery makes.

A backup is taken from a private MariaDB while sysbench writes (so its
data files are older than its log). Its data files go into an FSAL_PPL
export with elision configured; its redo log is then written over NFS
from its first byte on, as a log copied in is (the storage node does not
take that for MariaDB's log writes, DESIGN I7), and the storage node is
stopped and started again: it ingests the log from its checkpoint and,
not knowing which page writes the previous run elided, serves every page
with records in the log rebuilt (I6). Every page read back over NFS must
equal the page `mariadb-backup --prepare` makes from a copy of the same
backup (InnoDB's recovery is the oracle); pages that only the log creates
past a file's end are not served yet and are counted, not compared."""
import os
import re
import shutil
import struct
import subprocess

import pytest

from lib import memcheck, paths, redo_blocks
from lib.ganesha import Ganesha, free_port
from lib.mariadb import MariaDB
from lib.oracle import compare_dirs, data_files, page_size_of, prepare, take_backup

from _libnfs import Client


def make_backup(base, tables=2, table_size=5000, seconds=12):
    opts = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=32M",
            "--innodb-flush-log-at-trx-commit=1", "--innodb-max-dirty-pages-pct=5",
            "--innodb-max-dirty-pages-pct-lwm=1"]
    db = MariaDB(os.path.join(base, "server"), options=opts)
    db.install()
    db.start()
    try:
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=tables, table_size=table_size)
        db.stop()
        db.start()   # a checkpoint: the backup starts from data files that hold the tables
        load = subprocess.Popen(
            ["sysbench", "oltp_write_only", "--db-driver=mysql", f"--mysql-socket={db.socket}",
             "--mysql-user=root", "--mysql-db=sbtest", f"--tables={tables}", f"--table-size={table_size}",
             "--threads=2", f"--time={seconds}", "--rand-seed=3", "run"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        backup = os.path.join(base, "backup")
        take_backup(db, backup, throttle=10)
        _out, err = load.communicate(timeout=seconds + 120)
        assert load.returncode == 0, err[-2000:]
    finally:
        db.stop()
    return backup


@pytest.fixture(scope="module")
def backup(tmp_path_factory):
    return make_backup(str(tmp_path_factory.mktemp("fsal-oracle")))


def write_log(c, fh, log, start, stop):
    """log[start:stop] into the open ib_logfile0 in 64 KiB writes; a short
    remainder goes with the last one. A lone write of at most 4 KiB is
    provisional to the storage node (redo_reader.c: MariaDB's partial tail
    block may carry old buffer contents) until a later write or checkpoint
    follows, as one always does from MariaDB; this backup's log just
    ends."""
    chunk = 64 << 10
    offsets = list(range(start, stop, chunk))
    if len(offsets) > 1 and stop - offsets[-1] <= 4096:
        offsets.pop()
    for i, off in enumerate(offsets):
        end = offsets[i + 1] if i + 1 < len(offsets) else stop
        c.pwrite(fh, log[off:end], off)


def serve(tmp_path, backup, log, partial=(), crash=False, wrapper=(), live_from=None, live_checkpoint=None):
    """Starts an export holding the backup's data files, writes `log` as
    ib_logfile0 over NFS in 64 KiB writes, reads every page file back over
    NFS into tmp_path/served, and the byte ranges `partial` ((file, offset,
    length), read with one READ each). ganesha.nfsd is stopped after the
    log is written (with crash, killed with SIGKILL) and started again
    before the reads. `wrapper` runs ganesha.nfsd under another program
    (valgrind). With live_from, only log[:live_from] is written before the
    restart, and the rest after it, as MariaDB's live log writes; then
    live_checkpoint ((file offset, 64-byte block)), as MariaDB writes its
    checkpoint once its log is flushed.
    Returns (served dir, Ganesha's log text, the partial reads)."""
    export = tmp_path / "export"
    shutil.copytree(backup, export, ignore=shutil.ignore_patterns("ib_logfile0"))
    assert not any(n.endswith(".new") for _d, _s, files in os.walk(export) for n in files)
    (tmp_path / "pmem").mkdir()
    pool = tmp_path / "pmem" / "ppl.pool"
    subprocess.run([paths.tool("ppl-inspect"), "pool", "create", str(pool), "--identity", str(export),
                    "--size", "16M"], check=True, capture_output=True)
    fsal = (f'FSAL {{ Name = PPL; Pool_Path = "{pool}"; Stats_Interval = 0; Elision_Port = {free_port()}; '
            f'Elision_Token = "oracle"; Elision_Clients = "127.0.0.1"; FSAL {{ Name = VFS; }} }}')
    plugins = os.path.join(paths.build_dir(), "ganesha-fsal-ppl", "plugins")
    served = tmp_path / "served"
    with Ganesha(tmp_path / "ganesha", export, fsal=fsal, plugins_dir=plugins, wrapper=wrapper).start() as g:
        with Client(g.url("")) as c:
            fh = c.open("ib_logfile0", os.O_RDWR | os.O_CREAT)
            c.ftruncate(fh, len(log))           # InnoDB creates its log at full size
            write_log(c, fh, log, 0, live_from or len(log))
            c.fsync(fh)
            c.close_file(fh)
        if crash:
            g.kill9()
        else:
            g.stop()
        g.start()
        with Client(g.url("")) as c:
            if live_from:
                fh = c.open("ib_logfile0", os.O_RDWR)
                write_log(c, fh, log, live_from, len(log))
                c.fsync(fh)
                if live_checkpoint:
                    c.pwrite(fh, live_checkpoint[1], live_checkpoint[0])
                    c.fsync(fh)
                c.close_file(fh)
            for rel in data_files(str(export)):
                os.makedirs(os.path.dirname(served / rel), exist_ok=True)
                with open(served / rel, "wb") as out:
                    out.write(c.read_file(rel))
            parts = []
            for rel, off, length in partial:
                fh = c.open(rel, os.O_RDONLY)
                parts.append(c.pread(fh, length, off))
                c.close_file(fh)
    return str(served), g.log_text(), parts   # the final stats line is written at unexport


def test_pages_read_over_nfs_equal_prepare(tmp_path, backup):
    prepared = str(tmp_path / "prepared")
    shutil.copytree(backup, prepared)
    prepare(prepared)

    with open(os.path.join(backup, "ib_logfile0"), "rb") as f:
        log = f.read()
    # reads that cover parts of pages the log changed (InnoDB never reads
    # so; other NFS clients may): the bytes must be the rebuilt page's too
    partial = []
    for rel, path in sorted(data_files(backup).items()):
        ps = page_size_of(path)
        with open(path, "rb") as fb, open(os.path.join(prepared, rel), "rb") as fp:
            b, p = fb.read(), fp.read()
        for n in range(1, min(len(b), len(p)) // ps - 1):
            if len(partial) < 12 and b[n * ps:(n + 1) * ps] != p[n * ps:(n + 1) * ps]:
                partial.append((rel, n * ps + ps - 1000, 3000))   # the end of page n, the start of n+1
    assert len(partial) == 12
    served, logtext, parts = serve(tmp_path, backup, log, partial)
    for (rel, off, length), got in zip(partial, parts):
        with open(os.path.join(prepared, rel), "rb") as fp:
            fp.seek(off)
            assert got == fp.read(length), f"{rel} bytes {off}..{off + length} differ from prepare's"
    engine = re.findall(r"\| (engine: .*)", logtext)[-1]
    assert "redo ingest started at the checkpoint LSN" in logtext, logtext[-3000:]
    assert "redo ingest stopped" not in logtext and "cannot be rebuilt" not in logtext, logtext[-3000:]
    rebuilt = int(re.search(r"pages rebuilt (\d+)", engine).group(1))
    assert rebuilt > 50, engine               # the log really had work for the reads

    compared, diffs, problems = compare_dirs(prepared, served)
    assert compared > 500
    assert diffs == [], "\n".join(diffs[:20]) + "\n" + engine
    # Files the log extends past their end in the backup: the tail pages
    # exist only after recovery (not served by this stage of the FSAL).
    for p in problems:
        assert re.search(r": size \d+ after prepare, \d+ after replay", p), p


def test_restart_serves_the_records_in_the_logs_last_bytes(tmp_path, backup):
    """The storage node is killed right after the last log write and
    started again: it cannot know yet whether the log's last bytes are
    final (a lone tail block may carry old buffer contents), and MariaDB
    may read a page back before its next log write says so. Pages with
    records there are served only once that is settled -- here, with no
    log write coming, after the log has stayed quiet -- and every page
    equals prepare's."""
    prepared = str(tmp_path / "prepared")
    shutil.copytree(backup, prepared)
    prepare(prepared)
    with open(os.path.join(backup, "ib_logfile0"), "rb") as f:
        log = f.read()
    served, logtext, _ = serve(tmp_path, backup, log, crash=True)
    held = re.findall(r"(\d+) page\(s\) have records in the last (\d+) byte", logtext)
    assert held and int(held[-1][0]) > 0, logtext[-3000:]
    assert "redo ingest stopped" not in logtext and "READ fails" not in logtext, logtext[-3000:]
    compared, diffs, problems = compare_dirs(prepared, served)
    assert compared > 500
    assert diffs == [], "\n".join(diffs[:20])
    assert re.search(r"reads that waited for the log's tail after the restart [1-9]", logtext), logtext[-3000:]
    for p in problems:
        assert re.search(r": size \d+ after prepare, \d+ after replay", p), p


def test_memcheck_finds_no_memory_error_in_the_storage_node(tmp_path, backup):
    """The oracle comparison again, with the restart, and ganesha.nfsd
    running under valgrind's memcheck (lib/memcheck.py says why not the
    sanitizers): no invalid access, no use of uninitialised bytes, no
    leak, and the same pages."""
    prepared = str(tmp_path / "prepared")
    shutil.copytree(backup, prepared)
    prepare(prepared)
    with open(os.path.join(backup, "ib_logfile0"), "rb") as f:
        log = f.read()
    logs = tmp_path / "memcheck"
    logs.mkdir()
    served, logtext, _ = serve(tmp_path, backup, log, crash=True, wrapper=memcheck.command(logs))
    memcheck.assert_clean(logs)
    assert "redo ingest stopped" not in logtext and "READ fails" not in logtext, logtext[-3000:]
    compared, diffs, _problems = compare_dirs(prepared, served)
    assert compared > 500
    assert diffs == [], "\n".join(diffs[:20])


def test_damaged_log_over_nfs_stops_ingest_and_serves_no_later_change(tmp_path, backup):
    """One flipped byte in the middle of the records, written as MariaDB's
    live log writes after the restart, then a checkpoint whose log ends past
    it: the engine says the log is damaged and stops parsing there; every
    page still reads and carries no change from past the damage. (Bytes
    written past the damage alone prove nothing: test_redo_reader.c.)"""
    with open(os.path.join(backup, "ib_logfile0"), "rb") as f:
        log = bytearray(f.read())
    end = len(log.rstrip(b"\0"))
    at = 12288 + (end - 12288) * 2 // 3
    log[at] ^= 0x20
    live_from = (12288 + (at - 12288) // 3) // 4096 * 4096   # a block boundary well before the damage
    ck_lsn, _end, ck_off = redo_blocks.newest_checkpoint(log)
    end_lsn = redo_blocks.header_first_lsn(log) + end - 12288
    served, logtext, _ = serve(tmp_path, backup, bytes(log), live_from=live_from,
                               live_checkpoint=(12288 - ck_off, redo_blocks.checkpoint_block(ck_lsn, end_lsn)))
    m = re.search(r"redo ingest stopped: (.*?)\. Pages with records", logtext)
    assert m, logtext[-3000:]
    parsed = int(re.findall(r"\| engine: redo [0-9.]+ MB parsed to LSN (\d+)", logtext)[-1])
    assert "cannot be rebuilt" not in logtext
    pages = {}
    for rel, path in data_files(served).items():
        ps = page_size_of(path)
        with open(path, "rb") as f:
            data = f.read()
        for off in range(0, len(data), ps):
            page = data[off:off + ps]
            if not any(page):
                continue
            lsn = struct.unpack(">Q", page[16:24])[0]
            assert lsn <= parsed, f"{rel} page {off // ps}: LSN {lsn} is past the damage (parsed to {parsed})"
            pages[rel] = pages.get(rel, 0) + 1
    # every page the copied files hold still reads (none comes back as zeros)
    for rel, path in data_files(backup).items():
        ps = page_size_of(path)
        with open(path, "rb") as f:
            data = f.read()
        held = sum(1 for off in range(0, len(data), ps) if any(data[off:off + ps]))
        assert pages.get(rel, 0) >= held, f"{rel}: {pages.get(rel, 0)} pages read back, the copy holds {held}"
    assert sum(pages.values()) > 100
