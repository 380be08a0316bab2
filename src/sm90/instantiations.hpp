// THE sm90 instantiation list: one kernel per (dtype, head dim), head dims every multiple of 32
// up to 256 (FlashAttention-2's set). A head dim that is another multiple of 8 runs on the next
// one up: the TMA fills the missing dims of Q, K and V with zeros (which add nothing to Q K^T and
// give zero O columns) and the epilogue stores only the caller's dims. Each head dim is compiled in
// its own translation unit (sm90_fwd_hd<D>.cu) so that they build in parallel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "sm90/launch_args.hpp"
#include "sm90/tile_table.hpp"

namespace flashcore::sm90 {

inline constexpr int kHeadDimStep = 32;
inline constexpr int kMaxHeadDim = 256;

// The instantiation a head dim runs on, or 0 when it has none (not a multiple of 8, or > 256).
constexpr int instantiated_head_dim(int64_t head_dim) {
  if (head_dim <= 0 || head_dim > kMaxHeadDim || head_dim % 8 != 0) return 0;
  return static_cast<int>((head_dim + kHeadDimStep - 1) / kHeadDimStep * kHeadDimStep);
}

// Defined once per head dim by FLASHCORE_SM90_INSTANTIATE in sm90_fwd_hd<D>.cu.
template <int kHeadDim>
cudaError_t launch_head_dim(const LaunchArgs& args, cudaStream_t stream);
template <int kHeadDim>
int smem_bytes_head_dim(bool bf16);

// Calls fn(std::integral_constant<int, D>{}) for the instantiation D of head_dim; false if none.
template <typename Fn>
bool with_head_dim(int64_t head_dim, Fn&& fn) {
  switch (instantiated_head_dim(head_dim)) {
    case 32:
      fn(std::integral_constant<int, 32>{});
      return true;
    case 64:
      fn(std::integral_constant<int, 64>{});
      return true;
    case 96:
      fn(std::integral_constant<int, 96>{});
      return true;
    case 128:
      fn(std::integral_constant<int, 128>{});
      return true;
    case 160:
      fn(std::integral_constant<int, 160>{});
      return true;
    case 192:
      fn(std::integral_constant<int, 192>{});
      return true;
    case 224:
      fn(std::integral_constant<int, 224>{});
      return true;
    case 256:
      fn(std::integral_constant<int, 256>{});
      return true;
    default:
      return false;
  }
}

}  // namespace flashcore::sm90
