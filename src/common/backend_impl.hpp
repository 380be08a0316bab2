// The three entry points every backend implements. Backends inside the core library are listed
// with them in the registry (api/backend_registry.cpp); the unfused baseline, which lives in a
// target of its own because it needs cuBLAS, hands them over at run time (api/unfused_plug.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/problem.hpp"

namespace flashcore::detail {

struct BackendImpl {
  // Empty string when the backend implements the problem on this device, else why not.
  const char* (*rejects)(const Problem& problem, const cudaDeviceProp& device);
  size_t (*workspace_bytes)(const Problem& problem);
  Status (*launch)(const Problem& problem, void* workspace, cudaStream_t stream);
};

}  // namespace flashcore::detail
