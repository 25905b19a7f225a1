"""POSIX behaviour of each operation through ppl-mount, pjdfstest-style:
each case does one thing through the mount and checks the result both
through the mount and in the server's backing directory."""
import ctypes
import errno
import fcntl
import os
import stat
import subprocess
import time

import pytest


def expect_errno(code, fn, *args):
    with pytest.raises(OSError) as ei:
        fn(*args)
    assert ei.value.errno == code, f"{fn.__name__}{args}: {ei.value}"


def test_create_write_read(mnt, backing):
    p = os.path.join(mnt, "f")
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)
    assert os.write(fd, b"hello") == 5
    os.close(fd)
    st = os.stat(p)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_size == 5
    with open(os.path.join(backing, "f"), "rb") as f:
        assert f.read() == b"hello"
    expect_errno(errno.EEXIST, os.open, p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    expect_errno(errno.ENOENT, os.stat, os.path.join(mnt, "missing"))
    expect_errno(errno.ENOENT, os.open, os.path.join(mnt, "missing"), os.O_RDONLY)


def test_open_trunc_and_append(mnt, backing):
    p = os.path.join(mnt, "t")
    with open(p, "wb") as f:
        f.write(b"0123456789")
    with open(p, "ab") as f:
        f.write(b"ab")
    with open(os.path.join(backing, "t"), "rb") as f:
        assert f.read() == b"0123456789ab"
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    assert os.path.getsize(os.path.join(backing, "t")) == 0


def test_mkdir_rmdir_readdir(mnt, backing):
    d = os.path.join(mnt, "d")
    os.mkdir(d, 0o750)
    assert stat.S_IMODE(os.stat(os.path.join(backing, "d")).st_mode) == 0o750
    expect_errno(errno.EEXIST, os.mkdir, d)
    names = {f"e{i:04d}" for i in range(600)}
    for n in names:
        open(os.path.join(d, n), "w").close()
    os.mkdir(os.path.join(d, "sub"))
    listed = set(os.listdir(d))
    assert listed == names | {"sub"}
    kinds = {e.name: e.is_dir() for e in os.scandir(d)}
    assert kinds["sub"] is True and kinds["e0000"] is False
    expect_errno(errno.ENOTEMPTY, os.rmdir, d)
    expect_errno(errno.ENOTDIR, os.listdir, os.path.join(d, "e0000"))
    for n in names:
        os.unlink(os.path.join(d, n))
    os.rmdir(os.path.join(d, "sub"))
    assert os.listdir(d) == []
    os.rmdir(d)
    assert not os.path.exists(os.path.join(backing, "d"))
    expect_errno(errno.ENOENT, os.rmdir, d)


def test_unlink(mnt, backing):
    p = os.path.join(mnt, "u")
    open(p, "w").close()
    os.unlink(p)
    assert not os.path.exists(os.path.join(backing, "u"))
    expect_errno(errno.ENOENT, os.unlink, p)
    os.mkdir(os.path.join(mnt, "ud"))
    expect_errno(errno.EISDIR, os.unlink, os.path.join(mnt, "ud"))


def test_rename(mnt, backing):
    a, b = os.path.join(mnt, "a"), os.path.join(mnt, "b")
    with open(a, "w") as f:
        f.write("A")
    with open(b, "w") as f:
        f.write("B")
    ino = os.stat(a).st_ino
    os.rename(a, b)                      # replaces b atomically
    assert not os.path.exists(a)
    assert os.stat(b).st_ino == ino
    with open(os.path.join(backing, "b")) as f:
        assert f.read() == "A"
    os.mkdir(os.path.join(mnt, "rd"))
    os.rename(b, os.path.join(mnt, "rd", "c"))   # across directories
    assert os.listdir(os.path.join(backing, "rd")) == ["c"]
    os.rename(os.path.join(mnt, "rd"), os.path.join(mnt, "rd2"))
    assert os.path.isfile(os.path.join(backing, "rd2", "c"))
    expect_errno(errno.ENOENT, os.rename, a, b)


def test_link(mnt, backing):
    a, b = os.path.join(mnt, "la"), os.path.join(mnt, "lb")
    with open(a, "w") as f:
        f.write("x")
    os.link(a, b)
    assert os.stat(a).st_nlink == 2
    assert os.stat(a).st_ino == os.stat(b).st_ino
    assert os.stat(os.path.join(backing, "la")).st_ino == os.stat(os.path.join(backing, "lb")).st_ino
    with open(b, "a") as f:
        f.write("y")
    with open(a) as f:
        assert f.read() == "xy"
    os.unlink(a)
    assert os.stat(b).st_nlink == 1
    expect_errno(errno.EEXIST, os.link, b, b)


def test_symlink_readlink(mnt, backing):
    target = "some/where/../else"
    p = os.path.join(mnt, "sl")
    os.symlink(target, p)
    assert os.readlink(p) == target
    assert os.readlink(os.path.join(backing, "sl")) == target
    assert stat.S_ISLNK(os.lstat(p).st_mode)
    with open(os.path.join(mnt, "real"), "w") as f:
        f.write("via link")
    os.symlink("real", os.path.join(mnt, "sl2"))
    with open(os.path.join(mnt, "sl2")) as f:
        assert f.read() == "via link"
    expect_errno(errno.EINVAL, os.readlink, os.path.join(mnt, "real"))


def test_chmod_chown(mnt, backing):
    p = os.path.join(mnt, "perm")
    open(p, "w").close()
    os.chmod(p, 0o4711)
    assert stat.S_IMODE(os.stat(os.path.join(backing, "perm")).st_mode) == 0o4711
    os.chmod(p, 0o600)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    os.chown(p, 1234, 5678)
    st = os.stat(os.path.join(backing, "perm"))
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert (os.stat(p).st_uid, os.stat(p).st_gid) == (1234, 5678)


def test_truncate(mnt, backing):
    p = os.path.join(mnt, "tr")
    with open(p, "wb") as f:
        f.write(b"abcdef")
    os.truncate(p, 3)
    with open(os.path.join(backing, "tr"), "rb") as f:
        assert f.read() == b"abc"
    os.truncate(p, 100000)              # grows with zeros
    with open(p, "rb") as f:
        data = f.read()
    assert data == b"abc" + b"\0" * (100000 - 3)
    fd = os.open(p, os.O_RDWR)
    os.ftruncate(fd, 1)
    os.close(fd)
    assert os.path.getsize(os.path.join(backing, "tr")) == 1


def test_truncate_after_unsynced_write(mnt, backing):
    """Kept (uncommitted) data must not come back past a later truncate."""
    p = os.path.join(mnt, "tw")
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    os.pwrite(fd, b"z" * 50000, 0)
    os.ftruncate(fd, 10)
    os.fsync(fd)
    os.close(fd)
    with open(os.path.join(backing, "tw"), "rb") as f:
        assert f.read() == b"z" * 10


def test_utimens(mnt, backing):
    p = os.path.join(mnt, "tm")
    open(p, "w").close()
    os.utime(p, ns=(1_000_000_123_000_000, 2_000_000_456_000_000))
    st = os.stat(os.path.join(backing, "tm"))
    assert st.st_atime_ns == 1_000_000_123_000_000
    assert st.st_mtime_ns == 2_000_000_456_000_000
    before = time.time()
    os.utime(p)                          # "now", set by the server
    assert abs(os.stat(os.path.join(backing, "tm")).st_mtime - before) < 60


def test_statfs(mnt, backing):
    ours, theirs = os.statvfs(mnt), os.statvfs(backing)
    assert ours.f_blocks * ours.f_frsize == pytest.approx(theirs.f_blocks * theirs.f_frsize, rel=0.01)
    assert ours.f_bavail > 0 and ours.f_namemax == 255


def _fallocate():
    # The fallocate(2) system call itself: glibc's posix_fallocate() would
    # hide EOPNOTSUPP by writing zeros.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

    def call(fd, mode, off, length):
        ctypes.set_errno(0)
        rc = libc.fallocate(fd, mode, off, length)
        return 0 if rc == 0 else ctypes.get_errno()
    return call


FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def test_fallocate_grows_the_file_with_zeros(mnt, backing):
    fallocate = _fallocate()
    fd = os.open(os.path.join(mnt, "fa"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b"head")
        assert fallocate(fd, 0, 4096, 1 << 20) == 0
        assert os.fstat(fd).st_size == 4096 + (1 << 20)
        assert os.stat(os.path.join(backing, "fa")).st_size == 4096 + (1 << 20)
        assert os.pread(fd, 8, 0) == b"head" + bytes(4)
        assert os.pread(fd, 1 << 20, 4096) == bytes(1 << 20)
        # within the file: nothing changes, the data stays
        os.pwrite(fd, b"tail", 4096 + (1 << 20) - 4)
        assert fallocate(fd, 0, 0, 8192) == 0
        assert os.fstat(fd).st_size == 4096 + (1 << 20)
        assert os.pread(fd, 4, 4096 + (1 << 20) - 4) == b"tail"
    finally:
        os.close(fd)


def test_fallocate_refuses_what_it_cannot_do(mnt, backing):
    fallocate = _fallocate()
    fd = os.open(os.path.join(mnt, "fb"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b"x" * 8192)
        # no reservation without a size change, no holes over NFSv3
        assert fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20) == errno.EOPNOTSUPP
        assert fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == errno.EOPNOTSUPP
        # more than the server has free: ENOSPC, and the file is as it was
        free = os.statvfs(backing).f_bavail * os.statvfs(backing).f_frsize
        assert fallocate(fd, 0, 0, free * 4 + (1 << 40)) == errno.ENOSPC
        assert os.fstat(fd).st_size == 8192
        assert os.stat(os.path.join(backing, "fb")).st_size == 8192
        assert os.pread(fd, 8192, 0) == b"x" * 8192
    finally:
        os.close(fd)


def test_fsync_fdatasync(mnt, backing):
    fd = os.open(os.path.join(mnt, "fs"), os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"durable")
    os.fsync(fd)
    os.write(fd, b"!")
    os.fdatasync(fd)
    os.close(fd)
    with open(os.path.join(backing, "fs"), "rb") as f:
        assert f.read() == b"durable!"
    dfd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)


def test_posix_locks_are_local(mnt):
    """fcntl locks conflict between processes on this mount (kernel-local)."""
    p = os.path.join(mnt, "lk")
    open(p, "w").close()
    fd = os.open(p, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    code = ("import fcntl,os,sys\nfd=os.open(sys.argv[1],os.O_RDWR)\n"
            "try:\n fcntl.lockf(fd,fcntl.LOCK_EX|fcntl.LOCK_NB)\nexcept OSError:\n sys.exit(3)\n")
    r = subprocess.run(["python3", "-c", code, p])
    assert r.returncode == 3, "a second process got a conflicting lock"
    fcntl.lockf(fd, fcntl.LOCK_UN)
    r = subprocess.run(["python3", "-c", code, p])
    assert r.returncode == 0
    os.close(fd)


def test_mkfifo(mnt, backing):
    os.mkfifo(os.path.join(mnt, "fifo"), 0o600)
    assert stat.S_ISFIFO(os.stat(os.path.join(backing, "fifo")).st_mode)


def test_o_direct_roundtrip(mnt, backing):
    import mmap
    buf = mmap.mmap(-1, 1 << 20)
    buf.write(os.urandom(1 << 20))
    fd = os.open(os.path.join(mnt, "dio"), os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
    assert os.pwrite(fd, buf, 4096) == 1 << 20
    back = mmap.mmap(-1, 1 << 20)
    assert os.preadv(fd, [back], 4096) == 1 << 20
    os.close(fd)
    assert back[:] == buf[:]
    with open(os.path.join(backing, "dio"), "rb") as f:
        assert f.read() == b"\0" * 4096 + buf[:]


def test_unlink_while_open_keeps_the_file_until_close(mnt, backing):
    p = os.path.join(mnt, "open-unlinked")
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"still here")
    os.unlink(p)
    assert not os.path.exists(p)
    assert "open-unlinked" not in os.listdir(mnt)
    assert os.pread(fd, 100, 0) == b"still here"      # the open file lives on
    os.pwrite(fd, b"!", 10)
    os.fsync(fd)
    assert os.fstat(fd).st_size == 11
    hidden = [n for n in os.listdir(backing) if n.startswith(".ppl-mount-hidden-")]
    assert len(hidden) == 1
    os.close(fd)
    deadline = time.time() + 10                         # release is asynchronous
    while os.listdir(backing) and time.time() < deadline:
        time.sleep(0.05)
    assert os.listdir(backing) == []


def test_close_then_unlink_then_rmdir(mnt, backing):
    """rm -rf right after writing: the kernel's asynchronous RELEASE must not
    turn a closed file into a hidden one that keeps the directory busy."""
    import threading
    errors = []

    def worker(t):
        try:
            for round_ in range(3):
                d = os.path.join(mnt, f"rr{t}-{round_}")
                os.mkdir(d)
                for i in range(60):
                    p = os.path.join(d, f"f{i}")
                    with open(p, "wb") as f:
                        f.write(b"x" * 5000)
                    os.link(p, p + ".l")
                    os.unlink(p)
                    assert os.stat(p + ".l").st_nlink == 1
                    os.unlink(p + ".l")
                os.rmdir(d)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert os.listdir(backing) == []
