// Which instantiation a head dim runs on, for the tensor-core backends (sm80, sm90). Each has one
// kernel per multiple of 32 up to 256 (FlashAttention-2's set). A head dim that is another
// multiple of 8 runs on the next one up: the backend fills the missing dims of Q, K and V with
// zeros, which add nothing to Q K^T and give zero O columns, and stores only the caller's dims.
// The softmax scale is the caller's (default 1/sqrt(head_dim) of the real head dim,
// common/problem.hpp), so the padding changes no score.
#pragma once

#include <cstdint>

#include "flashcore/attention.hpp"

namespace flashcore::detail {

inline constexpr int kInstantiatedHeadDimStep = 32;

// The instantiation head_dim runs on, or 0 when it has none (not a multiple of 8, or > 256).
constexpr int instantiated_head_dim(int64_t head_dim) {
  if (head_dim <= 0 || head_dim > kMaxHeadDim || head_dim % kHeadDimMultiple != 0) return 0;
  return static_cast<int>((head_dim + kInstantiatedHeadDimStep - 1) / kInstantiatedHeadDimStep *
                          kInstantiatedHeadDimStep);
}

}  // namespace flashcore::detail
