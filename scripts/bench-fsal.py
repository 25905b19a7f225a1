#!/usr/bin/env python3
"""Benchmark: FSAL_PPL's redo ingest and rebuilt-page reads, against the
same NFS traffic on a plain FSAL_VFS export, in one run.

A backup of a private MariaDB is taken while sysbench oltp_write_only runs
(tests/fsal/test_fsal_oracle.py's recipe), so its data files are older than
its log. Each export (PPL over VFS, then VFS alone) gets the backup's data
files; the log is written over NFS (libnfs) in WRITE_KIB writes followed
by one COMMIT, and timed, each WRITE's reply too: on PPL every write is
parsed before it is acknowledged; on a third export, PPL with
Ingest_Behind = true, after, and the time until its parse caught up is
taken from its live stats (asked every 5 ms); both PPL exports have
elision on and their pools on tmpfs, so they differ by Ingest_Behind only. Then every page of every data file is read with one 16 KiB
READ each, timed one by one; on PPL the pages the log changed (those that
differ between the backup and `mariadb-backup --prepare`) come back
rebuilt. Then, on PPL only, its elision service is asked about those
pages, over and over for ELISION_SECONDS per row, by one client
connection (tests/libcatcher/bench_elision.c): first with an LSN one below
each page's (refused at once, no rebuild, no side effect), then with each
page's true LSN and checksum taken from the prepared oracle page (an ACK;
a page with pending records is rebuilt to answer; once acknowledged the
page counts as elided and the background workers may materialize it, after
which the answer is a read of its file), with 1 and with 16 questions in
flight. (A wrong checksum is not asked: it marks the page as diverged.)
Prints a Markdown table. Not a test.

usage: scripts/bench-fsal.py [--tables N] [--table-size N] [--seconds S] [--write-kib N]
                             [--elision-seconds S]
"""
import argparse
import json
import os
import shutil
import subprocess
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "fsal"))

from lib import paths, pmem, redo_blocks  # noqa: E402
from lib.ganesha import Ganesha, free_port  # noqa: E402
from lib.oracle import data_files, page_size_of, prepare  # noqa: E402
from _libnfs import Client  # noqa: E402
from test_fsal_oracle import make_backup  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


TOKEN = "bench-fsal"


def ask(port, questions, seconds, depth):
    """bench_elision's figures for one run of questions."""
    tool = os.path.join(paths.build_dir(), "tests", "libcatcher", "bench_elision")
    r = subprocess.run([tool, "127.0.0.1", str(port), TOKEN, questions, str(seconds), str(depth)],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def parse_done_s(pool, t0, timeout=120):
    """With Ingest_Behind: seconds from t0 until the storage node has
    parsed every log write it answered (its live stats, asked every 5 ms)."""
    end = time.time() + timeout
    while time.time() < end:
        r = subprocess.run([paths.tool("ppl-inspect"), "live", pool, "stats", "--json"],
                           capture_output=True, text=True)
        if r.returncode == 0 and json.loads(r.stdout).get("ingest_behind", {}).get("writes_waiting", 1) == 0:
            return time.perf_counter() - t0
        time.sleep(0.005)
    sys.exit("bench-fsal: the storage node did not finish parsing the log it answered within "
             f"{timeout} s")


def run(base, backup, log, fsal, plugins, write_kib, changed, elision=None, behind_pool=None):
    """elision: (port, true questions file, LSN-1 file, seconds), asked
    after the reads; their figures are returned last. behind_pool: the
    export has Ingest_Behind; the time until its parse caught up is
    measured too."""
    export = os.path.join(base, "export")
    shutil.copytree(backup, export, ignore=shutil.ignore_patterns("ib_logfile0"))
    answers = {}
    with Ganesha(os.path.join(base, "ganesha"), export, fsal=fsal, plugins_dir=plugins).start() as g:
        with Client(g.url("")) as c:
            fh = c.open("ib_logfile0", os.O_RDWR | os.O_CREAT)
            c.ftruncate(fh, len(log))           # InnoDB creates its log at full size
            chunk = write_kib << 10
            live_from, ck_off = live_split(log)
            # The log up to its checkpoint arrives as a copy (from byte 0:
            # the storage node waits, DESIGN I7); MariaDB's first write of
            # it, its checkpoint block, starts ingest at the checkpoint.
            for off in range(0, live_from, chunk):
                c.pwrite(fh, log[off:min(off + chunk, live_from)], off)
            c.fsync(fh)
            c.pwrite(fh, log[ck_off:ck_off + 64], ck_off)
            c.fsync(fh)
            # The rest is timed: MariaDB's live log writes, each parsed
            # on FSAL_PPL before its reply.
            t = time.perf_counter()
            write_us = []
            for off in range(live_from, len(log), chunk):
                tw = time.perf_counter()
                c.pwrite(fh, log[off:off + chunk], off)
                write_us.append((time.perf_counter() - tw) * 1e6)
            c.fsync(fh)
            ingest_s = time.perf_counter() - t
            parsed_s = parse_done_s(behind_pool, t) if behind_pool else ingest_s
            c.close_file(fh)
            lat_changed, lat_other = [], []
            for rel, path in data_files(export).items():
                ps = page_size_of(path)
                size = os.path.getsize(path)
                fh = c.open(rel, os.O_RDONLY)
                for off in range(0, size, ps):
                    t = time.perf_counter()
                    c.pread(fh, ps, off)
                    dt = time.perf_counter() - t
                    (lat_changed if (rel, off // ps) in changed else lat_other).append(dt * 1e6)
                c.close_file(fh)
        if elision:
            port, good, ahead, seconds = elision
            answers[("ahead", 16)] = ask(port, ahead, seconds, 16)
            for depth in (1, 16):
                answers[("true", depth)] = ask(port, good, seconds, depth)
    text = g.log_text()
    engine = [line for line in text.splitlines() if "| engine:" in line]
    return (ingest_s, lat_changed, lat_other, engine[-1].split("| ", 1)[1] if engine else "", answers, write_us,
            parsed_s)


def live_split(log):
    """(first byte of the live part, offset of the newest checkpoint
    block): the live part starts at the 4 KiB block that holds the
    checkpoint LSN, as MariaDB's writer rewrites its last block."""
    ck_lsn, _end, ck_off = redo_blocks.newest_checkpoint(log)
    area = len(log) - 12288
    at = 12288 + (ck_lsn - redo_blocks.header_first_lsn(log)) % area
    return max(12288, at // 4096 * 4096), ck_off


def questions(prepared, changed, path, lsn_back):
    """The elision questions for the changed pages, as libcatcher would
    ask them for the pages MariaDB's recovery produces."""
    files = data_files(prepared)
    with open(path, "w") as out:
        for rel, page_no in sorted(changed):
            ps = page_size_of(files[rel])
            with open(files[rel], "rb") as f:
                f.seek(page_no * ps)
                page = f.read(ps)
            lsn = int.from_bytes(page[16:24], "big") - lsn_back
            space = int.from_bytes(page[34:38], "big")
            checksum = int.from_bytes(page[-4:], "big")
            out.write(f"{space} {page_no} {lsn} {checksum} {ps}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=20000)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--write-kib", type=int, default=64)
    ap.add_argument("--elision-seconds", type=int, default=10)
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="ppl-bench-fsal-")
    backup = make_backup(base, a.tables, a.table_size, a.seconds)
    prepared = os.path.join(base, "prepared")
    shutil.copytree(backup, prepared)
    prepare(prepared)
    changed = set()
    bfiles, pfiles = data_files(backup), data_files(prepared)
    for rel, path in bfiles.items():
        ps = page_size_of(path)
        with open(path, "rb") as fb, open(pfiles[rel], "rb") as fp:
            n = 0
            while True:
                x, y = fb.read(ps), fp.read(ps)
                if not x:
                    break
                if x != y:
                    changed.add((rel, n))
                n += 1
    with open(os.path.join(backup, "ib_logfile0"), "rb") as f:
        log = f.read()
    plugins = os.path.join(paths.build_dir(), "ganesha-fsal-ppl", "plugins")
    os.makedirs(os.path.join(base, "vfs"))
    good, ahead = os.path.join(base, "ask-true"), os.path.join(base, "ask-ahead")
    questions(prepared, changed, good, 0)
    questions(prepared, changed, ahead, 1)
    # Both PPL exports alike but for Ingest_Behind: elision on, the pool
    # on tmpfs standing in for NVDIMM (on a disk every persist would be an
    # msync), so that the rows differ by where the parse happens only.
    shm = pmem.tmpfs_dir()
    pools = tempfile.mkdtemp(prefix="ppl-bench-fsal-pool-", dir=shm)

    def ppl_export(name, extra, **kw):
        pool = os.path.join(pools, f"{name}.pool")
        subprocess.run([paths.tool("ppl-inspect"), "pool", "create", pool, "--identity",
                        os.path.join(base, name, "export"), "--size", "64M"], check=True, stdout=subprocess.DEVNULL)
        port = free_port()
        return run(os.path.join(base, name), backup, log,
                   f'FSAL {{ Name = PPL; Pool_Path = "{pool}"; Stats_Interval = 0; Elision_Port = {port}; '
                   f'Elision_Token = "{TOKEN}"; {"Allow_Volatile_Pool = true; " if shm else ""}{extra}'
                   f'FSAL {{ Name = VFS; }} }}', plugins, a.write_kib, changed,
                   elision=(port, good, ahead, a.elision_seconds) if kw.get("ask") else None,
                   behind_pool=pool if kw.get("behind") else None)
    try:
        ppl = ppl_export("ppl", "", ask=True)
        behind = ppl_export("behind", "Ingest_Behind = true; ", behind=True)
    finally:
        shutil.rmtree(pools, ignore_errors=True)
    vfs = run(os.path.join(base, "vfs"), backup, log, "FSAL { Name = VFS; }", plugins, a.write_kib, changed)
    for name, r in (("FSAL_PPL", ppl), ("FSAL_PPL with Ingest_Behind", behind)):
        if "parsed to LSN" not in r[3] or "INGEST STOPPED" in r[3] or "rebuild failures 0" not in r[3]:
            sys.exit(f"bench-fsal: {name} did not ingest the log, nothing measured: {r[3] or 'no stats line'}")
    live_from, _ck = live_split(log)
    mb = (len(log) - live_from) / 1e6
    print(f"log {len(log) / 1e6:.1f} MB, of which {mb:.1f} MB from its checkpoint on written as MariaDB's live log "
          f"writes in {a.write_kib} KiB WRITEs (timed); {len(changed)} pages changed by the log; "
          f"backup under sysbench oltp_write_only {a.tables}x{a.table_size} for {a.seconds} s\n")
    print("| | FSAL_PPL over VFS | FSAL_PPL, Ingest_Behind | FSAL_VFS |")
    print("|---|---:|---:|---:|")
    print(f"| log written (WRITEs + COMMIT answered) | {mb / ppl[0]:.1f} MB/s ({ppl[0]:.2f} s) "
          f"| {mb / behind[0]:.1f} MB/s ({behind[0]:.2f} s) | {mb / vfs[0]:.1f} MB/s ({vfs[0]:.2f} s) |")
    print(f"| log parsed (from the first WRITE) | {mb / ppl[6]:.1f} MB/s | {mb / behind[6]:.1f} MB/s | – |")
    print(f"| {a.write_kib} KiB log WRITE reply: p50 / p99 | {statistics.median(ppl[5]):.0f} / {pct(ppl[5], 99):.0f} µs "
          f"| {statistics.median(behind[5]):.0f} / {pct(behind[5], 99):.0f} µs "
          f"| {statistics.median(vfs[5]):.0f} / {pct(vfs[5], 99):.0f} µs |")
    for label, i in (("pages the log changed", 1), ("other pages", 2)):
        p, b, v = ppl[i], behind[i], vfs[i]
        print(f"| 16 KiB READ, {label} ({len(p)}): p50 / p99 | {statistics.median(p):.0f} / {pct(p, 99):.0f} µs "
              f"| {statistics.median(b):.0f} / {pct(b, 99):.0f} µs "
              f"| {statistics.median(v):.0f} / {pct(v, 99):.0f} µs |")
    print(f"\nElision answers, one connection, {len(changed)} pages asked about in turn for "
          f"{a.elision_seconds} s per row:\n")
    print("| questions | in flight | answers/s | p50 / p99 per question | verdicts |")
    print("|---|---:|---:|---:|---|")
    for (kind, depth), r in ppl[4].items():
        label = "true LSN and checksum" if kind == "true" else "LSN one below the page's"
        verdicts = ", ".join(f"{k} {v}" for k, v in r["verdicts"].items())
        print(f"| {label} | {depth} | {r['per_second']:.0f} | {r['p50_us']:.0f} / {r['p99_us']:.0f} µs | "
              f"{verdicts} |")
    print(f"\nPPL {ppl[3]}")
    print(f"\nPPL, Ingest_Behind {behind[3]}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
