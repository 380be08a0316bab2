// BlockMask: FlexAttention's block-sparse description of a mask, in PyTorch's layout, so that a
// torch BlockMask's tensors can be passed as they are.
//
// Queries are cut into blocks of q_block_size rows and keys into blocks of kv_block_size; the last
// block of each may be short (a tail). For query block m of (b, h), the KV blocks to visit are
//   kv_indices[b, h, m, 0 .. kv_num_blocks[b, h, m])            partial: mask_mod runs per element
//   full_kv_indices[b, h, m, 0 .. full_kv_num_blocks[b, h, m])  full: every pair is visible and
//                                                               no mask code runs
// Any KV block in neither list is skipped: none of its pairs is visible. "Every pair" counts only
// pairs inside the sequences; kernels bound the tails themselves, as in dense attention. A full
// list is optional: without it every visited block is partial. As in PyTorch, the mask_mod is NOT
// consulted on full blocks, so a BlockMask built from another mask_mod changes the result.
//
// All arrays are contiguous int32 (torch's). batch and heads may be 1 to broadcast one mask over
// every batch or every query head. Entries past a row's count are ignored. Indices need not be
// sorted (no kernel may rely on an order), but must be in range and appear once per row across
// both lists: a block listed twice would be counted twice.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "flashcore/attention.hpp"
#include "flashcore/flex/block_mask_layout.hpp"

namespace flashcore::flex {

// Elements of each array: counts [batch, heads, Mq] and indices [batch, heads, Mq, Mk].
struct BlockMaskSizes {
  int64_t counts = 0;
  int64_t indices = 0;
};
BlockMaskSizes block_mask_sizes(const BlockMask& mask);

// The shape against the problem's (batch, heads_q, seqlen_q, seqlen_k), the block sizes, and that
// the four pointers are set consistently. Reads no array: it runs before launches, without a copy.
Status validate_block_mask(const BlockMask& mask, int64_t batch, int64_t heads_q, int64_t seqlen_q,
                           int64_t seqlen_k);

// Device bytes that create_block_mask needs for a mask of this shape: the four int32 arrays, each
// 16-byte aligned in the buffer. 0 when the shape is invalid (validate_block_mask_shape says why).
size_t block_mask_bytes(const BlockMask& shape);

// The shape on its own (no problem to match): sizes positive, block sizes multiples of
// kBlockSizeMultiple, block counts within int32 (the indices' type).
Status validate_block_mask_shape(const BlockMask& mask);

// Every count in [0, Mk], every listed index in [0, Mk), no block twice in a row across both lists.
// Reads the arrays, so they must be host memory: for device arrays use the next function.
Status check_block_mask_contents(const BlockMask& host_mask);

// The same checks on device arrays: copies them to the host (synchronizes the stream). For tests
// and debugging; run() never reads the arrays on the host. Without it, wrong arrays give wrong
// numbers but no access outside the tensors: the kernels clamp each count into [0, Mk] and skip
// a listed block outside [0, Mk).
Status check_block_mask_contents_on_device(const BlockMask& device_mask, cudaStream_t stream);

namespace detail {

// The builder's writable view of the four arrays (a BlockMask holds them const).
struct BlockMaskArrays {
  int32_t* kv_num_blocks = nullptr;
  int32_t* kv_indices = nullptr;
  int32_t* full_kv_num_blocks = nullptr;
  int32_t* full_kv_indices = nullptr;
};

// For create_block_mask: checks the shape and the buffer (device memory of block_mask_bytes), then
// places the four arrays in the buffer: *out is shape pointing at them, *arrays the same, writable.
Status prepare_block_mask(const BlockMask& shape, void* buffer, size_t buffer_bytes, BlockMask* out,
                          BlockMaskArrays* arrays);

}  // namespace detail

}  // namespace flashcore::flex
