#!/usr/bin/env bash
# run.sh — the main job: set up (install, configure, build) and run a 2-rank ZeRO-2 training of
# the bundled GPT on Markov data whose optimal loss is known (CPU backend without a GPU, one GPU
# per rank with them). Extra arguments go to `zerotrain train` (e.g. --steps 50).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
export ZT_BIN="${BUILD_DIR:-$ROOT/build}/zerotrain"
NP="${NP:-2}"
DEVICE=auto
GPUS=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
if [[ "$GPUS" -gt 0 && "$GPUS" -lt "$NP" ]]; then
  echo "run.sh: $GPUS GPU(s) for $NP ranks — NCCL needs one GPU per rank, so this run uses the CPU backend" \
       "(NP=$GPUS scripts/run.sh runs on the GPU)" >&2
  DEVICE=cpu
fi
exec "$ROOT/launcher/zt-launch" -n "$NP" train --device "$DEVICE" \
  --config "$ROOT/configs/ds/quickstart.json" \
  --model "$ROOT/configs/models/gpt-tiny.json" \
  --data markov:vocab=64,order=1,seed=3 \
  --steps 300 "$@"
