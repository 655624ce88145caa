#!/usr/bin/env bash
# setup.sh — idempotent set-up: install missing Debian packages (as root), configure, build.
#   BUILD_DIR (default build), ZT_CMAKE_ARGS (extra cmake flags), JOBS (default: cores),
#   SETUP_ONLY=1 (install packages and tools, then stop), ZT_HF_INTEROP=1 (also transformers for
#   the Hugging Face interop test, in BUILD_DIR/hf-venv).
# Safe to run again and again: installs nothing that is present, rebuilds incrementally.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc)}"

PKGS=(build-essential cmake ninja-build libopenmpi-dev openmpi-bin nlohmann-json3-dev libopenblas-dev
      libgtest-dev googletest python3 python3-venv)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Debian's PyTorch for /usr/bin/python3: the tests/model/torch_*.py references (float64 GPT-2 and
# Llama, AdamW training). Only when that interpreter cannot import torch (any source counts).
/usr/bin/python3 -c 'import torch' 2>/dev/null || missing+=(python3-torch)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# lizard (PyPI) for scripts/check_complexity.sh, in a venv beside the build; pinned version.
if [[ ! -x "$BUILD_DIR/tools-venv/bin/lizard" ]] && ! command -v lizard >/dev/null; then
  python3 -m venv "$BUILD_DIR/tools-venv"
  "$BUILD_DIR/tools-venv/bin/pip" install -q --disable-pip-version-check lizard==1.24.3
fi

# tokenizers (PyPI), pinned, in the same venv: tests/data/test_tokenizer_hf.py checks `zerotrain tokenize`
# against Hugging Face's implementation. Optional: offline, setup goes on and that test reports a skip.
if ! "$BUILD_DIR/tools-venv/bin/python" -c 'import tokenizers' 2>/dev/null; then
  [[ -x "$BUILD_DIR/tools-venv/bin/python" ]] || python3 -m venv "$BUILD_DIR/tools-venv"
  "$BUILD_DIR/tools-venv/bin/pip" install -q --disable-pip-version-check --retries 1 --timeout 20 tokenizers==0.22.1 ||
    echo "setup: could not install tokenizers==0.22.1 (offline?); the Hugging Face tokenizer test will be skipped" >&2
fi

# transformers (PyPI) for tests/model/hf_interop.py, opt-in (ZT_HF_INTEROP=1: a few minutes of
# downloads): a venv over /usr/bin/python3 that sees Debian's torch; 4.44.2 runs on torch 1.13.
if [[ "${ZT_HF_INTEROP:-0}" == 1 ]] && ! "$BUILD_DIR/hf-venv/bin/python" -c 'import transformers' 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$BUILD_DIR/hf-venv"
  "$BUILD_DIR/hf-venv/bin/pip" install -q --disable-pip-version-check --retries 1 --timeout 20 transformers==4.44.2 ||
    echo "setup: could not install transformers==4.44.2 (offline?); the Hugging Face interop test will be skipped" >&2
fi

[[ "${SETUP_ONLY:-0}" == 1 ]] && exit 0  # packages and tools only, no configure or build

if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja ${ZT_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
