#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build (CPU backend) running the unit tests and the
# fuzz corpus replay (tests/app/test_fuzz.py, fixed seed). Not part of .ci/run (it roughly doubles
# the suite's time); run it before a release:  bash scripts/asan.sh [BUILD_DIR]
# Exit 0 when every test passes with no sanitizer report.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build-asan}"
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DZT_ASAN=ON -DZT_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build "$build" -j "${ZT_JOBS:-2}"
# Open MPI's and OpenBLAS's own allocations are not ours: no leak checking, halt on any error.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1:detect_odr_violation=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
ctest -j "${ZT_JOBS:-2}" --output-on-failure -L unit
ZT_FUZZ_SECONDS="${ZT_FUZZ_SECONDS:-60}" ctest --output-on-failure -R 'fuzz_inputs|hostile_inputs'
