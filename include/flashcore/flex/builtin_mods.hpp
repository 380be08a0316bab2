// The built-in mods chosen at run time, for callers that cannot instantiate a template: the C ABI,
// Python, and the library's own compiled create_block_mask. Each is itself a mask_mod / score_mod
// made of the built-in functors, with the parts switched on by their data.
//
// A C++ caller who knows the mods at compile time should use the functors themselves
// (mask_mods.hpp, score_mods.hpp): these carry a branch per part.
#pragma once

#include <cstdint>

#include "flashcore/flex/mask_mods.hpp"
#include "flashcore/flex/score_mods.hpp"

namespace flashcore::flex {

// window AND documents AND prefix-LM, each part on when set. Everything off sees every key.
// Prefix-LM already makes the non-prefix part causal: leave the window unbounded with it.
struct BuiltinMask {
  WindowMod window = sliding_window_mask(-1, -1);  // unbounded on both sides: off
  DocumentMask documents;                          // on when documents.doc_ids_q is set
  bool use_prefix_lm = false;
  PrefixLMMask prefix_lm;

  FLASHCORE_HOST_DEVICE bool operator()(int b, int h, int q_idx, int kv_idx) const {
    return window(b, h, q_idx, kv_idx) &&
           (documents.doc_ids_q == nullptr || documents(b, h, q_idx, kv_idx)) &&
           (!use_prefix_lm || prefix_lm(b, h, q_idx, kv_idx));
  }
  FLASHCORE_HOST_DEVICE BuiltinMask with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const {
    return {window.with_seqlens(seqlen_q, seqlen_k), documents, use_prefix_lm,
            prefix_lm.with_seqlens(seqlen_q, seqlen_k)};
  }
  // Keys that any of the rows [row_begin, row_end) can see, as far as the window says (the other
  // parts only hide keys inside it): kernels visit only these tiles.
  FLASHCORE_HOST_DEVICE int64_t block_first_key(int64_t row_begin) const {
    return window.block_first_key(row_begin);
  }
  FLASHCORE_HOST_DEVICE int64_t block_end_key(int64_t row_end) const {
    return window.block_end_key(row_end);
  }
  // The AND of the parts' answers; documents have none, so with them a tile the others do not
  // rule out is left to its elements.
  FLASHCORE_HOST_DEVICE BlockVisibility block_visibility(int b, int h, int64_t q_begin,
                                                         int64_t q_end, int64_t kv_begin,
                                                         int64_t kv_end) const {
    BlockVisibility v = window.block_visibility(b, h, q_begin, q_end, kv_begin, kv_end);
    if (v == BlockVisibility::kEmpty) return v;
    if (use_prefix_lm) {
      const BlockVisibility p = prefix_lm.block_visibility(b, h, q_begin, q_end, kv_begin, kv_end);
      if (p == BlockVisibility::kEmpty) return p;
      if (v == BlockVisibility::kFull) {
        v = p;
      } else if (p != BlockVisibility::kFull) {
        v = BlockVisibility::kUnknown;  // two partial parts may or may not overlap
      }
    }
    return documents.doc_ids_q == nullptr ? v : BlockVisibility::kUnknown;
  }
};

// alibi, then relative bias, then softcap, each on when set (slopes, table, cap > 0).
struct BuiltinScoreMod {
  AlibiScore alibi;        // on when alibi.slopes is set
  RelativeBiasScore bias;  // on when bias.table is set
  SoftcapScore softcap;    // on when softcap.cap > 0

  template <typename T>
  FLASHCORE_HOST_DEVICE T operator()(T score, int b, int h, int q_idx, int kv_idx) const {
    if (alibi.slopes != nullptr) score = alibi(score, b, h, q_idx, kv_idx);
    if (bias.table != nullptr) score = bias(score, b, h, q_idx, kv_idx);
    if (softcap.cap > 0.f) score = softcap(score, b, h, q_idx, kv_idx);
    return score;
  }
  // No part on: the score passes unchanged (kernels then skip the per-element branches).
  FLASHCORE_HOST_DEVICE bool is_identity() const {
    return alibi.slopes == nullptr && bias.table == nullptr && !(softcap.cap > 0.f);
  }
  FLASHCORE_HOST_DEVICE BuiltinScoreMod with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const {
    return {alibi.with_seqlens(seqlen_q, seqlen_k), bias.with_seqlens(seqlen_q, seqlen_k), softcap};
  }
};

}  // namespace flashcore::flex
