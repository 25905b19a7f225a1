"""FSAL_PPL loaded by Debian's ganesha.nfsd, stacked over FSAL_VFS: files
round-trip byte-exactly, namespace operations work, InnoDB's files are
classified and reach the engine hook points, bad parameters refuse the
export with a clear log line, and the start-up line shows the effective
configuration."""
import json
import os
import random
import re
import socket
import struct
import subprocess

import pytest

from lib import paths
from lib.ganesha import Ganesha, GaneshaError, free_port

from _libnfs import Client

INNODB_NAMES = ["ib_logfile0", "t1.ibd", "ibdata1", "undo001"]


@pytest.fixture(scope="session")
def plugins_dir():
    d = os.path.join(paths.build_dir(), "ganesha-fsal-ppl", "plugins")
    for f in ("libfsalppl.so", "libfsalvfs.so"):
        if not os.path.exists(os.path.join(d, f)):
            raise RuntimeError(f"{d}/{f} missing: build the project (target fsalppl) first")
    return d


def ppl_fsal(pool_path, params="", sub="FSAL { Name = VFS; }"):
    pool = f'Pool_Path = "{pool_path}";' if pool_path else ""
    return f"FSAL {{ Name = PPL; {pool} {params} {sub} }}"


def make_pool(pool_path, identity, size="4M", args=()):
    """The pool an export with elision needs (made explicitly, as an operator would)."""
    os.makedirs(os.path.dirname(pool_path), exist_ok=True)
    subprocess.run([paths.tool("ppl-inspect"), "pool", "create", str(pool_path), "--identity", str(identity),
                    "--size", size, *args], check=True, capture_output=True)


def make_server(tmp_path, plugins_dir, params="", pool=True, sub="FSAL { Name = VFS; }"):
    export = tmp_path / "export"
    export.mkdir(exist_ok=True)
    (tmp_path / "pmem").mkdir(exist_ok=True)
    pool_path = str(tmp_path / "pmem" / "ppl.pool") if pool else None
    return Ganesha(tmp_path / "ganesha", export, fsal=ppl_fsal(pool_path, params, sub),
                   plugins_dir=plugins_dir)


@pytest.fixture
def server(tmp_path, plugins_dir):
    g = make_server(tmp_path, plugins_dir, params="Stats_Interval = 0;")
    try:
        g.start()
        yield g
    finally:
        g.stop()


def nfs_cp(src, dst):
    r = subprocess.run(["nfs-cp", src, dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout


def nfs_cat(url):
    r = subprocess.run(["nfs-cat", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def backing(server, name):
    with open(os.path.join(server.export_path, name), "rb") as f:
        return f.read()


def stats_at_unexport(server):
    m = re.search(r"PPL: stats at unexport for \S+: (.*)", server.log_text(since_start=True))
    assert m, "no final stats line:\n" + server.tail_log()
    return m.group(1).split(" | ")[0]   # the file-class counts; the engine's figures follow


def stat_fields(line):
    """'redo_log: write 3/1536 B, commit 1; tablespace: ...' ->
    {('redo_log', 'write'): (3, 1536), ('redo_log', 'commit'): (1, None), ...}"""
    out = {}
    if line == "no InnoDB file activity":
        return out
    for part in line.split("; "):
        cls, ops = part.split(": ", 1)
        for op in ops.split(", "):
            name, value = op.split(" ", 1)
            if "/" in value:
                n, b = value.rstrip(" B").split("/")
                out[(cls, name)] = (int(n), int(b))
            else:
                out[(cls, name)] = (int(value), None)
    return out


# -- loading and the start-up line ---------------------------------------

def test_startup_line_shows_defaults(server):
    line = server.wait_log(r"PPL: export (\S+) over FSAL VFS: (.*)", timeout=1)
    assert line, server.tail_log()
    assert line.group(1) == server.export_path
    cfg = line.group(2)
    pool = os.path.join(os.path.dirname(os.path.dirname(server.log)), "pmem", "ppl.pool")
    for item in (f"Pool_Path={pool}", "Pool_Size=(as-created)", "Block_Size=64", "Max_Per_Page=256",
                 "Apply_Threads=2", "Page_Cache_Size=67108864", "Elision=off", "Elision_Clients=127.0.0.1",
                 "Elision_Token=(none)", "Verify=off", "Allow_Volatile_Pool=no", "Stats_Interval=0",
                 "Archive=off"):
        assert item in cfg.split(), (item, cfg)


def test_startup_line_shows_every_setting(tmp_path, plugins_dir):
    port = free_port()
    params = (f'Pool_Size = 4194304; Block_Size = 128; Max_Per_Page = 512; Apply_Threads = 4; '
              f'Page_Cache_Size = 0; Elision_Address = "127.0.0.1"; Elision_Port = {port}; '
              f'Elision_Clients = "127.0.0.1, 10.1.0.0/16, ::1"; Elision_Token = "hunter2-secret"; '
              f'Verify = true; Allow_Volatile_Pool = true; Stats_Interval = 7; '
              f'Archive_Path = "{tmp_path / "archive"}"; Archive_Segment_Size = 2097152; '
              f'Archive_Retention_Size = 8388608; Archive_Retention_Age = 3600; '
              f'Base_Path = "{tmp_path / "bases"}"; Base_Interval = 600; Base_Keep = 3;')
    (tmp_path / "archive").mkdir()
    (tmp_path / "bases").mkdir()
    (tmp_path / "pmem").mkdir()
    subprocess.run([paths.tool("ppl-inspect"), "pool", "create", str(tmp_path / "pmem" / "ppl.pool"),
                    "--identity", str(tmp_path / "export"), "--size", "4M", "--block-size", "128",
                    "--max-per-page", "512"], check=True, capture_output=True)
    with make_server(tmp_path, plugins_dir, params).start() as g:
        cfg = g.wait_log(r"PPL: export \S+ over FSAL VFS: (.*)", timeout=1).group(1)
    for item in ("Pool_Size=4194304", "Block_Size=128", "Max_Per_Page=512", "Apply_Threads=4",
                 "Page_Cache_Size=0", f"Elision=127.0.0.1:{port}", "Elision_Token=(set)", "Verify=on",
                 "Allow_Volatile_Pool=yes", "Stats_Interval=7"):
        assert item in cfg.split(), (item, cfg)
    assert "Elision_Clients=127.0.0.1, 10.1.0.0/16, ::1" in cfg
    assert (f"Archive={tmp_path / 'archive'} (segments 2097152 B, keep 8388608 B, 3600 s; bases {tmp_path / 'bases'} "
            "every 600 s, keep 3)") in cfg
    assert "hunter2" not in g.log_text(), "the token must never be logged"


# -- data ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["plain.dat"] + INNODB_NAMES)
@pytest.mark.parametrize("size", [0, 1, 16384, 9 * 1024 * 1024 + 12345])
def test_round_trip(server, tmp_path, name, size):
    data = random.Random(size).randbytes(size)
    src = tmp_path / "src"
    src.write_bytes(data)
    nfs_cp(str(src), server.url(name))
    assert backing(server, name) == data
    assert nfs_cat(server.url(name)) == data


@pytest.mark.parametrize("name", ["plain.dat", "ib_logfile0", "t2.ibd"])
def test_unaligned_writes_and_reads_match_a_model(server, name):
    rnd = random.Random(name)
    size = 2 * 1024 * 1024 + 333
    model = bytearray(size)
    with Client(server.url("")) as c:
        fh = c.open(name, os.O_RDWR | os.O_CREAT)
        try:
            c.pwrite(fh, bytes(model), 0)
            for _ in range(150):
                off = rnd.randrange(size - 1)
                n = rnd.randint(1, min(size - off, 200_000))
                chunk = rnd.randbytes(n)
                c.pwrite(fh, chunk, off)
                model[off:off + n] = chunk
            c.fsync(fh)
            for _ in range(60):
                off = rnd.randrange(size)
                n = rnd.randint(1, 1_500_000)
                assert c.pread_full(fh, n, off) == bytes(model[off:off + n])
        finally:
            c.close_file(fh)
    assert backing(server, name) == bytes(model)


def test_data_survives_kill9_and_restart(server):
    data = os.urandom(300_001)
    with Client(server.url("")) as c:
        c.write_file("ib_logfile0", data)
        c.write_file("keep.ibd", data[::-1])
    server.kill9()
    server.start()
    with Client(server.url("")) as c:
        # Handles from before the restart are resolved by name again.
        assert c.read_file("ib_logfile0") == data
        assert c.read_file("keep.ibd") == data[::-1]


def test_nfsv4_create_write_read(server):
    """NFSv4 OPEN with create reaches FSAL_PPL's open2-by-name path; small
    I/O only (Debian's libnfs cannot send v4 WRITEs of 4000 bytes or more)."""
    data = os.urandom(3000)
    src = os.path.join(os.path.dirname(server.log), "v4src")
    with open(src, "wb") as f:
        f.write(data)
    nfs_cp(src, server.url("v4.ibd", version=4))
    assert backing(server, "v4.ibd") == data
    assert nfs_cat(server.url("v4.ibd", version=4)) == data
    assert server.stop() == 0
    f = stat_fields(stats_at_unexport(server))
    assert f[("tablespace", "write")][1] == 3000
    assert f[("tablespace", "read")][1] == 3000


def test_handles_kept_across_restart_keep_their_class(tmp_path, plugins_dir):
    """mariadbd keeps writing ib_logfile0 through the NFS handle it had when
    Ganesha restarts: a handle has no name, so the start-up scan must have
    classified the file for the write to reach the redo hook."""
    g = make_server(tmp_path, plugins_dir, "Stats_Interval = 0;")
    exp = g.export_path
    os.makedirs(os.path.join(exp, "db1", "deeper"))
    os.makedirs(os.path.join(exp, "a", "b", "c", "db", "deeper"))
    for name in ("ib_logfile0", "ibdata1", "undo001", "notes.txt", "db1/t.ibd", "db1/t.frm",
                 "db1/deeper/x.ibd", "a/b/c/db/t2.ibd", "a/b/c/db/deeper/y.ibd"):
        with open(os.path.join(exp, name), "wb") as f:
            f.write(b"\0" * 4096)
    try:
        g.start()
        scan = g.wait_log(r"PPL: export \S+: scanned (\d+) files in \d+ ms: (.*)", timeout=1)
        # a datadir up to three levels down and its database directories;
        # nothing deeper (a/b/c/db/deeper is not walked)
        assert scan and scan.group(1) == "8", g.tail_log()
        assert scan.group(2) == "redo log found, 3 tablespaces, 1 system, 1 undo, 2 other"
        with Client(g.url("")) as c:
            log = c.open("ib_logfile0")
            page = c.open("db1/t.ibd")
            c.pwrite(log, b"a" * 512, 0)
            g.kill9()
            g.start()
            c.pwrite(log, b"b" * 512, 512)         # through the old handles only
            c.fsync(log)
            assert c.pread(page, 4096, 0) == b"\0" * 4096
            c.close_file(log)
            c.close_file(page)
        assert g.stop() == 0
        f = stat_fields(stats_at_unexport(g))
        assert f[("redo_log", "write")] == (1, 512)
        assert f[("tablespace", "read")] == (1, 4096)
        assert not any(cls == "unresolved" for cls, _ in f)
        with open(os.path.join(exp, "ib_logfile0"), "rb") as fl:
            assert fl.read(1024) == b"a" * 512 + b"b" * 512
    finally:
        g.stop()


# -- namespace -----------------------------------------------------------

def test_mkdir_rename_unlink_link_symlink(server):
    exp = server.export_path
    with Client(server.url("")) as c:
        c.mkdir("db1")
        c.mkdir("db2")
        assert os.path.isdir(os.path.join(exp, "db1"))
        c.write_file("db1/t1.ibd", b"p" * 16384)
        c.write_file("db1/t1.frm", b"frm")
        c.rename("db1/t1.ibd", "db2/t9.ibd")
        assert not os.path.exists(os.path.join(exp, "db1", "t1.ibd"))
        assert c.read_file("db2/t9.ibd") == b"p" * 16384
        c.link("db1/t1.frm", "db2/t1.frm")
        assert os.stat(os.path.join(exp, "db2", "t1.frm")).st_nlink == 2
        c.symlink("../db2/t9.ibd", "db1/alias")
        assert c.readlink("db1/alias") == "../db2/t9.ibd"
        assert os.readlink(os.path.join(exp, "db1", "alias")) == "../db2/t9.ibd"
        c.unlink("db1/alias")
        c.unlink("db1/t1.frm")
        c.unlink("db2/t1.frm")
        c.unlink("db2/t9.ibd")
        c.rmdir("db1")
        with pytest.raises(OSError):
            c.read_file("db2/t9.ibd")
        with pytest.raises(OSError):
            c.rmdir("no-such-dir")
    assert os.listdir(exp) == ["db2"] and os.listdir(os.path.join(exp, "db2")) == []


# -- classification and hook points --------------------------------------

def test_innodb_files_reach_the_hooks_by_class(server):
    """Counts by class prove which path each operation took: the plain file
    never shows up, the log's bytes are counted exactly once, renames and
    unlinks of InnoDB files are seen, including the log re-creation
    (ib_logfile101 renamed over ib_logfile0)."""
    log_bytes = os.urandom(512 * 7)
    page = os.urandom(16384)
    with Client(server.url("")) as c:
        c.write_file("ib_logfile0", log_bytes)            # write + COMMIT
        c.write_file("plain.txt", b"not InnoDB's" * 1000)
        assert c.read_file("plain.txt") == b"not InnoDB's" * 1000
        c.mkdir("db")
        c.write_file("db/t.ibd", page * 4)
        fh = c.open("db/t.ibd", os.O_RDONLY)
        assert c.pread(fh, 16384, 16384) == page           # one page read
        c.close_file(fh)
        c.write_file("ib_logfile101", b"\0" * 2048)
        c.rename("ib_logfile101", "ib_logfile0")           # replaces the old log
        c.unlink("db/t.ibd")
    assert server.stop() == 0
    f = stat_fields(stats_at_unexport(server))
    assert f[("redo_log", "write")][1] == len(log_bytes)
    assert f[("redo_log", "commit")][0] >= 1
    assert f[("tablespace", "write")][1] == 4 * 16384
    assert f[("tablespace", "read")] == (1, 16384)
    assert f[("redo_new", "write")][1] == 2048
    assert f[("redo_new", "rename_from")] == (1, None)
    assert f[("redo_log", "rename_to")] == (1, None)
    assert f[("redo_log", "unlink")] == (1, None)      # the replaced log
    assert f[("tablespace", "unlink")] == (1, None)
    assert not any(cls in ("other", "unresolved") for cls, _ in f)


def test_names_that_are_not_innodb_files_pass_through(server):
    """Near misses of InnoDB's names are plain files: no hook sees them."""
    names = ["ib_logfile1", "ib_logfile0.bak", "ibdata", "ibdata1x", "undo", "undo_001", "x.ibd.bak",
             ".ibd", "IBDATA1", "t.IBD", "ibtmp1", "t.ibt", "aria_log.00000001"]
    with Client(server.url("")) as c:
        for n in names:
            c.write_file(n, n.encode())
            assert c.read_file(n) == n.encode()
        c.rename("ib_logfile1", "ib_logfile2")
        c.unlink("x.ibd.bak")
    assert server.stop() == 0
    assert stats_at_unexport(server) == "no InnoDB file activity"


def test_concurrent_clients_on_log_and_pages(server):
    """Four clients at once, each writing its own slice of ib_logfile0 and
    its own tablespace while reading the others': every byte lands, and
    the hook counts add up exactly (no lost or double-counted updates)."""
    import threading

    slice_len, page = 256 * 1024, 16384
    errors = []
    with Client(server.url("")) as c:
        c.write_file("ib_logfile0", b"")

    def worker(i):
        try:
            rnd = random.Random(i)
            with Client(server.url("")) as c:
                log = c.open("ib_logfile0")
                ts = c.open(f"t{i}.ibd", os.O_RDWR | os.O_CREAT)
                for k in range(0, slice_len, 4096):
                    c.pwrite(log, bytes([65 + i]) * 4096, i * slice_len + k)
                    c.pwrite(ts, rnd.randbytes(page), (k // 4096) * page)
                    c.pread(log, 4096, ((i + 1) % 4) * slice_len + k)
                c.fsync(log)
                c.fsync(ts)
                c.close_file(log)
                c.close_file(ts)
        except Exception as e:        # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    data = backing(server, "ib_logfile0")
    assert data == b"".join(bytes([65 + i]) * slice_len for i in range(4))
    for i in range(4):
        rnd = random.Random(i)
        expect = b"".join(rnd.randbytes(page) for _ in range(slice_len // 4096))
        assert backing(server, f"t{i}.ibd") == expect
    assert server.stop() == 0
    f = stat_fields(stats_at_unexport(server))
    assert f[("redo_log", "write")][1] == 4 * slice_len
    assert f[("tablespace", "write")][1] == 4 * (slice_len // 4096) * page
    assert f[("redo_log", "read")][0] == 4 * (slice_len // 4096)


def test_periodic_stats_line(tmp_path, plugins_dir):
    with make_server(tmp_path, plugins_dir, "Stats_Interval = 1;").start() as g:
        with Client(g.url("")) as c:
            c.write_file("ib_logfile0", b"x" * 4096)
        m = g.wait_log(r"PPL: stats periodic for \S+: (redo_log: [^|]*) \| (engine: .*)", timeout=5)
        assert m, g.tail_log()
        assert stat_fields(m.group(1))[("redo_log", "write")][1] == 4096
        # ib_logfile0 written from its first byte is a log being copied in
        # (MariaDB writes a new log as ib_logfile101): the engine says it
        # waits for MariaDB to write it
        assert "waiting: the log is being copied in" in m.group(2), m.group(2)


# -- configuration errors -------------------------------------------------

BAD = [
    ("", False, "Pool_Path is not set"),
    ('Pool_Path = "relative/pool";', False, 'Pool_Path "relative/pool" is relative'),
    ('Pool_Path = "/nonexistent-ppl-dir/pool";', False, "directory /nonexistent-ppl-dir does not exist"),
    ("Block_Size = 48;", True, "Block_Size = 48: must be a power of two from 64 to 4096"),
    ("Pool_Size = 1000;", True, "Pool_Size = 1000: must be at least 1048576 bytes"),
    ("Max_Per_Page = 100;", True, "Max_Per_Page = 100: must be a multiple of Block_Size (64)"),
    ("Apply_Threads = 0;", True, "Apply_Threads = 0: must be from 1 to 64"),
    ("Page_Cache_Size = 100;", True, "Page_Cache_Size = 100: use 0 to turn the rebuilt-page cache off"),
    ('Elision_Address = "localhost";', True, 'Elision_Address "localhost" is not a numeric'),
    ('Elision_Clients = "127.0.0.1, 10.0.0.0/33";', True, 'Elision_Clients entry "10.0.0.0/33"'),
    ("Elision_Port = 4000;", True, "Elision_Port = 4000 but Elision_Token is empty"),
    ("Stats_Interval = 100000;", True, "Stats_Interval = 100000: at most 86400 seconds"),
    ('Metrics_Port = 9100; Metrics_Address = "localhost";', True, 'Metrics_Address "localhost" is not a numeric'),
    ('Elision_Port = 4000; Elision_Token = "t"; Metrics_Port = 4000;', True,
     "Metrics_Port = 4000 is also Elision_Port"),
    ("Apply_Threads = 65;", True, "Apply_Threads = 65: must be from 1 to 64"),
    ("Block_Size = 8192;", True, "Block_Size = 8192: must be a power of two from 64 to 4096"),
    ("Max_Per_Page = 1048576;", True, "Max_Per_Page = 1048576: must be a multiple of Block_Size (64) and at most 4096 bytes"),
    ('Elision_Port = 70000; Elision_Token = "t";', True, "its FSAL block has errors"),
    ("Metrics_Port = 70000;", True, "its FSAL block has errors"),
    ("Page_Cache_Size = 99999999999999;", True, "Page_Cache_Size = 99999999999999: more than three quarters of this machine's memory"),
    ("Verify = maybe;", True, "its FSAL block has errors"),
    ("Pool_Sise = 5;", True, "its FSAL block has unknown parameters"),
    ("Block_Size = -3;", True, "its FSAL block has errors"),
    ('Archive_Path = "relative/archive";', True, 'Archive_Path "relative/archive" is relative'),
    ('Archive_Path = "/nonexistent-ppl-archive";', True,
     'Archive_Path "/nonexistent-ppl-archive" is not an existing directory'),
    ('Archive_Path = "/tmp"; Archive_Segment_Size = 1000;', True,
     "Archive_Segment_Size = 1000: must be from 1048576 to 1073741824 bytes"),
    ('Archive_Path = "/tmp"; Archive_Retention_Size = 1048576;', True,
     "Archive_Retention_Size = 1048576: keep at least two segments"),
    ("Archive_Retention_Age = -1;", True, "its FSAL block has errors"),
    ('Base_Path = "/tmp";', True, "Base_Path and Base_Interval need the log archive"),
    ('Archive_Path = "/tmp"; Base_Interval = 600;', True, "Base_Interval = 600 needs Base_Path"),
    ('Archive_Path = "/tmp"; Base_Path = "/tmp"; Base_Interval = 10;', True, "Base_Interval = 10: at least 60 seconds"),
    ('Archive_Path = "/tmp"; Base_Path = "/nonexistent-ppl-bases"; Base_Interval = 600;', True,
     'Base_Path "/nonexistent-ppl-bases" is not an existing directory'),
    ('Archive_Path = "/tmp"; Base_Keep = 0;', True, "Base_Keep = 0: from 1 to 1000"),
    ("Log_On_Pmem = true;", True, "Log_On_Pmem needs the pool (Pool_Path, and elision on: Elision_Port)"),
    ("Log_On_Pmem = sometimes;", True, "its FSAL block has errors"),
]


def refusal(g):
    """Starts g, which must refuse its export; the refusal line's match
    (group 1 the export, group 2 what is wrong)."""
    try:
        with pytest.raises(GaneshaError, match="refused export"):
            g.start(timeout=20)
    finally:
        g.stop()
    m = re.search(r"PPL: export (\S+) refused: (.*)", g.log_text())
    assert m, g.tail_log()
    return m


@pytest.mark.parametrize("params,with_pool,message", BAD, ids=[b[2].split()[0] for b in BAD])
def test_bad_configuration_refuses_export(tmp_path, plugins_dir, params, with_pool, message):
    g = make_server(tmp_path, plugins_dir, params, pool=with_pool)
    m = refusal(g)
    assert m.group(1) == g.export_path
    assert message in m.group(2), m.group(2)
    # A refused export must not keep the sub-FSAL referenced.
    assert "Extra references" not in g.log_text()


def test_archive_inside_the_export_refuses_export(tmp_path, plugins_dir):
    """The log archive is the storage node's own: inside the export,
    MariaDB's clients would see it and it would fill the datadir's disk."""
    (tmp_path / "export" / "archive").mkdir(parents=True)
    g = make_server(tmp_path, plugins_dir, f'Archive_Path = "{tmp_path / "export" / "archive"}";')
    m = refusal(g)
    assert "is inside the export" in m.group(2), m.group(2)


def test_pool_of_another_size_refuses_export(tmp_path, plugins_dir):
    """Pool_Size names the pool meant; the pool found has another size."""
    g = make_server(tmp_path, plugins_dir, f'Pool_Size = 8388608; Elision_Port = {free_port()}; '
                    f'Elision_Token = "t";')
    make_pool(tmp_path / "pmem" / "ppl.pool", g.export_path, size="4M")
    m = refusal(g)
    assert "holds 4194304 bytes but Pool_Size = 8388608: set Pool_Size to the pool's size" in m.group(2)


def test_log_on_pmem_needs_a_pool_with_a_log_area(tmp_path, plugins_dir):
    """Log_On_Pmem keeps log writes in the pool's log area: a pool made
    without one is refused, saying how to make one."""
    g = make_server(tmp_path, plugins_dir, f'Log_On_Pmem = true; Elision_Port = {free_port()}; Elision_Token = "t";')
    make_pool(tmp_path / "pmem" / "ppl.pool", g.export_path, args=("--log-size", "none"))
    m = refusal(g)
    assert "has no log area" in m.group(2) and "ppl-inspect pool create" in m.group(2), m.group(2)


def test_reload_keeps_or_refuses_engine_parameters(server):
    """SIGHUP re-reads the exports: the same PPL parameters are accepted; a
    changed one is refused with a clear line and the export keeps serving
    with the parameters it started with."""
    with Client(server.url("")) as c:
        c.write_file("ib_logfile0", b"before")
    server.reload()
    assert "cannot change on reload" not in server.log_text()
    server.fsal = server.fsal.replace("Stats_Interval = 0;", "Stats_Interval = 0; Max_Per_Page = 512;")
    server.reload()
    m = re.search(r"PPL: export (\S+): PPL parameters cannot change on reload \(running with (.*)\); "
                  r"restart ganesha.nfsd to apply them", server.log_text())
    assert m and m.group(1) == server.export_path, server.tail_log()
    assert "Max_Per_Page=256" in m.group(2)
    with Client(server.url("")) as c:
        assert c.read_file("ib_logfile0") == b"before"
        c.write_file("ib_logfile0", b"after")
    assert backing(server, "ib_logfile0") == b"after"


def test_missing_sub_fsal_refuses_export(tmp_path, plugins_dir):
    g = make_server(tmp_path, plugins_dir, sub="")
    try:
        with pytest.raises(GaneshaError, match="refused export"):
            g.start(timeout=20)
    finally:
        g.stop()
    assert "refused: no sub-FSAL; add FSAL { Name = VFS; }" in g.log_text()


# -- the shipped example --------------------------------------------------

def example_fsal_block():
    """The PPL FSAL block of ganesha.conf.example (balanced braces)."""
    with open(os.path.join(paths.REPO, "ganesha.conf.example")) as f:
        text = f.read()
    start = text.index("FSAL {\n        Name = PPL;")
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    raise AssertionError("unbalanced FSAL block in ganesha.conf.example")


def test_example_fsal_block_starts_an_export(tmp_path, plugins_dir):
    """The documented block, with its paths and addresses moved to this
    test's, is accepted as is: every parameter name in it is real."""
    block = example_fsal_block()
    port = free_port()
    (tmp_path / "pmem").mkdir()
    block = re.sub(r'Pool_Path = "[^"]*"', f'Pool_Path = "{tmp_path}/pmem/ppl.pool"', block)
    block = re.sub(r"Pool_Size = \d+", "Pool_Size = 4194304", block)  # the pool made below
    block = re.sub(r'Elision_Address = "[^"]*"', 'Elision_Address = "127.0.0.1"', block)
    block = re.sub(r'Elision_Clients = "[^"]*"', 'Elision_Clients = "127.0.0.1"', block)
    block = re.sub(r"Elision_Port = \d+", f"Elision_Port = {port}", block)
    export = tmp_path / "export"
    export.mkdir()
    make_pool(tmp_path / "pmem" / "ppl.pool", export)
    with Ganesha(tmp_path / "ganesha", export, fsal=block, plugins_dir=plugins_dir).start() as g:
        cfg = g.wait_log(r"PPL: export \S+ over FSAL VFS: (.*)", timeout=1).group(1)
        assert f"Elision=127.0.0.1:{port}" in cfg and "Max_Per_Page=256" in cfg
        with Client(g.url("")) as c:
            c.write_file("ib_logfile0", b"log" * 1000)
            assert c.read_file("ib_logfile0") == b"log" * 1000


def test_whole_example_config_serves(tmp_path, plugins_dir):
    """ganesha.conf.example as shipped, with only its site-specific values
    (addresses, ports, paths) replaced, starts a working PPL export."""
    with open(os.path.join(paths.REPO, "ganesha.conf.example")) as f:
        example = f.read()
    elision_port = free_port()

    def config(g):
        t = example.replace("10.0.0.2", "127.0.0.1").replace("10.0.0.1", "127.0.0.1")
        for old, new in (("NFS_Port = 2049", f"NFS_Port = {g.port}"),
                         ("MNT_Port = 20048", f"MNT_Port = {g.mnt_port}"),
                         ("Elision_Port = 3307", f"Elision_Port = {elision_port}"),
                         ('"/usr/lib/x86_64-linux-gnu/ganesha"', f'"{plugins_dir}"'),
                         ('"/srv/ppl/data"', f'"{g.export_path}"'),
                         ('"/mnt/pmem/ppl.pool"', f'"{tmp_path}/pmem/ppl.pool"'),
                         ("Pool_Size = 268435456", "Pool_Size = 4194304"),  # the pool made below
                         # the default recovery directory is shared by all tests
                         ("Only_Numeric_Owners = true;",
                          f'Only_Numeric_Owners = true;\n    RecoveryRoot = "{g.recovery}";')):
            assert old in t, f"ganesha.conf.example no longer contains {old!r}"
            t = t.replace(old, new)
        return t

    (tmp_path / "pmem").mkdir()
    (tmp_path / "data").mkdir()
    make_pool(tmp_path / "pmem" / "ppl.pool", tmp_path / "data")
    with Ganesha(tmp_path / "ganesha", tmp_path / "data", pseudo="/ppl", config=config).start() as g:
        assert re.search(r"CONFIG :(CRIT|MAJ|WARN) :Config File", g.log_text()) is None, g.tail_log()
        assert g.wait_log(r"PPL: export \S+ over FSAL VFS: .*Elision=127\.0\.0\.1:%d" % elision_port, 1)
        with Client(g.url("")) as c:
            c.write_file("ib_logfile0", b"example" * 100)
        assert backing(g, "ib_logfile0") == b"example" * 100


# -- elision service --------------------------------------------------------

def test_elision_needs_the_pool_made_for_this_export(tmp_path, plugins_dir):
    port = free_port()
    params = f'Elision_Port = {port}; Elision_Token = "tok";'
    g = make_server(tmp_path, plugins_dir, params)
    with pytest.raises(GaneshaError):
        g.start(timeout=15)
    assert "ppl-inspect pool create" in g.log_text(), g.tail_log()
    g.stop()
    make_pool(tmp_path / "pmem" / "ppl.pool", "/some/other/datadir")
    g = make_server(tmp_path, plugins_dir, params)
    with pytest.raises(GaneshaError):
        g.start(timeout=15)
    assert 'belongs to "/some/other/datadir"' in g.log_text(), g.tail_log()
    g.stop()


def test_elision_refuses_clients_not_allowed(tmp_path, plugins_dir):
    port = free_port()
    make_pool(tmp_path / "pmem" / "ppl.pool", tmp_path / "export")
    params = f'Elision_Port = {port}; Elision_Token = "tok"; Elision_Clients = "10.9.9.9";'
    with make_server(tmp_path, plugins_dir, params).start() as g:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        # a well-formed hello (ppl/elision_proto.h); the server closes without answering
        token = b"tok"
        s.sendall(struct.pack(">BBHI", 1, 0, 12 + len(token), 0) +
                  struct.pack(">IHHHH", 0x50504C45, 1, 1, len(token), 0) + token)
        s.settimeout(5)
        try:
            data = s.recv(64)
        except ConnectionResetError:
            data = b""
        assert data == b""
        s.close()
    assert re.search(r"elision: \d+ asked, 0 acked.*clients refused [1-9]", g.log_text()), g.tail_log()


def _frame(ftype, body, req_id=0):
    return struct.pack(">BBHI", ftype, 0, len(body), req_id) + body


def _hello(token):
    return _frame(1, struct.pack(">IHHHH", 0x50504C45, 1, 1, len(token), 0) + token)


def _elide(req_id, space, page_no, lsn, checksum=0, page_size=16384):
    return _frame(3, struct.pack(">IIQII", space, page_no, lsn, checksum, page_size), req_id)


def _read_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _closed_by_server(s, timeout=10):
    """Whether the server closes the connection (EOF or a reset) within timeout."""
    s.settimeout(timeout)
    try:
        while s.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except OSError:
        return False


def test_elision_service_survives_hostile_clients(tmp_path, plugins_dir):
    """An allowed address with a wrong token, a stream that is not the
    protocol, frames cut short or lying about their length, questions
    before the hello, questions with absurd fields: each connection is
    refused or closed (counted, logged), the server keeps answering a
    well-behaved client on the same port, and a question never makes it
    stop ingest or acknowledge a page it does not hold. (No MariaDB
    datadir here, so every question is a "no" before the index is asked;
    questions with LSNs past the log against a running ingest are
    test_store_rules.c's test_every_refusal.)"""
    port = free_port()
    pool = tmp_path / "pmem" / "ppl.pool"
    make_pool(pool, tmp_path / "export")
    params = f'Elision_Port = {port}; Elision_Token = "tok"; Elision_Clients = "127.0.0.1";'
    with make_server(tmp_path, plugins_dir, params).start() as g:
        def connect():
            return socket.create_connection(("127.0.0.1", port), timeout=10)

        def good_client():
            s = connect()
            s.sendall(_hello(b"tok"))
            reply = _read_exactly(s, 20)
            assert len(reply) == 20 and struct.unpack(">H", reply[14:16])[0] == 0, reply  # HELLO_OK
            return s

        # a wrong token: HELLO_REPLY with BAD_TOKEN, then closed
        s = connect()
        s.sendall(_hello(b"not-the-token"))
        reply = _read_exactly(s, 20)
        assert struct.unpack(">H", reply[14:16])[0] == 3, reply
        assert _closed_by_server(s)
        s.close()
        # not the protocol at all: an HTTP request, then random bytes
        for junk in (b"GET / HTTP/1.0\r\n\r\n", random.Random(7).randbytes(5000)):
            s = connect()
            s.sendall(junk)
            assert _closed_by_server(s)
            s.close()
        # a question before the hello
        s = connect()
        s.sendall(_elide(1, 0, 0, 1))
        assert _closed_by_server(s)
        s.close()
        hostile = [
            _frame(9, b"\0" * 8, 5),                          # a type no peer sends
            _frame(3, b"\0" * 5, 6),                          # a question of the wrong length
            _frame(1, b"\0" * 12, 7),                         # a second hello
            _frame(4, b"\0" * 8, 8),                          # a verdict, from the client
            struct.pack(">BBHI", 3, 1, 24, 9) + b"\0" * 24,  # flags set
        ]
        for frame in hostile:
            s = good_client()
            s.sendall(frame)
            assert _closed_by_server(s), frame
            s.close()
        # cut short: half a question, then the client goes away
        s = good_client()
        s.sendall(_elide(10, 0, 3, 1)[:13])
        s.close()
        # questions with absurd fields get a "no" each, on an open connection
        s = good_client()
        for i, (space, page_no, lsn, size) in enumerate([(0xFFFFFFFF, 0xFFFFFFFF, 2**64 - 1, 16384),
                                                         (0, 3, 2**63, 16384), (0, 3, 12345, 0),
                                                         (0, 3, 12345, 1 << 31), (77, 0, 0, 16384)]):
            s.sendall(_elide(100 + i, space, page_no, lsn, 0xDEADBEEF, size))
            v = _read_exactly(s, 16)
            assert len(v) == 16 and v[0] == 4 and struct.unpack(">I", v[4:8])[0] == 100 + i, v
            assert v[8] != 0, f"question {i} was acknowledged: {v!r}"
        s.close()
        # and the service still serves a well-behaved client
        s = good_client()
        s.sendall(_elide(200, 0, 5, 1))
        v = _read_exactly(s, 16)
        assert len(v) == 16 and struct.unpack(">I", v[4:8])[0] == 200 and v[8] != 0, v
        s.close()
        r = subprocess.run([paths.tool("ppl-inspect"), "live", str(pool), "stats", "--json"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        el = json.loads(r.stdout)["elision"]
        # the wrong token, the HTTP request, the random bytes and the
        # question before the hello are refused at hello; the rest close
        assert el["protocol_errors"] >= len(hostile) and el["clients_refused"] >= 4, el
        assert el["acked"] == 0, el
    log = g.log_text()
    assert "client refused at hello" in log, g.tail_log()
    assert "malformed frame" in log, g.tail_log()
    assert not [line for line in log.splitlines() if ":CRIT :PPL" in line or "redo ingest stopped" in line]
