#include "robust_grid.hpp"

#include <algorithm>

namespace flashcore::bench {
namespace {

const std::vector<int64_t> kHeadDims = {40, 64, 96, 128, 256};
const std::vector<int64_t> kQuickHeadDims = {64, 128};
const std::vector<std::string> kQuickShapes = {"tiny", "odd", "gqa", "decode", "sq_gt_sk"};

}  // namespace

const char* mask_mode_name(MaskMode m) {
  switch (m) {
    case MaskMode::kNone:
      return "none";
    case MaskMode::kCausal:
      return "causal";
    case MaskMode::kWindow:
      return "window";
  }
  return "?";
}

std::string RobustCase::name() const {
  return shape + "/" + distribution_name(distribution) + "/" + mask_mode_name(mask) + "/" +
         c.label();
}

const std::vector<RobustShape>& robust_shapes() {
  // name, B, Hq, Hkv, Sq, Sk
  static const std::vector<RobustShape> kShapes = {
      {"tiny", 1, 1, 1, 1, 1, true},           // one query, one key
      {"odd", 2, 3, 3, 7, 127, true},          // odd sizes, Sq != Sk, every tile a tail tile
      {"sq_gt_sk", 1, 4, 4, 1000, 127, true},  // causal leaves rows 0..872 fully masked
      {"gqa", 2, 8, 2, 127, 1000, true},       // GQA 4:1, odd Sq
      {"mqa", 1, 8, 1, 257, 4097, true},       // MQA, Sk one past a power of two
      {"decode", 8, 16, 4, 1, 4097, true},     // one query against a KV cache, GQA
      {"large_bh", 64, 32, 32, 33, 65, true},  // B*H = 2048 programs of a few rows
      {"long", 1, 2, 2, 16384, 16384, false},  // very long sequence
  };
  return kShapes;
}

std::vector<RobustCase> robust_grid(bool quick) {
  std::vector<RobustCase> grid;
  // Shape outermost, in robust_shapes() order (the costly long shape last), so that a
  // run cut short by --time-budget has covered whole shapes at every head dim and dtype.
  for (const RobustShape& shape : robust_shapes()) {
    if (quick &&
        std::find(kQuickShapes.begin(), kQuickShapes.end(), shape.name) == kQuickShapes.end()) {
      continue;
    }
    for (const int64_t head_dim : quick ? kQuickHeadDims : kHeadDims) {
      for (const char* dtype : {"fp16", "bf16"}) {
        for (const Distribution d : all_distributions()) {
          if (!shape.every_distribution && d != Distribution::kNormal &&
              d != Distribution::kLargeMagnitude && d != Distribution::kMaskedRows) {
            continue;
          }
          std::vector<MaskMode> masks = {MaskMode::kNone, MaskMode::kCausal};
          if (!quick) masks.push_back(MaskMode::kWindow);
          if (d == Distribution::kMaskedRows) masks = {MaskMode::kCausal};
          for (const MaskMode mask : masks) {
            RobustCase rc;
            rc.shape = shape.name;
            rc.distribution = d;
            rc.mask = mask;
            Case& c = rc.c;
            c.batch = shape.batch;
            c.heads_q = shape.heads_q;
            c.heads_kv = shape.heads_kv;
            c.seqlen_q = shape.seqlen_q;
            c.seqlen_k = shape.seqlen_k;
            c.head_dim = head_dim;
            c.dtype = dtype;
            c.causal = mask != MaskMode::kNone;
            c.window_left = mask == MaskMode::kWindow ? kRobustWindow : -1;
            if (d == Distribution::kMaskedRows) c.seqlen_q = c.seqlen_k + kMaskedRowsExtra;
            grid.push_back(rc);
          }
        }
      }
    }
  }
  return grid;
}

}  // namespace flashcore::bench
