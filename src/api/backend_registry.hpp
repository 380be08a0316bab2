// The one list of backends: what each implements, how much workspace it needs and how it
// launches. run() and resolve_backend() walk it; adding a kernel means adding one entry.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/backend_impl.hpp"
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

// The unfused baseline is not part of the core library (it needs cuBLAS): linking the
// flashcore_unfused target plugs it in (api/unfused_plug.cpp), and the Python package plugs it
// from a module of its own when asked for. Until then its entry rejects every problem, saying so.
void plug_unfused(const BackendImpl* impl);

}  // namespace flashcore::detail
