"""The README's main job, scripts/pushdown-demo.py, on a small dataset:
MariaDB + libcatcher over ppl-mount and FSAL_PPL in a private network
namespace, once eliding and once with full page writes. The script itself
fails unless both runs pass CHECK TABLE and keep their table checksums
across a MariaDB restart (reads served by the storage node); here the
figures it reports must also say that pages were elided, that the
full-writes run elided none, and that eliding sent far fewer bytes."""
import json
import os
import subprocess
import sys

import pytest

from lib import paths


def test_pushdown_demo(tmp_path, build_dir):
    if not os.path.exists("/dev/fuse"):
        pytest.fail("needs /dev/fuse (see DESIGN.md, Clients)")
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        if "PPL_SANITIZE:BOOL=ON" in f.read():
            pytest.skip("MariaDB runs only with the normal build's libcatcher.so")
    figures = tmp_path / "figures.json"
    r = subprocess.run([sys.executable, os.path.join(paths.REPO, "scripts", "pushdown-demo.py"),
                        "--seconds", "8", "--tables", "2", "--table-size", "3000", "--report", "4",
                        "--pool-mb", "64", "--work", str(tmp_path / "work"), "--json", str(figures)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200,
                       env=dict(os.environ, PPL_BUILD_DIR=build_dir))
    assert r.returncode == 0, r.stdout[-6000:]
    assert "both runs verified" in r.stdout, r.stdout[-3000:]
    figs = json.loads(figures.read_text())
    runs = figs["runs"]
    e, f = runs["elide"], runs["passthrough"]
    assert e["trx"] > 0 and f["trx"] > 0, runs
    assert f["elided"] == 0 and f["page_writes"] > 0 and f["pages"] >= f["page_writes"] * 4096, f
    assert e["page_writes"] > 0 and e["elided"] >= e["page_writes"] // 2, e
    sent_e = e["log"] + e["pages"] + e["questions"]
    sent_f = f["log"] + f["pages"] + f["questions"]
    assert sent_e * 5 < sent_f, runs
    if figs["netns"]:
        # what crossed the namespace's loopback includes every byte libcatcher counted
        assert e["link"] > sent_e and f["link"] > sent_f, runs
