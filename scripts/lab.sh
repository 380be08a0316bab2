#!/usr/bin/env bash
# The lab (the README's main job): installs what is missing, builds flashcore-bench for sm_90a
# (preset lab) unless a binary exists, and runs the FlashAttention lab at the minimal profile.
# Extra arguments go to `flashcore-bench run` (e.g. --check-expectations, --profile full). Then
# bench/plot.py draws tflops.png and speedup.png from the run's results.json (where matplotlib is
# installed). Without a GPU it exits non-zero with flashcore-bench's "no CUDA device" message.
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
out="lab-out/$(date -u +%Y%m%d-%H%M%S)"
status=0
"$bench" run --targets labs/flashattention --profile minimal --out "$out" "$@" || status=$?
# A run that wrote results (regressions and FAILED targets included) is plotted; its status stays.
if [ -f "$out/results.json" ]; then
  if python3 -c 'import matplotlib' 2>/dev/null; then
    python3 bench/plot.py "$out/results.json"
  else
    echo "lab.sh: matplotlib not installed; no plots (pip install -c constraints.txt matplotlib)" >&2
  fi
fi
exit $status
