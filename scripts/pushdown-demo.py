#!/usr/bin/env python3
"""The project's main job: unmodified MariaDB over the pushdown stack.

On one machine, twice over the same stack -- ganesha.nfsd with FSAL_PPL
over FSAL_VFS (configured from ganesha.conf.example), ppl-mount as the NFS
client, mariadbd with config/my.cnf and LD_PRELOAD=libcatcher.so:

  elide        libcatcher asks the storage node and drops every page write
               it can rebuild;
  full writes  libcatcher in passthrough mode: it only counts, every page
               write crosses the link in full.

Each run starts from the same sysbench dataset (loaded once on a local
datadir and copied into the export), with the buffer pool at about 10% of
the data, runs the same write-heavy workload, then checks the result:
CHECK TABLE, and CHECKSUM TABLE equal before and after a MariaDB restart
(whose reads come back rebuilt by the storage node). The table at the end
sets the two runs side by side.

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
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
from lib import ganesha as ganesha_lib  # noqa: E402
from lib import paths  # noqa: E402
from lib.ganesha import Ganesha, free_port  # noqa: E402
from lib.mariadb import MariaDB  # noqa: E402

MY_CNF = os.path.join(REPO, "config", "my.cnf")
GANESHA_EXAMPLE = os.path.join(REPO, "ganesha.conf.example")
TOKEN = "ppl-demo-token"
MODES = (("elide", "elide"), ("full writes", "passthrough"))


def load_mount_class():
    """ppl-mount's runner (tests/ppl_mount/_mount.py): foreground child,
    unmounted with fusermount3, killed by pid only as a last resort."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("ppl_mount_runner",
                                                  os.path.join(REPO, "tests", "ppl_mount", "_mount.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.PplMount


class Compute(MariaDB):
    """mariadbd with the shipped my.cnf; the command line overrides only its
    paths and the buffer pool size."""

    def common_args(self):
        return [f"--defaults-file={MY_CNF}", f"--datadir={self.datadir}",
                f"--innodb-page-size={self.page_size}", "--user=root"]


def render_ganesha_conf(g, pool, pool_size, elision_port, plugins):
    """ganesha.conf.example with this machine's paths, loopback addresses
    and private ports; every other line as shipped."""
    with open(GANESHA_EXAMPLE) as f:
        text = f.read()
    values = {
        "Bind_Addr": "127.0.0.1", "NFS_Port": str(g.port), "MNT_Port": str(g.mnt_port),
        "Plugins_Dir": f'"{plugins}"', "Path": f'"{g.export_path}"', "Pseudo": f'"{g.pseudo}"',
        "Clients": "127.0.0.1", "Pool_Path": f'"{pool}"', "Pool_Size": str(pool_size),
        "Elision_Address": '"127.0.0.1"', "Elision_Port": str(elision_port),
        "Elision_Clients": '"127.0.0.1"', "Elision_Token": f'"{TOKEN}"',
        # A fresh figures line every second: the run's figures are the
        # difference of the lines logged before and after it.
        "Stats_Interval": "1",
    }
    for key, value in values.items():
        text, n = re.subn(rf"^(\s*){key} = [^\n]*;$", rf"\g<1>{key} = {value};", text, count=1, flags=re.M)
        if n != 1:
            raise SystemExit(f"ganesha.conf.example has no '{key} = ...;' line any more: update {__file__}")
    # NFSv4 client state of this private server stays in its own directory.
    text = text.replace("NFSV4 {", f'NFSV4 {{\n    RecoveryBackend = fs;\n    RecoveryRoot = "{g.recovery}";', 1)
    return text


def tmpfs_dir():
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1] == "/dev/shm" and fields[2] == "tmpfs":
                return "/dev/shm"
    return None


# ---- figures ---------------------------------------------------------------

def catcher_stats(db, path, timeout=20):
    """libcatcher's counters now: SIGUSR2 makes it rewrite its stats file."""
    if os.path.exists(path):
        os.unlink(path)
    db.proc.send_signal(signal.SIGUSR2)
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise SystemExit(f"libcatcher wrote no stats file {path} after SIGUSR2")
        time.sleep(0.05)
    with open(path) as f:
        return json.load(f)


STATS_LINE = re.compile(r"PPL: stats periodic for \S+: (.*)")


def fsal_figures(g, timeout=10):
    """The storage node's counters from the first stats line logged after
    this call (one per second)."""
    seen = len(STATS_LINE.findall(g.log_text(since_start=True)))
    deadline = time.time() + timeout
    while True:
        lines = STATS_LINE.findall(g.log_text(since_start=True))
        if len(lines) > seen:
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
    return {"rebuilt": num(r"pages rebuilt (\d+)"), "materialized": num(r"materialized (\d+) page"),
            "bases": num(r"page writes taken as bases (\d+)"),
            "log_write_bytes": num(r"redo_log:[^;|]*?write \d+/(\d+) B"),
            "page_write_bytes": page_write_bytes, "line": line}


def link_bytes():
    """Bytes through this network namespace's loopback (both directions:
    on lo every byte sent is also received once)."""
    with open("/proc/net/dev") as f:
        for line in f:
            if line.strip().startswith("lo:"):
                return int(line.split(":", 1)[1].split()[0])
    return 0


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
            "link": link_bytes(), "wchar": written_by(g.pid)}


def catcher_split(c):
    page = [c["classes"][k] for k in ("ibd", "ibdata", "undo")]
    return {"log": c["classes"]["redo"]["bytes"],
            "pages": sum(p["bytes"] - p["bytes_not_sent"] for p in page),
            "questions": c.get("elision", {}).get("bytes_sent", 0),
            "page_writes": sum(p["pages"] for p in page), "elided": sum(p["elided"] for p in page)}


# ---- one run -----------------------------------------------------------------

def tables_of(a):
    return ",".join(f"sbtest.sbtest{i}" for i in range(1, a.tables + 1))


def check_tables(db, a):
    out = db.sql("CHECK TABLE " + tables_of(a))
    bad = [line for line in out.strip().splitlines() if line.split("\t")[2] == "status"
           and line.split("\t")[-1] != "OK"]
    if bad or not out.strip():
        raise SystemExit("CHECK TABLE failed:\n" + out)


def sysbench_run(db, a, label):
    cmd = ["sysbench", a.workload, "--db-driver=mysql", f"--mysql-socket={db.socket}", "--mysql-user=root",
           "--mysql-db=sbtest", f"--tables={a.tables}", f"--table-size={a.table_size}",
           f"--threads={a.threads}", f"--time={a.seconds}", f"--report-interval={a.report}", "--rand-seed=1",
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


def run_mode(a, work, label, catcher_mode, dataset, buffer_pool, build):
    tag = catcher_mode
    base = os.path.join(work, tag)
    export = os.path.join(base, "export")
    os.makedirs(export)
    shutil.copytree(dataset, os.path.join(export, "data"), symlinks=True)
    pool = os.path.join(a.pmem, f"ppl-demo-{os.getpid()}-{tag}.pool")
    subprocess.run([paths.tool("ppl-inspect"), "pool", "create", pool, "--identity", export,
                    "--size", str(a.pool_mb * 1024 * 1024)], check=True, stdout=subprocess.DEVNULL)
    elision_port = free_port()
    plugins = os.path.join(build, "ganesha-fsal-ppl", "plugins")
    g = Ganesha(os.path.join(base, "ganesha"), export, pseudo="/ppl", plugins_dir=plugins,
                config=lambda g: render_ganesha_conf(g, pool, a.pool_mb * 1024 * 1024, elision_port, plugins))
    mnt = os.path.join(base, "mnt")
    os.makedirs(mnt)
    stats_path = os.path.join(base, "libcatcher.json")
    env = {"LD_PRELOAD": os.path.join(build, "libcatcher", "libcatcher.so"), "LIBCATCHER_MODE": catcher_mode,
           "LIBCATCHER_SERVER": f"127.0.0.1:{elision_port}", "LIBCATCHER_TOKEN": TOKEN,
           "LIBCATCHER_TIMEOUT_MS": "2000", "LIBCATCHER_STATS_FILE": stats_path}
    db = Compute(os.path.join(base, "mariadb"), datadir=os.path.join(mnt, "data"), page_size=a.page_size,
                 options=[f"--innodb-buffer-pool-size={buffer_pool}"], env=env)
    os.makedirs(db.base)
    mount = None
    try:
        g.start()
        mount = load_mount_class()(paths.tool("ppl-mount"), g.url(), mnt, options=["--hard", "--direct-io"],
                                   log=os.path.join(base, "ppl-mount.log"))
        mount.start()
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
             storage_page_bytes=after["fsal"]["page_write_bytes"] - before["fsal"]["page_write_bytes"],
             storage_log_bytes=after["fsal"]["log_write_bytes"] - before["fsal"]["log_write_bytes"])
    return d


def prepare_dataset(a, work):
    """The sysbench tables, loaded once on a local datadir (not over the
    stack) with the same my.cnf and shut down cleanly."""
    db = Compute(os.path.join(work, "load"), page_size=a.page_size, options=["--innodb-buffer-pool-size=256M"])
    os.makedirs(db.base)
    db.install()
    db.start()
    try:
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=a.tables, table_size=a.table_size, threads=2)
        db.sql("SET GLOBAL innodb_fast_shutdown = 0")
        db.stop()
    finally:
        db.kill()
    data = sum(os.path.getsize(os.path.join(db.datadir, "sbtest", f)) for f in os.listdir(
        os.path.join(db.datadir, "sbtest")) if f.endswith(".ibd"))
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
        ("storage node bytes written", lambda x: human(x["storage_written"])),
    ]
    if netns:
        rows.append(("link bytes, both directions", lambda x: human(x["link"])))
    print()
    print(f"sysbench {a.workload}, {a.tables} tables x {a.table_size} rows ({human(data)} of data), "
          f"buffer pool {buffer_pool // (1024 * 1024)} MiB, {a.threads} threads, {a.seconds} s")
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


def inner(a):
    build = paths.build_dir()
    if a.inner:
        # Inside the namespace nothing listens on port 111, and a second
        # rpcbind would refuse to start (it locks /run/rpcbind.lock).
        # Ganesha registers through rpcbind's UNIX socket, which is the
        # host's (started by outer()); clients name both ports and never
        # ask it.
        ganesha_lib.ensure_rpcbind = lambda timeout=10: None
    work = a.work or tempfile.mkdtemp(prefix="ppl-pushdown-")
    os.makedirs(work, exist_ok=True)
    print(f"work directory {work}; loading {a.tables} x {a.table_size} rows on a local datadir", flush=True)
    dataset, data = prepare_dataset(a, work)
    mib = 1024 * 1024
    buffer_pool = max(a.min_buffer_pool_mb * mib, (data // 10 + mib - 1) // mib * mib)
    results = {}
    for label, mode in MODES:
        print(f"{label}: storage node, mount and compute node up; sysbench {a.workload} for {a.seconds} s",
              flush=True)
        results[mode] = run_mode(a, work, label, mode, dataset, buffer_pool, build)
    print_table(results, a, data, buffer_pool, a.netns)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"data_bytes": data, "buffer_pool": buffer_pool, "netns": a.netns, "runs": results}, f,
                      indent=1)
    if not a.keep and not a.work:
        shutil.rmtree(work, ignore_errors=True)


def outer(a, argv):
    """Make the private network namespace, run the demo inside it as a
    direct child, and remove the namespace again."""
    name = f"ppl-demo-{os.getpid()}"
    ganesha_lib.ensure_rpcbind()   # ours, a direct child, if none runs yet
    r = subprocess.run(["ip", "netns", "add", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(f"no private network namespace ({r.stdout.strip()}); running on the host's loopback "
              "and not counting link bytes (--no-netns says so explicitly)", flush=True)
        a.netns = False
        return inner(a)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        # getaddrinfo(AI_ADDRCONFIG), which Ganesha uses for Bind_Addr,
        # finds no IPv4 address while 127.0.0.1 is the only one; a second
        # loopback address (on lo, reaching nothing) satisfies it.
        subprocess.run(["ip", "-n", name, "addr", "add", "127.0.0.2/32", "dev", "lo"], check=True)
        if a.link_rate:
            subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "tbf",
                            "rate", a.link_rate, "burst", "256k", "latency", "50ms"], check=True)
        # nsenter --net only (not `ip netns exec`, which would also make a
        # mount namespace and hide the FUSE mount from the host).
        rc = subprocess.run(["nsenter", f"--net=/run/netns/{name}", sys.executable, os.path.abspath(__file__),
                             "--inner", *argv]).returncode
    finally:
        subprocess.run(["ip", "netns", "del", name])
    if rc:
        sys.exit(rc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=60, help="workload duration per run (default 60)")
    ap.add_argument("--workload", default="oltp_write_only", help="sysbench test (default oltp_write_only)")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=100000, help="rows per table (default 100000)")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--page-size", type=int, default=16384, choices=(4096, 8192, 16384))
    ap.add_argument("--min-buffer-pool-mb", type=int, default=8,
                    help="floor of the buffer pool, otherwise 10%% of the data (default 8)")
    ap.add_argument("--pool-mb", type=int, default=256, help="pmem pool size (default 256)")
    ap.add_argument("--pmem", help="directory for the pool: a DAX mount for real NVDIMM "
                    "(default /dev/shm, a tmpfs standing in for it)")
    ap.add_argument("--link-rate", help="shape the compute<->storage link, e.g. 1gbit (tc tbf)")
    ap.add_argument("--no-netns", dest="netns", action="store_false",
                    help="run on the host's loopback (link bytes are then not counted)")
    ap.add_argument("--report", type=int, default=10, help="seconds between progress lines (default 10)")
    ap.add_argument("--work", help="work directory (kept); default a temporary one, removed")
    ap.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    a = ap.parse_args()
    a.pmem = a.pmem or tmpfs_dir() or tempfile.gettempdir()
    if a.link_rate and not a.netns:
        ap.error("--link-rate needs the private network namespace (drop --no-netns)")
    if a.inner or not a.netns:
        inner(a)
    else:
        outer(a, argv)


if __name__ == "__main__":
    main()
