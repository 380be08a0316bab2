// The reference output of one problem, shared by the lab's parity gate (case_data.cpp) and the
// robustness suite: the float64 CPU reference when the caller has the exact inputs on the host,
// else the fp32 GPU oracle on the device inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "flashcore/attention.hpp"
#include "model.hpp"

namespace flashcore::bench {

struct HostValues {
  const std::vector<double>* q;
  const std::vector<double>* k;
  const std::vector<double>* v;
};

// O as [B, Sq, Hq, D] doubles. `host` null: the GPU oracle reads params' device tensors (and
// synchronizes the stream). *kind is "cpu-fp64" or "gpu-fp32".
bool reference_output(const AttentionParams& params, const HostValues* host, cudaStream_t stream,
                      std::vector<double>* out, std::string* kind, std::string* error);

// The params of a contiguous BSHD problem of case c on these device buffers.
AttentionParams case_params(const Case& c, const void* q, const void* k, const void* v, void* o);

}  // namespace flashcore::bench
