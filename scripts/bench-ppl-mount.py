#!/usr/bin/env python3
"""Benchmark: ppl-mount vs the server's local directory, in one run.

Starts a private ganesha.nfsd (tests/lib/ganesha.py) exporting a directory,
mounts it with ppl-mount (foreground, a direct child), and runs the same fio
jobs on the mount and on the exported directory itself:

  seq-write   1 MiB blocks, O_DIRECT, one job, fsync at the end
  seq-read    1 MiB blocks, O_DIRECT, one job
  rand-read   16 KiB blocks, O_DIRECT, THREADS jobs (psync), TIME seconds
  rand-write  16 KiB blocks, O_DIRECT, THREADS jobs (psync), TIME seconds

Prints a Markdown table. Not a test: numbers depend on the machine.

usage: scripts/bench-ppl-mount.py [--size-mib N] [--time S] [--threads N]
                                  [--connections N] [--build-dir DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "ppl_mount"))

from lib import paths  # noqa: E402
from lib.ganesha import Ganesha  # noqa: E402
from _mount import PplMount  # noqa: E402


def fio(name, directory, rw, bs, size_mib, jobs, runtime=None, extra=()):
    cmd = ["fio", f"--name={name}", f"--directory={directory}", f"--rw={rw}", f"--bs={bs}",
           f"--size={size_mib}M", f"--numjobs={jobs}", "--direct=1", "--ioengine=psync",
           "--group_reporting", "--output-format=json", "--filename=bench.dat", *extra]
    if runtime:
        cmd += ["--time_based", f"--runtime={runtime}"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"fio failed: {' '.join(cmd)}\n{r.stderr}{r.stdout[-2000:]}")
    job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    side = job["read"] if rw in ("read", "randread") else job["write"]
    return side["bw_bytes"] / 2**20, side["iops"]


TESTS = ("seq-write", "seq-read", "rand-read", "rand-write")


def run_suite(directory, args):
    want = args.only or TESTS
    out = {}
    # The sequential write also lays out the file the other tests use.
    out["seq-write"] = fio("seqw", directory, "write", "1M", args.size_mib, 1,
                           extra=["--end_fsync=1"])
    if "seq-read" in want:
        out["seq-read"] = fio("seqr", directory, "read", "1M", args.size_mib, 1)
    if "rand-read" in want:
        out["rand-read"] = fio("rr", directory, "randread", "16k", args.size_mib, args.threads,
                               runtime=args.time)
    if "rand-write" in want:
        out["rand-write"] = fio("rw", directory, "randwrite", "16k", args.size_mib, args.threads,
                                runtime=args.time, extra=["--end_fsync=1"])
    os.unlink(os.path.join(directory, "bench.dat"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--time", type=int, default=10)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--mount-opt", action="append", default=[],
                    help="extra ppl-mount option, e.g. --mount-opt=--wsize=256 (repeatable)")
    ap.add_argument("--only", choices=["seq-write", "seq-read", "rand-read", "rand-write"],
                    action="append", help="run only these tests (repeatable)")
    ap.add_argument("--build-dir")
    args = ap.parse_args()
    if args.build_dir:
        os.environ["PPL_BUILD_DIR"] = args.build_dir
    binary = paths.tool("ppl-mount")

    with tempfile.TemporaryDirectory(prefix="bench-ppl-mount-") as tmp:
        os.mkdir(os.path.join(tmp, "export"))
        server = Ganesha(os.path.join(tmp, "ganesha"), os.path.join(tmp, "export"))
        server.start()
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        m = PplMount(binary, server.url(), mnt, options=[f"--connections={args.connections}", *args.mount_opt],
                     log=os.path.join(tmp, "ppl-mount.log"))
        try:
            m.start()
            local = run_suite(server.export_path, args)
            fuse = run_suite(mnt, args)
        finally:
            m.stop()
            server.stop()

    print(f"fio {args.size_mib} MiB file, O_DIRECT, psync; random: {args.threads} jobs x "
          f"{args.time} s; ppl-mount --connections={args.connections} {' '.join(args.mount_opt)}; "
          f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| test | local dir MiB/s | local IOPS | ppl-mount MiB/s | ppl-mount IOPS | ratio |")
    print("|------|----------------:|-----------:|----------------:|---------------:|------:|")
    for k in TESTS:
        if k not in fuse:
            continue
        (lb, li), (fb, fi) = local[k], fuse[k]
        print(f"| {k} | {lb:.1f} | {li:.0f} | {fb:.1f} | {fi:.0f} | {fb / lb:.2f} |")


if __name__ == "__main__":
    main()
