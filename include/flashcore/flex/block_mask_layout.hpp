// The BlockMask struct on its own (flashcore/flex/block_mask.hpp describes its meaning and has its
// checks), so that AttentionParams can hold one without a cycle of includes.
#pragma once

#include <cstdint>

#include "flashcore/mask.hpp"

namespace flashcore::flex {

// Block sizes are multiples of the tensor-core tile edge, so that no kernel tile straddles two
// blocks. The sm80 flex kernel runs multiples of 64 (64 and 128 as a rule) and rejects others.
inline constexpr int64_t kBlockSizeMultiple = 16;
inline constexpr int64_t kDefaultBlockSize = 128;  // PyTorch's default

struct BlockMask {
  int64_t batch = 0;  // 1 broadcasts over the problem's batch
  int64_t heads = 0;  // 1 broadcasts over its query heads; else heads_q
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t q_block_size = kDefaultBlockSize;
  int64_t kv_block_size = kDefaultBlockSize;
  const int32_t* kv_num_blocks = nullptr;       // [batch, heads, num_q_blocks]
  const int32_t* kv_indices = nullptr;          // [batch, heads, num_q_blocks, num_kv_blocks]
  const int32_t* full_kv_num_blocks = nullptr;  // optional; shape of kv_num_blocks
  const int32_t* full_kv_indices = nullptr;     // optional; shape of kv_indices

  FLASHCORE_HOST_DEVICE int64_t num_q_blocks() const {
    return (seqlen_q + q_block_size - 1) / q_block_size;
  }
  FLASHCORE_HOST_DEVICE int64_t num_kv_blocks() const {
    return (seqlen_k + kv_block_size - 1) / kv_block_size;
  }
  FLASHCORE_HOST_DEVICE bool has_full_blocks() const { return full_kv_num_blocks != nullptr; }
  // Offset of (b, h, q_block) in the count arrays, broadcast dims read at 0; times
  // num_kv_blocks() it is the row's offset in the index arrays.
  FLASHCORE_HOST_DEVICE int64_t row(int64_t b, int64_t h, int64_t q_block) const {
    const int64_t bb = batch == 1 ? 0 : b;
    const int64_t hh = heads == 1 ? 0 : h;
    return (bb * heads + hh) * num_q_blocks() + q_block;
  }
};

}  // namespace flashcore::flex
