// THE sm90 instantiation list: one kernel per (dtype, head dim), head dims every multiple of 32
// up to 256 (FlashAttention-2's set). A head dim that is another multiple of 8 runs on the next
// one up (common/head_dim.hpp): the TMA fills the missing dims of Q, K and V with zeros and the
// epilogue stores only the caller's dims. Each head dim is compiled in its own translation unit
// (sm90_fwd_hd<D>.cu) so that they build in parallel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "common/head_dim.hpp"
#include "common/pruning.hpp"
#include "sm90/launch_args.hpp"
#include "sm90/tile_table.hpp"

namespace flashcore::sm90 {

using detail::instantiated_head_dim;

// The head dims (instantiated) whose kernels have a sinks variant (fwd_kernel.cuh,
// Variant::kSinks): gpt-oss's 64 and the common 128. Each is one more kernel per dtype to build;
// sinks at other head dims run on the flex kernel.
constexpr bool has_sinks_kernel(int head_dim) { return head_dim == 64 || head_dim == 128; }

// Defined once per head dim by FLASHCORE_SM90_INSTANTIATE in sm90_fwd_hd<D>.cu.
template <int kHeadDim>
cudaError_t launch_head_dim(const LaunchArgs& args, cudaStream_t stream);
template <int kHeadDim>
int smem_bytes_head_dim(bool bf16);

// Calls fn(std::integral_constant<int, D>{}) for the instantiation D of head_dim; false if none,
// or if this build left D out (common/pruning.hpp; its translation unit is then not compiled).
template <int kHeadDim, typename Fn>
bool call_if_built(Fn& fn) {
  if constexpr (detail::head_dim_built(kHeadDim)) fn(std::integral_constant<int, kHeadDim>{});
  return detail::head_dim_built(kHeadDim);
}
template <typename Fn>
bool with_head_dim(int64_t head_dim, Fn&& fn) {
  switch (instantiated_head_dim(head_dim)) {
    case 32:
      return call_if_built<32>(fn);
    case 64:
      return call_if_built<64>(fn);
    case 96:
      return call_if_built<96>(fn);
    case 128:
      return call_if_built<128>(fn);
    case 160:
      return call_if_built<160>(fn);
    case 192:
      return call_if_built<192>(fn);
    case 224:
      return call_if_built<224>(fn);
    case 256:
      return call_if_built<256>(fn);
    default:
      return false;
  }
}

}  // namespace flashcore::sm90
