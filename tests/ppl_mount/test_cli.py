"""The command line: --help documents every option, bad input fails with a
clear message, background mode detaches and exits cleanly on unmount."""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

OPTIONS = ["--foreground", "--debug", "--connections", "--threads", "--timeout", "--hard",
           "--sync-writes", "--direct-io", "--attr-timeout", "--rsize", "--wsize",
           "--max-dirty", "-o OPT", "--help", "--version", "nfsport=", "mountport="]


def run(binary, *args, timeout=30):
    return subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def test_help_documents_every_option(ppl_mount_binary):
    r = run(ppl_mount_binary, "--help")
    assert r.returncode == 0
    for opt in OPTIONS:
        assert opt in r.stdout, f"--help does not mention {opt}"


@pytest.mark.parametrize("args, message", [
    ((), "need exactly two arguments"),
    (("http://127.0.0.1/x", "/tmp"), "is not an nfs:// URL"),
    (("nfs://127.0.0.1/x", "/tmp", "--connections=0"), "--connections must be an integer"),
    (("nfs://127.0.0.1/x", "/tmp", "--timeout=soon"), "--timeout must be seconds"),
    (("nfs://127.0.0.1/x", "/tmp", "--no-such-option"), "Try 'ppl-mount --help'"),
])
def test_bad_arguments(ppl_mount_binary, args, message):
    r = run(ppl_mount_binary, *args)
    assert r.returncode == 2
    assert message in r.stdout


def test_no_server_fails_within_timeout(ppl_mount_binary, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]      # nobody listens once the socket is closed
    r = run(ppl_mount_binary, f"nfs://127.0.0.1/export?nfsport={port}&mountport={port}",
            str(tmp_path), "--timeout=2", "-f")
    assert r.returncode == 1
    assert "cannot connect" in r.stdout


def test_unknown_export_is_refused(ppl_mount_binary, server, tmp_path):
    url = server.url().replace("/export/", "/no-such-export/")
    r = run(ppl_mount_binary, url, str(tmp_path), "--timeout=5", "-f")
    assert r.returncode == 1
    assert "mounting" in r.stdout and "failed" in r.stdout


# A small supervisor, itself a direct child of the test: it becomes the
# subreaper of the detached ppl-mount, so the daemon is reaped by pid here
# instead of becoming an orphan of PID 1.
SUPERVISOR = textwrap.dedent("""
    import ctypes, os, subprocess, sys, time
    binary, url, mnt, backing = sys.argv[1:5]
    PR_SET_CHILD_SUBREAPER = 36
    assert ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    rc = subprocess.run([binary, url, mnt]).returncode
    assert rc == 0, f"ppl-mount exited {rc}"
    mounted = lambda: any(l.split()[1] == mnt for l in open("/proc/self/mounts"))
    assert mounted(), "not mounted after the command returned"
    with open(os.path.join(mnt, "bg"), "w") as f:
        f.write("background")
    assert open(os.path.join(backing, "bg")).read() == "background"
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            print("reaped", pid, os.waitstatus_to_exitcode(status))
            sys.exit(0)
        time.sleep(0.05)
    sys.exit("the detached ppl-mount did not exit after fusermount3 -u")
""")


def test_background_mode(ppl_mount_binary, server, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([sys.executable, "-c", SUPERVISOR, ppl_mount_binary, server.url(),
                        str(mnt), server.export_path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert "reaped" in r.stdout and r.stdout.strip().endswith(" 0"), r.stdout


@pytest.mark.mount_options("--sync-writes", "--direct-io", "--connections=1", "--wsize=4")
def test_sync_writes_direct_io_small_wsize(mnt, backing):
    data = os.urandom(100_003)          # 25 WRITEs of 4 KiB, FILE_SYNC
    with open(os.path.join(mnt, "s"), "wb") as f:
        f.write(data)
    with open(os.path.join(backing, "s"), "rb") as f:
        assert f.read() == data
    with open(os.path.join(mnt, "s"), "rb") as f:
        assert f.read() == data
