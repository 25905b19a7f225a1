#!/usr/bin/env bash
# Ganesha's FSAL API headers are not packaged by Debian. The FSAL is built
# against the same 4.3 source Debian built ganesha.nfsd from, obtained with
# `apt-get source` from deb-src entries derived from this machine's own apt
# sources (no host name is written here), then configured (not built) so
# that include/config.h matches Debian's binary.
set -euo pipefail

DEST=${PPL_GANESHA_SRC:-/opt/ppl/ganesha-src}
# Flags matching Debian's binary. Debian's libganesha_nfsd links libacl,
# libnfsidmap, libcap, libblkid and libwbclient, so NFSACL3, NFSIDMAP, CAPS,
# BLKID and MSPAC are on there; USE_NFSACL3 changes struct nfs_core_param
# and the protocol enum, which plugins see. These only switch on when the
# -dev packages are present at configure time (setup.sh installs them), so
# a config.h made without them is redone.
FLAGS=(-DUSE_SYSTEM_NTIRPC=ON -DUSE_FSAL_VFS=ON -DUSE_FSAL_NULL=ON
  -DUSE_DBUS=ON -DUSE_GSS=ON -DUSE_9P=ON -D_MSPAC_SUPPORT=ON -DUSE_NFSACL3=ON -DUSE_LTTNG=OFF
  -DUSE_ADMIN_TOOLS=OFF -DUSE_GUI_ADMIN_TOOLS=OFF -DUSE_RADOS_RECOV=OFF -DRADOS_URLS=OFF
  -DUSE_MAN_PAGE=OFF -DUSE_FSAL_PROXY_V4=OFF -DUSE_FSAL_PROXY_V3=OFF -DUSE_FSAL_CEPH=OFF
  -DUSE_FSAL_GPFS=OFF -DUSE_FSAL_XFS=OFF -DUSE_FSAL_LUSTRE=OFF -DUSE_FSAL_GLUSTER=OFF
  -DUSE_FSAL_RGW=OFF -DUSE_FSAL_KVSFS=OFF -DUSE_FSAL_MEM=OFF -DUSE_FSAL_LIZARDFS=OFF
  -DUSE_FSAL_SAUNAFS=OFF)
MUST_DEFINE=(USE_NFSACL3 USE_NFSIDMAP USE_CAPS USE_BLKID _MSPAC_SUPPORT _USE_9P USE_DBUS)

configured_ok() {
  local h="$DEST/build/include/config.h" d
  [ -f "$h" ] || return 1
  for d in "${MUST_DEFINE[@]}"; do grep -q "^#define $d 1" "$h" || return 1; done
}

configure() {
  rm -rf "$DEST/build"
  mkdir -p "$DEST/build"
  ( cd "$DEST/build" && cmake ../src "${FLAGS[@]}" >"$DEST/configure.log" 2>&1 ) || {
    echo "fetch-ganesha-src.sh: configuring Ganesha failed; see $DEST/configure.log" >&2; exit 1; }
  if ! configured_ok; then
    echo "fetch-ganesha-src.sh: $DEST/build/include/config.h does not match Debian's ganesha.nfsd" >&2
    echo "  (one of ${MUST_DEFINE[*]} is missing; see $DEST/configure.log for the library" >&2
    echo "  that was not found and install its -dev package, normally done by scripts/setup.sh)" >&2
    exit 1
  fi
  echo "fetch-ganesha-src.sh: Ganesha source configured in $DEST"
}

if [ -f "$DEST/src/include/fsal_api.h" ]; then
  if configured_ok; then
    echo "fetch-ganesha-src.sh: $DEST already configured"
  else
    configure
  fi
  exit 0
fi

srcfile=/etc/apt/sources.list.d/ppl-deb-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
    # deb822 entries: same URIs/Suites/Components, type deb-src.
    cat /etc/apt/sources.list.d/*.sources | sed 's/^Types: deb$/Types: deb-src/' > "$srcfile"
  else
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' > /etc/apt/sources.list.d/ppl-deb-src.list
  fi
  apt-get update -qq
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
( cd "$work" && chmod 777 "$work" && apt-get source --download-only nfs-ganesha >/dev/null 2>&1 || true )
orig=$(ls "$work"/nfs-ganesha_4.3*.orig.tar.* 2>/dev/null | head -1 || true)
if [ -z "$orig" ]; then
  echo "fetch-ganesha-src.sh: could not download the nfs-ganesha 4.3 source (.orig.tar) with apt-get source;" >&2
  echo "  check that deb-src entries exist in /etc/apt/sources.list.d and run apt-get update" >&2
  exit 1
fi
rm -rf "$DEST"
mkdir -p "$DEST/unpack"
tar -xf "$orig" -C "$DEST/unpack"
srcdir=$(ls -d "$DEST"/unpack/nfs-ganesha-*/src)
mv "$srcdir" "$DEST/src"
rm -rf "$DEST/unpack"
configure
