// The FlexAttention part of AttentionParams: the built-in mask_mod and score_mod (selected at run
// time), a BlockMask and attention sinks. Everything off by default, which is plain attention.
//
// The window and softcap have their own AttentionParams fields (causal, window_left/right,
// softcap), shared with dense attention; the copies inside mask and score_mod stay off, so that
// each has one spelling (validation says so). Kernels AND the window into the mask_mod and apply
// softcap last in the score_mod. A problem with any part here on runs the flex kernels
// (sm80 for now); without, dense attention runs as before.
#pragma once

#include "flashcore/flex/block_mask_layout.hpp"
#include "flashcore/flex/builtin_mods.hpp"
#include "flashcore/flex/sinks.hpp"

namespace flashcore::flex {

struct FlexOptions {
  // Documents and prefix-LM; their arrays are device memory. window must stay unbounded.
  BuiltinMask mask;
  // ALiBi slopes and the relative-bias table, fp32 device memory. softcap must stay 0.
  BuiltinScoreMod score_mod;
  // Optional (kv_num_blocks null: none); device arrays, shape checked against q and k before any
  // launch. Without one the kernels visit every KV block the window allows and ask the mask's
  // block_visibility which ones need element masking.
  BlockMask block_mask;
  AttentionSinks sinks;  // fp32 [Hq] device memory, optional

  bool has_mask_mod() const { return mask.documents.doc_ids_q != nullptr || mask.use_prefix_lm; }
  bool has_score_mod() const {
    return score_mod.alibi.slopes != nullptr || score_mod.bias.table != nullptr;
  }
  bool has_block_mask() const { return block_mask.kv_num_blocks != nullptr; }
  // Whether any part changes the scores or which keys a row sees (a mask_mod, a score_mod or a
  // BlockMask). Sinks alone do not: they change only each row's normalization, which the dense
  // kernels can add.
  bool has_mods() const { return has_mask_mod() || has_score_mod() || has_block_mask(); }
  // Whether the problem has a FlexAttention part at all (varlen aside, see flashcore/varlen.hpp).
  bool active() const { return has_mods() || sinks.enabled(); }
};

}  // namespace flashcore::flex
