#!/usr/bin/env python3
"""The side-by-side benchmark (issue 17): one machine standing for two
nodes, four set-ups, the same data set. A benchmark, never a test.

Set-ups (--setups, default all four, in this order):
  local    MariaDB's defaults, datadir on a local disk (no network at all)
  vanilla  stock NFS-Ganesha (FSAL_VFS) export mounted with ppl-mount,
           MariaDB's defaults (doublewrite on), no preload: what users run
  tuned    the same FSAL_VFS export, the project's config/my.cnf
           (doublewrite off, steady flushing), no preload: full page writes
  stack    FSAL_PPL over VFS with its pmem pool, config/my.cnf,
           LD_PRELOAD=libcatcher.so eliding
  archive  (only when asked for) the stack with its log archive on
           (Archive_Path on the storage side's disk): what archiving costs
  behind   (only when asked for) the stack with Ingest_Behind = true: log
           WRITEs answered before they are parsed
  pmemlog  (only when asked for) the stack with Log_On_Pmem = true: log
           WRITEs answered once durable in the pool's log area, the log
           file synced behind them (commits wait for no disk sync)

The two nodes: the compute side (mariadbd, ppl-mount, sysbench) runs on
--compute-cpus and ganesha.nfsd on --storage-cpus (the script sets its own
CPU affinity before it starts each process; children inherit it). The
whole run happens in a private network namespace whose loopback is the
link (--link-rate shapes it with tbf); sysbench talks to mariadbd over its
UNIX socket, so every byte on that loopback is node-to-node traffic.

Workloads: sysbench oltp_write_only, oltp_read_write, oltp_update_index
(--tables x --table-size rows) and TPC-C (tpcc/tpcc.lua, --warehouses, a
list runs several scales), each at every --threads count. The buffer pool
is 10% of the data set. --load local (default) loads each data set once on
a local datadir and copies it into every run; --load through loads it in
every run through that run's own storage, as a new user's first trial
does, before the timed run (use it with --seconds 600 for the long runs).

Per run: TPS, latency p95/p99 (sysbench's histogram), TPS each second,
link bytes per transaction, bytes the storage side wrote to its disk per
transaction (the sectors written by the block device under the export,
or under the local datadir, between two syncs around the timed run), CPU
seconds per 1,000 transactions of each node, READ latency at the compute
node (ppl-mount's figures, asked with SIGUSR1 before and after the timed
run; the round trip and the server together), and for the stack the
checkpoint-gate and log-wrap waits. After each run CHECK TABLE (and the
TPC-C consistency check) must pass. Written to --out: results.json,
report.md (tables) and PNG plots: TPS over time per workload and thread
count, the ratios of the stack to the other set-ups, and for the stack the
storage node's figures over the run (storage-*.png, from its stats line
each second: redo parsed, rebuilt reads, elisions and materializations per
second, mini-transactions applied per second by all rebuilds, pages
pending).

    PPL_BUILD_DIR=build scripts/bench-twonode.py --workloads tpcc,oltp_write_only --threads 1,8 --seconds 60
    PPL_BUILD_DIR=build scripts/bench-twonode.py --workloads tpcc --threads 8 --load through --seconds 600

Every server is a direct child of this script and is stopped by pid."""
import argparse
import datetime
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pplnode  # noqa: E402
from pplnode import Compute, Ganesha, paths  # noqa: E402
from lib.mariadb import MariaDB, check_table_problems  # noqa: E402

TOKEN = "ppl-bench-token"
TPCC = os.path.join(paths.REPO, "tpcc", "tpcc.lua")
TPCC_TABLES = ("warehouse", "district", "customer", "history", "new_orders", "orders", "order_line", "item",
               "stock")
SETUPS = ("local", "vanilla", "tuned", "stack", "archive", "behind", "pmemlog")
PPL_SETUPS = ("stack", "archive", "behind", "pmemlog")
SYSBENCH = ("oltp_write_only", "oltp_read_write", "oltp_update_index")
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- the two nodes' CPUs -------------------------------------------------

class on_cpus:
    """Within the block, processes this script starts run on `cpus`
    (affinity is inherited at fork)."""

    def __init__(self, cpus):
        self.cpus = cpus

    def __enter__(self):
        self.saved = os.sched_getaffinity(0)
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)

    def __exit__(self, *exc):
        os.sched_setaffinity(0, self.saved)


def parse_cpus(text):
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


# ---- figures read from /proc --------------------------------------------

def cpu_seconds(pid):
    """User + system CPU seconds of every thread of pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def device_written(path):
    """Bytes written so far by the block device that holds path (its
    /proc/diskstats sectors, 512 bytes each), or None when path is on no
    block device (tmpfs). A process's own write_bytes is no measure here:
    on this kernel it also counts the pages a process dirties in a tmpfs
    mapping, which is the stack's pmem pool (a pool append counted as a
    4 KiB page write to disk: 181 MB in 5 s where the disk took 31 MB)."""
    st = os.stat(path)
    dev = (os.major(st.st_dev), os.minor(st.st_dev))
    with open("/proc/diskstats") as f:
        for line in f:
            x = line.split()
            if (int(x[0]), int(x[1])) == dev:
                return int(x[9]) * 512
    return None


GATE = re.compile(r"checkpoints held (\d+) \(([\d.]+) s\), log wraps held (\d+) \(([\d.]+) s\)")
READS = re.compile(r"read latency p50/p99 plain (\d+)/(\d+) us, rebuilt (\d+)/(\d+) us")
ANSWERS = re.compile(r"answer p50/p99 (\d+)/(\d+) us")
STATS = re.compile(r"PPL: stats periodic for \S+: (.*)")
# cumulative counters of a stats line, for the storage node's figures over time
SERIES = {"lsn": re.compile(r"parsed to LSN (\d+)"),
          "rebuilt": re.compile(r"pages rebuilt (\d+) \("),
          "mtrs_applied": re.compile(r"pages rebuilt \d+ \((\d+) mtrs applied"),
          "acked": re.compile(r"\d+ asked, (\d+) acked"),
          "materialized": re.compile(r"materialized (\d+) page"),
          "pending": re.compile(r"(\d+) pages pending")}
SERIES_WINDOW = 10  # seconds per point (the stats lines come every second)


def storage_series(lines):
    """Per SERIES_WINDOW seconds of a run, from the storage node's stats
    lines (one a second, cumulative counters): redo MB/s parsed, pages
    served rebuilt to reads/s, mini-transactions applied/s by every
    rebuild (reads, elision checks, materializations: the node counts
    them together, so no per-read ratio is drawn), elisions/s,
    pages materialized/s, and pages with pending records at the window's
    end. Why a run's TPS changes over time is read here."""
    rows = []
    for line in lines:
        row = {}
        for k, rx in SERIES.items():
            m = rx.search(line)
            if m:
                row[k] = int(m.group(1))
        if "lsn" in row:
            rows.append(row)
    out = []
    for i in range(SERIES_WINDOW, len(rows), SERIES_WINDOW):
        a, b = rows[i - SERIES_WINDOW], rows[i]
        d = {k: b.get(k, 0) - a.get(k, 0) for k in SERIES if k != "pending"}
        out.append({"end_s": i, "redo_mb_s": d["lsn"] / 1e6 / SERIES_WINDOW,
                    "rebuilt_reads_s": d["rebuilt"] / SERIES_WINDOW,
                    "mtrs_applied_s": d["mtrs_applied"] / SERIES_WINDOW,
                    "elided_s": d["acked"] / SERIES_WINDOW, "materialized_s": d["materialized"] / SERIES_WINDOW,
                    "pages_pending": b.get("pending", 0)})
    return out


def gate_figures(g, timeout=10):
    """The stack's checkpoint-gate and log-wrap waits from the first stats
    line ganesha.nfsd logs after this call (Stats_Interval = 1)."""
    seen = len(STATS.findall(g.log_text(since_start=True)))
    deadline = time.time() + timeout
    while time.time() < deadline:
        lines = STATS.findall(g.log_text(since_start=True))
        if len(lines) > seen:
            m = GATE.search(lines[-1])
            if not m:
                raise SystemExit("the storage node's stats line has no 'checkpoints held ... log wraps held': "
                                 + lines[-1][:300])
            r = READS.search(lines[-1])
            # percentiles since the storage node started: not differences
            lat = {f"{kind}_read_{q}_us": int(r.group(i)) for i, (kind, q) in enumerate(
                (("plain", "p50"), ("plain", "p99"), ("rebuilt", "p50"), ("rebuilt", "p99")), 1)} if r else {}
            ans = ANSWERS.search(lines[-1])
            if ans:   # the elision service's time per question, since it started
                lat.update(answer_p50_us=int(ans.group(1)), answer_p99_us=int(ans.group(2)))
            return {"checkpoints_held": int(m.group(1)), "checkpoint_wait_s": float(m.group(2)),
                    "log_wraps_held": int(m.group(3)), "log_wrap_wait_s": float(m.group(4)), **lat}
        time.sleep(0.2)
    raise SystemExit(f"ganesha.nfsd logged no PPL stats line in {timeout} s; its log: {g.log}")


# ---- one set-up's nodes ----------------------------------------------------

def fresh_dir(path):
    """An empty directory at path: what an earlier run left in the same
    --work directory (the script's own scratch space) goes first, so that
    every run starts alike."""
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        sys.exit(f"{path}, left by an earlier run, cannot be removed (a mount still on it? "
                 f"fusermount3 -u it, or pass another --work)")
    os.makedirs(path)


class Nodes:
    """One set-up: the storage node and the mount (none for local), and
    mariadbd with that set-up's configuration, each on its node's CPUs."""

    def __init__(self, a, setup, base, buffer_pool):
        self.a, self.setup, self.base = a, setup, base
        self.g = self.mount = None
        self.pool = None
        fresh_dir(base)
        options = [f"--innodb-buffer-pool-size={buffer_pool}"] + [f"--{o}" for o in a.mysqld_option]
        env = None
        if setup == "local":
            datadir = os.path.join(base, "data")
        else:
            self.export = os.path.join(base, "export")
            self.mnt = os.path.join(base, "mnt")
            os.makedirs(self.export)
            os.makedirs(self.mnt)
            datadir = os.path.join(self.mnt, "data")
            if setup in PPL_SETUPS:
                self.pool = os.path.join(a.pmem, f"ppl-bench-{os.getpid()}.pool")
                extra = None
                if setup == "archive":
                    os.makedirs(os.path.join(base, "archive"))
                    extra = {"Archive_Path": f'"{os.path.join(base, "archive")}"'}
                elif setup == "behind":
                    extra = {"Ingest_Behind": "true"}
                elif setup == "pmemlog":
                    extra = {"Log_On_Pmem": "true"}
                self.g, port = pplnode.storage_node(base, self.export, self.pool, a.pool_mb * 1024 * 1024, TOKEN,
                                                    stats_interval=1, extra=extra)
                self.stats_path = os.path.join(base, "libcatcher.json")
                env = pplnode.catcher_env("elide", port, TOKEN, self.stats_path)
            else:
                self.g = Ganesha(os.path.join(base, "ganesha"), self.export, pseudo="/ppl")
        cls = Compute if setup in ("tuned",) + PPL_SETUPS else MariaDB   # MariaDB: --no-defaults
        self.db = cls(os.path.join(base, "mariadb"), datadir=datadir, options=options, env=env)
        os.makedirs(self.db.base)

    def datadir(self):
        return self.db.datadir

    def up(self, install=False):
        if self.g:
            with on_cpus(self.a.storage_cpus):
                self.g.start()
            with on_cpus(self.a.compute_cpus):
                self.mount = pplnode.mount_export(self.a.client, self.g, self.mnt,
                                                  os.path.join(self.base, "ppl-mount.log"))
        with on_cpus(self.a.compute_cpus):
            if install:
                self.db.install()
            self.db.start()

    def down(self):
        try:
            self.db.stop()
        finally:
            self.db.kill()
            if self.mount:
                self.mount.stop()
            if self.g:
                self.g.stop()
            if self.pool and os.path.exists(self.pool):
                os.unlink(self.pool)

    def client_reads(self):
        """ppl-mount's READ latency since the last call (it logs them on
        SIGUSR1): the compute node's view of a read, round trip included.
        None for local and for the kernel client."""
        m = self.mount
        if m is None or getattr(m, "proc", None) is None or not getattr(m, "log", None):
            return None
        def lines():
            with open(m.log, errors="replace") as f:
                return CLIENT_READS.findall(f.read())
        n = len(lines())
        m.proc.send_signal(signal.SIGUSR1)
        deadline = time.time() + 10
        while time.time() < deadline:
            got = lines()
            if len(got) > n:
                count, p50, p90, p99, p999, larger = map(int, got[n])
                return {"client_reads": count, "client_read_p50_us": p50, "client_read_p90_us": p90,
                        "client_read_p99_us": p99, "client_read_p999_us": p999, "client_reads_larger": larger}
            time.sleep(0.05)
        print(f"  ppl-mount logged no read figures after SIGUSR1 (see {m.log})", flush=True)
        return None

    def figures(self):
        """Counters whose differences make a run's figures."""
        compute = [self.db.proc.pid] + ([self.mount.proc.pid] if self.mount else [])
        # Everything written before this point reaches the disk now, so
        # the difference of two calls is the run's own writes, whatever
        # the page cache held back. The storage side's disk is the one
        # under the export (under the datadir for local); on this machine
        # nothing else writes to it during a run.
        os.sync()
        written = device_written(self.export if self.g else self.db.datadir)
        f = {"compute_cpu": sum(cpu_seconds(p) for p in compute),
             "storage_cpu": cpu_seconds(self.g.pid) if self.g else 0.0,
             "disk": written if written is not None else float("nan"),
             "link": pplnode.link_bytes(), "loadgen_cpu": children_cpu()}
        if self.setup in PPL_SETUPS:
            f.update(gate_figures(self.g))
        return f

    def failures(self):
        """Lines of the storage node that say it served or kept something
        wrong (a benchmark that got there measured nothing)."""
        if self.setup not in PPL_SETUPS:
            return []
        text = self.g.log_text()
        return [w for w in ("cannot be rebuilt", "redo ingest stopped", "could not be materialized", "diverge")
                if w in text]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---- workloads ----------------------------------------------------------------

class Workload:
    def __init__(self, a, name, scale):
        self.a, self.name, self.scale = a, name, scale

    @property
    def schema(self):
        return "tpcc" if self.name == "tpcc" else "sbtest"

    def label(self):
        if self.name == "tpcc":
            return f"tpcc-{self.scale}w"
        return f"{self.name}-{self.a.tables}x{self.a.table_size}"

    def describe(self):
        if self.name == "tpcc":
            return f"TPC-C (tpcc/tpcc.lua), {self.scale} warehouse(s)"
        return f"sysbench {self.name}, {self.a.tables} tables x {self.a.table_size} rows"

    def command(self, db, threads, *extra):
        if self.name == "tpcc":
            return ["sysbench", TPCC, f"--mysql-socket={db.socket}", "--mysql-user=root", "--mysql-db=tpcc",
                    f"--scale={self.scale}", f"--threads={threads}", *extra]
        return ["sysbench", self.name, "--db-driver=mysql", f"--mysql-socket={db.socket}", "--mysql-user=root",
                "--mysql-db=sbtest", f"--tables={self.a.tables}", f"--table-size={self.a.table_size}",
                f"--threads={threads}", *extra]

    def load(self, db):
        db.sql(f"CREATE DATABASE {self.schema}")
        # the load's own thread count: TPC-C loads one warehouse per thread
        threads = min(self.scale, 4) if self.name == "tpcc" else min(self.a.tables, 4)
        r = subprocess.run(self.command(db, threads, "prepare"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if r.returncode != 0:
            raise SystemExit(f"loading {self.describe()} failed:\n{r.stdout[-3000:]}")

    def tables(self):
        if self.name == "tpcc":
            return [f"tpcc.{t}" for t in TPCC_TABLES]
        return [f"sbtest.sbtest{i}" for i in range(1, self.a.tables + 1)]

    def check(self, db):
        out = db.sql("CHECK TABLE " + ",".join(self.tables()))
        if check_table_problems(out):
            raise SystemExit("CHECK TABLE failed:\n" + out)
        if self.name == "tpcc":
            r = subprocess.run(self.command(db, 1, "check"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
            if "all consistency conditions hold" not in r.stdout:
                raise SystemExit("TPC-C consistency check failed:\n" + r.stdout[-3000:])


CLIENT_READS = re.compile(r"reads since the last report: (\d+) of at most 64 KiB, p50 (\d+) us, p90 (\d+) us, "
                          r"p99 (\d+) us, p99.9 (\d+) us; (\d+) larger")
HIST = re.compile(r"^\s*([\d.]+)\s*\|[*\s]*(\d+)\s*$", re.M)
TICK = re.compile(r"^\[ (\d+)s \] thds: \d+ tps: ([\d.]+)", re.M)


def percentile(hist, q):
    total = sum(n for _, n in hist)
    seen = 0
    for value, n in hist:
        seen += n
        if seen >= q * total:
            return value
    return hist[-1][0] if hist else None


# MariaDB's own counters of what it waited for, per run: a user thread
# that found no free page in the buffer pool and waited for the page
# cleaner (wait_free), pages it wrote, and reads it did.
INNODB_COUNTERS = ("Innodb_buffer_pool_wait_free", "Innodb_buffer_pool_pages_flushed", "Innodb_data_reads",
                   "Innodb_data_writes")


def innodb_counters(db):
    names = ",".join(f"'{n}'" for n in INNODB_COUNTERS)
    out = db.sql(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
    return {k: int(v) for k, v in (line.split("\t") for line in out.splitlines() if "\t" in line)}


def run_load(w, db, threads, seconds, label):
    """sysbench's run with a progress line each second and its latency
    histogram; returns its figures."""
    cmd = w.command(db, threads, f"--time={seconds}", "--report-interval=1", "--histogram=on", "--rand-seed=1",
                    "run")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    for line in p.stdout:
        out.append(line)
        m = TICK.match(line)
        if m and int(m.group(1)) % 10 == 0:
            print(f"  {label} {line.strip()}", flush=True)
    text = "".join(out)
    if p.wait() != 0:
        raise SystemExit("sysbench failed: " + " ".join(cmd) + "\n" + text[-3000:])
    m = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", text)
    if not m:
        raise SystemExit("no transaction count in sysbench's output:\n" + text[-2000:])
    hist = sorted((float(v), int(n)) for v, n in HIST.findall(text))
    return {"transactions": int(m.group(1)), "tps": float(m.group(2)),
            "p95_ms": percentile(hist, 0.95), "p99_ms": percentile(hist, 0.99),
            "tps_each_second": [float(t) for _, t in TICK.findall(text)]}


# ---- one run ------------------------------------------------------------------

def one_run(a, work, w, setup, threads, dataset, buffer_pool):
    base = os.path.join(work, f"{w.label()}-t{threads}-{setup}")
    n = Nodes(a, setup, base, buffer_pool)
    label = f"{setup:>7} {w.label()} t{threads}"
    try:
        if dataset:
            target = n.datadir() if setup == "local" else os.path.join(n.export, "data")
            shutil.copytree(dataset, target, symlinks=True)
            n.up()
        else:
            n.up(install=True)
            t0 = time.time()
            w.load(n.db)
            print(f"  {label}: loaded through this set-up in {time.time() - t0:.0f} s", flush=True)
        n.client_reads()   # starts the count for the timed run
        counters = innodb_counters(n.db)
        before = n.figures()
        stats_from = len(STATS.findall(n.g.log_text(since_start=True))) if setup in PPL_SETUPS else 0
        result = run_load(w, n.db, threads, a.seconds, label)
        after = n.figures()
        result.update(n.client_reads() or {})
        result["innodb"] = {k: v - counters.get(k, 0) for k, v in innodb_counters(n.db).items()}
        if setup in PPL_SETUPS:
            result["storage_series"] = storage_series(STATS.findall(n.g.log_text(since_start=True))[stats_from:])
        w.check(n.db)
        wrong = n.failures()
        if wrong:
            raise SystemExit(f"{label}: ganesha.nfsd logged '{wrong[0]}'; see {n.g.log}")
    except BaseException:
        print(f"{label}: failed; MariaDB's log:\n{n.db.tail_log()}", file=sys.stderr)
        if n.g:
            print(f"ganesha.nfsd's log: {n.g.log}", file=sys.stderr)
        raise
    finally:
        n.down()
    d = {k: after[k] - before[k] for k in after if not k.endswith("_us")}
    catcher = getattr(n, "stats_path", None)
    if catcher and os.path.exists(catcher):
        # libcatcher's own figures, written when mariadbd stopped (since it started)
        with open(catcher) as f:
            result["libcatcher"] = json.load(f).get("elision", {})
    trx = max(result["transactions"], 1)
    result.update(setup=setup, workload=w.label(), threads=threads, seconds=a.seconds,
                  link_bytes_per_trx=d["link"] / trx,
                  disk_bytes_per_trx=None if d["disk"] != d["disk"] else d["disk"] / trx,   # NaN: no block device
                  compute_cpu_s_per_1000=1000 * (d["compute_cpu"] + d["loadgen_cpu"]) / trx,
                  storage_cpu_s_per_1000=1000 * d["storage_cpu"] / trx)
    for k in ("checkpoints_held", "checkpoint_wait_s", "log_wraps_held", "log_wrap_wait_s"):
        if k in d:
            result[k] = round(d[k], 3)
    result.update({k: v for k, v in after.items() if k.endswith("_us")})
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    gate = (f", gate waits {result['checkpoint_wait_s']:.2f} s, wrap waits {result['log_wrap_wait_s']:.2f} s, "
            f"storage-node reads p50/p99 plain {result.get('plain_read_p50_us')}/{result.get('plain_read_p99_us')} us, "
            f"rebuilt {result.get('rebuilt_read_p50_us')}/{result.get('rebuilt_read_p99_us')} us"
            if setup in PPL_SETUPS else "")
    lc = result.get("libcatcher")
    if lc:
        gate += (f", answers p50/p99 {result.get('answer_p50_us')}/{result.get('answer_p99_us')} us on the storage "
                 f"node and {lc.get('wait_p50_us')}/{lc.get('wait_p99_us')} us waited by MariaDB's writers"
                 + (f", writes completed by libcatcher's thread {lc['deferred_writes']} "
                    f"(p50/p99 {lc.get('deferred_p50_us')}/{lc.get('deferred_p99_us')} us after their submit)"
                    if lc.get("deferred_writes") else ""))
    client = (f", client reads p50/p99 {result['client_read_p50_us']}/{result['client_read_p99_us']} us"
              if "client_read_p50_us" in result else "")
    inno = result.get("innodb", {})
    client += (f", InnoDB waits for a free page {inno.get('Innodb_buffer_pool_wait_free')}, "
               f"pages flushed {inno.get('Innodb_buffer_pool_pages_flushed')}")
    print(f"  {label}: {result['tps']:.1f} TPS, p95 {result['p95_ms']} ms, p99 {result['p99_ms']} ms{gate}{client}",
          flush=True)
    return result


def prepare_dataset(a, work, w):
    """The data set loaded once on a local datadir with MariaDB's
    defaults, shut down cleanly; returns (datadir, bytes of table data)."""
    db = MariaDB(os.path.join(work, "load-" + w.label()), options=["--innodb-buffer-pool-size=256M"])
    fresh_dir(db.base)
    db.install()
    with on_cpus(a.compute_cpus):
        db.start()
    try:
        w.load(db)
        db.sql("SET GLOBAL innodb_fast_shutdown = 0")
        db.stop()
    finally:
        db.kill()
    d = os.path.join(db.datadir, w.schema)
    data = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".ibd"))
    return db.datadir, data


def buffer_pool_for(a, data):
    mib = 1024 * 1024
    return max(a.min_buffer_pool_mb * mib, (data * a.buffer_pool_pct // 100 + mib - 1) // mib * mib)


# ---- report ---------------------------------------------------------------------

def report(a, out, runs, datasets):
    """report.md and the plots, rewritten after every run."""
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"arguments": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(a).items()},
                   "datasets": datasets, "runs": runs}, f, indent=1)
    groups, every = {}, {}
    for r in runs:
        every.setdefault((r["workload"], r["threads"]), {}).setdefault(r["setup"], []).append(r)
    for key, by in every.items():
        # with --repeat, a set-up's row is its median run (by TPS), and
        # the TPS of every run is listed beside it
        groups[key] = {s: sorted(rs, key=lambda r: r["tps"])[(len(rs) - 1) // 2] for s, rs in by.items()}
    lines = [f"# bench-twonode, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC", "",
             f"- command: `{command_line()}`",
             f"- compute CPUs {sorted(a.compute_cpus)}, storage CPUs {sorted(a.storage_cpus)}, "
             f"link {a.link_rate or 'loopback, unshaped'}, load {a.load}, {a.seconds} s per run"
             + (f", {a.repeat} runs per set-up (interleaved; a row is the median run)" if a.repeat > 1 else ""),
             f"- load average when the report was written: {os.getloadavg()[0]:.2f}", ""]
    for name, d in datasets.items():
        lines.append(f"- {name}: {d['bytes'] / 1e6:.0f} MB of table data, buffer pool {d['buffer_pool'] >> 20} MiB")
    head = ("| workload | threads | set-up | TPS | p95 ms | p99 ms | link B/trx | disk B/trx | compute CPU s/1000 trx "
            "| storage CPU s/1000 trx | gate waits s | wrap waits s | stack / this | TPS of each run |")
    lines += ["", head, "|" + " --- |" * 14]
    for (wl, th), by in groups.items():
        stack = by.get("stack")
        for s in SETUPS:
            r = by.get(s)
            if not r:
                continue
            ratio = f"{stack['tps'] / r['tps']:.2f}x" if stack and r["tps"] and s != "stack" else ""
            each = ", ".join(f"{x['tps']:.1f}" for x in every[(wl, th)][s])
            lines.append(f"| {wl} | {th} | {s} | {r['tps']:.1f} | {r['p95_ms']} | {r['p99_ms']} "
                         f"| {r['link_bytes_per_trx']:.0f} | {fmt_bytes(r['disk_bytes_per_trx'])} "
                         f"| {r['compute_cpu_s_per_1000']:.2f} | {r['storage_cpu_s_per_1000']:.2f} "
                         f"| {r.get('checkpoint_wait_s', '')} | {r.get('log_wrap_wait_s', '')} | {ratio} "
                         f"| {each} |")
    lat = [(wl, th, by["stack"]) for (wl, th), by in groups.items() if "stack" in by
           and "plain_read_p50_us" in by["stack"]]
    if lat:
        lines += ["", "The stack's READs on the storage node (the host's read and the store's part, since it "
                  "started), in us:", "", "| workload | threads | plain p50 | plain p99 | rebuilt p50 | rebuilt p99 |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {wl} | {th} | {r['plain_read_p50_us']} | {r['plain_read_p99_us']} | {r['rebuilt_read_p50_us']} "
                  f"| {r['rebuilt_read_p99_us']} |" for wl, th, r in lat]
    cli = [(wl, th, s, by[s]) for (wl, th), by in groups.items() for s in SETUPS
           if s in by and "client_read_p50_us" in by[s]]
    if cli:
        lines += ["", "READs of at most 64 KiB as the compute node sees them (ppl-mount, from the READ's arrival "
                  "to its data, round trip included; the timed run only), in us:", "",
                  "| workload | threads | set-up | reads | p50 | p90 | p99 | p99.9 |",
                  "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {wl} | {th} | {s} | {r['client_reads']} | {r['client_read_p50_us']} | {r['client_read_p90_us']} "
                  f"| {r['client_read_p99_us']} | {r['client_read_p999_us']} |" for wl, th, s, r in cli]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plots(out, groups)


def fmt_bytes(v):
    return "–" if v is None else f"{v:.0f}"


def command_line():
    """This run's command as typed (without the namespace's --inner)."""
    argv = [x for x in sys.argv if x != "--inner"]
    return " ".join(["scripts/bench-twonode.py" if x.endswith("bench-twonode.py") else x for x in argv])


def plots(out, groups):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for (wl, th), by in groups.items():
        fig, ax = plt.subplots(figsize=(8, 4))
        for s in SETUPS:
            if s in by:
                series = by[s]["tps_each_second"]
                ax.plot(range(1, len(series) + 1), series, label=f"{s} ({by[s]['tps']:.0f} TPS)")
        ax.set_xlabel("seconds")
        ax.set_ylabel("transactions per second")
        ax.set_title(f"{wl}, {th} thread(s)")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"tps-{wl}-t{th}.png"), dpi=100)
        plt.close(fig)
        for s, r in by.items():
            if r.get("storage_series"):
                storage_plot(plt, r["storage_series"], f"{wl}, {th} thread(s), {s}",
                             os.path.join(out, f"storage-{wl}-t{th}-{s}.png"))
    keys = [k for k, by in groups.items() if "stack" in by]
    if not keys:
        return
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(keys)), 4))
    width = 0.27
    for i, s in enumerate(("local", "vanilla", "tuned")):
        vals = [groups[k]["stack"]["tps"] / groups[k][s]["tps"] if s in groups[k] and groups[k][s]["tps"] else 0
                for k in keys]
        ax.bar([j + (i - 1) * width for j in range(len(keys))], vals, width, label=f"stack / {s}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{wl}\nt{th}" for wl, th in keys], fontsize=8)
    ax.set_ylabel("TPS ratio")
    ax.set_title("the stack's TPS against each set-up")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ratios.png"), dpi=100)
    plt.close(fig)


def storage_plot(plt, series, title, path):
    """The storage node's figures over a run (storage_series), one panel each."""
    x = [p["end_s"] for p in series]
    panels = (("redo parsed, MB/s", ["redo_mb_s"]), ("pages per second", ["rebuilt_reads_s", "elided_s",
                                                                          "materialized_s"]),
              ("mtrs applied/s, all rebuilds", ["mtrs_applied_s"]), ("pages with pending records",
                                                                            ["pages_pending"]))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 8), sharex=True)
    for ax, (ylabel, keys) in zip(axes, panels):
        for k in keys:
            ax.plot(x, [p[k] for p in series], label=k.replace("_s", "/s").replace("_", " "))
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
        if len(keys) > 1:
            ax.legend(fontsize=8)
    axes[0].set_title(f"the storage node over the run: {title}")
    axes[-1].set_xlabel(f"seconds (points every {SERIES_WINDOW} s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- driver ------------------------------------------------------------------------

def inner(a):
    if a.inner:
        pplnode.inside_netns()
    work = a.work or tempfile.mkdtemp(prefix="ppl-twonode-")
    os.makedirs(work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    print(f"work directory {work}; results in {a.out}", flush=True)
    runs, datasets = [], {}
    try:
        for name in a.workloads:
            for scale in (a.warehouses if name == "tpcc" else [1]):
                w = Workload(a, name, scale)
                print(f"{w.describe()}: loading it on a local datadir", flush=True)
                dataset, data = prepare_dataset(a, work, w)
                buffer_pool = buffer_pool_for(a, data)
                datasets[w.label()] = {"bytes": data, "buffer_pool": buffer_pool}
                for threads in a.threads:
                    for rep in range(a.repeat):
                        # every other round in reverse: a drift of the machine
                        # over the rounds does not favour one set-up
                        for setup in (a.setups if rep % 2 == 0 else a.setups[::-1]):
                            print(f"{setup}: {w.describe()}, {threads} thread(s), {a.seconds} s"
                                  + (f", run {rep + 1} of {a.repeat}" if a.repeat > 1 else ""), flush=True)
                            r = one_run(a, work, w, setup, threads, dataset if a.load == "local" else None,
                                        buffer_pool)
                            r["run"] = rep + 1
                            runs.append(r)
                            report(a, a.out, runs, datasets)
                shutil.rmtree(os.path.dirname(dataset), ignore_errors=True)
    finally:
        if not a.keep and not a.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"report: {os.path.join(a.out, 'report.md')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setups", default=",".join(SETUPS[:4]),
                    help="comma-separated, among " + ",".join(SETUPS) + " (default the first four)")
    ap.add_argument("--workloads", default="oltp_write_only,oltp_read_write,oltp_update_index,tpcc",
                    help="comma-separated sysbench tests and/or tpcc")
    ap.add_argument("--threads", default="1,8,32", help="comma-separated thread counts (default 1,8,32)")
    ap.add_argument("--warehouses", default="1", help="TPC-C scales, comma-separated (default 1)")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=100000, help="rows per sysbench table (default 100000)")
    ap.add_argument("--seconds", type=int, default=60, help="timed run per set-up (default 60)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per set-up, interleaved across set-ups; the report shows the median and each run")
    ap.add_argument("--load", choices=("local", "through"), default="local",
                    help="load the data once locally and copy it in (default), or through each set-up")
    ap.add_argument("--buffer-pool-pct", type=int, default=10, help="buffer pool as %% of the data (default 10)")
    ap.add_argument("--min-buffer-pool-mb", type=int, default=8)
    ap.add_argument("--mysqld-option", action="append", default=[], metavar="NAME=VALUE",
                    help="a mariadbd option for every set-up's timed runs (repeatable), e.g. innodb_use_native_aio=0")
    ap.add_argument("--compute-cpus", default="0", help="CPUs of the compute node (default 0)")
    ap.add_argument("--storage-cpus", default="1", help="CPUs of the storage node (default 1)")
    ap.add_argument("--link-rate", default="1gbit", help="tc tbf rate of the link (default 1gbit; 0: unshaped)")
    ap.add_argument("--pool-mb", type=int, default=256, help="the stack's pmem pool (default 256)")
    ap.add_argument("--pmem", help="directory for the pool (default /dev/shm, a tmpfs standing in for NVDIMM)")
    ap.add_argument("--out", help="directory for results.json, report.md and the plots "
                    "(default bench-twonode-DATE under the current directory)")
    ap.add_argument("--work", help="work directory (kept); default a temporary one, removed")
    ap.add_argument("--keep", action="store_true", help="keep every run's directories")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    a = ap.parse_args()
    wanted = a.setups.split(",")
    unknown = [s for s in wanted if s not in SETUPS]
    if unknown or not wanted:
        ap.error(f"--setups: {','.join(unknown) or 'none given'}; choose among " + ",".join(SETUPS))
    a.setups = [s for s in SETUPS if s in wanted]
    a.workloads = a.workloads.split(",")
    for w in a.workloads:
        if w != "tpcc" and w not in SYSBENCH:
            ap.error(f"--workloads: {w} is none of {', '.join(SYSBENCH)}, tpcc")
    if a.repeat < 1:
        ap.error("--repeat: at least 1 run per set-up")
    a.threads = [int(t) for t in a.threads.split(",")]
    a.warehouses = [int(t) for t in a.warehouses.split(",")]
    a.compute_cpus, a.storage_cpus = parse_cpus(a.compute_cpus), parse_cpus(a.storage_cpus)
    have = os.sched_getaffinity(0)
    if not (a.compute_cpus | a.storage_cpus) <= have:
        ap.error(f"CPUs {sorted((a.compute_cpus | a.storage_cpus) - have)} are not available (this process may "
                 f"use {sorted(have)})")
    if a.compute_cpus & a.storage_cpus:
        print("warning: the compute and storage CPU sets overlap; the nodes share CPUs", flush=True)
    a.link_rate = None if a.link_rate in ("0", "") else a.link_rate
    a.pmem = a.pmem or pplnode.tmpfs_dir() or tempfile.gettempdir()
    a.out = os.path.abspath(a.out or f"bench-twonode-{datetime.datetime.utcnow():%Y%m%d-%H%M}")
    a.client = pplnode.choose_client("auto")
    if a.inner:
        return inner(a)
    if "--out" not in argv:
        argv += ["--out", a.out]
    rc = pplnode.run_in_netns(f"ppl-bench-{os.getpid()}", a.link_rate,
                              [sys.executable, os.path.abspath(__file__), "--inner", *argv])
    if rc is None:
        raise SystemExit("bench-twonode needs a private network namespace (ip netns add) for the link")
    sys.exit(rc)


if __name__ == "__main__":
    main()
