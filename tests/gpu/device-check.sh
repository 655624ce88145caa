#!/usr/bin/env bash
# device-check.sh — the one prepared GPU check (docs/building.md, "GPU status"). Run from the repo root
# on the lent GPU machine, carrying `.device/debs` (made here by tests/gpu/prepare-debs.sh):
#
#   run(command="bash tests/gpu/device-check.sh", carry=[".device/debs"], timeout_s=420)
#
# Usage: device-check.sh [--deadline S] [--out DIR] [--dry-run] [--rehearse-mpi]
#   --deadline S     overall deadline in seconds (default 330, or $ZT_DEADLINE_S). Every step runs
#                    for at most min(its own limit, time left); steps that no longer fit are
#                    recorded as skipped.
#   --out DIR        where logs and the summary go (default $OUT, else /tmp/zt-device-out)
#   --dry-run        print the steps and their budgets, exit 0 (builds and runs nothing)
#   --rehearse-mpi   toolkit + deps + an MPI hello over the carried .debs only, no GPU needed:
#                    the relocation rehearsal, meant for a clean environment here:
#                      env -i HOME=$HOME PATH=<dir without MPI> bash tests/gpu/device-check.sh --rehearse-mpi
#
# Steps, in priority order (a failed step does not stop later ones that can still run):
#   info        GPU, driver, nvcc, cmake, cores
#   toolkit     cuBLAS headers + libraries, NCCL (toolkit or nvidia-nccl wheel), compute-sanitizer,
#               PyTorch, the carried .debs: prints what it found; fails if cuBLAS or NCCL is missing
#   deps        dpkg -x the carried .debs into /tmp/zt-deps (never into /); mpirun from there
#   configure   cmake, CMAKE_CUDA_ARCHITECTURES=90 only
#   build       only the targets the check runs, all cores, -k 0: the fixed tools below plus every
#               executable of a ctest test labelled gpu (found after configure, so a new gpu test
#               target is built and run without editing this script)
#   gpu-tests   ctest -L gpu: the Llama ops first (test_gpu_llama_ops: RMSNorm, rotary embedding,
#               SwiGLU, embedding without positions), then CUDA kernels vs the CPU reference (grouped-query
#               attention, the Lion / Adagrad / LAMB / quantisation engine ops: test_gpu_optim), zeroed-alloc ordering,
#               memory pool, NCCL np1, --cuda-graph eager vs replay, cpu_checkpointing vs recompute
#               alone (bitwise), the key/value cache ops and the KV-cached GPT and Llama decoders
#               (test_gpu_decode), and any other gpu-labelled test
#   memcheck    compute-sanitizer --tool memcheck on a short kernel subset
#   racecheck   compute-sanitizer --tool racecheck on the same subset
#   train-fp32  world size 1, gpt-tiny fp32 at stages 0-3: loss curves identical across stages;
#               first losses vs the CPU backend
#   gpt2-bf16   GPT-2 124M, bf16, B=8 x T=1024, 20 steps: tokens/s and MFU
#   gpt2-graph  the same, 10 steps eager and 10 with --cuda-graph: identical losses, tokens/s of both
#   torch-gpt2  the same GPT-2 124M step in PyTorch (if importable): tokens/s and MFU
#   comm-bench  the NCCL collective benchmark at one rank
#   kernel-bench tests/gpu/bench_gpu_kernels (GEMM TFLOP/s, memory-bound GB/s, % of H200 peak)
#   then, if time is left:
#   memory-total GPT-2 124M, bf16, stage 3, 3 steps: the memory report's device total (reserved +
#               outside the tracker) within 5% of cudaMemGetInfo's in-use bytes; nvidia-smi beside it
#   offload     ZeRO-Offload at stage 2 (pinned, pageable) and stage 3 + offload_param vs the device
#               optimizer (losses within 1e-3 relative; step times)
#   cpu-ckpt    GPT-2 124M bf16 block recompute without / with cpu_checkpointing: bitwise equal
#               losses, host_activations predicted == measured, tokens/s (device-extra.sh cpu-ckpt)
#   long-t      long-context GPT-2 (device-extra.sh long-t)
#
# Each finished step appends a row (step, status, seconds, note) to $OUT/summary.tsv at once; the
# whole table is printed from an EXIT trap, so a run killed at its deadline still returns it.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

DEADLINE=${ZT_DEADLINE_S:-330}
DRY_RUN=0
REHEARSE=0
OUT_DIR=${OUT:-/tmp/zt-device-out}
while [ $# -gt 0 ]; do
  case $1 in
    --deadline) DEADLINE=$2; shift 2 ;;
    --deadline=*) DEADLINE=${1#*=}; shift ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --out=*) OUT_DIR=${1#*=}; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    --rehearse-mpi) REHEARSE=1; shift ;;
    -h|--help) sed -n '2,46p' "$0"; exit 0 ;;
    *) echo "device-check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $DEADLINE in ''|*[!0-9]*) echo "device-check.sh: --deadline wants whole seconds, got '$DEADLINE'" >&2; exit 2 ;; esac

BUILD=${ZT_BUILD_DIR:-build-gpu}
PREFIX=${ZT_DEPS_PREFIX:-/tmp/zt-deps}
DEBS=${ZT_DEBS:-.device/debs}
JOBS=${ZT_JOBS:-$(nproc 2>/dev/null || echo 16)}
RESERVE=5  # seconds kept for the summary
# Only what the steps below run: these tools, plus every gpu-labelled ctest test's executable
# (gpu_test_targets, after configure).
TARGETS=(zerotrain zt_comm_bench bench_gpu_kernels)
# Short kernel subset for the sanitizers (shared-memory reductions, attention incl. grouped-query,
# loss, optimizer).
SANITIZE_FILTER='*LayerNormForwardBackward/bf16:*SquaredNormMatchesAndIsDeterministic/fp32:*ColumnReductionsAreDeterministic/fp32:*SoftmaxCrossEntropyWithIgnoredTargetsAndAliasing/bf16:*AttentionForwardBackward/bf16:*TiledAttentionMatchesCpu/bf16:*GqaBackwardIsDeterministic/bf16:GpuTest.AdamAllDtypeCombinations:GpuTest.AdamStepMultiMatchesPerChunkSteps:*LayerNormPathsMatchCpuAndRepeat/bf16:*GpuLinear.BackwardMatchesCpu/bf16'

# name limit_s log  — the plan, in order (also what --dry-run prints).
PLAN=(
  "info 15 setup.log"
  "toolkit 20 setup.log"
  "deps 60 setup.log"
  "configure 60 build.log"
  "build 200 build.log"
  "gpu-tests 120 gpu-tests.log"
  "memcheck 45 sanitizer.log"
  "racecheck 45 sanitizer.log"
  "train-fp32 60 train.log"
  "gpt2-bf16 60 perf.log"
  "gpt2-graph 45 perf.log"
  "torch-gpt2 60 perf.log"
  "comm-bench 30 perf.log"
  "kernel-bench 30 perf.log"
  "memory-total 45 train.log"
  "offload 40 train.log"
  "cpu-ckpt 45 train.log"
  "long-t 60 train.log"
)
[ $REHEARSE = 1 ] && PLAN=("toolkit 20 setup.log" "deps 60 setup.log" "mpi-hello 60 setup.log")

if [ $DRY_RUN = 1 ]; then
  echo "device-check.sh dry run: deadline ${DEADLINE}s (${RESERVE}s kept for the summary), out $OUT_DIR, build $BUILD, -j$JOBS"
  echo "build targets: ${TARGETS[*]} + the executables of every ctest test labelled gpu (CMAKE_CUDA_ARCHITECTURES=90)"
  printf '%-13s %8s %10s  %s\n' step limit_s "by_s(max)" log
  t=0
  for p in "${PLAN[@]}"; do
    set -- $p
    t=$((t + $2))
    printf '%-13s %8s %10s  %s\n' "$1" "$2" "$t" "$3"
  done
  echo "sum of limits ${t}s; each step gets min(limit, time left before the deadline)"
  exit 0
fi

OUT=$OUT_DIR
mkdir -p "$OUT"
SUMMARY="$OUT/summary.tsv"
printf 'step\tstatus\tseconds\tnote\n' >"$SUMMARY"
START=$(date +%s)
CURRENT=""       # step running now (for the trap)
CURRENT_PID=""
CURRENT_T0=0

limit_of() { local p; for p in "${PLAN[@]}"; do set -- $p; [ "$1" = "$STEP_Q" ] && { echo "$2"; return; }; done; echo 30; }
log_of() { local p; for p in "${PLAN[@]}"; do set -- $p; [ "$1" = "$STEP_Q" ] && { echo "$3"; return; }; done; echo misc.log; }
time_left() { echo $((START + DEADLINE - RESERVE - $(date +%s))); }
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$SUMMARY"; }
skip() { row "$1" skipped - "$2"; }

# step NAME COMMAND — runs COMMAND (a string, bash -c) for at most min(limit, time left), output
# appended to the step's log; the last line starting with "NOTE: " becomes the row's note.
step() {
  local name=$1 cmd=$2 limit log left size rc status note
  STEP_Q=$name; limit=$(limit_of); log=$(log_of)
  left=$(time_left)
  if [ "$left" -lt 5 ]; then skip "$name" "deadline (${DEADLINE}s) reached"; return 99; fi
  [ "$limit" -gt "$left" ] && limit=$left
  { echo; echo "=== [$name] $(date -u +%H:%M:%S) limit ${limit}s: $cmd"; } >>"$OUT/$log"
  size=$(stat -c %s "$OUT/$log")
  CURRENT=$name CURRENT_T0=$(date +%s)
  timeout --kill-after=5 "$limit" bash -c "$cmd" >>"$OUT/$log" 2>&1 &
  CURRENT_PID=$!
  wait "$CURRENT_PID"
  rc=$?
  CURRENT="" CURRENT_PID=""
  note=$(tail -c +$((size + 1)) "$OUT/$log" | grep -a '^NOTE: ' | tail -n 1 | cut -c7- | tr '\t' ' ')
  if [ $rc -eq 0 ]; then status=ok
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="TIMEOUT(${limit}s)"
  else status="FAIL(rc=$rc)"; fi
  [ $rc -ne 0 ] && [ -z "$note" ] && note="see $log"
  row "$name" "$status" $(($(date +%s) - CURRENT_T0)) "$note"
  return $rc
}

print_summary() {
  local rc=$?
  trap - TERM INT HUP
  if [ -n "$CURRENT" ]; then
    [ -n "$CURRENT_PID" ] && kill -TERM "$CURRENT_PID" 2>/dev/null
    row "$CURRENT" killed $(($(date +%s) - CURRENT_T0)) "the check was stopped while this step ran"
  fi
  # Last lines of each failed step's log, then the table (last, so it is what a reader sees).
  awk -F'\t' 'NR > 1 && $2 !~ /^(ok|skipped)$/ {print $1}' "$SUMMARY" | while read -r name; do
    STEP_Q=$name; log=$(log_of)
    echo; echo "----- last lines of $log (step $name: not ok) -----"; tail -n 25 "$OUT/$log"
  done
  {
    echo
    echo "zerotrain device check — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(($(date +%s) - START)) s of ${DEADLINE} s, logs in $OUT"
    awk -F'\t' '{printf "%-13s %-16s %7s  %s\n", $1, $2, $3, $4}' "$SUMMARY"
  } | tee "$OUT/summary.txt"
  # Exit status: the signal's, else 1 when any step was not ok (skipped is fine), else 0.
  if [ "$rc" -eq 0 ] && awk -F'\t' 'NR > 1 && $2 !~ /^(ok|skipped)$/ {bad = 1} END {exit !bad}' "$SUMMARY"; then rc=1; fi
  exit $rc
}
trap print_summary EXIT
trap 'exit 143' TERM INT HUP

# ---- environment: the carried MPI (relocated by OPAL_PREFIX), NCCL from the toolkit or the wheel
export PATH="$PREFIX/usr/bin:/usr/local/cuda/bin:$PATH"
export OPAL_PREFIX="$PREFIX/usr"
export PMIX_PREFIX="$PREFIX/usr/lib/x86_64-linux-gnu/pmix2"
export PMIX_MCA_mca_base_component_path="$PREFIX/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
# PMIx finds its plugins through PMIX_PKGLIBDIR (not PMIX_PREFIX nor the component path): without
# it the rehearsal here loaded pmix_mca_pcompress_zlib.so from the system's /usr/lib.
export PMIX_PKGLIBDIR="$PREFIX/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
# hwloc loads optional plugins from its compiled-in /usr/lib/x86_64-linux-gnu/hwloc (the system's,
# here); the .debs carry none, so point it into the prefix: the same (no plugins) on both machines.
export HWLOC_PLUGINS_PATH="$PREFIX/usr/lib/x86_64-linux-gnu/hwloc"
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LIBDIRS="$PREFIX/usr/lib/x86_64-linux-gnu:$PREFIX/usr/lib/x86_64-linux-gnu/openmpi/lib:$PREFIX/usr/lib/x86_64-linux-gnu/openblas-pthread"
NCCL_ROOT=""
if [ -f /usr/local/cuda/include/nccl.h ] && ls /usr/local/cuda/lib*/libnccl.so* >/dev/null 2>&1; then
  NCCL_FROM="the CUDA toolkit (/usr/local/cuda)"
else
  # nvidia-nccl-cu13 wheel: <site-packages>/nvidia/.../lib/libnccl.so.2 with include/nccl.h beside lib/
  NCCL_ROOT=$(python3 - 2>/dev/null <<'PY' || true
import glob, os, sys
for d in sys.path:
    for lib in sorted(glob.glob(os.path.join(d, "nvidia", "**", "libnccl.so.2"), recursive=True)):
        root = os.path.dirname(os.path.dirname(lib))
        if os.path.exists(os.path.join(root, "include", "nccl.h")):
            print(root); sys.exit(0)
PY
)
  if [ -n "$NCCL_ROOT" ]; then NCCL_FROM="the wheel at $NCCL_ROOT"; LIBDIRS="$LIBDIRS:$NCCL_ROOT/lib"; else NCCL_FROM=""; fi
fi
export LD_LIBRARY_PATH="$LIBDIRS:${LD_LIBRARY_PATH:-}"
export ZT_PREFIX="$PREFIX" ZT_DEBS_DIR="$DEBS" ZT_NCCL_FROM="$NCCL_FROM" BUILD
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
export SANITIZER

# ---- info, toolkit ----------------------------------------------------------------------------
[ $REHEARSE = 0 ] && step info 'nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader;
  /usr/local/cuda/bin/nvcc --version | tail -n 2; cmake --version | head -n 1; ninja --version; python3 --version;
  echo "cores $(nproc)"; free -g | head -n 2; uname -r;
  echo "NOTE: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true), $(nproc) cores"; command -v nvidia-smi >/dev/null'

step toolkit 'miss=();
  found() { echo "  found $1: $2"; }
  h=$(ls /usr/local/cuda/include/cublas_v2.h /usr/local/cuda/targets/*/include/cublas_v2.h 2>/dev/null | head -n 1);
  [ -n "$h" ] && found "cuBLAS header" "$h" || miss+=(cublas_v2.h);
  l=$(ls /usr/local/cuda/lib64/libcublas.so* /usr/local/cuda/targets/*/lib/libcublas.so* 2>/dev/null | head -n 1);
  [ -n "$l" ] && found "cuBLAS library" "$l" || miss+=(libcublas.so);
  l=$(ls /usr/local/cuda/lib64/libcudart.so* /usr/local/cuda/targets/*/lib/libcudart.so* 2>/dev/null | head -n 1);
  [ -n "$l" ] && found "CUDA runtime" "$l" || miss+=(libcudart.so);
  [ -n "$ZT_NCCL_FROM" ] && found NCCL "$ZT_NCCL_FROM" || miss+=(NCCL);
  [ -n "$SANITIZER" ] && found compute-sanitizer "$SANITIZER" || echo "  no compute-sanitizer (memcheck/racecheck will be skipped)";
  python3 -c "import torch; print(\"  found PyTorch\", torch.__version__, \"CUDA\", torch.version.cuda)" 2>/dev/null || echo "  no PyTorch (torch-gpt2 will be skipped)";
  n=$(ls "$ZT_DEBS_DIR"/*.deb 2>/dev/null | wc -l);
  [ "$n" -gt 0 ] && found "carried .debs" "$n in $ZT_DEBS_DIR ($(ls "$ZT_DEBS_DIR" | grep -c "^openmpi-bin\|^libopenmpi") of them OpenMPI)" || miss+=(".debs in $ZT_DEBS_DIR");
  command -v mpirun.openmpi >/dev/null && [ "$(dirname "$(command -v mpirun.openmpi)")" != "$ZT_PREFIX/usr/bin" ] && echo "  note: a system MPI is on PATH: $(command -v mpirun.openmpi)";
  if [ ${#miss[@]} -gt 0 ]; then echo "NOTE: missing: ${miss[*]}"; exit 1; fi;
  echo "NOTE: cuBLAS ok, NCCL from ${ZT_NCCL_FROM%% (*}, $n debs, sanitizer ${SANITIZER:+yes}${SANITIZER:-no}"'

# ---- deps: MPI, OpenBLAS, json, gtest from the carried .debs -----------------------------------
if ls "$DEBS"/*.deb >/dev/null 2>&1; then
  step deps 'set -e; mkdir -p "$ZT_PREFIX";
    for f in "$ZT_DEBS_DIR"/*.deb; do dpkg -x "$f" "$ZT_PREFIX"; done;
    cd "$ZT_PREFIX/usr/bin";
    for t in mpicc mpicxx mpirun mpiexec; do [ -e $t.openmpi ] && ln -sf $t.openmpi $t; done;
    echo "prefix: $ZT_PREFIX"; echo "mpirun: $(command -v mpirun)"; mpirun --version | head -n 1;
    mpicc -showme:compile; mpicc -showme:link;
    mpirun --allow-run-as-root -np 1 hostname;
    echo "NOTE: $(mpirun --version | head -n 1) from $(dirname "$(command -v mpirun)")"'
else
  skip deps "no $DEBS: run tests/gpu/prepare-debs.sh here and carry .device/debs"
fi

if [ $REHEARSE = 1 ]; then
  # An MPI program built with the carried mpicc and run on 2 ranks; every MPI/PMIx/hwloc library
  # mapped by a rank or by its parent (mpirun) must come from the prefix (a system MPI here would
  # otherwise hide a broken relocation).
  step mpi-hello 'set -e; d=$(mktemp -d); cat >"$d/hello.c" <<EOF
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char** argv) {
  int r, n; MPI_Init(&argc, &argv); MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
  int v = r + 1, s = 0; MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d of %d: allreduce %d\n", r, n, s);
  char path[4096], line[4096];
  snprintf(path, sizeof path, "%s/maps.%d", argv[1], r);
  FILE* out = fopen(path, "w");
  for (int who = 0; out && who < 2; ++who) {
    snprintf(path, sizeof path, "/proc/%d/maps", who ? (int)getppid() : (int)getpid());
    FILE* f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
      char* p = strchr(line, 0x2f);
      if (p && strstr(p, ".so") && (strstr(p, "mpi") || strstr(p, "libopen-") || strstr(p, "pmix") || strstr(p, "hwloc") || strstr(p, "mca_")))
        fprintf(out, "map %s", p);
    }
    if (f) fclose(f);
  }
  if (out) fclose(out);
  MPI_Finalize(); return s == n * (n + 1) / 2 ? 0 : 1;
}
EOF
    mpicc "$d/hello.c" -o "$d/hello"; ldd "$d/hello" | grep -E "mpi|pmix|hwloc|open-";
    mpirun --allow-run-as-root --oversubscribe -np 2 "$d/hello" "$d"; cat "$d"/maps.* >"$d/out";
    sort -u "$d/out" | sed "s/^map /  mapped: /";
    outside=$(grep "^map" "$d/out" | grep -v "map $ZT_PREFIX/" | sort -u || true);
    if [ -n "$outside" ]; then echo "MPI files mapped from outside $ZT_PREFIX:"; echo "$outside"; echo "NOTE: relocation leaks outside the prefix"; exit 1; fi;
    echo "NOTE: 2-rank allreduce ok; $(grep "^map" "$d/out" | sort -u | wc -l) MPI/PMIx/hwloc libraries mapped by ranks and mpirun, all from $ZT_PREFIX"'
  exit 0
fi

# ---- configure + build (sm_90 only, only what the check runs) --------------------------------
CMAKE_ARGS=(-S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
[ -n "$NCCL_ROOT" ] && CMAKE_ARGS+=(-DNCCL_INCLUDE_DIR="$NCCL_ROOT/include" -DNCCL_LIBRARY="$NCCL_ROOT/lib/libnccl.so.2")
if [ -d "$PREFIX/usr" ]; then
  CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$PREFIX/usr"
    -DMPI_C_COMPILER="$PREFIX/usr/bin/mpicc.openmpi" -DMPIEXEC_EXECUTABLE="$PREFIX/usr/bin/mpirun.openmpi"
    -DCBLAS_INCLUDE_DIR="$PREFIX/usr/include/x86_64-linux-gnu/openblas-pthread"
    "-DCMAKE_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu/openblas-pthread;$PREFIX/usr/lib/x86_64-linux-gnu")
fi
printf -v CMAKE_LINE '%q ' cmake "${CMAKE_ARGS[@]}"
step configure "$CMAKE_LINE && echo \"NOTE: sm_90 only, \$(grep -ao 'zerotrain: CUDA backend.*' '$OUT/build.log' | tail -n 1 | cut -c12-)\""
# The executable (= target) name of every test labelled gpu: the first command word that is a
# file under the build folder (a test may run under mpiexec).
gpu_test_targets() {
  ctest --test-dir "$BUILD" -L gpu --show-only=json-v1 2>/dev/null | python3 -c '
import json, os, sys
build = os.path.realpath(sys.argv[1])
names = set()
for t in json.load(sys.stdin).get("tests", []):
    for w in t.get("command", []):
        if os.path.realpath(w).startswith(build + os.sep):
            names.add(os.path.basename(w)); break
print(" ".join(sorted(names)))' "$BUILD"
}
if [ -f "$BUILD/build.ninja" ]; then
  GPU_TARGETS=$(gpu_test_targets)
  [ -z "$GPU_TARGETS" ] && GPU_TARGETS="test_gpu_kernels"  # ctest json unreadable: at least the kernels
  TARGETS+=($GPU_TARGETS)
  step build "ninja -C '$BUILD' -k 0 -j$JOBS ${TARGETS[*]}; rc=\$?;
    [ \$rc -ne 0 ] && grep -aE 'FAILED:|error' '$OUT/build.log' | head -n 5 | sed 's/^/  /';
    echo \"NOTE: ${#TARGETS[@]} targets, -j$JOBS\$([ \$rc -ne 0 ] && echo ', some failed')\"; exit \$rc"
else
  skip build "configure failed"
fi
have() { [ -x "$BUILD/$1" ]; }

# ---- GPU kernel tests vs the CPU reference, then the sanitizers --------------------------------
if have tests/gpu/test_gpu_kernels; then
  # -V: every gtest line lands in the log, so the note can count passed / skipped / failed cases.
  step gpu-tests "ctest --test-dir '$BUILD' -L gpu -V --no-tests=error --timeout 100; rc=\$?;
    L='$OUT/gpu-tests.log';
    echo \"NOTE: gtest cases \$(grep -acE '\\[       OK \\] .*\\([0-9]+ ms\\)' \$L) ok, \$(grep -acE '\\[  SKIPPED \\] .*\\([0-9]+ ms\\)' \$L) skipped, \$(grep -acE '\\[  FAILED  \\] .*\\([0-9]+ ms\\)' \$L) failed\"; exit \$rc"
  if [ -n "$SANITIZER" ]; then
    for tool in memcheck racecheck; do
      step $tool "'$SANITIZER' --tool $tool --error-exitcode 3 --print-limit 20 '$BUILD/tests/gpu/test_gpu_kernels' --gtest_filter='$SANITIZE_FILTER';
        rc=\$?; echo \"NOTE: $tool on $(echo "$SANITIZE_FILTER" | tr ':' '\n' | wc -l) kernel tests, rc \$rc\"; exit \$rc"
    done
  else
    skip memcheck "no compute-sanitizer"; skip racecheck "no compute-sanitizer"
  fi
else
  skip gpu-tests "test_gpu_kernels not built"; skip memcheck "not built"; skip racecheck "not built"
fi

# ---- training, performance, PyTorch side by side, NCCL benchmark -----------------------------
if have zerotrain; then
  step train-fp32 "bash tests/gpu/device-extra.sh stages-fp32"
  step gpt2-bf16 "bash tests/gpu/device-extra.sh gpt2-bf16"
  step gpt2-graph "bash tests/gpu/device-extra.sh gpt2-graph"
else
  skip train-fp32 "zerotrain not built"; skip gpt2-bf16 "zerotrain not built"; skip gpt2-graph "zerotrain not built"
fi
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  step torch-gpt2 "python3 tests/gpu/torch_gpt2.py --steps 20 --batch 8"
else
  skip torch-gpt2 "PyTorch with CUDA not importable"
fi
if have benchmarks/zt_comm_bench; then step comm-bench "bash tests/gpu/device-extra.sh comm-bench"; else skip comm-bench "zt_comm_bench not built"; fi
if have tests/gpu/bench_gpu_kernels; then
  step kernel-bench "'$BUILD/tests/gpu/bench_gpu_kernels'; rc=\$?; echo 'NOTE: see perf.log'; exit \$rc"
else
  skip kernel-bench "bench_gpu_kernels not built"
fi
# Lower priority: only with the time the steps above left.
if have zerotrain; then
  step memory-total "bash tests/gpu/device-extra.sh memory-total"
  step offload "bash tests/gpu/device-extra.sh offload"
  step cpu-ckpt "bash tests/gpu/device-extra.sh cpu-ckpt"
  step long-t "bash tests/gpu/device-extra.sh long-t"
else
  skip memory-total "zerotrain not built"; skip offload "zerotrain not built"; skip cpu-ckpt "zerotrain not built"; skip long-t "zerotrain not built"
fi
