// Which (dtype, head dim) kernels of the tensor-core backends (sm80, sm90) this build has. CMake's
// FLASHCORE_HEAD_DIMS and FLASHCORE_DTYPES (cmake/pruning.cmake) turn into
// FLASHCORE_DISABLE_HDIM<D>, FLASHCORE_DISABLE_FP16 and FLASHCORE_DISABLE_BF16, as FlashAttention's
// FLASH_ATTENTION_DISABLE_*: the instantiation lists (sm80/sm80_fwd.cu, sm90/instantiations.hpp)
// read them through head_dim_built()/dtype_built(), and the backends' rejects() say so through
// pruned_reason().
#pragma once

#include "flashcore/attention.hpp"

namespace flashcore::detail {

constexpr bool head_dim_built(int head_dim) {
  switch (head_dim) {
#ifdef FLASHCORE_DISABLE_HDIM32
    case 32:
      return false;
#endif
#ifdef FLASHCORE_DISABLE_HDIM64
    case 64:
      return false;
#endif
#ifdef FLASHCORE_DISABLE_HDIM96
    case 96:
      return false;
#endif
#ifdef FLASHCORE_DISABLE_HDIM128
    case 128:
      return false;
#endif
#ifdef FLASHCORE_DISABLE_HDIM160
    case 160:
      return false;
#endif
#ifdef FLASHCORE_DISABLE_HDIM192
    case 192:
      return false;
#endif
#ifdef FLASHCORE_DISABLE_HDIM224
    case 224:
      return false;
#endif
#ifdef FLASHCORE_DISABLE_HDIM256
    case 256:
      return false;
#endif
    default:
      return true;
  }
}

constexpr bool dtype_built(DType dtype) {
#ifdef FLASHCORE_DISABLE_FP16
  if (dtype == DType::kFloat16) return false;
#endif
#ifdef FLASHCORE_DISABLE_BF16
  if (dtype == DType::kBFloat16) return false;
#endif
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

constexpr bool kernel_built(DType dtype, int head_dim) {
  return dtype_built(dtype) && head_dim_built(head_dim);
}

// Why a backend has no kernel for (dtype, head_dim) its list instantiates in a full build, or ""
// when this build has it. head_dim is the instantiation's (common/head_dim.hpp rounds up to a
// multiple of 32).
constexpr const char* pruned_reason(DType dtype, int head_dim) {
  if (!dtype_built(dtype)) {
    return dtype == DType::kFloat16
               ? "has no fp16 kernels in this build: FLASHCORE_DTYPES left fp16 out"
               : "has no bf16 kernels in this build: FLASHCORE_DTYPES left bf16 out";
  }
  if (head_dim_built(head_dim)) return "";
  constexpr const char* kLeftOut[] = {
      "has no head_dim 32 kernel in this build: FLASHCORE_HEAD_DIMS left 32 out",
      "has no head_dim 64 kernel in this build: FLASHCORE_HEAD_DIMS left 64 out",
      "has no head_dim 96 kernel in this build: FLASHCORE_HEAD_DIMS left 96 out",
      "has no head_dim 128 kernel in this build: FLASHCORE_HEAD_DIMS left 128 out",
      "has no head_dim 160 kernel in this build: FLASHCORE_HEAD_DIMS left 160 out",
      "has no head_dim 192 kernel in this build: FLASHCORE_HEAD_DIMS left 192 out",
      "has no head_dim 224 kernel in this build: FLASHCORE_HEAD_DIMS left 224 out",
      "has no head_dim 256 kernel in this build: FLASHCORE_HEAD_DIMS left 256 out"};
  return kLeftOut[head_dim / 32 - 1];  // only these eight can be left out
}

}  // namespace flashcore::detail
