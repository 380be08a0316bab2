// Split-KV (flash-decoding): how many CTAs share one query tile's keys, and the workspace their
// partial results need. Host-only arithmetic, shared by workspace_bytes and launch so the two
// always agree.
#pragma once

#include <algorithm>
#include <cstdint>

namespace flashcore::sm80 {

inline constexpr int kMaxSplits = 128;
// A split must amortize writing and re-reading its fp32 partial O: below two KV blocks per split
// the partials cost more than the parallelism gains.
inline constexpr int64_t kMinBlocksPerSplit = 2;

struct SplitInputs {
  int64_t ctas;       // batch * heads * query tiles, the parallelism without splitting
  int64_t kv_blocks;  // KV blocks of the longest row range (seqlen_k / BLOCK_N, rounded up)
  int64_t sm_count;
  int64_t ctas_per_sm;  // occupancy of the kernel
  int requested;        // AttentionParams::num_splits
};

// 1 = no split. The heuristic (requested == 0) splits only when one wave of CTAs leaves SMs idle,
// and then just enough to fill every resident CTA slot once.
inline int choose_num_splits(const SplitInputs& in) {
  const int64_t most = std::min<int64_t>(kMaxSplits, std::max<int64_t>(1, in.kv_blocks));
  if (in.requested >= 1) return static_cast<int>(std::min<int64_t>(in.requested, most));
  const int64_t slots = in.sm_count * in.ctas_per_sm;
  if (in.ctas >= in.sm_count) return 1;
  const int64_t fill = slots / std::max<int64_t>(1, in.ctas);
  const int64_t amortized = in.kv_blocks / kMinBlocksPerSplit;
  return static_cast<int>(std::max<int64_t>(1, std::min({fill, amortized, most})));
}

// fp32 partial O [splits, B, H, Sq, D] then partial LSE [splits, B, H, Sq].
inline size_t split_workspace_bytes(int splits, int64_t rows, int64_t head_dim) {
  if (splits <= 1) return 0;
  return static_cast<size_t>(splits) * static_cast<size_t>(rows) *
         static_cast<size_t>(head_dim + 1) * sizeof(float);
}

}  // namespace flashcore::sm80
