// How a launch's CUDA error becomes a Status: shared by every backend and the GPU oracle.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/attention.hpp"

namespace flashcore::detail {

// Turns the launch's cudaGetLastError() into a Status that names the kernel.
Status launch_status(cudaError_t err, const char* kernel);

}  // namespace flashcore::detail
