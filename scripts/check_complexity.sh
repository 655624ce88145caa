#!/usr/bin/env bash
# check_complexity.sh — the engine, the config reader and the step simulator stay readable: no
# function in csrc/zero, csrc/config or csrc/sim over 60 lines or cyclomatic complexity 15 (lizard's -L 60 -C 15).
# Uses `lizard` from PATH, else the copy scripts/setup.sh installs in $BUILD_DIR/tools-venv.
# Exit 0: clean; 1: the offending functions are listed; 2: lizard is not available.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
LIZARD="$(command -v lizard || true)"
[[ -z "$LIZARD" && -x "$BUILD_DIR/tools-venv/bin/lizard" ]] && LIZARD="$BUILD_DIR/tools-venv/bin/lizard"
if [[ -z "$LIZARD" ]]; then
  echo "check_complexity: lizard not found on PATH or in $BUILD_DIR/tools-venv (run scripts/setup.sh)" >&2
  exit 2
fi
cd "$ROOT"
if ! out="$("$LIZARD" -L 60 -C 15 -w csrc/zero csrc/config csrc/sim)"; then
  echo "check_complexity: functions over 60 lines or cyclomatic complexity 15:" >&2
  echo "$out" >&2
  exit 1
fi
echo "check_complexity: csrc/zero, csrc/config and csrc/sim: every function <= 60 lines and complexity < 15"
