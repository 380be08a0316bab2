#!/usr/bin/env bash
# The lab (the README's main job): installs what is missing, builds flashcore-bench for sm_90a
# unless a binary exists, and runs the FlashAttention lab at the minimal profile. Extra arguments go
# to `flashcore-bench run` (e.g. --check-expectations, --profile full). Without a GPU it exits
# non-zero with flashcore-bench's "no CUDA device" message.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bench="${FLASHCORE_BENCH:-build/sm90/tools/bench/flashcore-bench}"
if [ ! -x "$bench" ]; then
  scripts/install_deps.sh
  cmake --preset sm90 >/dev/null
  cmake --build --preset sm90 --target flashcore-bench
fi
exec "$bench" run --targets labs/flashattention --profile minimal \
  --out "lab-out/$(date -u +%Y%m%d-%H%M%S)" "$@"
