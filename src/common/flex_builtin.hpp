// The built-in mods (flex::BuiltinMask, flex::BuiltinScoreMod: what the C ABI and Python run) on
// a warp's mma C fragment without a functor call per element. ncu on the sm90 flex kernel (H100,
// B4 H16 S4096 D128, causal BlockMask): the one partial step per tile ran 4,842 instructions per
// warp with 130 local-memory spills and drew 44% of the stall samples, as much as the 15.5 full
// steps; with ALiBi, the per-element score_mod made the step's code 3,074 instructions (563
// without) and drew 73%. So:
//   - mask: the window's and prefix-LM's visible keys of a row are one range (prefix-LM's
//     kv <= q + offset || kv < prefix is kv < max(q + offset + 1, prefix)), computed once per row
//     and turned into the row's bits as runs, a few integer operations per row. Documents compare
//     the row's id with the column's, each id loaded once per step, unless the sm90 merged walks
//     found the step's rows and keys all of one document (then no id is read).
//   - score_mod: bound once per tile on sm90, per step on sm80 (ALiBi's slope loaded once, 32-bit
//     distances), each part a pass over the fragment behind one uniform branch, softcap with
//     tanh.approx as the dense kernel's softcap (common/score_scaling.hpp). It runs on every
//     element, visible or not: its reads stay inside the bias table (distances are clamped) and
//     the caller selects -inf for hidden elements afterwards.
// Functors of one's own keep the generic per-element calls (flex_scores.hpp). Host-callable for
// tests/cpu/test_flex_builtin.cu, which checks both against the functors element by element.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/score_scaling.hpp"
#include "flashcore/flex/builtin_mods.hpp"

namespace flashcore::detail {

// Where a warp's fragment sits: tile rows row0 + mt * 16 + lane / 4 (+ 8) and keys key0 + nt * 8 +
// 2 * (lane % 4) (+ 1), in the sequence's own indices. Tile row r is query row r of head h, except
// in a decode tile whose rows are the query heads of one kv head (sm80/flex_view.hpp packs them:
// packed_heads = G, seqlen_q = 1): there row r is query row 0 of head h + r, for r < G.
struct FragmentPlace {
  int b, h;
  int row0, key0;
  int seqlen_q, seqlen_k;
  int lane;
  int packed_heads = 0;

  __host__ __device__ int head_of(int row) const { return packed_heads > 0 ? h + row : h; }
  __host__ __device__ int query_of(int row) const { return packed_heads > 0 ? 0 : row; }
  // Tile rows [0, rows()) hold queries; the others are padding, never visible.
  __host__ __device__ int rows() const { return packed_heads > 0 ? packed_heads : seqlen_q; }
};

// Bits as element_visibility's (bit (half * kNTiles + nt) * 2 + e of word mt) for a partial tile
// of the built-in mask, for kSpans consecutive spans of kNTiles * 8 keys from at.key0 (word mt of
// span s is bits[s][mt]); rows or keys outside the sequences are hidden, and their ids never read.
// A row's window and prefix-LM leave it one range of visible keys [begin, end), so its bits are
// runs: the thread's column nt * 8 + e lies in the range for the n tiles
// [ceil((begin - e) / 8), ceil((end - e) / 8)), which are bits 2 * nt + e of a contiguous run. That
// is a few integer operations per row instead of two compares and an insert per element (ncu on
// the sm90 flex kernel, H200, sliding window 1024 at B4 H16 S4096: 872 instructions per warp on the
// window's first key block against the dense kernel's 198). The row's range is worked out once
// for all spans (sm90's key tile is two 64-key spans, each a visibility word). Documents then
// compare the row's id with each column's, each column id loaded once per step, and clear the
// bits of other documents. The mask reads no head, so a packed tile's rows (all query row 0) see
// the same keys.
// one_document_step: the caller knows the rows and keys are of one document (the sm90 merged
// walks' FlexStep::one_document), so the documents are not read at all.
template <int kMTiles, int kNTiles, int kSpans>
__host__ __device__ __forceinline__ void builtin_visibility_spans(const flex::BuiltinMask& mask,
                                                                  const FragmentPlace& at,
                                                                  uint32_t (&bits)[kSpans][kMTiles],
                                                                  bool one_document_step = false) {
  constexpr int kFragRows = 16, kFragCols = 8, kCols = kNTiles * kFragCols;
  constexpr uint32_t kEvenBits = 0x55555555u;    // bit 2 * nt: column e = 0 of each n tile
  const int col0 = at.key0 + 2 * (at.lane % 4);  // the thread's first column
  const flex::DocumentMask& docs = mask.documents;
  const bool use_docs = docs.doc_ids_q != nullptr && !one_document_step;
  int doc_q[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    uint32_t words[kSpans];
#pragma unroll
    for (int span = 0; span < kSpans; ++span) words[span] = 0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = at.row0 + mt * kFragRows + at.lane / 4 + 8 * half;
      const int q = at.query_of(row);
      // The row's visible keys [first, last) relative to col0. Both ends are key indices between
      // -seqlen_q (prefix-LM's causal end when Sq > Sk) and seqlen_k before col0 is taken off, so
      // the differences fit an int.
      int first = 0, last = 0;
      doc_q[mt][half] = 0;
      if (row < at.rows()) {
        const int64_t first_key = mask.window.first_key(q);
        int64_t end_key = mask.window.end_key(q);  // one past; already <= seqlen_k
        if (mask.use_prefix_lm) {
          const int64_t causal_end = q + mask.prefix_lm.causal_offset + 1;
          const int64_t prefix = mask.prefix_lm.prefix(at.b);
          const int64_t prefix_end = causal_end > prefix ? causal_end : prefix;
          end_key = end_key < prefix_end ? end_key : prefix_end;
        }
        if (end_key > at.seqlen_k) end_key = at.seqlen_k;
        first = static_cast<int>(first_key - col0);
        last = static_cast<int>(end_key - col0);
        if (use_docs) doc_q[mt][half] = docs.doc_ids_q[at.b * docs.batch_stride_q + q];
      }
#pragma unroll
      for (int span = 0; span < kSpans; ++span) {
        // The range clamped to the span's columns.
        const auto clamp = [](int x) { return x < 0 ? 0 : (x > kCols ? kCols : x); };
        const int begin = clamp(first - span * kCols);
        const int end = clamp(last - span * kCols);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          // begin, end >= 0, so these divisions round up as ceil does.
          const int first_tile = (begin - e + kFragCols - 1) / kFragCols;
          int end_tile = (end - e + kFragCols - 1) / kFragCols;
          end_tile = end_tile > first_tile ? end_tile : first_tile;  // an empty row
          const uint32_t run = (1u << (2 * end_tile)) - (1u << (2 * first_tile));
          words[span] |= (run & (kEvenBits << e)) << (half * kNTiles * 2);
        }
      }
    }
#pragma unroll
    for (int span = 0; span < kSpans; ++span) bits[span][mt] = words[span];
  }
  if (!use_docs) return;
  // Each column's id is loaded and compared with every row's, so no array of column ids stays
  // live (a first version that loaded them all first spilled in sm80's hd128 kernel: 255
  // registers with O live). Columns past the keys are hidden by the ranges already.
  const int32_t* ids_k = docs.doc_ids_k + at.b * docs.batch_stride_k;
#pragma unroll
  for (int span = 0; span < kSpans; ++span) {
    uint32_t same[kMTiles];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) same[mt] = 0;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int kv = col0 + span * kCols + nt * kFragCols + e;
        const int doc_k = kv < at.seqlen_k ? ids_k[kv] : 0;
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            same[mt] |= static_cast<uint32_t>(doc_q[mt][half] == doc_k)
                        << ((half * kNTiles + nt) * 2 + e);
          }
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) bits[span][mt] &= same[mt];
  }
}

// One span: the tile's kNTiles * 8 keys from at.key0.
template <int kMTiles, int kNTiles>
__host__ __device__ __forceinline__ void builtin_visibility(const flex::BuiltinMask& mask,
                                                            const FragmentPlace& at,
                                                            uint32_t (&bits)[kMTiles]) {
  uint32_t span[1][kMTiles];
  builtin_visibility_spans<kMTiles, kNTiles, 1>(mask, at, span);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) bits[mt] = span[0][mt];
}

// The built-in score_mod bound to one head of one sequence (with_seqlens already applied):
// alibi, then the relative bias, then softcap, as BuiltinScoreMod::operator().
struct BuiltinScoreTerms {
  float slope;            // ALiBi's slope for the head; 0: off
  int offset;             // Sk - Sq (ALiBi and the bias share it)
  const float* bias_row;  // the head's row of the bias table; nullptr: off
  int bias_limit;         // max_distance - 1
  float cap, inv_cap;     // cap 0: off

  __host__ __device__ static BuiltinScoreTerms bind(const flex::BuiltinScoreMod& mod, int h) {
    BuiltinScoreTerms t;
    t.slope = mod.alibi.slopes != nullptr ? mod.alibi.slopes[h] : 0.f;
    t.offset = static_cast<int>(mod.alibi.slopes != nullptr ? mod.alibi.offset : mod.bias.offset);
    t.bias_row = mod.bias.table != nullptr ? mod.bias.table + h * mod.bias.row_stride : nullptr;
    t.bias_limit = static_cast<int>(mod.bias.max_distance - 1);
    t.cap = mod.softcap.cap > 0.f ? mod.softcap.cap : 0.f;
    t.inv_cap = t.cap > 0.f ? 1.f / t.cap : 0.f;
    return t;
  }

  // each(fn) calls fn(float& score, int q, int kv) for every element of the fragment; the scores
  // are scaled (natural-log domain) on the way in and out.
  template <typename Each>
  __host__ __device__ __forceinline__ void apply(Each&& each) const {
    if (slope != 0.f) {
      each([&](float& x, int q, int kv) {
        const int distance = kv - (q + offset);
        x -= slope * static_cast<float>(distance < 0 ? -distance : distance);
      });
    }
    if (bias_row != nullptr) {
      each([&](float& x, int q, int kv) {
        int d = kv - (q + offset);
        d = d < -bias_limit ? -bias_limit : (d > bias_limit ? bias_limit : d);
        x += bias_row[d + bias_limit];
      });
    }
    if (cap > 0.f) {
#if defined(__CUDA_ARCH__)
      each([&](float& x, int, int) { x = cap * fast_tanh(x * inv_cap); });
#else
      each([&](float& x, int, int) { x = cap * std::tanh(x * inv_cap); });  // tests/cpu
#endif
    }
  }
};

}  // namespace flashcore::detail
