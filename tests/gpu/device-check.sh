#!/usr/bin/env bash
# device-check.sh — the one prepared GPU check (docs/device.md). Run from the repo root on the
# lent GPU machine, carrying `.device/debs` (made here by tests/gpu/prepare-debs.sh):
#
#   run(command="bash tests/gpu/device-check.sh", carry=[".device/debs"], timeout_s=540)
#
# Steps (each one's failure is recorded in the table; later steps still run where they can):
#   info       GPU, driver, toolkit, cmake, python versions
#   deps       dpkg -x the carried .debs into /tmp/zt-deps (never into /); find NCCL
#   configure  cmake -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 into build-gpu
#   build      ninja -k 0 -j16 (keeps going past broken targets)
#   gpu-tests  ctest -L gpu (CUDA kernels vs the CPU backend, NCCL single-rank tests, ...)
#   nccl-other ctest -R nccl|cuda for tests that forgot the gpu label
#   bench      tests/gpu bench_gpu_kernels (GEMM TFLOP/s, memory-bound kernels GB/s)
#   extra      tests/gpu/device-extra.sh, if present (e.g. a single-GPU training smoke run)
#   cpu-tests  ctest -L unit (only with ZT_CHECK_CPU=1)
# ZT_DRY_RUN=1 stops after configure (a rehearsal that needs no GPU).
# Logs go to $OUT (at most 8 files come back, so one log per step group), and the summary
# table is printed LAST. Target runtime: < 8 minutes.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/zt-device-out}
mkdir -p "$OUT"
BUILD=${ZT_BUILD_DIR:-build-gpu}
PREFIX=${ZT_DEPS_PREFIX:-/tmp/zt-deps}
DEBS=${ZT_DEBS:-.device/debs}
JOBS=${ZT_JOBS:-16}
START=$(date +%s)
ROWS=()
FAILED_LOGS=()

# step NAME LOG LIMIT_S COMMAND... — runs COMMAND (a string, bash -c) with a time limit,
# appending to $OUT/LOG, and records one table row. Returns the command's status.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local t0 rc status
  t0=$(date +%s)
  { echo; echo "=== [$name] $(date -u +%H:%M:%S) $*"; } >>"$OUT/$log"
  timeout --kill-after=15 "$limit" bash -c "$*" >>"$OUT/$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then status=ok
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="TIMEOUT(${limit}s)"
  else status="FAIL(rc=$rc)"; fi
  [ $rc -ne 0 ] && FAILED_LOGS+=("$name:$log")
  ROWS+=("$(printf '%-11s %-16s %5ss  %s' "$name" "$status" "$(($(date +%s) - t0))" "$log")")
  return $rc
}
skip() { ROWS+=("$(printf '%-11s %-16s %5s   %s' "$1" "skipped" "-" "$2")"); }

# ---- info -------------------------------------------------------------------------------
step info setup.log 60 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader;
  (command -v nvcc || ls /usr/local/cuda/bin/nvcc) && /usr/local/cuda/bin/nvcc --version | tail -2;
  cmake --version | head -1; ninja --version; python3 --version; nproc; free -g | head -2; uname -r;
  ldd --version | head -1'

# ---- deps: MPI, OpenBLAS, json, gtest from the carried .debs; NCCL from the wheel -------
export PATH="$PREFIX/usr/bin:/usr/local/cuda/bin:$PATH"
export OPAL_PREFIX="$PREFIX/usr"
export PMIX_PREFIX="$PREFIX/usr/lib/x86_64-linux-gnu/pmix2"
export PMIX_MCA_mca_base_component_path="$PREFIX/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LIBDIRS="$PREFIX/usr/lib/x86_64-linux-gnu:$PREFIX/usr/lib/x86_64-linux-gnu/openmpi/lib:$PREFIX/usr/lib/x86_64-linux-gnu/openblas-pthread"
# The nvidia-nccl-cu13 wheel: <site-packages>/nvidia/.../lib/libnccl.so.2 with include/nccl.h beside lib/.
NCCL_ROOT=$(python3 - 2>/dev/null <<'PY' || true
import glob, os, sys
for d in sys.path:
    for lib in sorted(glob.glob(os.path.join(d, "nvidia", "**", "libnccl.so.2"), recursive=True)):
        root = os.path.dirname(os.path.dirname(lib))
        if os.path.exists(os.path.join(root, "include", "nccl.h")):
            print(root); sys.exit(0)
PY
)
if [ -n "$NCCL_ROOT" ] && [ -f "$NCCL_ROOT/lib/libnccl.so.2" ]; then LIBDIRS="$LIBDIRS:$NCCL_ROOT/lib"; fi
export LD_LIBRARY_PATH="$LIBDIRS:${LD_LIBRARY_PATH:-}"
export ZT_PREFIX_FOR_STEPS="$PREFIX" ZT_DEBS_FOR_STEPS="$DEBS"

if [ -d "$DEBS" ] && ls "$DEBS"/*.deb >/dev/null 2>&1; then
  step deps setup.log 120 'set -e; mkdir -p "$ZT_PREFIX_FOR_STEPS";
    for f in "$ZT_DEBS_FOR_STEPS"/*.deb; do dpkg -x "$f" "$ZT_PREFIX_FOR_STEPS"; done;
    cd "$ZT_PREFIX_FOR_STEPS/usr/bin";
    for t in mpicc mpicxx mpirun mpiexec; do [ -e $t.openmpi ] && ln -sf $t.openmpi $t; done;
    echo "prefix: $ZT_PREFIX_FOR_STEPS ($(ls "$ZT_DEBS_FOR_STEPS"/*.deb | wc -l) debs)";
    mpirun --version | head -1; mpicc -showme:compile; mpicc -showme:link;
    mpirun --allow-run-as-root -np 1 hostname'
else
  skip deps "no $DEBS: run tests/gpu/prepare-debs.sh here and carry .device/debs"
fi

NCCL_ARGS=()
if [ -f /usr/local/cuda/include/nccl.h ] && ls /usr/local/cuda/lib*/libnccl.so* >/dev/null 2>&1; then
  echo "NCCL: from the CUDA toolkit" >>"$OUT/setup.log"
elif [ -n "$NCCL_ROOT" ] && [ -f "$NCCL_ROOT/include/nccl.h" ]; then
  NCCL_ARGS=(-DNCCL_INCLUDE_DIR="$NCCL_ROOT/include" -DNCCL_LIBRARY="$NCCL_ROOT/lib/libnccl.so.2")
  echo "NCCL: from the wheel at $NCCL_ROOT" >>"$OUT/setup.log"
else
  echo "NCCL: not found (configure will fail)" >>"$OUT/setup.log"
fi

# ---- configure + build ------------------------------------------------------------------
CMAKE_ARGS=(-S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc "${NCCL_ARGS[@]}")
if [ -d "$PREFIX/usr" ]; then
  CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$PREFIX/usr"
    -DMPI_C_COMPILER="$PREFIX/usr/bin/mpicc.openmpi" -DMPIEXEC_EXECUTABLE="$PREFIX/usr/bin/mpirun.openmpi"
    -DCBLAS_INCLUDE_DIR="$PREFIX/usr/include/x86_64-linux-gnu/openblas-pthread"
    "-DCMAKE_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu/openblas-pthread;$PREFIX/usr/lib/x86_64-linux-gnu")
fi
printf -v CMAKE_LINE '%q ' cmake "${CMAKE_ARGS[@]}"
if step configure build.log 180 "$CMAKE_LINE" && [ "${ZT_DRY_RUN:-0}" = 1 ]; then
  skip build "ZT_DRY_RUN=1 (configure-only rehearsal)"
elif [ -f "$BUILD/build.ninja" ]; then
  step build build.log 420 "ninja -C '$BUILD' -k 0 -j$JOBS"
  BUILD_RC=$?
  # gtest runs on one GPU; ctest -j1 keeps timings clean.
  # -V: every gtest line lands in the log, so the summary can count passed / skipped cases.
  step gpu-tests gpu-tests.log 300 "ctest --test-dir '$BUILD' -L gpu -V --no-tests=error --timeout 280"
  step nccl-other gpu-tests.log 200 "ctest --test-dir '$BUILD' -R 'nccl|cuda|gpu' -LE gpu -V --no-tests=ignore --timeout 180"
  BENCH="$BUILD/tests/gpu/bench_gpu_kernels"
  if [ -x "$BENCH" ]; then step bench bench.log 120 "'$BENCH'"; else skip bench "no $BENCH (build failed?)"; fi
  # Hook for checks owned elsewhere (e.g. a short single-GPU training run): runs with the same
  # environment, BUILD exported; its output goes to bench.log.
  if [ -f tests/gpu/device-extra.sh ]; then
    step extra bench.log 180 "BUILD='$BUILD' bash tests/gpu/device-extra.sh"
  fi
  if [ "${ZT_CHECK_CPU:-0}" = 1 ]; then
    step cpu-tests cpu-tests.log 300 "ctest --test-dir '$BUILD' -L 'unit|mpi' -LE gpu -j8 --timeout 240"
  else
    skip cpu-tests "set ZT_CHECK_CPU=1 to run"
  fi
  [ $BUILD_RC -ne 0 ] && grep -E "FAILED:|error" "$OUT/build.log" | head -40 >"$OUT/build-errors.log"
else
  skip build "configure failed"
fi

# ---- summary (printed last) ----------------------------------------------------------------
for f in "${FAILED_LOGS[@]}"; do
  name=${f%%:*}; log=${f#*:}
  echo
  echo "----- last lines of $log (step $name failed) -----"
  tail -n 40 "$OUT/$log"
done
{
  echo
  echo "zerotrain device check — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(($(date +%s) - START)) s total, logs in \$OUT"
  printf '%-11s %-16s %6s  %s\n' step status time log
  for r in "${ROWS[@]}"; do echo "$r"; done
  if [ -f "$OUT/gpu-tests.log" ]; then
    grep -hE "tests passed|tests failed out of" "$OUT/gpu-tests.log" | sed 's/^/ctest: /'
    echo "gtest cases: $(grep -cE '\[       OK \] .*\([0-9]+ ms\)' "$OUT/gpu-tests.log") ok," \
      "$(grep -cE '\[  SKIPPED \] .*\([0-9]+ ms\)' "$OUT/gpu-tests.log") skipped," \
      "$(grep -cE '\[  FAILED  \] .*\([0-9]+ ms\)' "$OUT/gpu-tests.log") failed"
    grep -hE '\[  FAILED  \] .*\([0-9]+ ms\)' "$OUT/gpu-tests.log" | head -20 | sed 's/^/  /'
  fi
} | tee "$OUT/summary.txt"
