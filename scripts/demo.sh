#!/usr/bin/env bash
# The README's main command: set-up, build, then MariaDB over the pushdown
# stack, elide vs full page writes side by side (scripts/pushdown-demo.py;
# arguments go to it, e.g. --seconds 120, --link-rate 1gbit).
# `scripts/demo.sh twonode [ARGS]` runs the side-by-side benchmark instead
# (scripts/bench-twonode.py: local, stock FSAL_VFS, tuned, the stack).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPPL_SANITIZE=OFF >/dev/null
ninja -C build >/dev/null
if [ "${1:-}" = twonode ]; then
  shift
  PPL_BUILD_DIR=$(pwd)/build exec python3 scripts/bench-twonode.py "$@"
fi
PPL_BUILD_DIR=$(pwd)/build exec python3 scripts/pushdown-demo.py "$@"
