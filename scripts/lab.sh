#!/usr/bin/env bash
# The lab (the README's main job): installs what is missing, builds flashcore-bench for sm_90a
# (preset lab) unless a binary exists, and runs the FlashAttention lab at the minimal profile.
# Extra arguments go to `flashcore-bench run` (e.g. --check-expectations, --profile full).
# Without a GPU it exits non-zero with flashcore-bench's "no CUDA device" message.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bench="${FLASHCORE_BENCH:-build/lab/tools/bench/flashcore-bench}"
if [ ! -x "$bench" ]; then
  # The lab needs no GoogleTest: header wheels only (already in .deps/ on an offline machine).
  scripts/install_deps.sh --headers-only
  for tool in cmake ninja nvcc; do
    command -v "$tool" >/dev/null || { echo "lab.sh: $tool not found; install it (see README)" >&2; exit 1; }
  done
  cmake --preset lab >/dev/null
  cmake --build --preset lab
fi
exec "$bench" run --targets labs/flashattention --profile minimal \
  --out "lab-out/$(date -u +%Y%m%d-%H%M%S)" "$@"
