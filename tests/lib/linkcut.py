"""The compute-storage link cut under load, run inside a private network
namespace (tests/lib/netns.py; tests/e2e/test_link_cut.py starts it):

    python3 tests/lib/linkcut.py BASE CUT_SECONDS

The whole stack on the namespace's loopback, TPC-C and a ledger client
running; then
  1. every port of the storage node cut (NFS, MOUNT, elision) for
     CUT_SECONDS: MariaDB waits on the hard mount (it stays up; its page
     writes wait behind its log writes, and a question libcatcher asks
     goes unanswered, the page then written by MariaDB); once the link is
     back, commits go on and pages are elided again;
  2. only the elision port cut for CUT_SECONDS: commits go on all the
     while, libcatcher times out and writes its pages itself; once the
     port is back, pages are elided again;
and at the end every acknowledged ledger row is there, CHECK TABLE passes,
TPC-C's consistency conditions hold and the storage node logged no
failure. Prints one line per step; exits non-zero (with the reason) on
any failure. Every process is a child of this one, stopped by pid."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lib import netns  # noqa: E402
from lib.ledger import OPTIONS, Ledger, Load, check, prepare  # noqa: E402
from lib.stack import Stack  # noqa: E402

# libcatcher's refusals that mean "no answer from the storage node"
NO_ANSWER = ("timeout", "connection_lost", "unavailable")


def say(line):
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


class Run:
    def __init__(self, base):
        self.s = Stack(base, options=OPTIONS)
        self.link = netns.Link()
        self.ledger = self.load = None

    def commits(self):
        return len(self.ledger.acked)

    def wait_commits(self, n, timeout):
        seen, deadline = self.commits(), time.monotonic() + timeout
        while self.commits() < seen + n and time.monotonic() < deadline:
            assert self.ledger.is_alive(), "the ledger lost its server"
            time.sleep(0.1)
        assert self.commits() >= seen + n, f"{self.commits() - seen} commits in {timeout} s (wanted {n})"

    def catcher(self):
        t = self.s.catcher_stats()["total"]
        return t["elided"], sum(t.get("refused", {}).get(r, 0) for r in NO_ANSWER)

    def wait_elided(self, timeout):
        """Pages elided again: libcatcher asks and the storage node answers."""
        first, _ = self.catcher()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(1)
            now, _ = self.catcher()
            if now > first:
                return now - first
        raise AssertionError(f"no page elided in the {timeout} s after the link came back")

    def cut(self, ports, seconds, commits_go_on):
        elided0, unanswered0 = self.catcher()
        c0 = self.commits()
        self.link.cut(ports)
        say(f"cut ports {ports} for {seconds} s")
        try:
            time.sleep(seconds)
            assert self.s.db.proc.poll() is None, "mariadbd stopped while the link was cut"
            during = self.commits() - c0
        finally:
            self.link.restore()
        say(f"restored; {during} commits during the cut")
        if commits_go_on:
            assert during >= 10, f"only {during} commits while only the elision port was cut"
        self.wait_commits(20, timeout=180)
        _, unanswered = self.catcher()
        # With every port cut, MariaDB's log writes wait on the hard mount,
        # and so does every page write behind them (the log goes first):
        # libcatcher may have nothing to ask. With only the elision port
        # cut, pages are flushed and asked about all the while.
        if commits_go_on:
            assert unanswered > unanswered0, \
                "libcatcher never went without an answer during the cut (it must write those pages itself)"
        say(f"commits go on; {unanswered - unanswered0} page writes libcatcher made without an answer")
        say(f"elision resumed: {self.wait_elided(120)} page(s) elided")

    def main(self, seconds):
        self.s.start()
        populated = prepare(self.s.db)
        self.ledger = Ledger(self.s.db, 1)
        self.ledger.start()
        self.load = Load(self.s.db)
        self.wait_commits(20, timeout=120)
        say(f"stack up, {populated} TPC-C orders, elision on: {self.wait_elided(60)} page(s) elided")
        g = self.s.g
        self.cut([g.port, g.mnt_port, self.s.elision_port], seconds, commits_go_on=False)
        self.cut([self.s.elision_port], seconds, commits_go_on=True)
        self.ledger.stop_event.set()
        self.load.stop()
        self.ledger.join(60)
        assert not self.load.failed, f"a TPC-C run failed across the cuts:\n{self.load.failed[0]}"
        check(self.s.db, list(self.ledger.acked))
        say(f"checked: {len(self.ledger.acked)} acknowledged ledger rows, CHECK TABLE, TPC-C")
        self.s.db.stop()
        self.s.assert_storage_clean()

    def stop(self):
        self.link.restore()
        if self.ledger:
            self.ledger.stop_event.set()
        if self.load:
            self.load.going.clear()
        self.s.stop()


def main():
    base, seconds = sys.argv[1], float(sys.argv[2])
    netns.inside()
    r = Run(base)
    try:
        r.main(seconds)
    finally:
        r.stop()
    say("LINK CUT OK")


if __name__ == "__main__":
    main()
