// Validation run before any launch. Split in two so that the CPU-only checks can be tested on a
// machine without a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/attention.hpp"

namespace flashcore::detail {

// Sizes, dtypes, strides, alignment, window and scale: needs no device.
Status validate_arguments(const AttentionParams& params);

// The varlen fields (cu_seqlens, max_seqlen) without reading the arrays; part of
// validate_arguments (src/api/varlen.cpp).
Status validate_varlen_arguments(const AttentionParams& params);

// AttentionParams::flex without reading its arrays; part of validate_arguments
// (src/api/validate_flex.cpp).
Status validate_flex_arguments(const AttentionParams& params);

// The current device (architecture) and that every pointer is device memory. Fills properties.
Status validate_device(const AttentionParams& params, cudaDeviceProp* properties);

}  // namespace flashcore::detail
