// Validation of BackwardParams before any launch, in the two halves of the forward's
// (api/validate.hpp): the arguments alone, testable without a GPU, and the device.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/backward.hpp"

namespace flashcore::detail {

// Sizes, dtypes, strides, alignment, LSE, overlap of the gradients, window, softcap and scale:
// needs no device.
Status validate_backward_arguments(const BackwardParams& params);

// The current device (architecture) and that every pointer is device memory. Fills properties.
Status validate_backward_device(const BackwardParams& params, cudaDeviceProp* properties);

}  // namespace flashcore::detail
