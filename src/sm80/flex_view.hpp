// The problem as the sm80 flex kernel sees it, for any mods: the dense kernel's pointers, strides
// and scale with the query side as the mods see it (real query heads and rows), one unsplit grid
// of the flex tile's rows, and the BlockMask, sinks and varlen arrays of the params.
//
// Decode under GQA is packed as the dense decode packs it (common/query_view.hpp): with one query
// row, the G query heads of a kv head become the rows of one tile, so each K/V tile is read once
// for the group instead of once per query head. The mods still see real heads: row r of kv head h
// is query row 0 of head h * G + r (detail::FragmentPlace). That needs every row of the tile to
// walk the same key blocks, so it is done only where nothing of the walk depends on the head: the
// built-in mask (it reads no head) and a BlockMask broadcast over heads, or none.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/flex_problem.hpp"
#include "common/problem.hpp"
#include "flashcore/flex/builtin_mods.hpp"
#include "flashcore/varlen.hpp"
#include "sm80/flex_params.hpp"
#include "sm80/fwd_plan.hpp"
#include "sm80/kernel_traits.hpp"

namespace flashcore::sm80 {

// The flex tiles' keys per KV tile (the same at every head dim; the query rows are not: 128, and
// 64 at hd256). BlockMask query blocks must be multiples of kFlexQBlockMultiple
// (kernel_traits.hpp), KV blocks of kFlexBlockKV.
inline constexpr int64_t kFlexBlockKV =
    FlexTileConfig<64>::kBlockN * FlexTileConfig<64>::kKeyGroups;
static_assert(FlexTileConfig<256>::kBlockN * FlexTileConfig<256>::kKeyGroups == kFlexBlockKV &&
                  FlexTileConfig<256>::kBlockM % kFlexQBlockMultiple == 0,
              "every flex tile takes the same BlockMask block sizes");

// Whether the flex tile of tile_rows query rows packs the problem's query heads (above);
// builtin_mask: the mask is flex::BuiltinMask, not a functor of one's own (which may read h).
inline bool flex_packs_heads(const detail::Problem& problem, int64_t tile_rows, bool builtin_mask) {
  const AttentionParams& a = problem.params;
  const int64_t group = problem.group();
  return builtin_mask && a.seqlen_q == 1 && group > 1 && group <= tile_rows && !is_varlen(a) &&
         (!a.flex.has_block_mask() || a.flex.block_mask.heads == 1);
}

// The view for the flex tile Traits (its query rows set the grid).
template <typename Traits, typename Mask, typename ScoreMod>
FlexParams<Mask, ScoreMod> flex_view(const detail::Problem& problem, const Mask& mask,
                                     const ScoreMod& score_mod) {
  const AttentionParams& a = problem.params;
  FlexParams<Mask, ScoreMod> fp{};
  FwdParams& p = fp.fwd;
  p = kernel_view(problem);
  p.heads = static_cast<int>(a.heads_q);
  p.kv_group = static_cast<int>(problem.group());
  p.seqlen_q = static_cast<int>(a.seqlen_q);
  p.q_seq = a.q.strides.seq, p.q_head = a.q.strides.head;
  p.o_seq = a.o.strides.seq, p.o_head = a.o.strides.head;
  p.scale = problem.scale;
  p.num_splits = 1;
  fp.packed_heads = 0;
  if (flex_packs_heads(problem, Traits::kBlockM, std::is_same_v<Mask, flex::BuiltinMask>)) {
    // Rows are the group's query heads: row r of kv head h is at query head h * G + r.
    const int group = p.kv_group;
    p.heads = static_cast<int>(a.heads_kv);
    p.kv_group = 1;
    p.seqlen_q = group;
    p.q_seq = a.q.strides.head, p.q_head = a.q.strides.head * group;
    p.o_seq = a.o.strides.head, p.o_head = a.o.strides.head * group;
    fp.packed_heads = group;
  }
  const int64_t rows = is_varlen(a) ? a.max_seqlen_q : p.seqlen_q;
  p.num_m_blocks = static_cast<int>((rows + Traits::kBlockM - 1) / Traits::kBlockM);
  fp.mask = mask;
  fp.score_mod = score_mod;
  fp.block_mask = a.flex.block_mask;
  fp.sinks = a.flex.sinks;
  fp.cu_seqlens_q = a.cu_seqlens_q;
  fp.cu_seqlens_k = a.cu_seqlens_k;
  return fp;
}

// The params' built-in mods (common/flex_problem.hpp), under the names run_flex and the JIT use.
using detail::builtin_mask;
using detail::builtin_score_mod;

}  // namespace flashcore::sm80
