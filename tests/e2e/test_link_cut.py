"""The link between the compute node and the storage node cut for a while
under load, and restored (issue 21, item 2): in a network namespace this
test makes, on that namespace's loopback only, the storage node's ports
are cut (packets dropped silently; tests/lib/netns.py), first all of them,
then only the elision port. The hard mount makes MariaDB wait, libcatcher
gets no answer and writes its pages itself, nothing is lost, and elision
resumes once the link is back. tests/lib/linkcut.py is the driver, run
inside the namespace; this test reads its verdict."""
import sys

import pytest

from lib import netns, paths
from lib.stack import require_stack

CUT_SECONDS = 15


def test_link_cut_loses_nothing_and_elision_resumes(tmp_path):
    require_stack()
    try:
        with netns.Netns("ppl-linkcut") as ns:
            r = ns.run([sys.executable, f"{paths.REPO}/tests/lib/linkcut.py", str(tmp_path), str(CUT_SECONDS)],
                       timeout=1200)
    except netns.Unavailable as e:
        pytest.skip(f"no private network namespace here: {e}")
    print(r.stdout)
    assert r.returncode == 0 and "LINK CUT OK" in r.stdout, r.stdout[-4000:] + r.stderr[-6000:]
