"""Large, unaligned and concurrent I/O through ppl-mount, checked byte for
byte against the server's backing directory."""
import mmap
import os
import random
import re
import signal
import threading
import time


def backing_bytes(backing, name):
    with open(os.path.join(backing, name), "rb") as f:
        return f.read()


def test_large_sequential(mnt, backing):
    data = os.urandom(9 * 1024 * 1024 + 12345)     # several wsize pieces, odd tail
    with open(os.path.join(mnt, "large"), "wb") as f:
        f.write(data)
    assert backing_bytes(backing, "large") == data
    with open(os.path.join(mnt, "large"), "rb") as f:
        assert f.read() == data


def test_unaligned_random_writes_match_a_model(mnt, backing):
    rnd = random.Random(6)
    size = 3 * 1024 * 1024
    model = bytearray(size)
    fd = os.open(os.path.join(mnt, "unaligned"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        for _ in range(300):
            off = rnd.randrange(size - 1)
            n = rnd.randint(1, min(size - off, 300_000))
            chunk = rnd.randbytes(n)
            assert os.pwrite(fd, chunk, off) == n
            model[off:off + n] = chunk
        os.fsync(fd)
        end = os.fstat(fd).st_size
        for _ in range(100):
            off = rnd.randrange(end)
            n = rnd.randint(1, 2_000_000)
            assert os.pread(fd, n, off) == bytes(model[off:min(off + n, end)])
    finally:
        os.close(fd)
    assert backing_bytes(backing, "unaligned") == bytes(model[:end])


def test_read_past_eof_and_holes(mnt, backing):
    fd = os.open(os.path.join(mnt, "holes"), os.O_CREAT | os.O_RDWR, 0o644)
    os.pwrite(fd, b"end", 5_000_001)
    assert os.pread(fd, 10, 5_000_001) == b"end"
    assert os.pread(fd, 10, 6_000_000) == b""
    assert os.pread(fd, 3_000_000, 2_000_004) == b"\0" * 2_999_997 + b"end"
    os.close(fd)
    assert backing_bytes(backing, "holes") == b"\0" * 5_000_001 + b"end"


def test_o_direct_16k_pages_many_threads(mnt, backing):
    """InnoDB-like: page-sized O_DIRECT writes and reads from many threads
    into several files at once; every page must land exactly."""
    page, pages, nfiles, nthreads = 16384, 96, 4, 8
    fds = [os.open(os.path.join(mnt, f"ts{i}.ibd"), os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
           for i in range(nfiles)]
    expect = {}
    lock = threading.Lock()
    errors = []

    def worker(t):
        try:
            rnd = random.Random(t)
            buf = mmap.mmap(-1, page)
            for k in range(pages):
                f = rnd.randrange(nfiles)
                slot = t * pages + k
                body = (f"{f}:{slot}:".encode() * page)[:page]
                buf.seek(0)
                buf.write(body)
                assert os.pwrite(fds[f], buf, slot * page) == page
                with lock:
                    expect[(f, slot)] = body
                back = mmap.mmap(-1, page)
                assert os.preadv(fds[f], [back], slot * page) == page
                assert back[:] == body
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for fd in fds:
        os.fsync(fd)
        os.close(fd)
    assert not errors, errors
    for f in range(nfiles):
        data = backing_bytes(backing, f"ts{f}.ibd")
        for (ff, slot), body in expect.items():
            if ff == f:
                assert data[slot * page:(slot + 1) * page] == body, (f, slot)


def test_concurrent_appenders_to_distinct_files(mnt, backing):
    def writer(i, out):
        data = os.urandom(1_500_000 + i)
        with open(os.path.join(mnt, f"w{i}"), "wb") as f:
            for off in range(0, len(data), 7777):
                f.write(data[off:off + 7777])
        out[i] = data

    out = {}
    threads = [threading.Thread(target=writer, args=(i, out)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, data in out.items():
        assert backing_bytes(backing, f"w{i}") == data


def _report_lines(mount):
    with open(mount.log) as f:
        return [l for l in f if "reads since the last report:" in l]


def _wait_report(mount, n):
    deadline = time.time() + 10
    while time.time() < deadline:
        lines = _report_lines(mount)
        if len(lines) >= n:
            return lines[n - 1]
        time.sleep(0.05)
    raise AssertionError("no read figures after SIGUSR1:\n" + mount.tail_log())


def test_sigusr1_reports_read_latency_per_interval(mount, mnt):
    """SIGUSR1 logs the page-sized READs since the last report (the figure
    bench-twonode takes before and after a timed run) and does not end the
    mount; a READ over 64 KiB is counted apart."""
    page = 16384
    path = os.path.join(mnt, "t.ibd")
    with open(path, "wb") as f:
        f.write(os.urandom(page * 80))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, page * 80)
    try:
        mount.proc.send_signal(signal.SIGUSR1)
        _wait_report(mount, 1)
        for i in range(25):
            assert os.preadv(fd, [memoryview(buf)[:page]], i * page) == page
        assert os.preadv(fd, [buf], 0) == page * 80   # 1.25 MiB: one larger read, or pieces of it
        mount.proc.send_signal(signal.SIGUSR1)
        line = _wait_report(mount, 2)
        m = re.search(r"(\d+) of at most 64 KiB, p50 (\d+) us, p90 \d+ us, p99 (\d+) us, "
                      r"p99.9 \d+ us; (\d+) larger", line)
        assert m, line
        small, p50, p99, larger = map(int, m.groups())
        # the kernel may split the big read into pieces of its own size
        assert small >= 25 and larger + (small - 25) >= 1, line
        assert 0 < p50 <= p99, line
        mount.proc.send_signal(signal.SIGUSR1)
        line = _wait_report(mount, 3)
        assert ": 0 of at most 64 KiB" in line and "; 0 larger" in line, line
    finally:
        os.close(fd)
    assert mount.proc.poll() is None, "SIGUSR1 ended the mount"
