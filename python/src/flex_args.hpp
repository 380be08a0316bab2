// The flex part of flashcore._flashcore: the keyword dict that flashcore.flex_attention and
// flashcore.attention_varlen build (python/flashcore/flex.py) checked and turned into
// AttentionParams::flex / the varlen fields, and create_block_mask for the built-in masks.
#pragma once

#include <nanobind/nanobind.h>

#include "flashcore/attention.hpp"

namespace flashcore_python {

// Keys (all optional): doc_ids_q, doc_ids_k (int32 [B, S]), prefix_lengths (int32 [B]),
// prefix_length (int), alibi_slopes, sinks (float32 [Hq]), rel_bias (float32 [Hq, 2S - 1]),
// block_mask (kv_num_blocks, kv_indices, full_kv_num_blocks or None, full_kv_indices or None,
// q_block_size, kv_block_size), cu_seqlens_q, cu_seqlens_k (int32 [batch + 1]), max_seqlen_q,
// max_seqlen_k (int). Arrays must be contiguous and on `device`. With cu_seqlens, q/k/v come as
// [1, total, H, D] and batch becomes the number of sequences.
void apply_flex(const nanobind::dict& flex, int device, flashcore::AttentionParams* params);

void bind_flex(nanobind::module_& m);

}  // namespace flashcore_python
