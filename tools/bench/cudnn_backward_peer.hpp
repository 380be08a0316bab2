// cuDNN's fused SDPA backward, run in-process through the cuDNN frontend's C++ graph API on the
// same inputs, O and LSE (flashcore's forward) and with the same timer as flashcore's backward:
// the backward's speed bar (issue 20).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "backward_data.hpp"

namespace flashcore::bench {

class CudnnSdpaBackward {
 public:
  CudnnSdpaBackward();
  ~CudnnSdpaBackward();
  CudnnSdpaBackward(const CudnnSdpaBackward&) = delete;
  CudnnSdpaBackward& operator=(const CudnnSdpaBackward&) = delete;

  // Builds the graph and plan for this case. Returns false with cuDNN's reason when cuDNN does not
  // support it (the peer is then SKIPPED).
  bool build(const BackwardData& data, cudaStream_t stream, std::string* error);
  // Runs on set `set` of the case it was built for: dQ, dK and dV into that set's gradients.
  bool run(const BackwardData& data, int set, std::string* error);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace flashcore::bench
