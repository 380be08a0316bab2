// create_block_mask for any mask_mod: builds a BlockMask on the GPU in one launch. Include it from
// a .cu file to build masks of your own functors; the built-in masks are compiled into the library
// (flashcore/flex/create_block_mask.hpp), so calling them needs no nvcc.
//
// One CTA per BlockMask row (b, h, query block) writes that row and nothing else, which is why one
// launch suffices: rows need no coordination. The CTA walks the row's KV blocks in chunks of one
// block per thread. Its warps classify the chunk's tiles, by the mask's block_visibility where it
// answers (O(1) for windows and prefix-LM), else by evaluating the tile's pairs 32 at a time and
// stopping at the first tile that shows both a visible and a hidden pair. Then a block-wide prefix
// sum over "partial" and "full" gives each listed block its slot, so indices come out ascending
// with no sort. Counts are written once, at the end.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <string>

#include "flashcore/flex/block_mask.hpp"
#include "flashcore/flex/mod_traits.hpp"

namespace flashcore::flex {

namespace detail {

constexpr int kBuilderThreads = 256;  // KV blocks classified per chunk: one per thread
constexpr int kWarpSize = 32;
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ int64_t min_index(int64_t a, int64_t b) { return a < b ? a : b; }

// The tile's visibility from its pairs; every lane of the warp calls it with the same tile. Rows
// are walked one at a time with lanes across the keys, so no lane divides an index.
template <typename Mask>
__device__ BlockVisibility classify_tile_by_elements(const Mask& mask, int b, int h,
                                                     int64_t q_begin, int64_t q_end,
                                                     int64_t kv_begin, int64_t kv_end, int lane) {
  bool any_visible = false, any_hidden = false;
  for (int64_t q = q_begin; q < q_end; ++q) {
    for (int64_t kv0 = kv_begin; kv0 < kv_end; kv0 += kWarpSize) {
      const int64_t kv = kv0 + lane;
      const bool in_tile = kv < kv_end;
      const bool visible = in_tile && mask(b, h, static_cast<int>(q), static_cast<int>(kv));
      any_visible |= __any_sync(kFullWarp, visible) != 0;
      any_hidden |= __any_sync(kFullWarp, in_tile && !visible) != 0;
      if (any_visible && any_hidden) return BlockVisibility::kPartial;  // warp-uniform
    }
  }
  return any_visible ? BlockVisibility::kFull : BlockVisibility::kEmpty;
}

template <typename Mask>
__global__ void __launch_bounds__(kBuilderThreads)
    create_block_mask_kernel(const Mask mask_mod, const BlockMask out,
                             const BlockMaskArrays arrays) {
  using Scan = cub::BlockScan<int, kBuilderThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ BlockVisibility chunk[kBuilderThreads];

  const int64_t mq = out.num_q_blocks(), mk = out.num_kv_blocks();
  const int64_t row = blockIdx.x;  // (b * heads + h) * mq + q_block
  const int64_t q_block = row % mq;
  const int h = static_cast<int>((row / mq) % out.heads);
  const int b = static_cast<int>(row / mq / out.heads);
  const int64_t q_begin = q_block * out.q_block_size;
  const int64_t q_end = min_index(q_begin + out.q_block_size, out.seqlen_q);
  const Mask mask = bind_seqlens(mask_mod, out.seqlen_q, out.seqlen_k);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  constexpr int kWarps = kBuilderThreads / kWarpSize;
  int32_t* partial_indices = arrays.kv_indices + row * mk;
  int32_t* full_indices = arrays.full_kv_indices + row * mk;

  int partial_count = 0, full_count = 0;  // of the chunks done; the same in every thread
  for (int64_t chunk_begin = 0; chunk_begin < mk; chunk_begin += kBuilderThreads) {
    for (int slot = warp; slot < kBuilderThreads; slot += kWarps) {
      const int64_t kv_block = chunk_begin + slot;
      BlockVisibility v = BlockVisibility::kEmpty;  // past the last block: list nothing
      if (kv_block < mk) {
        const int64_t kv_begin = kv_block * out.kv_block_size;
        const int64_t kv_end = min_index(kv_begin + out.kv_block_size, out.seqlen_k);
        v = block_visibility(mask, b, h, q_begin, q_end, kv_begin, kv_end);
        if (v == BlockVisibility::kUnknown) {
          v = classify_tile_by_elements(mask, b, h, q_begin, q_end, kv_begin, kv_end, lane);
        }
      }
      if (lane == 0) chunk[slot] = v;
    }
    __syncthreads();

    const BlockVisibility mine = chunk[threadIdx.x];
    const int64_t kv_block = chunk_begin + threadIdx.x;
    int slot = 0, chunk_total = 0;
    Scan(scan_storage).ExclusiveSum(mine == BlockVisibility::kPartial ? 1 : 0, slot, chunk_total);
    if (mine == BlockVisibility::kPartial) {
      partial_indices[partial_count + slot] = static_cast<int32_t>(kv_block);
    }
    partial_count += chunk_total;
    __syncthreads();  // scan_storage is reused
    Scan(scan_storage).ExclusiveSum(mine == BlockVisibility::kFull ? 1 : 0, slot, chunk_total);
    if (mine == BlockVisibility::kFull) {
      full_indices[full_count + slot] = static_cast<int32_t>(kv_block);
    }
    full_count += chunk_total;
    __syncthreads();  // chunk[] and scan_storage are rewritten by the next chunk
  }
  if (threadIdx.x == 0) {
    arrays.kv_num_blocks[row] = partial_count;
    arrays.full_kv_num_blocks[row] = full_count;
  }
}

// Enqueues the builder for a BlockMask that prepare_block_mask placed (out, arrays); returns the
// launch's error. create_block_mask below, and the shared objects of flashcore.jit_mask_mod (which
// link no library code, so the library prepares the mask and they only launch), both call it.
template <typename Mask>
cudaError_t launch_block_mask_builder(const Mask& mask_mod, const BlockMask& out,
                                      const BlockMaskArrays& arrays, cudaStream_t stream) {
  // One CTA per row (b, h, query block); validate_block_mask_shape bounded the rows by 2^31 - 1,
  // the grid's x limit. Computed here, not by the library's block_mask_sizes: a shared object of
  // flashcore.jit links no library code.
  const int64_t rows = out.batch * out.heads * out.num_q_blocks();
  create_block_mask_kernel<Mask>
      <<<static_cast<unsigned>(rows), kBuilderThreads, 0, stream>>>(mask_mod, out, arrays);
  return cudaGetLastError();
}

}  // namespace detail

// Builds the BlockMask of mask_mod for shape (batch, heads, seqlen_q, seqlen_k, block sizes; its
// pointers are ignored) into buffer (device memory, block_mask_bytes(shape) or more), in one launch
// on stream. *out gets shape with its arrays in buffer, full blocks listed apart, indices
// ascending. The mask is bound to (seqlen_q, seqlen_k) and called with b < batch, h < heads: heads
// = 1 builds one mask for every head (h = 0), as PyTorch's H=None. Fails before launching on a bad
// shape or buffer; does not synchronize.
template <typename Mask>
Status create_block_mask(const Mask& mask_mod, const BlockMask& shape, void* buffer,
                         size_t buffer_bytes, BlockMask* out, cudaStream_t stream) {
  detail::BlockMaskArrays arrays;
  if (Status s = detail::prepare_block_mask(shape, buffer, buffer_bytes, out, &arrays); !s.ok()) {
    return s;
  }
  if (const cudaError_t err = detail::launch_block_mask_builder(mask_mod, *out, arrays, stream);
      err != cudaSuccess) {
    return {StatusCode::kCudaError,
            std::string("create_block_mask launch failed: ") + cudaGetErrorString(err)};
  }
  return Status::Ok();
}

}  // namespace flashcore::flex
