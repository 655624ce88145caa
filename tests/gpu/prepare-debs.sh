#!/usr/bin/env bash
# prepare-debs.sh — run HERE (the development machine, Debian 12), from the repo root, before a
# device check: downloads OpenMPI, its runtime libraries, OpenBLAS, nlohmann-json and GoogleTest
# as .deb files into .device/debs (git-ignored). The lead then carries `.device/debs` to the GPU
# machine, where tests/gpu/device-check.sh unpacks them with `dpkg -x` into a /tmp prefix
# (never into /). Nothing is installed here.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=.device/debs
mkdir -p "$DEST"
PKGS=(
  # OpenMPI 4.1 and what its libraries and components load at run time
  openmpi-bin libopenmpi3 openmpi-common libopenmpi-dev libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2
  libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libmunge2 libnuma1 libpciaccess0 libltdl7
  libgfortran5 libquadmath0
  # build dependencies of zerotrain that the GPU image may lack
  nlohmann-json3-dev libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libopenblas0 libgtest-dev
)
cd "$DEST"
failed=()
for p in "${PKGS[@]}"; do
  if ! apt-get download "$p" >/dev/null 2>&1; then failed+=("$p"); fi
done
ls -1 *.deb | wc -l | xargs echo "debs in $DEST:"
du -sh . | cut -f1 | xargs echo "size:"
if ((${#failed[@]})); then
  echo "could not download: ${failed[*]}" >&2
  exit 1
fi
