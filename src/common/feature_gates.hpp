// Features the API accepts and validates before every backend runs them. Each backend's rejects()
// asks here first, and drops the call once its kernels implement the feature.
#pragma once

#include "common/problem.hpp"
#include "flashcore/varlen.hpp"

namespace flashcore::detail {

// "" when the problem is not varlen, else the reason a backend without varlen kernels gives.
inline const char* rejects_varlen(const Problem& problem) {
  return is_varlen(problem.params)
             ? "varlen not yet supported by this backend (cu_seqlens_q/k); pad the sequences "
               "into a dense batch meanwhile"
             : "";
}

}  // namespace flashcore::detail
