// RAII NVTX range (NVTX3, header-only from the CUDA toolkit) so that Nsight Systems shows each
// target and its phases: flashattention_optimized_sm80 > parity / warmup / timed.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace flashcore::bench {

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace flashcore::bench
