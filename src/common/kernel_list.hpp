// From a runtime (dtype, head dim) to a backend's compile-time instantiation list, written once for
// every list (the sm80 forward, backward and flex kernels; sm90's small-grid tiles). A backend
// names its list as KernelList<Traits, D...>: fn receives Traits<Element, D>{} for the dtype's
// element type (__half or __nv_bfloat16) and the head dim D. A (dtype, D) that the build leaves out
// (common/pruning.hpp) is never instantiated.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/pruning.hpp"
#include "flashcore/attention.hpp"

namespace flashcore::detail {

template <template <typename, int> class Traits, int... kHeadDims>
struct KernelList {
  // Calls fn once when head_dim (an instantiation's, rounded by the caller) is in the list and
  // this build has the kernel; returns whether it did.
  template <typename Fn>
  static bool with(DType dtype, int64_t head_dim, Fn&& fn) {
    return dtype == DType::kFloat16 ? with_element<__half>(head_dim, fn)
                                    : with_element<__nv_bfloat16>(head_dim, fn);
  }

 private:
  template <typename Element, typename Fn>
  static bool with_element(int64_t head_dim, Fn& fn) {
    return ((head_dim == kHeadDims && call_if_built<Element, kHeadDims>(fn)) || ...);
  }
  template <typename Element, int kHeadDim, typename Fn>
  static bool call_if_built(Fn& fn) {
    constexpr DType kDType = std::is_same_v<Element, __half> ? DType::kFloat16 : DType::kBFloat16;
    if constexpr (kernel_built(kDType, kHeadDim)) fn(Traits<Element, kHeadDim>{});
    return kernel_built(kDType, kHeadDim);
  }
};

}  // namespace flashcore::detail
