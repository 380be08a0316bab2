// cuDNN's fused SDPA (flash attention), run in-process through the cuDNN frontend's C++ graph API
// on the same inputs and with the same timer as flashcore: the peer every speed bar is measured
// against.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "case_data.hpp"

namespace flashcore::bench {

class CudnnSdpa {
 public:
  CudnnSdpa();
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // Builds the graph and plan for this case. Returns false with cuDNN's reason when cuDNN does not
  // support it (the peer is then SKIPPED).
  bool build(const CaseData& data, cudaStream_t stream, std::string* error);
  // Runs on set `set` of the case it was built for.
  bool run(const CaseData& data, int set, std::string* error);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace flashcore::bench
