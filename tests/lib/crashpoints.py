"""Crashes of the storage node at its named crash points (ppl/crash.h),
under load, with the whole stack: MariaDB + libcatcher eliding, ppl-mount
on a hard mount, FSAL_PPL built with the points (plugins-crash).

A ledger client commits one row at a time and TPC-C runs beside it (the
same workload as test_crash_ledger.py), on a 1 MiB pool so that pages
are kept in the pool, go over its cap, and make the cleaner run. For each
(point, N) of a plan, the running storage node is armed with `ppl-inspect
live POOL crash-at POINT:N` and the driver waits for it to kill itself
there; then it starts ganesha.nfsd again (MariaDB waits on the hard mount
meanwhile and goes on, never restarted) and checks that every
acknowledged ledger row is there, CHECK TABLE passes on every table, and
TPC-C's consistency conditions hold. Points that only a start passes
(a doublewrite image written back, ingest starting) are armed through
PPL_CRASH_AT in the restarted node's environment, right after a crash
that leaves work for them: the node dies again in its own recovery.

Used by tests/e2e/test_crash_points.py (a subset) and
scripts/crash-points.py (the full run)."""
import os
import re
import time

from lib import paths
from lib.ganesha import GaneshaError
from lib.ledger import OPTIONS, Ledger, Load, check, final_check, prepare
from lib.stack import Stack

HEADER = os.path.join(paths.REPO, "applier", "include", "ppl", "crash.h")

# Passed only while a storage node starts: armed through its environment,
# after a crash at the point that leaves them work.
# A page write reaches the storage node when libcatcher writes the page
# itself: while the elision service is unreachable (it lost its
# connection when the node died), or refused. A restart after a crash at
# elision_ack meets the writes of pages libcatcher could not ask about.
AT_RESTART = {"dw_restored": "dw_staged", "ingest_started": "log_written", "page_write_taken": "elision_ack"}


def points():
    """The crash points' names, in ppl/crash.h's order."""
    with open(HEADER) as f:
        text = f.read()
    text = text[text.index("#define PPL_CRASH_POINT_LIST(X)"):]
    names = re.findall(r'X\([A-Z_]+, "(\w+)",', text)
    assert names, f"no crash points found in {HEADER}"
    return names


def live_points():
    return [p for p in points() if p not in AT_RESTART]


class Result:
    def __init__(self, point, n, how):
        self.point, self.n, self.how = point, n, how
        self.crashed = False           # the node killed itself at (point, n)
        self.seconds = 0.0             # from arming to the crash
        self.check_s = 0.0             # restart and checks
        self.error = None

    def row(self):
        state = "crashed" if self.crashed else "not reached"
        return f"{self.point}:{self.n:<5} {self.how:<8} {state:<12} {self.seconds:6.1f} s {self.check_s:6.1f} s"


class Driver:
    def __init__(self, base, log=print, reach_timeout=45):
        self.log, self.reach_timeout = log, reach_timeout
        self.s = Stack(base, options=OPTIONS, pool_size="1M",
                       pool_args=["--max-per-page", "2048", "--dw-page-size", "16384"],
                       fsal_extra="Apply_Threads = 2; Max_Per_Page = 2048;", plugins="plugins-crash")
        self.results = []
        self.ledger = self.load = None
        self.populated = 0

    # -- the stack and its load ---------------------------------------
    def start(self):
        self.s.start()
        self.populated = prepare(self.s.db)
        self.ledger = Ledger(self.s.db, 1)
        self.ledger.start()
        self.load = Load(self.s.db)

    def finish(self):
        """Stops the load, checks a clean restart of MariaDB reads back
        what the crashes left, and stops everything."""
        try:
            assert self.ledger.is_alive(), "the ledger client lost its server"
            self.ledger.stop_event.set()
            self.ledger.join(60)
            self.load.stop()
            assert not self.load.failed, \
                f"{len(self.load.failed)} TPC-C run(s) failed across the crashes:\n{self.load.failed[0]}"
            final_check(self.s.db, self.populated, self.ledger.acked)
        finally:
            self.stop()
        self.s.assert_storage_clean()

    def run(self, todo, before_each=None):
        """start(), a crash at each (point, n) of todo, finish(); on a
        failure everything is stopped before it is raised. before_each(i)
        is called before the i-th crash (progress)."""
        ok = False
        try:
            self.start()
            for i, (point, n) in enumerate(todo):
                if before_each:
                    before_each(i)
                self.crash(point, n)
            self.finish()
            ok = True
        finally:
            if not ok:
                self.stop()

    def stop(self):
        if self.ledger:
            self.ledger.stop_event.set()
        if self.load:
            self.load.going.clear()
        self.s.stop()

    # -- one crash ----------------------------------------------------
    def _said(self, point, n):
        try:
            with open(self.s.g.stderr, errors="replace") as f:
                text = f.read()
        except OSError:
            return 0
        return text.count(f"PPL crash point {point} hit {n}: killing the process")

    def _restart(self, env=None):
        """ganesha.nfsd again on the same ports; with env, armed for its
        start. Returns whether it died while starting."""
        try:
            self.s.restart_storage(env)
        except GaneshaError:
            if env is None:
                raise
            return True
        return False

    def _wait_dead(self, timeout):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            p = self.s.g.proc
            if p is None or p.poll() is not None:
                return True
            assert self.ledger.is_alive(), "the ledger client lost its server (mariadbd gone?)"
            time.sleep(0.02)
        return False

    def _committing(self):
        """Waits until the ledger commits once more: each crash comes
        under load."""
        seen = len(self.ledger.acked)
        deadline = time.monotonic() + 60
        while len(self.ledger.acked) == seen and self.ledger.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.ledger.acked) > seen, "the ledger stopped committing (mariadbd gone?)"

    def _disarm(self, point):
        self.s.live("crash-at", f"{point}:{2 ** 62}")

    def _exit_status(self):
        p = self.s.g.proc
        return p.returncode if p is not None else self.s.g.last_exit

    def _died_at(self, r, said, t0):
        r.seconds = time.monotonic() - t0
        assert self._said(r.point, r.n) == said + 1, \
            (f"ganesha.nfsd died (exit status {self._exit_status()}), but not at crash point "
             f"{r.point}:{r.n}:\n{self.s.g.tail_log()}\nstderr:\n{self._stderr_tail()}")
        r.crashed = True

    def _stderr_tail(self, n=20):
        try:
            with open(self.s.g.stderr, errors="replace") as f:
                return "\n".join(f.read().splitlines()[-n:])
        except OSError as e:
            return f"(no stderr: {e})"

    def _live(self, point, n):
        """Arms the running node at (point, n) and waits for it to die
        there. Returns the Result; the node is left dead if it crashed."""
        r = Result(point, n, "live")
        self.results.append(r)
        self._committing()
        said, t0 = self._said(point, n), time.monotonic()
        armed = self.s.live("crash-at", f"{point}:{n}")
        assert armed.get("armed") == f"{point}:{n}", armed
        if self._wait_dead(self.reach_timeout):
            self._died_at(r, said, t0)
        else:
            self._disarm(point)
            r.seconds = time.monotonic() - t0
        return r

    def _checked(self, r):
        """Starts the dead node again, unarmed, and checks what survived."""
        t1 = time.monotonic()
        self._restart()
        check(self.s.db, list(self.ledger.acked))
        r.check_s = time.monotonic() - t1

    def crash(self, point, n):
        """One crash at (point, n) and the checks after it; a point of
        AT_RESTART follows a crash at the point that leaves it work (two
        results). Returns the (last) Result."""
        if point not in AT_RESTART:
            r = self._live(point, n)
            if r.crashed:
                self._checked(r)
            self.log(r.row())
            return r
        first = self._live(AT_RESTART[point], 1 + len(self.results) % 3)
        self.log(first.row())
        r = Result(point, n, "restart")
        self.results.append(r)
        if first.crashed:
            said, t0 = self._said(point, n), time.monotonic()
            died = self._restart(env={"PPL_CRASH_AT": f"{point}:{n}"}) or self._wait_dead(self.reach_timeout)
            if died:
                self._died_at(r, said, t0)
                self._checked(r)
            else:
                self._disarm(point)
                r.seconds = time.monotonic() - t0
                check(self.s.db, list(self.ledger.acked))
        self.log(r.row())
        return r


def plan(hits, restart_hits=(1,)):
    """(point, n) for every live point at every hit count in hits, the
    counts outermost so that consecutive crashes differ in kind; then the
    restart points."""
    out = [(p, n) for n in hits for p in live_points()]
    out += [(p, n) for n in restart_hits for p in AT_RESTART]
    return out
