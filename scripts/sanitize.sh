#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and synccheck over a GPU-suite subset that runs every sm90
# instantiation (both softcap variants), every sm90 small-grid tile and every sm80 tile, each on a
# small shape so racecheck's slowdown stays in minutes. Prints each tool's ERROR SUMMARY and keeps
# the logs.
# Usage: scripts/sanitize.sh [OUT_DIR]   (FLASHCORE_GPU_TESTS: the suite binary, default build/sm90;
# FLASHCORE_SANITIZER_TOOLS: which tools, default "memcheck racecheck synccheck";
# FLASHCORE_SANITIZER_TIMEOUT: seconds per tool, default 900)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-lab-out/sanitize}"
tests="${FLASHCORE_GPU_TESTS:-build/sm90/tests/flashcore_gpu_tests}"
mkdir -p "$out"
# sm90: head dims 32..256 step 32 (one per instantiation) and 40/72/.. (the softcap variant, and
# head dims rounded up to an instantiation). One case per head dim runs every backend and, for
# sm80 and sm90, every tile (large, small, and sm90's medium and cta-pair); the split case runs
# split-KV and combine; the scheduler case runs the CTA-pair (K/V multicast) kernel with fewer
# tiles than clusters (and 192-row blocks that cannot pair, with GQA); CreateBlockMask runs the BlockMask builder; the sm80 head-dim cases run
# every sm80 instantiation (and rounded head dims) on both tiles; the flex cases run the sm80
# and sm90 flex kernels; the backward cases run the sm80 and sm90 backwards.
filter='*Sm90HeadDimTest*'
for d in 32 40 64 72 96 128 160 192 200 224 256; do filter+="/*_d${d}_*:*Sm90HeadDimTest*"; done
filter="${filter%:\*Sm90HeadDimTest\*}"
filter+=':*BackendTest*/fp16_b2_sq128_sk128_hq4_hkv4_d*:*SplitKvTest*/*sq512_sk512*splits3'
filter+=':*DependentLaunch*:*Sm90SchedulerTest*/*sq700*:*Sm90SchedulerTest*/*sq500*:*CreateBlockMask*'
filter+=':*Sm80HeadDimTest*/fp16_b2_sq7_sk127*'
# The sm80 and sm90 flex kernels (every built-in mod, BlockMask, varlen, sinks), varlen on the
# persistent sm90 kernel (FlexSm90Varlen) and the varlen oracle.
filter+=':*FlexSm80*:*FlexSm90*:*GpuOracleVarlen*'
# The backward (docs/backward.md), each case on the sm80 and the sm90 backward: both head dims and
# dtypes, tails, masks, softcap (sm90: its own kernel), strides, and a deterministic case (the
# semaphores: sm80's CTA-wide turn, sm90's dQ writer warp). Case names end in the backend
# (_sm80, _sm90): a pattern without the trailing * matches no case.
filter+=':*BackwardTest*/fp16_b2_sq127_sk7_*:*BackwardTest*/bf16_b2_sq7_sk1000_*'
filter+=':*BackwardTest*/*causal_bhsd_*:*BackwardTest*/bf16_*softcap2_scaled_*'
filter+=':*BackwardTest*/fp16_*d64_causal_deterministic_*'
# The persistent sm90 backwards: more tiles than SMs, most of them without steps.
filter+=':*BackwardTest*/fp16_b2_sq127_sk4097_hq4_hkv2_*_win50x20_deterministic_sm90'
# ... and their cut tail: pieces of one tile in different CTAs, partial dK and dV sums, the last
# piece's loads (src/sm90/bwd_tail_split.hpp).
filter+=':*BackwardTest*/bf16_b2_sq300_sk4097_hq10_hkv5_*_softcap5_sm90'
filter+=':*BackwardTest*/fp16_b2_sq1531_sk1531_hq4_hkv2_d128_sm90'
# The sm80 flex backward (varlen with empty sequences, a random BlockMask with empty query
# blocks, ALiBi + softcap + window through the score_mod derivative) and the sm90 varlen backward
# (kAuto's varlen_plain_fp16 on an sm_90 GPU; hd64 causal softcap with lengths around its 128-row
# query block).
filter+=':*BackwardFlex.*/varlen_plain_fp16:*BackwardFlex.*/varlen_plain_fp16_sm80'
filter+=':*BackwardFlex.*/block_mask_random_empty_rows:*BackwardFlex.*/alibi_softcap_window'
filter+=':*BackwardFlex.*/varlen_causal_softcap_hd64_fp16_sm90'
# The sm80 flex backward at hd256, on the H100's 64-row tile and on the A100's 32-row one.
filter+=':*BackwardFlex.*/hd256_varlen_causal_gqa_softcap:*BackwardFlexA100Tile.*/hd256_varlen_causal_gqa_softcap'
# Deterministic mode on varlen and flex: sm80's counted turns and their semaphores (from the walk's
# tests and from a BlockMask's lists), sm90's turns per sequence in its dQ writer warp.
filter+=':*BackwardFlexDeterministic*/varlen_window_hd64_fp16_sm80'
filter+=':*BackwardFlexDeterministic*/varlen_causal_softcap_gqa_hd64_sm90'
filter+=':*BackwardFlexDeterministic*/block_mask_random_gqa_softcap_hd64'
status=0
# The dependent-launch test's "did the dependent start early" control cannot hold when the
# sanitizer serializes launches; it skips itself with that reason under this variable.
export FLASHCORE_UNDER_SANITIZER=1
for tool in ${FLASHCORE_SANITIZER_TOOLS:-memcheck racecheck synccheck}; do
  timeout "${FLASHCORE_SANITIZER_TIMEOUT:-900}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$tests" --gtest_brief=1 \
    --gtest_filter="$filter" > "$out/$tool.log" 2>&1 || status=1
  printf '%-10s %s | %s\n' "$tool" "$(grep -m1 -E '(ERROR|RACECHECK) SUMMARY' "$out/$tool.log" || echo 'no summary')" \
    "$(grep -E '^\[  (PASSED|FAILED) ' "$out/$tool.log" | tr '\n' ' ')"
done
exit $status
