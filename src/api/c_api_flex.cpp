// The C ABI of FlexAttention's pieces: the built-in mask_mods, create_block_mask, and the
// conversions flashcore_attention uses for its flex fields.
#include "api/c_api_flex.hpp"

#include "api/c_api_status.hpp"
#include "flashcore/flashcore.h"
#include "flashcore/flex/create_block_mask.hpp"

namespace flashcore::detail {

flex::BlockMask to_block_mask(const flashcore_block_mask& c) {
  flex::BlockMask m;
  m.batch = c.batch;
  m.heads = c.heads;
  m.seqlen_q = c.seqlen_q;
  m.seqlen_k = c.seqlen_k;
  m.q_block_size = c.q_block_size;
  m.kv_block_size = c.kv_block_size;
  m.kv_num_blocks = c.kv_num_blocks;
  m.kv_indices = c.kv_indices;
  m.full_kv_num_blocks = c.full_kv_num_blocks;
  m.full_kv_indices = c.full_kv_indices;
  return m;
}

flex::BuiltinMask to_builtin_mask(const flashcore_mask_mod& c) {
  flex::BuiltinMask mask;
  mask.window = flex::sliding_window_mask(c.window_left, c.window_right);
  mask.documents = {c.doc_ids_q, c.doc_ids_k, c.doc_batch_stride_q, c.doc_batch_stride_k};
  if (c.doc_ids_q != nullptr && c.doc_ids_k == nullptr) mask.documents.doc_ids_k = c.doc_ids_q;
  mask.use_prefix_lm = c.use_prefix_lm != 0;
  mask.prefix_lm.prefix_lengths = c.prefix_lengths;
  mask.prefix_lm.prefix_length = c.prefix_length;
  return mask;
}

template <typename CParams>
flex::FlexOptions flex_options_of(const CParams& c) {
  flex::FlexOptions f;
  f.mask = to_builtin_mask(c.mask_mod);
  f.score_mod.alibi.slopes = c.alibi_slopes;
  if (c.rel_bias_table != nullptr) {
    f.score_mod.bias = flex::relative_bias(c.rel_bias_table, c.rel_bias_max_distance);
  }
  f.sinks.logits = c.sink_logits;
  f.block_mask = to_block_mask(c.block_mask);
  return f;
}

flex::FlexOptions to_flex_options(const flashcore_attention_params& c) {
  return flex_options_of(c);
}
flex::FlexOptions to_flex_options(const flashcore_backward_params& c) { return flex_options_of(c); }

}  // namespace flashcore::detail

namespace {

using flashcore::flex::BlockMask;

flashcore_block_mask to_c(const BlockMask& m) {
  return {m.batch,         m.heads,         m.seqlen_q,   m.seqlen_k,           m.q_block_size,
          m.kv_block_size, m.kv_num_blocks, m.kv_indices, m.full_kv_num_blocks, m.full_kv_indices};
}

}  // namespace

extern "C" {

void flashcore_mask_mod_init(flashcore_mask_mod* mask) {
  if (mask == nullptr) return;
  *mask = flashcore_mask_mod{};
  mask->window_left = -1;
  mask->window_right = -1;
}

size_t flashcore_block_mask_bytes(const flashcore_block_mask* shape) {
  return shape != nullptr
             ? flashcore::flex::block_mask_bytes(flashcore::detail::to_block_mask(*shape))
             : 0;
}

flashcore_status flashcore_create_block_mask(const flashcore_mask_mod* c,
                                             const flashcore_block_mask* shape, void* buffer,
                                             size_t buffer_bytes, flashcore_block_mask* out,
                                             void* stream) {
  using flashcore::detail::c_api_fail;
  if (c == nullptr || shape == nullptr || out == nullptr) {
    return c_api_fail(FLASHCORE_INVALID_ARGUMENT, "mask, shape and out must not be null");
  }
  if (c->window_left < -1 || c->window_right < -1) {
    return c_api_fail(FLASHCORE_INVALID_ARGUMENT,
                      "mask window_left and window_right must be >= 0, or -1 for unbounded");
  }
  if (c->use_prefix_lm != 0 && (c->window_left != -1 || c->window_right != -1)) {
    return c_api_fail(FLASHCORE_INVALID_ARGUMENT,
                      "prefix-LM is causal past the prefix already; leave the window at (-1, -1)");
  }
  const flashcore::flex::BuiltinMask mask = flashcore::detail::to_builtin_mask(*c);
  BlockMask built;
  const flashcore::Status status =
      flashcore::flex::create_block_mask(mask, flashcore::detail::to_block_mask(*shape), buffer,
                                         buffer_bytes, &built, static_cast<cudaStream_t>(stream));
  if (status.ok()) *out = to_c(built);
  return flashcore::detail::c_api_result(status);
}

}  // extern "C"
