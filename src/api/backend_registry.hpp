// The one list of backends: what each implements, how much workspace it needs and how it
// launches. run() and resolve_backend() walk it; adding a kernel means adding one entry.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/problem.hpp"

namespace flashcore::detail {

struct BackendEntry {
  Backend backend;
  const char* name;  // the lab's "provider"
  bool in_auto;      // kAuto may pick it (entries are listed fastest first)
  // Empty string when the backend implements the problem on this device, else why not.
  const char* (*rejects)(const Problem& problem, const cudaDeviceProp& device);
  // Optional (null: never). Non-empty when kAuto should pass over a problem this backend
  // implements, because a later entry was measured faster on it; says why.
  const char* (*auto_declines)(const Problem& problem, const cudaDeviceProp& device);
  size_t (*workspace_bytes)(const Problem& problem);
  Status (*launch)(const Problem& problem, void* workspace, cudaStream_t stream);
};

// Fastest first.
const BackendEntry* backend_entries(size_t* count);
const BackendEntry* find_backend(Backend backend);

// Turns the launch's cudaGetLastError() into a Status that names the kernel.
Status launch_status(cudaError_t err, const char* kernel);

}  // namespace flashcore::detail
