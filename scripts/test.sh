#!/usr/bin/env bash
# The whole test suite: set-up, a normal and an ASan+UBSan build, the C unit
# tests under both (ctest), the threaded ones under ThreadSanitizer, a short
# fuzz run, and the tests that start real servers (pytest). Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/setup.sh || { echo "setup.sh failed"; exit 1; }

results=$root/build/test-results
rm -rf "$results"
mkdir -p "$results"
status=0

step() { echo; echo "=== $*"; }

step "build (RelWithDebInfo)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && ninja -C build || exit 1
step "build (ASan+UBSan)"
cmake -S . -B build-asan -G Ninja -DPPL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null && ninja -C build-asan || exit 1
step "build (libFuzzer targets, clang)"
CC=clang cmake -S . -B build-fuzz -G Ninja -DPPL_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && ninja -C build-fuzz || exit 1

step "build (ThreadSanitizer: the threaded engine tests)"
cmake -S . -B build-tsan -G Ninja -DPPL_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
  ninja -C build-tsan threaded_tests || exit 1

step "unit tests"
ctest --test-dir build --output-on-failure --output-junit "$results/ctest.xml" || status=1
step "unit tests under ASan+UBSan"
ctest --test-dir build-asan --output-on-failure --output-junit "$results/ctest-asan.xml" || status=1
step "threaded unit tests under ThreadSanitizer"
ctest --test-dir build-tsan --output-on-failure -L threaded --output-junit "$results/ctest-tsan.xml" || status=1
step "fuzz targets (short runs)"
ctest --test-dir build-fuzz --output-on-failure -L fuzz --output-junit "$results/ctest-fuzz.xml" || status=1

step "server tests (pytest)"
PPL_BUILD_DIR=$root/build python3 -m pytest -v -p no:cacheprovider --junitxml="$results/pytest.xml" tests "$@"
rc=$?
# pytest exit 5 = nothing collected: that is a failure of the suite here.
[ $rc -eq 0 ] || status=1

python3 scripts/junit-summary.py "$results"/*.xml || status=1
exit $status
