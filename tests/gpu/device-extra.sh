#!/usr/bin/env bash
# device-extra.sh — single-GPU training through the whole engine (called by device-check.sh with
# BUILD set and MPI on PATH). One rank (NCCL communicator of size 1) per run:
#   * gpt-tiny at stages 0-3, fp32 and bf16, 20 steps: must exit 0 with finite losses;
#   * the CUDA loss of stage 0 fp32 vs the CPU backend on the same seed: first-step losses agree;
#   * GPT-2 124M, bf16, stage 1, B=8 x T=1024: throughput, TFLOP/s and MFU (printed by train).
set -u
BIN="$BUILD/zerotrain"
MPI="mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x PATH"
TMP=$(mktemp -d)
fail=0
row() { printf '%-34s %s\n' "$1" "$2"; }
cfg() {  # cfg FILE STAGE DTYPE MBS
  local dt=""
  [ "$3" = bf16 ] && dt='"bf16": {"enabled": true},'
  echo "{\"train_batch_size\": $4, $dt \"zero_optimization\": {\"stage\": $2, \"reduce_bucket_size\": 20000},
         \"steps_per_print\": 5, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-3}}}" > "$1"
}
for dtype in fp32 bf16; do
  for stage in 0 1 2 3; do
    cfg "$TMP/c.json" $stage $dtype 16
    if $MPI "$BIN" train --device cuda --config "$TMP/c.json" --model configs/models/gpt-tiny.json \
         --data markov:vocab=64,order=1,seed=3 --steps 20 --metrics "$TMP/m.jsonl" > "$TMP/log" 2>&1 &&
       python3 -c "import json,math,sys; L=[json.loads(l)['loss'] for l in open('$TMP/m.jsonl')]; sys.exit(0 if all(map(math.isfinite,L)) and L[-1]<L[0] else 1)"; then
      row "train gpt-tiny stage $stage $dtype" "ok ($(tail -n 2 "$TMP/log" | head -n 1 | cut -c1-60))"
    else
      row "train gpt-tiny stage $stage $dtype" "FAILED"; cat "$TMP/log"; fail=1
    fi
  done
done
cfg "$TMP/c.json" 0 fp32 16
for dev in cpu cuda; do
  $MPI "$BIN" train --device $dev --config "$TMP/c.json" --model configs/models/gpt-tiny.json \
    --data markov:vocab=64,order=1,seed=3 --steps 3 --metrics "$TMP/$dev.jsonl" > "$TMP/log_$dev" 2>&1 || fail=1
done
if python3 -c "
import json,sys
a=[json.loads(l)['loss'] for l in open('$TMP/cpu.jsonl')]; b=[json.loads(l)['loss'] for l in open('$TMP/cuda.jsonl')]
print('cpu', a, 'cuda', b); sys.exit(0 if all(abs(x-y) < 1e-4*abs(x) for x,y in zip(a,b)) else 1)"; then
  row "cuda vs cpu losses (fp32, 3 steps)" "ok"
else
  row "cuda vs cpu losses (fp32, 3 steps)" "FAILED"; fail=1
fi
echo '{"train_batch_size": 8, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1},
       "steps_per_print": 2, "optimizer": {"type": "AdamW", "params": {"lr": 6e-4}}}' > "$TMP/big.json"
if $MPI "$BIN" train --device cuda --config "$TMP/big.json" --model configs/models/gpt2-124m.json \
     --data markov:vocab=256,order=1,seed=1 --steps 8 > "$TMP/big.log" 2>&1; then
  row "gpt2-124m bf16 stage 1 B=8 T=1024" "ok: $(grep '^step' "$TMP/big.log" | tail -n 1)"
else
  row "gpt2-124m bf16 stage 1 B=8 T=1024" "FAILED"; tail -n 20 "$TMP/big.log"; fail=1
fi
grep -E "^MFU|^model" "$TMP/big.log" || true
# NCCL path of the collective benchmark (one rank: NCCL vs direct NCCL, latency-bound but exercises the backend)
if $MPI "$BUILD/benchmarks/zt_comm_bench" --device cuda --min-bytes 1M --max-bytes 64M --step-factor 8 \
     > "$TMP/comm.log" 2>&1; then
  row "comm bench nccl np1" "ok"; tail -n 12 "$TMP/comm.log"
else
  row "comm bench nccl np1" "FAILED"; tail -n 20 "$TMP/comm.log"; fail=1
fi
rm -rf "$TMP"
exit $fail
