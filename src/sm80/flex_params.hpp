// What the sm80 flex kernel receives: the dense kernel's view of the problem (sizes, strides,
// pointers; the decode GQA packing of flex_view.hpp, no split) plus the mods, the BlockMask, sinks
// and varlen arrays.
#pragma once

#include <cstdint>

#include "flashcore/flex/block_mask_layout.hpp"
#include "flashcore/flex/sinks.hpp"
#include "sm80/fwd_params.hpp"

namespace flashcore::sm80 {

template <typename Mask, typename ScoreMod>
struct FlexParams {
  // seqlen_q/k are the totals of a varlen batch; mask, softcap, prescale and the split fields are
  // unused (the mods below carry them).
  FwdParams fwd;
  Mask mask;                   // mask_mod, bound to each sequence's lengths in the kernel
  ScoreMod score_mod;          // on the scaled score, natural-log domain
  flex::BlockMask block_mask;  // kv_num_blocks null: every tile of the mask's key range
  flex::AttentionSinks sinks;
  // Varlen (AttentionParams' meaning), or null: then the kernel's gridDim.z is the batch.
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  // Decode under GQA (flex_view.hpp): fwd's rows are the packed_heads query heads of each of its
  // heads (kv heads), row r of kv head h being query row 0 of head h * packed_heads + r; 0: fwd's
  // rows are query rows.
  int packed_heads;
};

}  // namespace flashcore::sm80
