// The robustness suite's grid: head dims x dtypes x shapes x input distributions x mask modes.
// Every cell of it runs every provider; the inputs and the reference are made once per cell.
#pragma once

#include <string>
#include <vector>

#include "model.hpp"
#include "robust_inputs.hpp"

namespace flashcore::bench {

enum class MaskMode { kNone, kCausal, kWindow };
const char* mask_mode_name(MaskMode m);  // "none", "causal", "window"

// Keys left of the diagonal in kWindow cells: odd, so windows never align with a tile.
inline constexpr int64_t kRobustWindow = 97;
// kMaskedRows cells get Sq = Sk + this under a causal mask (bottom-right aligned), so the first
// this-many query rows see no key at all: their output must be 0, never NaN.
inline constexpr int64_t kMaskedRowsExtra = 37;

struct RobustShape {
  const char* name;
  int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k;
  // False for the long shape: its cells cost ~100x a small one's (inputs, oracle, the scalar
  // provider), so it runs the normal, large-magnitude and masked-rows distributions only.
  bool every_distribution;
};

struct RobustCase {
  std::string shape;  // RobustShape::name
  Distribution distribution;
  MaskMode mask;
  Case c;  // sizes, dtype, head dim and the mask as AttentionParams sees it

  // Stable name, e.g. "odd/normal/causal/B2_H3_S7_Sk127_D64_fp16_causal".
  std::string name() const;
};

const std::vector<RobustShape>& robust_shapes();

// Default: head dims {40, 64, 96, 128, 256} (40 runs on a larger tile, 96 is sm90-only), fp16
// and bf16, every shape, every distribution (long: normal, large magnitude, masked rows) under no
// mask, causal and a sliding window (masked rows: causal only). Quick: head dims 64 and 128, the
// shapes tiny, odd, gqa, decode and sq_gt_sk, no window.
std::vector<RobustCase> robust_grid(bool quick);

// Cells whose float64 CPU reference is cheap enough for the suite (a grid of ~1500 cells);
// larger ones use the fp32 GPU oracle.
inline constexpr double kRobustCpuReferenceMaxFlops = 1e8;

}  // namespace flashcore::bench
