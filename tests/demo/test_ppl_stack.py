"""scripts/ppl-stack.py: `up` brings the whole stack up as its own children
and supervises it, `down` stops exactly that by pid file (idempotent), and
a second `up` on the same state directory finds the data again (the
storage node restarts from its files and pool). The export is mounted by
the kernel's NFS client where the host has one: on a host without, asking
for it is refused before anything starts; on a host with one, the same
round trip runs over it."""
import contextlib
import os
import subprocess
import sys
import time

import pytest

from lib import paths

sys.path.insert(0, os.path.join(paths.REPO, "scripts"))
import kernel_nfs  # noqa: E402

SCRIPT = os.path.join(paths.REPO, "scripts", "ppl-stack.py")


def stack(*args, **kw):
    return subprocess.run([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, env=dict(os.environ, PPL_BUILD_DIR=paths.build_dir()), **kw)


def bring_up(d, pmem, client="ppl-mount"):
    p = subprocess.Popen([sys.executable, SCRIPT, "up", "--dir", d, "--pmem", pmem, "--buffer-pool-mb", "16",
                          "--stats-interval", "0", "--client", client], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, PPL_BUILD_DIR=paths.build_dir()))
    lines = []
    deadline = time.time() + 180
    for line in p.stdout:
        lines.append(line)
        if line.startswith("up:"):
            return p, lines
        if time.time() > deadline:
            break
    p.kill()
    p.wait()
    raise AssertionError("ppl-stack.py up did not come up:\n" + "".join(lines[-40:]))


@contextlib.contextmanager
def running(d, pmem, client="ppl-mount"):
    """`up` for the body (which ends with bring_down); stopped by pid
    whatever happens in it."""
    p, lines = bring_up(d, pmem, client)
    try:
        yield p, lines
    finally:
        if p.poll() is None:
            p.terminate()
            p.wait(120)


def sql(d, statement):
    r = subprocess.run(["mariadb", "--no-defaults", "-uroot", f"--socket={d}/mariadb/mysqld.sock", "-N", "-B",
                        "-e", statement], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
    return r.stdout


def bring_down(d, p):
    r = stack("down", "--dir", d)
    assert r.returncode == 0 and "stopped" in r.stdout, r.stdout
    rest = p.stdout.read()
    assert p.wait(60) == 0, rest
    assert "down: mariadbd stopped" in rest, rest
    assert not os.listdir(os.path.join(d, "pids"))


def test_up_down_restart(tmp_path, build_dir):
    if not os.path.exists("/dev/fuse"):
        pytest.fail("needs /dev/fuse (see DESIGN.md, Clients)")
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        if "PPL_SANITIZE:BOOL=ON" in f.read():
            pytest.skip("MariaDB runs only with the normal build's libcatcher.so")
    d, pmem = str(tmp_path / "stack"), str(tmp_path / "pmem")
    os.makedirs(pmem)
    assert stack("status", "--dir", d).returncode == 3
    with running(d, pmem) as (p, _):
        assert stack("status", "--dir", d).stdout.count("pid ") == 4
        again = stack("up", "--dir", d, "--pmem", pmem)
        assert again.returncode != 0 and "already up" in again.stdout, again.stdout
        sql(d, "CREATE DATABASE t; CREATE TABLE t.a (id INT PRIMARY KEY, v VARCHAR(100)) ENGINE=InnoDB")
        sql(d, "INSERT INTO t.a SELECT seq, REPEAT('x', 100) FROM t.seq_1_to_5000")
        bring_down(d, p)
    r = stack("down", "--dir", d)
    assert r.returncode == 0 and "not running" in r.stdout      # idempotent
    with running(d, pmem) as (p, _):
        assert sql(d, "SELECT COUNT(*), SUM(LENGTH(v)) FROM t.a").split() == ["5000", "500000"]
        assert sql(d, "CHECK TABLE t.a").split()[-1] == "OK"
        bring_down(d, p)


def test_kernel_nfs_client(tmp_path, build_dir):
    d, pmem = str(tmp_path / "stack"), str(tmp_path / "pmem")
    os.makedirs(pmem)
    ok, why = kernel_nfs.available()
    if not ok:
        r = stack("up", "--dir", d, "--pmem", pmem, "--client", "kernel")
        assert r.returncode != 0 and why in r.stdout and "--client ppl-mount" in r.stdout, r.stdout
        assert not os.path.exists(d), "a refused `up` made its state directory"
        return
    with running(d, pmem, client="kernel") as (p, lines):
        assert "kernel NFS client" in lines[-1], lines[-1]
        with open("/proc/self/mounts") as f:
            assert any(line.split()[1] == os.path.join(d, "mnt") and line.split()[2].startswith("nfs") for line in f)
        sql(d, "CREATE DATABASE t; CREATE TABLE t.a (id INT PRIMARY KEY) ENGINE=InnoDB")
        sql(d, "INSERT INTO t.a SELECT seq FROM t.seq_1_to_1000")
        assert sql(d, "CHECK TABLE t.a").split()[-1] == "OK"
        bring_down(d, p)
