// Variable-length batches (AttentionParams::cu_seqlens_q / cu_seqlens_k): checking the arrays.
//
// What is checked where: can_implement() and run() check everything that needs no read of device
// memory (both arrays set or neither, pointer alignment and that they are device memory, max_seqlen
// within the totals, tensor shapes) and never copy the arrays, so they stay asynchronous and
// CUDA-graph safe. The arrays' contents (0 first, nondecreasing, the total last, no sequence longer
// than max_seqlen) are checked by the functions below, on host arrays or by copying device ones.
// Arrays that break these rules give wrong numbers but never an access outside the tensors or
// the workspace: the kernels clamp each sequence into the packed totals and the backward also to
// max_seqlen (tests/gpu/test_contract_bounds.cpp).
#pragma once

#include <cstdint>

#include "flashcore/attention.hpp"

namespace flashcore {

inline bool is_varlen(const AttentionParams& params) {
  return params.cu_seqlens_q != nullptr || params.cu_seqlens_k != nullptr;
}

// The contents of one cu_seqlens array in host memory: batch + 1 entries, 0 first, nondecreasing,
// total last, no difference above max_seqlen. name ("cu_seqlens_q") goes into the message.
Status check_cu_seqlens(const char* name, const int32_t* host_cu_seqlens, int64_t batch,
                        int64_t total, int64_t max_seqlen);

// Both arrays of params: copies them to the host on params.stream and synchronizes it, then checks
// them as check_cu_seqlens. For callers that cannot vouch for their arrays (the bindings' debug
// mode, tests); run() never calls it.
Status check_varlen_on_device(const AttentionParams& params);

}  // namespace flashcore
