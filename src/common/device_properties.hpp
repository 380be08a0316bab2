// The current device's properties, cached: kernels size their grids from them and the API
// validates against them, so this sits below both.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/attention.hpp"

namespace flashcore::detail {

// Properties of the current device, queried once per device; kNoDevice without a GPU.
Status current_device_properties(cudaDeviceProp* properties);

}  // namespace flashcore::detail
