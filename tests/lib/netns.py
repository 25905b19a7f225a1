"""A private network namespace for a test, and its link cut on demand.

Everything of a stack test that talks TCP is the compute node talking to
the storage node: ppl-mount to ganesha.nfsd (NFS and MOUNT ports),
libcatcher to the elision service. Run in a namespace of its own, on its
own loopback, that traffic can be cut without touching the host's: the
test makes the namespace (Netns, on the host), runs its driver inside it
(Netns.run: nsenter --net only, so that the FUSE mount the driver makes
is the host's too), and the driver cuts chosen ports (Link) with tc on
the namespace's lo. MariaDB's clients use its UNIX socket; Ganesha
registers with the host's rpcbind through rpcbind's UNIX socket, so the
driver must not start one of its own (inside()).

The cut drops packets silently, as a pulled cable or a dead switch does
(no reset, no ICMP): an htb root qdisc sends the ports' packets to a
class whose queue holds none (pfifo limit 0). This kernel has no tc drop
action (act_gact) and no netem; htb, u32 and pfifo are what it has."""
import os
import subprocess

from lib import ganesha


class Unavailable(RuntimeError):
    """No network namespace can be made here (not root, no ip netns)."""


class Netns:
    def __init__(self, prefix):
        self.name = f"{prefix}-{os.getpid()}"
        self.made = False

    def __enter__(self):
        ganesha.ensure_rpcbind()  # on the host, a direct child if none runs yet
        r = subprocess.run(["ip", "netns", "add", self.name], capture_output=True, text=True)
        if r.returncode != 0:
            raise Unavailable(f"ip netns add {self.name}: {r.stderr.strip()}")
        self.made = True
        subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"], check=True)
        # Ganesha's Bind_Addr lookup (getaddrinfo with AI_ADDRCONFIG) finds
        # no IPv4 address while 127.0.0.1 is the only one
        subprocess.run(["ip", "-n", self.name, "addr", "add", "127.0.0.2/32", "dev", "lo"], check=True)
        return self

    def run(self, argv, timeout):
        """argv inside the namespace, as a direct child; its CompletedProcess."""
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.name}", *argv], capture_output=True,
                              text=True, timeout=timeout)

    def __exit__(self, *exc):
        if self.made:
            subprocess.run(["ip", "netns", "del", self.name])


def inside():
    """Called first by a driver running inside the namespace."""
    ganesha.ensure_rpcbind = lambda timeout=10: None


def _tc(*args):
    subprocess.run(["tc", *args], check=True, capture_output=True)


class Link:
    """The namespace's lo, cut for chosen TCP ports (both directions)."""

    def __init__(self):
        self.cut_ports = []

    def cut(self, ports):
        _tc("qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "20")
        _tc("class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", "1mbit")
        _tc("class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", "100gbit")
        _tc("qdisc", "add", "dev", "lo", "parent", "1:10", "handle", "10:", "pfifo", "limit", "0")
        for p in ports:
            for field in ("dport", "sport"):
                _tc("filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                    "match", "ip", field, str(p), "0xffff", "flowid", "1:10")
        self.cut_ports = list(ports)

    def restore(self):
        if self.cut_ports:
            _tc("qdisc", "del", "dev", "lo", "root")
            self.cut_ports = []
