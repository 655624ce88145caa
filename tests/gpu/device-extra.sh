#!/usr/bin/env bash
# device-extra.sh — the training and benchmark checks of device-check.sh, one per subcommand (it
# runs each as its own step with its own time limit). Needs BUILD (the build folder) and MPI on
# PATH. One rank (NCCL communicator of size 1) per run. The last "NOTE: " line is the step's note.
#
#   stages-fp32  gpt-tiny, fp32, stages 0-3, 20 steps: finite, falling losses, and the loss curve
#                identical at every stage; then 3 steps of stage 0 on the CPU backend: first
#                losses agree with the GPU's (rel 1e-4)
#   gpt2-bf16    GPT-2 124M, bf16, stage 1, B=8 x T=1024, 20 steps: tokens/s and MFU (median of
#                steps 6-20)
#   gpt2-graph   the same model, 10 steps eager then 10 with --cuda-graph: identical losses,
#                graphs replayed, tokens/s side by side
#   memory-total GPT-2 124M, bf16, stage 3, B=4 x T=1024, 3 steps with --memory-report: the report's
#                device total (reserved bytes of the device categories + the memory outside the
#                tracker) within 5% of cudaMemGetInfo's in-use bytes at report time; nvidia-smi's
#                peak memory.used during the run printed beside it
#   cpu-ckpt     GPT-2 124M, bf16, stage 2, B=8 x T=1024, block recompute, 8 steps without and with
#                activation_checkpointing.cpu_checkpointing: bitwise equal losses, host_activations
#                measured == predicted, device activations lower, tokens/s side by side
#   comm-bench   the collective benchmark, NCCL at one rank (checks results, exercises the backend)
#
# ZT_TRAIN_DEVICE=cpu runs stages-fp32 and memory-total on the CPU backend (a rehearsal that needs
# no GPU; memory-total then uses ZT_MEM_MODEL, default gpt-tiny, and has no device figure to compare).
set -u
BUILD=${BUILD:?set BUILD to the build folder}
BIN="$BUILD/zerotrain"
DEVICE=${ZT_TRAIN_DEVICE:-cuda}
MPI=(mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x PATH)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cfg() {  # cfg FILE STAGE DTYPE BATCH
  local dt=""
  [ "$3" = bf16 ] && dt='"bf16": {"enabled": true},'
  echo "{\"train_batch_size\": $4, $dt \"zero_optimization\": {\"stage\": $2, \"reduce_bucket_size\": 20000},
         \"steps_per_print\": 5, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-3}}}" >"$1"
}
train() {  # train DEVICE CONFIG MODEL DATA STEPS METRICS LOG [EXTRA ARGS...]
  local d=$1 c=$2 m=$3 data=$4 n=$5 metrics=$6 log=$7
  shift 7
  "${MPI[@]}" "$BIN" train --device "$d" --config "$c" --model "$m" --data "$data" --steps "$n" --metrics "$metrics" "$@" >"$log" 2>&1
}

stages_fp32() {
  local fail=0 stage
  for stage in 0 1 2 3; do
    cfg "$TMP/c$stage.json" $stage fp32 16
    if train "$DEVICE" "$TMP/c$stage.json" configs/models/gpt-tiny.json markov:vocab=64,order=1,seed=3 20 \
         "$TMP/s$stage.jsonl" "$TMP/s$stage.log"; then
      echo "stage $stage: $(grep '^step' "$TMP/s$stage.log" | tail -n 1 | cut -c1-70)"
    else
      echo "stage $stage: FAILED"; tail -n 20 "$TMP/s$stage.log"; fail=1
    fi
  done
  [ $fail = 0 ] || { echo "NOTE: a stage failed to train"; return 1; }
  python3 - "$TMP" <<'PY' || fail=1
import json, math, sys
d = sys.argv[1]
curves = {s: [json.loads(l)["loss"] for l in open(f"{d}/s{s}.jsonl")] for s in range(4)}
ref = curves[0]
ok = all(map(math.isfinite, ref)) and ref[-1] < ref[0]
for s in range(1, 4):
    diff = max(abs(a - b) for a, b in zip(ref, curves[s])) if curves[s] else float("inf")
    same = len(curves[s]) == len(ref) and curves[s] == ref
    print(f"stage {s} vs stage 0: {'identical' if same else 'DIFFERENT'} over {len(ref)} steps (max |diff| {diff:.3g})")
    ok = ok and same
print(f"stage 0 losses: first {ref[0]:.6f}, last {ref[-1]:.6f}")
print(f"NOTE: loss curves {'identical' if ok else 'NOT identical (or not falling)'} across stages 0-3 "
      f"over {len(ref)} steps, {ref[0]:.4f} -> {ref[-1]:.4f}")
sys.exit(0 if ok else 1)
PY
  [ "$DEVICE" = cuda ] || return $fail
  # The same first steps on the CPU backend.
  train cpu "$TMP/c0.json" configs/models/gpt-tiny.json markov:vocab=64,order=1,seed=3 3 "$TMP/cpu.jsonl" \
    "$TMP/cpu.log" || { tail -n 20 "$TMP/cpu.log"; echo "NOTE: CPU reference run failed"; return 1; }
  python3 - "$TMP" <<'PY' || fail=1
import json, sys
d = sys.argv[1]
cpu = [json.loads(l)["loss"] for l in open(f"{d}/cpu.jsonl")]
gpu = [json.loads(l)["loss"] for l in open(f"{d}/s0.jsonl")][: len(cpu)]
rel = max(abs(a - b) / abs(a) for a, b in zip(cpu, gpu))
print("cpu", cpu, "cuda", gpu)
print(f"NOTE: stages 0-3 identical; cuda vs cpu first {len(cpu)} losses max rel diff {rel:.2e} "
      f"({'ok' if rel < 1e-4 else 'TOO LARGE'})")
sys.exit(0 if rel < 1e-4 else 1)
PY
  return $fail
}

gpt2_bf16() {
  echo '{"train_batch_size": 8, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1},
         "steps_per_print": 5, "optimizer": {"type": "AdamW", "params": {"lr": 6e-4}}}' >"$TMP/big.json"
  if ! train "$DEVICE" "$TMP/big.json" configs/models/gpt2-124m.json markov:vocab=256,order=1,seed=1 20 \
       "$TMP/big.jsonl" "$TMP/big.log"; then
    tail -n 30 "$TMP/big.log"; echo "NOTE: GPT-2 124M bf16 run failed"; return 1
  fi
  grep -E "^MFU|^step|^model|^rank map|^  rank" "$TMP/big.log"
  python3 - "$TMP/big.jsonl" <<'PY'
import json, math, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tail = rows[5:] or rows
tok = statistics.median(r["tokens_per_s"] for r in tail)
ms = statistics.median(r["step_ms"] for r in tail)
mfu = [r["mfu"] for r in tail if r.get("mfu") is not None]
losses = [r["loss"] for r in rows]
mfu_s = f"{100 * statistics.median(mfu):.1f}%" if mfu else "n/a"
print(f"zerotrain gpt2-124m bf16: {tok:.0f} tok/s, {ms:.1f} ms/step, MFU {mfu_s} (median of steps {tail[0]['step']}-{rows[-1]['step']}), "
      f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, peak mem {rows[-1]['mem_peak_bytes'] / 2**30:.2f} GiB")
print(f"NOTE: {tok:.0f} tok/s, MFU {mfu_s}, {ms:.0f} ms/step (B=8 T=1024 bf16 stage 1)")
sys.exit(0 if all(map(math.isfinite, losses)) else 1)
PY
}

# train --cuda-graph on GPT-2 124M bf16 (stage 1, B=8 x T=1024): 10 eager steps, then the same 10
# steps with micro-step graphs (2 eager warm-up steps, captured from step 3): the losses must be
# the same (rel 1e-5; the replay runs the same kernels), the graphs must have been replayed, and
# tokens/s of both (median of steps 4-10) are printed side by side.
gpt2_graph() {
  echo '{"train_batch_size": 8, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1},
         "steps_per_print": 5, "optimizer": {"type": "AdamW", "params": {"lr": 6e-4}}}' >"$TMP/g.json"
  local mode
  for mode in eager graph; do
    local extra=()
    [ $mode = graph ] && extra=(--cuda-graph --cuda-graph-warmup 2)
    if ! train "$DEVICE" "$TMP/g.json" configs/models/gpt2-124m.json markov:vocab=256,order=1,seed=1 10 \
         "$TMP/$mode.jsonl" "$TMP/$mode.log" "${extra[@]}"; then
      tail -n 30 "$TMP/$mode.log"; echo "NOTE: GPT-2 124M bf16 $mode run failed"; return 1
    fi
  done
  grep -E "^cuda graph" "$TMP/graph.log"
  python3 - "$TMP/eager.jsonl" "$TMP/graph.jsonl" "$TMP/graph.log" <<'PY'
import json, math, re, statistics, sys
runs = [[json.loads(l) for l in open(f)] for f in sys.argv[1:3]]
log = open(sys.argv[3]).read()
tok = [statistics.median(r["tokens_per_s"] for r in rows[3:]) for rows in runs]
bad = [(a["step"], a["loss"], b["loss"]) for a, b in zip(*runs)
       if not (math.isfinite(a["loss"]) and abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]))]
m = re.search(r"cuda graph: (\d+) capture\(s\).*?(\d+) replay\(s\)", log)
replays = int(m.group(2)) if m else 0
for step, a, b in bad: print(f"step {step}: eager loss {a:.6f}, graph loss {b:.6f}")
print(f"eager {tok[0]:.0f} tok/s, --cuda-graph {tok[1]:.0f} tok/s ({tok[1] / tok[0]:.2f}x), {replays} replays")
ok = not bad and len(runs[0]) == len(runs[1]) == 10 and replays > 0
print(f"NOTE: --cuda-graph {tok[1]:.0f} vs eager {tok[0]:.0f} tok/s, {replays} replays, losses "
      + ("identical" if not bad else f"differ at {len(bad)} steps"))
sys.exit(0 if ok else 1)
PY
}

# ZeRO-Offload on the GPU: stage 2 (and stage 3 with offload_param), pinned and pageable, and
# stage 2 at gradient_accumulation_steps 4, against the device optimizer. The CPU optimizer has no
# FMA contraction and the CUDA AdamW does, so the losses agree to round-off (bound: 1e-3 relative
# over 10 steps), not bit for bit. The gradients accumulate on the host (pinned copies on the copy
# stream during backward, added by the host lane): the memory report must show no device `grads`
# and `host_grads` predicted == measured.
offload() {
  local fail=0 v
  for v in none pinned pageable param gas4; do
    local pin=false stage=2 extra="" gas=1 report=()
    [ $v = pinned ] && pin=true
    [ $v = gas4 ] && { pin=true; gas=4; }
    [ $v != none ] && report=(--memory-report "$TMP/o_$v.mem.json")
    [ $v = param ] && { stage=3; pin=true; extra=', "offload_param": {"device": "cpu", "pin_memory": true}'; }
    local off=""
    [ $v != none ] && off=", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": $pin}$extra"
    echo "{\"train_batch_size\": 16, \"gradient_accumulation_steps\": $gas, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": $stage,
           \"reduce_bucket_size\": 20000, \"sub_group_size\": 5000 $off}, \"steps_per_print\": 5,
           \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-3}}}" >"$TMP/o_$v.json"
    train "$DEVICE" "$TMP/o_$v.json" configs/models/gpt-tiny.json markov:vocab=64,order=1,seed=3 10 \
      "$TMP/o_$v.jsonl" "$TMP/o_$v.log" "${report[@]}" || { echo "offload $v: FAILED"; tail -n 20 "$TMP/o_$v.log"; fail=1; }
  done
  [ $fail = 0 ] || return 1
  python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
ref = [json.loads(l)["loss"] for l in open(f"{d}/o_none.jsonl")]
ok = True
for v in ("pinned", "pageable", "param", "gas4"):
    got = [json.loads(l)["loss"] for l in open(f"{d}/o_{v}.jsonl")]
    rel = max(abs(a - b) / abs(a) for a, b in zip(ref, got))
    ms = [json.loads(l)["step_ms"] for l in open(f"{d}/o_{v}.jsonl")][2:]
    cats = json.load(open(f"{d}/o_{v}.mem.json"))["ranks"][0]["categories"]
    g, hg = cats["grads"], cats["host_grads"]
    mem_ok = g["measured_bytes"] == 0 and hg["measured_bytes"] == hg["predicted_bytes"] > 0
    print(f"offload {v}: max rel loss diff {rel:.2e} vs device optimizer; median step {sorted(ms)[len(ms)//2]:.2f} ms; "
          f"device grads {g['measured_bytes']} B, host_grads {hg['measured_bytes']} B measured / "
          f"{hg['predicted_bytes']} B predicted")
    ok = ok and rel < 1e-3 and len(got) == len(ref) and mem_ok
print(f"NOTE: offload (pinned, pageable, offload_param, GAS 4) {'matches' if ok else 'DOES NOT match'} the device "
      "optimizer, with the gradients on the host")
sys.exit(0 if ok else 1)
PY
}

# One bf16 training step of GPT-2 124M at T=4096 (B=1, tiled attention, block recompute): the
# long-sequence path end to end; prints the step time and the peak memory.
long_t() {
  python3 -c "import json; m = json.load(open('configs/models/gpt2-124m.json')); m['n_ctx'] = 4096; json.dump(m, open('$TMP/gpt2_4k.json', 'w'))"
  echo '{"train_batch_size": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2},
         "activation_checkpointing": {"zerotrain_recompute": "block"},
         "optimizer": {"type": "AdamW", "params": {"lr": 6e-4}}}' >"$TMP/long.json"
  if ! train "$DEVICE" "$TMP/long.json" "$TMP/gpt2_4k.json" markov:vocab=256,order=1,seed=1 2 "$TMP/long.jsonl" \
       "$TMP/long.log"; then
    tail -n 30 "$TMP/long.log"; echo "NOTE: T=4096 training step failed"; return 1
  fi
  python3 - "$TMP/long.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"NOTE: T=4096 GPT-2 124M bf16 step ok: {rows[-1]['step_ms']:.0f} ms/step, {rows[-1]['tokens_per_s']:.0f} tok/s, "
      f"peak mem {rows[-1]['mem_peak_bytes'] / 2**30:.2f} GiB, losses {[round(r['loss'], 3) for r in rows]}")
sys.exit(0 if all(math.isfinite(r["loss"]) for r in rows) else 1)
PY
}

memory_total() {
  local model=${ZT_MEM_MODEL:-configs/models/gpt2-124m.json} smi="" poll=""
  [ "$DEVICE" = cpu ] && model=${ZT_MEM_MODEL:-configs/models/gpt-tiny.json}
  echo '{"train_batch_size": 4, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3},
         "optimizer": {"type": "AdamW", "params": {"lr": 6e-4}}}' >"$TMP/mem.json"
  if command -v nvidia-smi >/dev/null && [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 200 >"$TMP/smi.txt" 2>/dev/null &
    poll=$!
  fi
  if ! train "$DEVICE" "$TMP/mem.json" "$model" markov:vocab=64,order=1,seed=1 3 "$TMP/mem.jsonl" "$TMP/mem.log" \
       --memory-report "$TMP/mem_report.json"; then
    [ -n "$poll" ] && kill "$poll" 2>/dev/null
    tail -n 30 "$TMP/mem.log"; echo "NOTE: memory-total training run failed"; return 1
  fi
  [ -n "$poll" ] && { kill "$poll" 2>/dev/null; wait "$poll" 2>/dev/null; smi=$(sort -n "$TMP/smi.txt" | tail -n 1); }
  python3 - "$TMP/mem_report.json" "${smi:-}" <<'PY'
import json, sys
HOST = {"pinned_host", "host_master", "host_moments", "host_params", "host_staging", "host_activations"}
rank = json.load(open(sys.argv[1]))["ranks"][0]
dev, cats = rank["device"], rank["categories"]
pool = dev["pool"]
print(f"pool: reserved {pool['reserved_bytes']} B, in use {pool['in_use_bytes']} B, cached {pool['cached_bytes']} B, "
      f"{pool['device_allocations']} device allocations, {pool['reuses']} reuses")
for name, o in dev["outside_tracker"].items():
    print(f"outside the tracker: {name:<18} {o['bytes']:>14} B  ({o['measured_by']})")
reserved, outside, used = dev["reserved_bytes"], dev["outside_tracker_bytes"], dev["used_bytes"]
# The prediction where there is one (the peak for gather), else the measured reservation.
predicted = sum((c["predicted_bytes"] if c["predicted_bytes"] is not None else c["reserved_bytes"])
                for n, c in cats.items() if n not in HOST)
if used is None:
    print(f"NOTE: no device figure (CPU backend): reserved {reserved} B, nothing outside the tracker ({outside} B)")
    sys.exit(0)
explained = reserved + outside
rel = (explained - used) / used
line = (f"report {explained / 2**20:.1f} MiB (reserved {reserved / 2**20:.1f} + outside {outside / 2**20:.1f}) vs "
        f"cudaMemGetInfo in use {used / 2**20:.1f} MiB: {100 * rel:+.1f}%; predicted + outside {(predicted + outside) / 2**20:.1f} MiB")
if sys.argv[2]:
    smi = float(sys.argv[2]) * 2**20
    line += f"; nvidia-smi peak memory.used {smi / 2**20:.0f} MiB ({100 * (explained - smi) / smi:+.1f}%)"
print(line)
ok = abs(rel) <= 0.05
print(f"NOTE: memory report total {'within' if ok else 'NOT within'} 5% of the device's in-use bytes ({100 * rel:+.1f}%)")
sys.exit(0 if ok else 1)
PY
}

cpu_ckpt() {
  local v fail=0
  for v in false true; do
    echo "{\"train_batch_size\": 8, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 2},
           \"activation_checkpointing\": {\"zerotrain_recompute\": \"block\", \"cpu_checkpointing\": $v},
           \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 6e-4}}}" >"$TMP/ck_$v.json"
    train "$DEVICE" "$TMP/ck_$v.json" configs/models/gpt2-124m.json markov:vocab=256,order=1,seed=1 8 \
      "$TMP/ck_$v.jsonl" "$TMP/ck_$v.log" --memory-report "$TMP/ck_$v.mem.json" ||
      { echo "cpu_checkpointing $v: FAILED"; tail -n 20 "$TMP/ck_$v.log"; fail=1; }
  done
  [ $fail = 0 ] || { echo "NOTE: cpu-ckpt training run failed"; return 1; }
  python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
rows = {v: [json.loads(l) for l in open(f"{d}/ck_{v}.jsonl")] for v in ("false", "true")}
cats = {v: json.load(open(f"{d}/ck_{v}.mem.json"))["ranks"][0]["categories"] for v in ("false", "true")}
same = [r["loss"] for r in rows["false"]] == [r["loss"] for r in rows["true"]] and len(rows["true"]) == 8
host = cats["true"]["host_activations"]
act = {v: cats[v]["activations"]["measured_bytes"] for v in ("false", "true")}
tps = {v: sorted(r["tokens_per_s"] for r in rows[v][2:])[len(rows[v][2:]) // 2] for v in ("false", "true")}
print(f"host_activations measured {host['measured_bytes']} B, predicted {host['predicted_bytes']} B; device activations "
      f"{act['false'] / 2**20:.1f} -> {act['true'] / 2**20:.1f} MiB; tokens/s {tps['false']:.0f} -> {tps['true']:.0f}")
ok = same and host["measured_bytes"] == host["predicted_bytes"] > 0 and act["true"] < act["false"]
print(f"NOTE: cpu_checkpointing {'bitwise equal' if same else 'NOT equal'} to recompute alone, host "
      f"{host['measured_bytes'] / 2**20:.1f} MiB, device activations -{(act['false'] - act['true']) / 2**20:.1f} MiB, "
      f"{tps['true']:.0f} vs {tps['false']:.0f} tok/s")
sys.exit(0 if ok else 1)
PY
}

comm_bench() {
  if "${MPI[@]}" "$BUILD/benchmarks/zt_comm_bench" --device cuda --min-bytes 1M --max-bytes 64M --step-factor 8 \
       >"$TMP/comm.log" 2>&1; then
    tail -n 14 "$TMP/comm.log"; echo "NOTE: NCCL np1 collectives ok (results checked)"
  else
    tail -n 20 "$TMP/comm.log"; echo "NOTE: comm bench failed"; return 1
  fi
}

case ${1:-} in
  stages-fp32) stages_fp32 ;;
  gpt2-bf16) gpt2_bf16 ;;
  gpt2-graph) gpt2_graph ;;
  long-t) long_t ;;
  comm-bench) comm_bench ;;
  offload) offload ;;
  cpu-ckpt) cpu_ckpt ;;
  memory-total) memory_total ;;
  *) echo "usage: device-extra.sh stages-fp32|gpt2-bf16|gpt2-graph|offload|cpu-ckpt|long-t|memory-total|comm-bench" >&2; exit 2 ;;
esac
