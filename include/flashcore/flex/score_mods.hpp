// FlexAttention score_mods: a function of each visible score before the softmax, with PyTorch
// FlexAttention's meaning.
//
// A score_mod is a copyable struct with
//   template <typename T>
//   __host__ __device__ T operator()(T score, int b, int h, int q_idx, int kv_idx) const;
// score is the scaled dot product (q . k * softmax_scale), in the natural-log domain; the result
// goes into the softmax. Kernels call it with T = float; the float64 reference with T = double, so
// a mod written as a template is checked exactly (one that takes only float also works, at float
// precision). It runs on visible pairs only; masking is the mask_mod's job. h is the query head.
//
// Positions are bottom-right aligned, as the masks (flashcore/flex/mask_mods.hpp): query i stands
// at key position i + Sk - Sq. Mods that need the lengths have with_seqlens and are bound per
// sequence by bind_seqlens(), so in a varlen batch each sequence uses its own.
#pragma once

#include <cmath>
#include <cstdint>

#include "flashcore/flex/mod_traits.hpp"
#include "flashcore/mask.hpp"

namespace flashcore::flex {

namespace detail {

// tanh at the score's own precision: tanhf in float (device and host), std::tanh in double.
FLASHCORE_HOST_DEVICE float tanh_of(float x) { return tanhf(x); }
#if !defined(__CUDA_ARCH__)
inline double tanh_of(double x) { return std::tanh(x); }
#endif

// key position - query position, bottom-right aligned: negative for keys before the query.
FLASHCORE_HOST_DEVICE int64_t relative_position(int64_t q_idx, int64_t kv_idx, int64_t offset) {
  return kv_idx - (q_idx + offset);
}

}  // namespace detail

// Leaves the score as it is.
struct NoScoreMod {
  template <typename T>
  FLASHCORE_HOST_DEVICE T operator()(T score, int, int, int, int) const {
    return score;
  }
  // Kernels then scale the score and nothing else (common/flex_scores.hpp).
  FLASHCORE_HOST_DEVICE constexpr bool is_identity() const { return true; }
};

// score -> cap * tanh(score / cap), as the library's softcap option (Gemma 2). cap must be > 0;
// pass NoScoreMod for no cap.
struct SoftcapScore {
  float cap = 0.f;

  template <typename T>
  FLASHCORE_HOST_DEVICE T operator()(T score, int, int, int, int) const {
    return T(cap) * detail::tanh_of(score / T(cap));
  }
};

// ALiBi: score - slope[h] * |q_pos - kv_idx| (FlashAttention's form, symmetric in the distance).
// Under a causal mask every visible key is at or before the query, and this equals PyTorch's
// example `score + slope[h] * (kv_idx - q_idx)`. slopes is fp32 [Hq].
struct AlibiScore {
  const float* slopes = nullptr;
  int64_t offset = 0;  // Sk - Sq, bound by with_seqlens

  template <typename T>
  FLASHCORE_HOST_DEVICE T operator()(T score, int, int h, int q_idx, int kv_idx) const {
    const int64_t distance = detail::relative_position(q_idx, kv_idx, offset);
    return score - T(slopes[h]) * T(distance < 0 ? -distance : distance);
  }
  FLASHCORE_HOST_DEVICE AlibiScore with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const {
    return {slopes, seqlen_k - seqlen_q};
  }
};

// Relative-position bias: score + table[h, d + S - 1] with d = kv_pos - q_pos clamped to
// [-(S - 1), S - 1]. table is fp32 [Hq, 2 * S - 1], rows row_stride elements apart (2 * S - 1 when
// contiguous). With S >= max(Sq, Sk) nothing is clamped; a smaller S shares the end entries among
// all longer distances (T5's clipping), and no read leaves the table.
struct RelativeBiasScore {
  const float* table = nullptr;
  int64_t max_distance = 0;  // S: the table covers distances -(S - 1) .. S - 1
  int64_t row_stride = 0;
  int64_t offset = 0;  // Sk - Sq, bound by with_seqlens

  template <typename T>
  FLASHCORE_HOST_DEVICE T operator()(T score, int, int h, int q_idx, int kv_idx) const {
    int64_t d = detail::relative_position(q_idx, kv_idx, offset);
    const int64_t limit = max_distance - 1;
    d = d < -limit ? -limit : (d > limit ? limit : d);
    return score + T(table[h * row_stride + d + limit]);
  }
  FLASHCORE_HOST_DEVICE RelativeBiasScore with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const {
    return {table, max_distance, row_stride, seqlen_k - seqlen_q};
  }
};

// A contiguous [Hq, 2 * max_distance - 1] table.
inline RelativeBiasScore relative_bias(const float* table, int64_t max_distance) {
  return {table, max_distance, 2 * max_distance - 1, 0};
}

// first, then second: compose_score_mods(alibi, softcap) caps the biased score.
template <typename First, typename Second>
struct ComposedScore {
  First first;
  Second second;

  template <typename T>
  FLASHCORE_HOST_DEVICE T operator()(T score, int b, int h, int q_idx, int kv_idx) const {
    return second(first(score, b, h, q_idx, kv_idx), b, h, q_idx, kv_idx);
  }
  FLASHCORE_HOST_DEVICE ComposedScore with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const {
    return {bind_seqlens(first, seqlen_q, seqlen_k), bind_seqlens(second, seqlen_q, seqlen_k)};
  }
};

template <typename First, typename Second>
ComposedScore<First, Second> compose_score_mods(const First& first, const Second& second) {
  return {first, second};
}

}  // namespace flashcore::flex
