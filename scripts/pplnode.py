"""The storage node, the mount and the compute node as the scripts start
them (scripts/pushdown-demo.py, scripts/ppl-stack.py): ganesha.nfsd
configured from ganesha.conf.example, the export mounted by the kernel's
NFS client where there is one, else by ppl-mount, mariadbd with
config/my.cnf and LD_PRELOAD=libcatcher.so, and the private network
namespace of the two-node mode. Every process is a direct child of the
calling script and is stopped by pid (tests/lib's Ganesha and MariaDB)."""
import os
import re
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from lib import ganesha as ganesha_lib  # noqa: E402
from lib import paths  # noqa: E402
from lib.ganesha import Ganesha, free_port  # noqa: E402,F401
from lib.mariadb import MariaDB  # noqa: E402
from lib.pmem import on_tmpfs, tmpfs_dir  # noqa: E402,F401  (scripts find the pool's place here)
from lib.stack import mount_class  # noqa: E402  (scripts start ppl-mount the tests' way)
import kernel_nfs  # noqa: E402

MY_CNF = os.path.join(REPO, "config", "my.cnf")
GANESHA_EXAMPLE = os.path.join(REPO, "ganesha.conf.example")


CLIENTS = ("auto", "kernel", "ppl-mount")


def choose_client(wanted):
    """The NFS client to mount the export with: `kernel` or `ppl-mount`;
    `auto` takes the kernel's when this host has one."""
    ok, why = kernel_nfs.available()
    if wanted == "kernel" and not ok:
        raise SystemExit(f"--client kernel: {why}; --client ppl-mount (or auto) uses the FUSE client")
    if wanted == "auto":
        return "kernel" if ok else "ppl-mount"
    return wanted


def mount_export(client, g, mnt, log):
    """Mounts g's export on mnt, hard (a storage-node restart is waited
    out); ppl-mount also with --direct-io (O_DIRECT reaches the server as
    InnoDB issues it). Returns the started mount: stop() unmounts it."""
    if client == "kernel":
        m = kernel_nfs.KernelNfsMount(ganesha_lib.HOST, g.port, g.mnt_port, g.pseudo, mnt)
    else:
        m = mount_class()(paths.tool("ppl-mount"), g.url(), mnt, options=["--hard", "--direct-io"], log=log)
    m.start()
    return m


class Compute(MariaDB):
    """mariadbd with the shipped my.cnf; the command line overrides only its
    paths and whatever options the caller adds."""

    def common_args(self):
        return [f"--defaults-file={MY_CNF}", f"--datadir={self.datadir}",
                f"--innodb-page-size={self.page_size}", "--user=root"]


def render_ganesha_conf(g, pool, pool_size, elision_port, token, plugins, stats_interval, source=GANESHA_EXAMPLE,
                        extra=None):
    """ganesha.conf.example (or `source`, e.g. the installed
    /etc/ppl/ganesha.conf) with this machine's paths, loopback addresses
    and private ports; every other line as shipped. plugins=None keeps the
    file's Plugins_Dir; `extra` sets more of its parameters."""
    with open(source) as f:
        text = f.read()
    values = {
        "Bind_Addr": "127.0.0.1", "NFS_Port": str(g.port), "MNT_Port": str(g.mnt_port),
        "Path": f'"{g.export_path}"', "Pseudo": f'"{g.pseudo}"',
        "Clients": "127.0.0.1", "Pool_Path": f'"{pool}"', "Pool_Size": str(pool_size),
        "Elision_Address": '"127.0.0.1"', "Elision_Port": str(elision_port),
        "Elision_Clients": '"127.0.0.1"', "Elision_Token": f'"{token}"',
        "Stats_Interval": str(stats_interval),
        # The runs here emulate NVDIMM with tmpfs, and a power loss is not
        # among what they try: the pool keeps records as NVDIMM would.
        "Allow_Volatile_Pool": "true" if on_tmpfs(pool) else "false", **(extra or {}),
    }
    if plugins is not None:
        values["Plugins_Dir"] = f'"{plugins}"'
    for key, value in values.items():
        # a parameter the example shows commented out (#Archive_Path) is set too
        text, n = re.subn(rf"^(\s*)#?{key} = [^\n]*;$", rf"\g<1>{key} = {value};", text, count=1, flags=re.M)
        if n != 1:
            raise SystemExit(f"{source} has no '{key} = ...;' line any more: update {__file__}")
    # NFSv4 client state of this private server stays in its own directory.
    text = text.replace("NFSV4 {", f'NFSV4 {{\n    RecoveryBackend = fs;\n    RecoveryRoot = "{g.recovery}";', 1)
    return text


def storage_node(base, export, pool, pool_size, token, stats_interval=60, elision_port=None, extra=None):
    """A Ganesha (not started) exporting `export` as /ppl through FSAL_PPL;
    the pool is made for the export unless it exists (a restart reuses
    it). Returns (Ganesha, elision port)."""
    if not os.path.exists(pool):
        subprocess.run([paths.tool("ppl-inspect"), "pool", "create", pool, "--identity", export,
                        "--size", str(pool_size)], check=True, stdout=subprocess.DEVNULL)
    port = elision_port or free_port()
    plugins = os.path.join(paths.build_dir(), "ganesha-fsal-ppl", "plugins")
    g = Ganesha(os.path.join(base, "ganesha"), export, pseudo="/ppl", plugins_dir=plugins,
                config=lambda g: render_ganesha_conf(g, pool, pool_size, port, token, plugins, stats_interval,
                                                     extra=extra))
    return g, port


def catcher_env(mode, elision_port, token, stats_path):
    return {"LD_PRELOAD": os.path.join(paths.build_dir(), "libcatcher", "libcatcher.so"),
            "LIBCATCHER_MODE": mode, "LIBCATCHER_SERVER": f"127.0.0.1:{elision_port}",
            "LIBCATCHER_TOKEN": token, "LIBCATCHER_TIMEOUT_MS": "2000", "LIBCATCHER_STATS_FILE": stats_path}


def link_bytes():
    """Bytes through this network namespace's loopback, counted once (on lo
    every byte sent is also received): the compute<->storage link of the
    two-node mode."""
    with open("/proc/net/dev") as f:
        for line in f:
            if line.strip().startswith("lo:"):
                return int(line.split(":", 1)[1].split()[0])
    return 0


def inside_netns():
    """In the namespace nothing listens on port 111, and a second rpcbind
    would refuse to start (it locks /run/rpcbind.lock). Ganesha registers
    through rpcbind's UNIX socket, which is the host's (see run_in_netns);
    clients name both ports and never ask it."""
    ganesha_lib.ensure_rpcbind = lambda timeout=10: None


def run_in_netns(name, link_rate, argv):
    """Runs argv in a new network namespace `name` (loopback only,
    optionally shaped) as a direct child and removes the namespace after.
    Returns its exit code, or None when no namespace can be made."""
    ganesha_lib.ensure_rpcbind()   # on the host: ours, a direct child, if none runs yet
    r = subprocess.run(["ip", "netns", "add", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(f"no private network namespace ({r.stdout.strip()})", flush=True)
        return None
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        # getaddrinfo(AI_ADDRCONFIG), which Ganesha uses for Bind_Addr,
        # finds no IPv4 address while 127.0.0.1 is the only one; a second
        # loopback address (on lo, reaching nothing) satisfies it.
        subprocess.run(["ip", "-n", name, "addr", "add", "127.0.0.2/32", "dev", "lo"], check=True)
        if link_rate:
            subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "tbf",
                            "rate", link_rate, "burst", "256k", "latency", "50ms"], check=True)
        # nsenter --net only (not `ip netns exec`, which would also make a
        # mount namespace and hide the FUSE mount from the host).
        p = subprocess.Popen(["nsenter", f"--net=/run/netns/{name}", *argv])
        # SIGTERM (scripts/ppl-stack.py down) goes on to the child, which
        # stops what it started; a terminal's Ctrl-C reaches it directly.
        old = signal.signal(signal.SIGTERM, lambda _s, _f: p.send_signal(signal.SIGTERM))
        try:
            while True:
                try:
                    return p.wait()
                except KeyboardInterrupt:
                    continue
        finally:
            signal.signal(signal.SIGTERM, old)
    finally:
        subprocess.run(["ip", "netns", "del", name])
