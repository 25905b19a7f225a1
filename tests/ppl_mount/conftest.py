"""Fixtures for ppl-mount tests: one private ganesha.nfsd (FSAL_VFS) per
module, and per test a fresh ppl-mount in the foreground (a direct child)
with the test's own directory on the export.

    server   the lib.ganesha.Ganesha instance
    mount    the _mount.PplMount for this test (kill9(), tail_log())
    mnt      this test's directory through the mount
    backing  the same directory in the server's exported directory

@pytest.mark.mount_options("--timeout=2", ...) adds ppl-mount options."""
import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lib import paths  # noqa: E402
from lib.ganesha import Ganesha  # noqa: E402
from _mount import PplMount  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "mount_options(*opts): extra ppl-mount command-line options")


@pytest.fixture(scope="session")
def ppl_mount_binary():
    return paths.tool("ppl-mount")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        pytest.skip("needs /dev/fuse and fusermount3")
    base = tmp_path_factory.mktemp("ppl-mount")
    export = base / "export"
    export.mkdir()
    g = Ganesha(str(base / "ganesha"), str(export))
    g.start()
    yield g
    g.stop()


@pytest.fixture
def mount(request, server, ppl_mount_binary, tmp_path):
    if server.proc is None or server.proc.poll() is not None:
        server.start()          # an earlier test left it stopped
    marker = request.node.get_closest_marker("mount_options")
    options = list(marker.args) if marker else []
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    m = PplMount(ppl_mount_binary, server.url(), str(mountpoint), options=options,
                 log=str(tmp_path / "ppl-mount.log"))
    m.start()
    yield m
    rc = m.stop()
    if rc not in (0, -9, None):
        pytest.fail(f"ppl-mount exited with {rc}:\n{m.tail_log()}")


@pytest.fixture
def mnt(mount, request):
    d = os.path.join(mount.mountpoint, request.node.name.replace("/", "_"))
    os.mkdir(d)
    return d


@pytest.fixture
def backing(server, mnt):
    return os.path.join(server.export_path, os.path.basename(mnt))
