#!/usr/bin/env python3
"""Benchmark of libcatcher (a script, not a test): the cost libcatcher adds
to a write call when it does not elide (off / passthrough), and the latency
of an elided page write, i.e. one question to the storage node over
loopback (ppl-elision-ref --mode ack) plus the page checks.

    scripts/bench-libcatcher.py [--mariadb] [BUILD_DIR]   (default: $PPL_BUILD_DIR or build)

With --mariadb it also runs sysbench oltp_write_only against a private
MariaDB (continuous flushing, so that pages are written all the time)
without libcatcher, with it in passthrough mode, and with it asking a
server that refuses everything: the cost seen by a real workload.

Files live on /dev/shm so that the write itself costs as little as
possible and the difference is libcatcher's. Prints a Markdown table.
"""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find(build, name):
    for root, _dirs, files in os.walk(build):
        if name in files:
            return os.path.join(root, name)
    sys.exit(f"{name} not found under {build}: build the project first")


def mariadb_runs(lib, ref, seconds=20):
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from lib.mariadb import MariaDB
    import json
    base = tempfile.mkdtemp(prefix="bench-libcatcher-mariadb.")
    opts = ["--innodb-buffer-pool-size=64M", "--innodb-log-file-size=96M"]
    rows = []
    try:
        tmpl = MariaDB(os.path.join(base, "template"), options=opts)
        tmpl.install()
        configs = ("no LD_PRELOAD", "passthrough", "elide, server NACKs all")
        for rnd, label in [(r, c) for r in (1, 2) for c in configs]:  # interleaved rounds
            run = os.path.join(base, f"{rnd}-" + label.split()[0].strip(","))
            shutil.copytree(tmpl.datadir, os.path.join(run, "data"))
            env, srv = None, None
            stats = os.path.join(run, "catcher.json")
            if label != "no LD_PRELOAD":
                env = {"LD_PRELOAD": lib, "LIBCATCHER_STATS_FILE": stats}
                if label.startswith("passthrough"):
                    env["LIBCATCHER_MODE"] = "passthrough"
                else:
                    pf = os.path.join(run, "port")
                    srv = subprocess.Popen([ref, "--mode", "nack", "--port", "0", "--port-file", pf],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    while not os.path.exists(pf):
                        time.sleep(0.05)
                    env["LIBCATCHER_SERVER"] = "127.0.0.1:" + open(pf).read().strip()
            db = MariaDB(run, options=opts, env=env)
            db.start()
            try:
                db.sql("CREATE DATABASE sbtest")
                db.sysbench("oltp_write_only", "prepare", tables=4, table_size=10000)
                db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0.001")
                db.sql("SET GLOBAL innodb_max_dirty_pages_pct=0")
                # start from a clean buffer pool: otherwise whether the
                # pages dirtied by prepare are flushed inside the window
                # decides the page count more than anything else
                for _ in range(120):
                    dirty = int(db.sql("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'").split()[1])
                    if dirty == 0:
                        break
                    time.sleep(0.5)
                w0 = int(db.sql("SHOW GLOBAL STATUS LIKE 'Innodb_pages_written'").split()[1])
                out = db.sysbench("oltp_write_only", f"--time={seconds}", "--report-interval=0", "run",
                                  tables=4, table_size=10000, threads=2)
                w1 = int(db.sql("SHOW GLOBAL STATUS LIKE 'Innodb_pages_written'").split()[1])
            finally:
                db.stop()
                if srv:
                    srv.send_signal(signal.SIGTERM)
                    srv.wait(10)
            tps = float(out.split("transactions:")[1].split("(")[1].split()[0])
            lat = out.split("95th percentile:")[1].split()[0]
            asked = ""
            if os.path.exists(stats):
                tot = json.load(open(stats))["total"]
                asked = tot["refused"].get("nack_not_durable", 0)
            rows.append((f"{label} (round {rnd})", tps, lat, w1 - w0, asked))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows


def main():
    args = sys.argv[1:]
    with_mariadb = "--mariadb" in args
    args = [a for a in args if a != "--mariadb"]
    build = args[0] if args else os.environ.get("PPL_BUILD_DIR", os.path.join(REPO, "build"))
    lib = os.path.join(build, "libcatcher", "libcatcher.so")
    bench = find(build, "bench_libcatcher")
    ref = find(build, "ppl-elision-ref")
    base = tempfile.mkdtemp(prefix="bench-libcatcher.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    data = os.path.join(base, "data")
    os.makedirs(os.path.join(data, "db"))
    os.makedirs(os.path.join(base, "outside"))
    page_file = os.path.join(data, "db", "t1.ibd")
    redo_file = os.path.join(data, "ib_logfile0")
    untracked = os.path.join(base, "outside", "x.bin")
    rows = []
    for path in (page_file, redo_file, untracked):
        with open(path, "wb") as f:  # allocated up front: no run pays for growing the file
            f.write(bytes(64 * 16384))

    def env(mode=None, server=None):
        e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        if mode:
            e.update(LD_PRELOAD=lib, LIBCATCHER_MODE=mode, LIBCATCHER_DATADIR=data, LIBCATCHER_PAGE_SIZE="16384")
        if server:
            e["LIBCATCHER_SERVER"] = server
        return e

    def loop(path, size, mode, n=100000):
        out = subprocess.run([bench, "loop", path, str(size), str(n)], env=env(mode), check=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
        return float(out)

    def compare(path, size, reps=7):
        """Best-of-rounds per configuration, the configurations interleaved
        so that load from other processes hits them alike; the minimum is
        the cost without interference."""
        best = {None: 1e30, "off": 1e30, "passthrough": 1e30}
        for _ in range(reps):
            for mode in best:
                best[mode] = min(best[mode], loop(path, size, mode))
        return best[None], best["off"], best["passthrough"]

    try:
        for label, path, size in (("16 KiB page write, page file", page_file, 16384),
                                  ("512 B write, redo file", redo_file, 512),
                                  ("16 KiB write, file outside the datadir", untracked, 16384)):
            rows.append((label, *compare(path, size)))

        port_file = os.path.join(base, "port")
        srv = subprocess.Popen([ref, "--mode", "ack", "--port", "0", "--port-file", port_file],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 10
            while not os.path.exists(port_file) and time.time() < deadline:
                time.sleep(0.05)
            port = open(port_file).read().strip()
            e = env("elide", f"127.0.0.1:{port}")
            os.unlink(page_file)
            rtt = {}
            for k in (1, 8):
                out = subprocess.run([bench, "rtt", page_file, "20000", str(k)], env=e, check=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
                rtt[k] = tuple(float(x) for x in out.split())
        finally:
            srv.send_signal(signal.SIGTERM)
            srv.wait(10)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    load = open("/proc/loadavg").read().split()[0]
    print(f"Command: scripts/bench-libcatcher.py {build}   ({os.cpu_count()} CPUs, load average {load}, files on /dev/shm)\n")
    print("| write | no LD_PRELOAD (ns/call) | mode off (ns/call) | mode passthrough (ns/call) | off cost (ns) | passthrough cost (ns) |")
    print("|---|---|---|---|---|---|")
    for label, plain, off, pt in rows:
        print(f"| {label} | {plain:.0f} | {off:.0f} | {pt:.0f} | {off - plain:+.0f} | {pt - plain:+.0f} |")
    print()
    print("Elided page writes (page checks incl. CRC-32C + one pipelined exchange over loopback with")
    print("ppl-elision-ref --mode ack), 20000 pwrite calls, one thread, one connection:")
    print("| pages per call | p50 (us) | p99 (us) | max (us) |")
    print("|---|---|---|---|")
    for k, (p50, p99, worst) in rtt.items():
        print(f"| {k} | {p50:.1f} | {p99:.1f} | {worst:.1f} |")
    if with_mariadb:
        rows = mariadb_runs(lib, ref)
        print()
        print("MariaDB, sysbench oltp_write_only, 4 tables x 10000 rows, 2 threads, 20 s, continuous flushing:")
        print("| libcatcher | TPS | 95th pct latency (ms) | pages written during the run | pages asked and NACKed (whole server life) |")
        print("|---|---|---|---|---|")
        for label, tps, lat, pages, asked in rows:
            print(f"| {label} | {tps:.1f} | {lat} | {pages} | {asked} |")


if __name__ == "__main__":
    main()
