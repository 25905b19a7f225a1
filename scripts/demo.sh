#!/usr/bin/env bash
# The README's main command: set-up, build, then the replay demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build >/dev/null
PPL_BUILD_DIR=$(pwd)/build exec python3 scripts/replay-demo.py "$@"
