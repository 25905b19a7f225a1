"""ppl-replay on damaged or incomplete input: a clear error naming the
place, exit status 1, and no data file changed past what the valid part of
the log allows. The datadir comes from a real MariaDB run."""
import hashlib
import json
import os
import shutil
import struct
import subprocess

import pytest

from lib import paths
from lib.mariadb import MariaDB


@pytest.fixture(scope="module")
def crashed_datadir(tmp_path_factory):
    """A datadir whose server was killed under load: recovery has work to do."""
    base = str(tmp_path_factory.mktemp("replay-bad"))
    db = MariaDB(os.path.join(base, "server"), options=["--innodb-log-file-size=16M",
                                                        "--innodb-buffer-pool-size=16M"])
    db.install()
    db.start()
    db.sql("CREATE DATABASE sbtest")
    db.sysbench("oltp_write_only", "prepare", tables=2, table_size=2000)
    db.sysbench("oltp_write_only", "run", "--time=5", tables=2, table_size=2000)
    db.kill()
    return db.datadir


def digest(d):
    h = {}
    for root, _dirs, files in os.walk(d):
        for f in files:
            if f.endswith(".ibd") or f.startswith("ibdata"):
                p = os.path.join(root, f)
                with open(p, "rb") as fh:
                    h[os.path.relpath(p, d)] = hashlib.sha256(fh.read()).hexdigest()
    return h


def replay(d, *args):
    return subprocess.run([paths.tool("ppl-replay"), *args, d], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def test_crashed_datadir_replays(crashed_datadir, tmp_path):
    d = str(tmp_path / "copy")
    shutil.copytree(crashed_datadir, d)
    r = replay(d, "--json")
    assert r.returncode == 0, r.stderr
    assert '"mtrs"' in r.stdout


def test_progress_lines(crashed_datadir, tmp_path):
    """A long replay says how far it has come: with --progress-every 0 a
    line at each step of the read and of the rebuild, the last page count
    the number of pages the summary gives; without it, nothing within the
    first second, and nothing with --quiet."""
    d = str(tmp_path / "copy")
    shutil.copytree(crashed_datadir, d)
    r = replay(d, "--json", "--progress-every", "0")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    reads = [x for x in r.stderr.splitlines() if x.startswith("replay: log read to LSN ")]
    rebuilt = [x for x in r.stderr.splitlines() if x.startswith("replay: ") and x.endswith(" pages rebuilt")]
    assert reads and rebuilt, r.stderr
    # "K of N pages rebuilt"; workers print in any order, the largest K is N
    done = max(int(x.split()[1]) for x in rebuilt)
    assert {x.split()[3] for x in rebuilt} == {str(done)}, rebuilt[-3:]
    assert done >= summary["pages_written"] > 0, (done, summary)
    for args in ((), ("--quiet",)):
        d2 = str(tmp_path / f"copy{len(args)}")
        shutil.copytree(crashed_datadir, d2)
        r = replay(d2, "--json", *args)
        assert r.returncode == 0, r.stderr
        if args or json.loads(r.stdout)["total_s"] < 0.9:
            assert "replay: " not in r.stderr, r.stderr
    r = replay(d, "--progress-every", "soon")
    assert r.returncode == 2 and "--progress-every needs seconds" in r.stderr


def test_bad_header_checksum_refused(crashed_datadir, tmp_path):
    d = str(tmp_path / "copy")
    shutil.copytree(crashed_datadir, d)
    before = digest(d)
    with open(os.path.join(d, "ib_logfile0"), "r+b") as f:
        f.seek(20)
        b = f.read(1)
        f.seek(20)
        f.write(bytes([b[0] ^ 0xFF]))
    r = replay(d)
    assert r.returncode == 1
    assert "header checksum mismatch" in r.stderr
    assert digest(d) == before  # nothing written


def test_damaged_record_area_stops_before_damage(crashed_datadir, tmp_path):
    """Flip a byte inside the parsed range: the reader stops at that
    mini-transaction; because the last checkpoint lies... behind it, the stop
    looks like the end of the log, so replay succeeds but ends before the
    damage: its end LSN is lower than the undamaged run's."""
    good = str(tmp_path / "good")
    shutil.copytree(crashed_datadir, good)
    r0 = replay(good, "--json", "--dry-run")
    assert r0.returncode == 0, r0.stderr
    import json
    s0 = json.loads(r0.stdout)
    bad = str(tmp_path / "bad")
    shutil.copytree(crashed_datadir, bad)
    # a byte in the middle of the parsed LSN range
    with open(os.path.join(bad, "ib_logfile0"), "r+b") as f:
        hdr = f.read(12288)
        first_lsn = struct.unpack(">Q", hdr[8:16])[0]
        size = os.fstat(f.fileno()).st_size
        mid = (s0["start_lsn"] + s0["end_lsn"]) // 2
        off = 12288 + (mid - first_lsn) % (size - 12288)
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x5A]))
    r1 = replay(bad, "--json", "--dry-run")
    if r1.returncode == 0:
        s1 = json.loads(r1.stdout)
        assert s1["end_lsn"] <= mid < s0["end_lsn"]
        assert s1["mtrs"] < s0["mtrs"]
    else:
        assert r1.returncode == 1 and "damaged" in r1.stderr, r1.stderr


def test_checkpoint_beyond_damage_is_an_error(crashed_datadir, tmp_path):
    """Damage before the checkpoint's own mini-transaction: that log was
    certainly written, so a stop there is reported as damage."""
    d = str(tmp_path / "copy")
    shutil.copytree(crashed_datadir, d)
    with open(os.path.join(d, "ib_logfile0"), "r+b") as f:
        blk = bytearray(f.read(12288))
        first_lsn = struct.unpack(">Q", blk[8:16])[0]
        size = os.fstat(f.fileno()).st_size
        best = None
        for o in (4096, 8192):
            ck, end = struct.unpack(">QQ", blk[o:o + 16])
            if ck and (best is None or ck > best[0]):
                best = (ck, end)
        ck, end = best
        if end <= ck:
            pytest.fail("checkpoint block has no end LSN beyond its LSN")
        off = 12288 + (ck - first_lsn) % (size - 12288)
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x5A]))
    r = replay(d, "--dry-run")
    assert r.returncode == 1
    assert "damaged at LSN" in r.stderr and "checkpoint" in r.stderr, r.stderr


def test_truncated_log_file(crashed_datadir, tmp_path):
    d = str(tmp_path / "copy")
    shutil.copytree(crashed_datadir, d)
    before = digest(d)
    os.truncate(os.path.join(d, "ib_logfile0"), 5000)
    r = replay(d)
    assert r.returncode == 1
    assert "too small" in r.stderr or "cannot read" in r.stderr, r.stderr
    assert digest(d) == before


def test_not_a_datadir(tmp_path):
    r = replay(str(tmp_path))
    assert r.returncode == 1
    assert "ibdata1" in r.stderr
