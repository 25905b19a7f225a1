#!/usr/bin/env python3
"""The project's main job: unmodified MariaDB over the pushdown stack.

On one machine, twice over the same stack -- ganesha.nfsd with FSAL_PPL
over FSAL_VFS (configured from ganesha.conf.example), the kernel's NFS
client where the host has one, else ppl-mount (--client), mariadbd with
config/my.cnf and LD_PRELOAD=libcatcher.so:

  elide        libcatcher asks the storage node and drops every page write
               it can rebuild;
  full writes  libcatcher in passthrough mode: it only counts, every page
               write crosses the link in full.

Each run starts from the same dataset (loaded once on a local datadir and
copied into the export), with the buffer pool at about 10% of the data,
runs the same write-heavy workload, then checks the result: CHECK TABLE,
and CHECKSUM TABLE equal before and after a MariaDB restart (whose reads
come back rebuilt by the storage node); with --workload tpcc also the
TPC-C consistency conditions (tpcc/tpcc.lua check). The table at the end
sets the two runs side by side.

Workloads: any sysbench OLTP test (default oltp_write_only; --tables,
--table-size), or tpcc (tpcc/tpcc.lua, the standard mix; --warehouses).

By default every process runs in a private network namespace, so that all
TCP on its loopback is compute<->storage traffic and can be counted
(--link-rate shapes it; --no-netns runs on the host's loopback and does
not count link bytes). Every server is a direct child of this script and
is stopped by pid."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pplnode  # noqa: E402
from pplnode import Compute, paths  # noqa: E402
from lib import stack as stack_lib  # noqa: E402
from lib.mariadb import check_table_problems  # noqa: E402

TOKEN = "ppl-demo-token"
TPCC = os.path.join(paths.REPO, "tpcc", "tpcc.lua")
TPCC_TABLES = ("warehouse", "district", "customer", "history", "new_orders", "orders", "order_line", "item",
               "stock")
MODES = (("elide", "elide"), ("full writes", "passthrough"))


# ---- figures ---------------------------------------------------------------

def catcher_stats(db, path, timeout=20):
    try:
        return stack_lib.catcher_stats(db, path, timeout)
    except AssertionError as exc:
        raise SystemExit(str(exc))


STATS_LINE = re.compile(r"PPL: stats periodic for \S+: (.*)")
POOL_LINE = re.compile(r"PPL: pool stats periodic for \S+: (.*)")


def fsal_figures(g, timeout=10):
    """The storage node's counters from the first stats line logged after
    this call (one per second)."""
    text = g.log_text(since_start=True)
    seen, pool_seen = len(STATS_LINE.findall(text)), len(POOL_LINE.findall(text))
    deadline = time.time() + timeout
    while True:
        text = g.log_text(since_start=True)
        lines, pool = STATS_LINE.findall(text), POOL_LINE.findall(text)
        # the pool's line follows the stats line (when there is a pool)
        if len(lines) > seen and (len(pool) > pool_seen or not pool_seen):
            break
        if time.time() > deadline:
            raise SystemExit("ganesha.nfsd logged no PPL stats line; its log: " + g.log)
        time.sleep(0.2)
    line = lines[-1]
    def num(pattern):
        m = re.search(pattern, line)
        return int(m.group(1)) if m else 0
    page_write_bytes = sum(int(b) for b in re.findall(
        r"(?:tablespace|system_ts|undo_ts|unresolved)[^;|]*?write \d+/(\d+) B", line))
    m = re.search(r"(\d+) record\(s\) appended", pool[-1]) if pool else None
    return {"rebuilt": num(r"pages rebuilt (\d+)"), "materialized": num(r"materialized (\d+) page"),
            "pool_records": int(m.group(1)) if m else 0,
            "bases": num(r"page writes taken as bases (\d+)"),
            "log_write_bytes": num(r"redo_log:[^;|]*?write \d+/(\d+) B"),
            "page_write_bytes": page_write_bytes, "line": line}


def written_by(pid):
    """Bytes ganesha.nfsd passed to write calls (its files: the log, the data
    files; the pmem pool is written by stores, not calls, and is not here)."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def snapshot(g, db, stats_path):
    return {"catcher": catcher_stats(db, stats_path), "fsal": fsal_figures(g),
            "link": pplnode.link_bytes(), "wchar": written_by(g.pid)}


def catcher_split(c):
    page = [c["classes"][k] for k in ("ibd", "ibdata", "undo")]
    return {"log": c["classes"]["redo"]["bytes"],
            "pages": sum(p["bytes"] - p["bytes_not_sent"] for p in page),
            "questions": c.get("elision", {}).get("bytes_sent", 0),
            "page_writes": sum(p["pages"] for p in page), "elided": sum(p["elided"] for p in page)}


# ---- one run -----------------------------------------------------------------

def tables_of(a):
    if a.workload == "tpcc":
        return ",".join(f"tpcc.{t}" for t in TPCC_TABLES)
    return ",".join(f"sbtest.sbtest{i}" for i in range(1, a.tables + 1))


def tpcc(db, a, command, *args):
    cmd = ["sysbench", TPCC, f"--mysql-socket={db.socket}", "--mysql-user=root", "--mysql-db=tpcc",
           f"--scale={a.warehouses}", *args, command]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SystemExit("sysbench failed: " + " ".join(cmd) + "\n" + r.stdout[-4000:])
    return r.stdout


def check_tables(db, a):
    out = db.sql("CHECK TABLE " + tables_of(a))
    if check_table_problems(out):
        raise SystemExit("CHECK TABLE failed:\n" + out)
    if a.workload == "tpcc":
        out = tpcc(db, a, "check")
        if "all consistency conditions hold" not in out:
            raise SystemExit("TPC-C consistency check failed:\n" + out[-4000:])


def sysbench_run(db, a, label):
    if a.workload == "tpcc":
        cmd = ["sysbench", TPCC, f"--mysql-socket={db.socket}", "--mysql-user=root", "--mysql-db=tpcc",
               f"--scale={a.warehouses}"]
    else:
        cmd = ["sysbench", a.workload, "--db-driver=mysql", f"--mysql-socket={db.socket}", "--mysql-user=root",
               "--mysql-db=sbtest", f"--tables={a.tables}", f"--table-size={a.table_size}"]
    cmd += [f"--threads={a.threads}", f"--time={a.seconds}", f"--report-interval={a.report}", "--rand-seed=1",
            "run"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    for line in p.stdout:
        out.append(line)
        if line.startswith("["):          # sysbench's progress line
            print(f"  {label:>11} {line.strip()}", flush=True)
    if p.wait() != 0:
        raise SystemExit("sysbench failed: " + " ".join(cmd) + "\n" + "".join(out[-40:]))
    text = "".join(out)
    m = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", text)
    if not m:
        raise SystemExit("no transaction count in sysbench's output:\n" + text[-2000:])
    return int(m.group(1)), float(m.group(2))


def run_mode(a, work, label, catcher_mode, dataset, buffer_pool):
    tag = catcher_mode
    base = os.path.join(work, tag)
    export = os.path.join(base, "export")
    os.makedirs(export)
    shutil.copytree(dataset, os.path.join(export, "data"), symlinks=True)
    pool = os.path.join(a.pmem, f"ppl-demo-{os.getpid()}-{tag}.pool")
    # A fresh figures line every second: the run's figures are the
    # difference of the lines logged before and after it.
    g, elision_port = pplnode.storage_node(base, export, pool, a.pool_mb * 1024 * 1024, TOKEN, stats_interval=1)
    mnt = os.path.join(base, "mnt")
    os.makedirs(mnt)
    stats_path = os.path.join(base, "libcatcher.json")
    env = pplnode.catcher_env(catcher_mode, elision_port, TOKEN, stats_path)
    db = Compute(os.path.join(base, "mariadb"), datadir=os.path.join(mnt, "data"), page_size=a.page_size,
                 options=[f"--innodb-buffer-pool-size={buffer_pool}"], env=env)
    os.makedirs(db.base)
    mount = None
    try:
        g.start()
        mount = pplnode.mount_export(a.client, g, mnt, os.path.join(base, "ppl-mount.log"))
        db.start()
        before = snapshot(g, db, stats_path)
        t0 = time.time()
        trx, tps = sysbench_run(db, a, label)
        wall = time.time() - t0
        after = snapshot(g, db, stats_path)

        # Verified: the tables check, and read back the same after a restart
        # whose reads the storage node serves (rebuilt where it holds redo).
        check_tables(db, a)
        sums = db.sql("CHECKSUM TABLE " + tables_of(a))
        db.stop()
        db.start()
        if db.sql("CHECKSUM TABLE " + tables_of(a)) != sums:
            raise SystemExit(f"{label}: table checksums changed across a MariaDB restart; logs in {base}")
        check_tables(db, a)
        db.stop()
    except BaseException:
        print(f"{label}: failed; MariaDB's log:\n{db.tail_log()}\nganesha.nfsd's log: {g.log}", file=sys.stderr)
        raise
    finally:
        db.kill()
        if mount:
            mount.stop()
        g.stop()
        if os.path.exists(pool):
            os.unlink(pool)
    problems = [w for w in ("cannot be rebuilt", "redo ingest stopped", "could not be materialized")
                if w in g.log_text()]
    if problems:
        raise SystemExit(f"{label}: ganesha.nfsd logged '{problems[0]}'; see {g.log}")
    cb, ca = catcher_split(before["catcher"]), catcher_split(after["catcher"])
    d = {k: ca[k] - cb[k] for k in ca}
    d["refused"] = {}
    for cls in ("ibd", "ibdata", "undo"):
        for reason, n in after["catcher"]["classes"][cls]["refused"].items():
            n -= before["catcher"]["classes"][cls]["refused"].get(reason, 0)
            if n:
                d["refused"][reason] = d["refused"].get(reason, 0) + n
    d.update(trx=trx, tps=tps, wall=wall, link=after["link"] - before["link"],
             storage_written=after["wchar"] - before["wchar"],
             rebuilt=after["fsal"]["rebuilt"] - before["fsal"]["rebuilt"],
             materialized=after["fsal"]["materialized"] - before["fsal"]["materialized"],
             pool_records=after["fsal"]["pool_records"] - before["fsal"]["pool_records"],
             storage_page_bytes=after["fsal"]["page_write_bytes"] - before["fsal"]["page_write_bytes"],
             storage_log_bytes=after["fsal"]["log_write_bytes"] - before["fsal"]["log_write_bytes"])
    return d


def prepare_dataset(a, work):
    """The tables, loaded once on a local datadir (not over the stack) with
    the same my.cnf and shut down cleanly."""
    db = Compute(os.path.join(work, "load"), page_size=a.page_size, options=["--innodb-buffer-pool-size=256M"])
    os.makedirs(db.base)
    db.install()
    db.start()
    try:
        if a.workload == "tpcc":
            db.sql("CREATE DATABASE tpcc")
            tpcc(db, a, "prepare")
        else:
            db.sql("CREATE DATABASE sbtest")
            db.sysbench("oltp_write_only", "prepare", tables=a.tables, table_size=a.table_size, threads=2)
        db.sql("SET GLOBAL innodb_fast_shutdown = 0")
        db.stop()
    finally:
        db.kill()
    schema = "tpcc" if a.workload == "tpcc" else "sbtest"
    data = sum(os.path.getsize(os.path.join(db.datadir, schema, f)) for f in os.listdir(
        os.path.join(db.datadir, schema)) if f.endswith(".ibd"))
    return db.datadir, data


def human(n):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def print_table(r, a, data, buffer_pool, netns):
    e, f = r["elide"], r["passthrough"]
    rows = [
        ("transactions", lambda x: f"{x['trx']}"),
        ("TPS", lambda x: f"{x['tps']:.1f}"),
        ("compute->storage: log", lambda x: human(x["log"])),
        ("compute->storage: pages", lambda x: human(x["pages"])),
        ("compute->storage: elision questions", lambda x: human(x["questions"])),
        ("compute->storage: total", lambda x: human(x["log"] + x["pages"] + x["questions"])),
        ("redo bytes per transaction", lambda x: f"{x['log'] / max(x['trx'], 1):.0f}"),
        ("bytes sent per transaction", lambda x: f"{(x['log'] + x['pages'] + x['questions']) / max(x['trx'], 1):.0f}"),
        ("page writes seen", lambda x: f"{x['page_writes']}"),
        ("page writes elided", lambda x: f"{x['elided']} ({100 * x['elided'] / max(x['page_writes'], 1):.1f}%)"),
        ("pages rebuilt on read (storage)", lambda x: f"{x['rebuilt']}"),
        ("pages materialized (storage)", lambda x: f"{x['materialized']}"),
        ("records kept in the pmem pool", lambda x: f"{x['pool_records']}"),
        ("storage node bytes written", lambda x: human(x["storage_written"])),
    ]
    if netns:
        rows.append(("link bytes, both directions", lambda x: human(x["link"])))
    print()
    print(f"{describe(a)} ({human(data)} of data), buffer pool {buffer_pool // (1024 * 1024)} MiB, {a.threads} threads, {a.seconds} s")
    print(f"{'':38}{'elide':>18}{'full writes':>18}")
    for name, fmt in rows:
        print(f"{name:38}{fmt(e):>18}{fmt(f):>18}")
    sent_e = e["log"] + e["pages"] + e["questions"]
    sent_f = f["log"] + f["pages"] + f["questions"]
    if sent_e and e["trx"] and f["trx"]:
        per_e, per_f = sent_e / e["trx"], sent_f / f["trx"]
        print(f"\nbytes sent per transaction: {per_e / max(e['log'] / e['trx'], 1):.2f}x the redo with elision, "
              f"{per_f / per_e:.1f}x fewer than with full page writes")
    if e["refused"]:
        top = sorted(e["refused"].items(), key=lambda kv: -kv[1])
        print("page writes not elided, by reason (libcatcher): " + ", ".join(f"{k} {v}" for k, v in top))
    print("both runs verified: CHECK TABLE passed, table checksums equal across a MariaDB restart")


def describe(a):
    if a.workload == "tpcc":
        return f"TPC-C (tpcc/tpcc.lua), {a.warehouses} warehouse(s)"
    return f"sysbench {a.workload}, {a.tables} tables x {a.table_size} rows"


def inner(a):
    if a.inner:
        pplnode.inside_netns()
    work = a.work or tempfile.mkdtemp(prefix="ppl-pushdown-")
    os.makedirs(work, exist_ok=True)
    print(f"work directory {work}; loading {describe(a)} on a local datadir", flush=True)
    dataset, data = prepare_dataset(a, work)
    mib = 1024 * 1024
    buffer_pool = max(a.min_buffer_pool_mb * mib, (data // 10 + mib - 1) // mib * mib)
    if a.page_size == 65536:
        buffer_pool = max(buffer_pool, 24 * mib)   # MariaDB refuses 64 KiB pages below 21 MiB
    results = {}
    for label, mode in MODES:
        print(f"{label}: storage node, mount ({a.client}) and compute node up; {describe(a)} for {a.seconds} s",
              flush=True)
        results[mode] = run_mode(a, work, label, mode, dataset, buffer_pool)
    print_table(results, a, data, buffer_pool, a.netns)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"data_bytes": data, "buffer_pool": buffer_pool, "netns": a.netns, "runs": results}, f,
                      indent=1)
    if not a.keep and not a.work:
        shutil.rmtree(work, ignore_errors=True)


def outer(a, argv):
    """Runs the demo inside a private network namespace."""
    rc = pplnode.run_in_netns(f"ppl-demo-{os.getpid()}", a.link_rate,
                              [sys.executable, os.path.abspath(__file__), "--inner", *argv])
    if rc is None:
        print("running on the host's loopback and not counting link bytes (--no-netns says so explicitly)",
              flush=True)
        a.netns = False
        return inner(a)
    if rc:
        sys.exit(rc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=60, help="workload duration per run (default 60)")
    ap.add_argument("--workload", default="oltp_write_only",
                    help="sysbench test, or tpcc (default oltp_write_only)")
    ap.add_argument("--warehouses", type=int, default=1, help="TPC-C scale (default 1)")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=100000, help="rows per table (default 100000)")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--page-size", type=int, default=16384, choices=(4096, 8192, 16384, 32768, 65536))
    ap.add_argument("--min-buffer-pool-mb", type=int, default=8,
                    help="floor of the buffer pool, otherwise 10%% of the data (default 8)")
    ap.add_argument("--pool-mb", type=int, default=256, help="pmem pool size (default 256)")
    ap.add_argument("--pmem", help="directory for the pool: a DAX mount for real NVDIMM "
                    "(default /dev/shm, a tmpfs standing in for it)")
    ap.add_argument("--link-rate", help="shape the compute<->storage link, e.g. 1gbit (tc tbf)")
    ap.add_argument("--client", default="auto", choices=pplnode.CLIENTS,
                    help="NFS client: the kernel's, ppl-mount (FUSE), or auto (the kernel's where there is one; "
                    "default)")
    ap.add_argument("--no-netns", dest="netns", action="store_false",
                    help="run on the host's loopback (link bytes are then not counted)")
    ap.add_argument("--report", type=int, default=10, help="seconds between progress lines (default 10)")
    ap.add_argument("--work", help="work directory (kept); default a temporary one, removed")
    ap.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    a = ap.parse_args()
    a.pmem = a.pmem or pplnode.tmpfs_dir() or tempfile.gettempdir()
    a.client = pplnode.choose_client(a.client)
    if a.link_rate and not a.netns:
        ap.error("--link-rate needs the private network namespace (drop --no-netns)")
    if a.inner or not a.netns:
        inner(a)
    else:
        outer(a, argv)


if __name__ == "__main__":
    main()
