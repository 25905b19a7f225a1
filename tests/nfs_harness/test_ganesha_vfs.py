"""The test NFS server harness (tests/lib/ganesha.py) over Debian's FSAL_VFS:
files written with libnfs land byte-exactly in the exported directory and
read back the same; two servers run side by side without rpcbind mix-ups;
stop, kill -9 and restart behave."""
import os
import subprocess

import pytest

from lib.ganesha import Ganesha, _listening


def nfs_cp(src, dst):
    r = subprocess.run(["nfs-cp", src, dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    assert r.returncode == 0, f"nfs-cp {src} {dst}: {r.stdout}"


def nfs_cat(url):
    r = subprocess.run(["nfs-cat", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, f"nfs-cat {url}: {r.stderr.decode(errors='replace')}"
    return r.stdout


@pytest.fixture
def server(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    g = Ganesha(tmp_path / "ganesha", export)
    g.start()
    yield g
    g.stop()


@pytest.mark.parametrize("size", [0, 1, 4095, 65536 + 7, 9 * 1024 * 1024 + 12345])
def test_round_trip(server, tmp_path, size):
    data = os.urandom(size)
    src = tmp_path / "src"
    src.write_bytes(data)
    nfs_cp(str(src), server.url(f"f{size}"))
    with open(os.path.join(server.export_path, f"f{size}"), "rb") as f:
        assert f.read() == data
    assert nfs_cat(server.url(f"f{size}")) == data
    back = tmp_path / "back"
    nfs_cp(server.url(f"f{size}"), str(back))
    assert back.read_bytes() == data


def test_server_file_visible_to_client(server):
    with open(os.path.join(server.export_path, "made-on-server"), "wb") as f:
        f.write(b"written directly into the exported directory\n")
    assert nfs_cat(server.url("made-on-server")) == b"written directly into the exported directory\n"
    r = subprocess.run(["nfs-ls", server.url("")], stdout=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0 and "made-on-server" in r.stdout


def test_two_servers_side_by_side(tmp_path):
    """Each start re-registers with rpcbind, so the second server owns the
    registration; clients reach the first through its explicit ports."""
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    (a_dir / "who").write_bytes(b"server a")
    (b_dir / "who").write_bytes(b"server b")
    with Ganesha(tmp_path / "ga", a_dir).start() as a, Ganesha(tmp_path / "gb", b_dir).start() as b:
        assert {a.port, a.mnt_port}.isdisjoint({b.port, b.mnt_port})
        assert nfs_cat(a.url("who")) == b"server a"
        assert nfs_cat(b.url("who")) == b"server b"
        b.stop()
        # b unregistered NFS/MOUNT from rpcbind on exit; a is still reachable.
        assert nfs_cat(a.url("who")) == b"server a"


def test_stop_kill9_restart(server, tmp_path):
    (tmp_path / "src").write_bytes(b"survives restarts")
    nfs_cp(str(tmp_path / "src"), server.url("keep"))
    port = server.port
    assert server.stop() == 0
    assert "NFS EXIT: regular exit" in server.log_text()
    assert not _listening(port)

    server.start()
    assert server.port == port
    assert nfs_cat(server.url("keep")) == b"survives restarts"
    pid = server.pid
    server.kill9()
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert not _listening(port)

    server.restart()
    assert server.pid != pid
    assert nfs_cat(server.url("keep")) == b"survives restarts"


def test_refused_export_fails_start_with_reason(tmp_path):
    """Ganesha keeps running when the FSAL refuses an export; start() must
    notice, stop the server and say why."""
    g = Ganesha(tmp_path / "ganesha", tmp_path / "no-such-dir")
    try:
        with pytest.raises(RuntimeError) as e:
            g.start(timeout=20)
    finally:
        g.stop()
    assert "refused export /export" in str(e.value)
    assert "Could not create export for (/export)" in str(e.value)
    assert g.proc is None
