#!/usr/bin/env bash
# test.sh — set up (install, configure, build) and run the whole test suite.
# Extra arguments go to ctest (e.g. -R config, -L mpi).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$BUILD_DIR"
ctest --output-on-failure -j "${CTEST_JOBS:-2}" "$@"
