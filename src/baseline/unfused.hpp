// The lab's "matmul + softmax + matmul" baseline: cuBLAS batched GEMM for S = scale * Q K^T into an
// fp32 workspace, one kernel for softcap/mask/softmax writing P (in the input dtype) and LSE, and a
// cuBLAS batched GEMM for O = P V. Built as the flashcore_unfused target, outside the core library,
// so that only programs that ask for it link cuBLAS.
#pragma once

#include "common/backend_impl.hpp"

namespace flashcore::detail {

const BackendImpl& unfused_backend();

}  // namespace flashcore::detail
