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

// One tensor argument: non-null, of expected_dtype, last dim contiguous, rows 16-byte aligned,
// offsets within int64, and (outputs) no two elements at one address. name appears in messages.
// The backward's validation (api/validate_backward.cpp) checks its tensors with it too.
Status check_tensor(const char* name, const void* data, DType dtype, DType expected_dtype,
                    const Strides& s, int64_t batch, int64_t seqlen, int64_t heads,
                    int64_t head_dim, bool is_output);

// That data is device (or managed) memory CUDA knows.
Status check_device_pointer(const char* name, const void* data);

// The current device (architecture) and that every pointer is device memory. Fills properties.
Status validate_device(const AttentionParams& params, cudaDeviceProp* properties);

}  // namespace flashcore::detail
