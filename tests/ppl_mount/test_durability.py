"""Durability and failure behaviour: fsync means the server has the data,
a server restart between WRITE and COMMIT is detected and repaired, and a
server that is gone turns into EIO after the timeout, then reconnects."""
import errno
import mmap
import os
import threading
import time

import pytest


def aligned(data):
    buf = mmap.mmap(-1, len(data))
    buf.write(data)
    return buf


def test_kill9_right_after_fsync(mount, mnt, backing):
    data = os.urandom(5 * 1024 * 1024 + 333)
    fd = os.open(os.path.join(mnt, "k9"), os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    mount.kill9()                       # the client dies; nothing more is sent
    with open(os.path.join(backing, "k9"), "rb") as f:
        assert f.read() == data
    try:
        os.close(fd)
    except OSError:
        pass                            # the dead mount may refuse the close


def test_server_restart_between_write_and_fsync_resends(server, mount, mnt, backing):
    """A server restart changes the write verifier. Simulate the data loss a
    real crash could cause (the backing file is emptied while the server is
    down): fsync must notice the new verifier and send the data again."""
    data = os.urandom(3 * 1024 * 1024)
    fd = os.open(os.path.join(mnt, "vf"), os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
    try:
        assert os.pwrite(fd, aligned(data), 0) == len(data)   # UNSTABLE, kept client-side
        server.kill9()
        with open(os.path.join(backing, "vf"), "r+b") as f:
            f.truncate(0)                                     # "lost" on the server
        # ganesha.nfsd stats every mount point while it starts, this one
        # included: that must not wait for the server (default 30 s timeout).
        # Ganesha's write verifier is its start time in whole seconds: a
        # restart within the second of the previous start is invisible to
        # every NFSv3 client. Make sure this one is a different second.
        time.sleep(1.1)
        t = time.monotonic()
        server.start()
        assert time.monotonic() - t < 15
        os.fsync(fd)
    finally:
        os.close(fd)
    with open(os.path.join(backing, "vf"), "rb") as f:
        assert f.read() == data
    assert "re-sending" in mount.tail_log(200)


@pytest.mark.mount_options("--timeout=2")
def test_server_gone_gives_eio_then_reconnects(server, mount, mnt, backing):
    data = os.urandom(200_000)
    fd = os.open(os.path.join(mnt, "gone"), os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
    try:
        os.pwrite(fd, aligned(data[:196608]), 0)
        server.kill9()
        t = time.monotonic()
        with pytest.raises(OSError) as ei:
            os.fsync(fd)                # must not claim durability
        assert ei.value.errno == errno.EIO
        with pytest.raises(OSError) as ei:
            os.stat(os.path.join(mnt, "does-not-matter"))
        assert ei.value.errno == errno.EIO
        elapsed = time.monotonic() - t
        assert 1.5 < elapsed < 15, elapsed  # two operations, 2 s timeout each
        server.start()
        os.stat(os.path.join(mnt, "gone"))  # reconnects by itself
        os.fsync(fd)                        # the kept data is still committed
    finally:
        os.close(fd)
    with open(os.path.join(backing, "gone"), "rb") as f:
        assert f.read() == data[:196608]


@pytest.mark.mount_options("--hard")
def test_hard_mode_waits_for_the_server(server, mount, mnt, backing):
    with open(os.path.join(mnt, "h"), "w") as f:
        f.write("hard")
    server.kill9()
    result = {}

    def look():
        try:
            result["size"] = os.stat(os.path.join(mnt, "h")).st_size
        except OSError as e:
            result["error"] = e

    time.sleep(1.2)                     # past the kernel's attribute cache
    t = threading.Thread(target=look)
    t.start()
    t.join(4)
    assert t.is_alive(), f"hard mode gave up: {result}"
    server.start()
    t.join(30)
    assert not t.is_alive() and result == {"size": 4}, result
