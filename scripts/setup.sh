#!/usr/bin/env bash
# Installs every Debian package the project needs, and the Ganesha 4.3 source
# headers the FSAL builds against. Idempotent: a second run installs nothing
# new and re-runs `apt-get update` only if a package is missing.
set -euo pipefail

PKGS=(
  # build
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev llvm
  # applier / pool
  libpmem-dev liburcu-dev
  # the metrics endpoint (Metrics_Port: OpenMetrics over HTTP)
  libmicrohttpd-dev
  # ppl-inspect (JSON output)
  libjson-c-dev
  # libcatcher test program (io_uring and libaio styles)
  liburing-dev libaio-dev
  # FSAL build against Debian's Ganesha
  nfs-ganesha nfs-ganesha-vfs libntirpc-dev libkrb5-dev libdbus-1-dev bison flex dpkg-dev
  libacl1-dev libcap-dev libblkid-dev libnfsidmap-dev libwbclient-dev
  rpcbind
  # ppl-mount
  libnfs-dev libnfs-utils libfuse3-dev fuse3 fio
  # the database, its oracle, the load
  mariadb-server mariadb-client mariadb-backup sysbench
  # MariaDB's own test suite (mysql-test-run and the innodb suite), tests/mtr
  mariadb-test
  # tests
  python3 python3-pytest iproute2 procps psmisc
  # tests/deploy: systemd-analyze verify on the shipped units (systemd need
  # not be PID 1); cpack comes with cmake, dpkg-shlibdeps with dpkg-dev
  systemd
  # the metrics test's strict OpenMetrics parser (Debian's python3)
  python3-prometheus-client
  # the storage node under memcheck (tests/lib/memcheck.py)
  valgrind
  # scripts/bench-twonode.py's plots
  python3-matplotlib
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Debian's mariadb-server postinst tries to start a system server; the
  # project never uses it, so keep package scripts from starting services.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all packages present"
fi

# The python3 on PATH may not be Debian's (the tests run whichever it
# is): give it the parser from PyPI when Debian's package does not reach it.
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
  echo "setup.sh: installing prometheus-client for $(command -v python3)"
  python3 -m pip install -q prometheus-client
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
  echo "setup.sh: installing matplotlib for $(command -v python3)"
  python3 -m pip install -q matplotlib
fi

here=$(cd "$(dirname "$0")" && pwd)
"$here/fetch-ganesha-src.sh"
