// FlexAttention mask_mods: which (query, key) pairs attention may look at, with PyTorch
// FlexAttention's meaning.
//
// A mask_mod is a copyable struct with
//   __host__ __device__ bool operator()(int b, int h, int q_idx, int kv_idx) const;
// true means query q_idx of batch b and query head h sees key kv_idx. Indices are int32, as the
// kernels and PyTorch's index tensors use. The same struct runs in the kernels (built with device
// pointers) and in the float64 CPU reference (built with host pointers), so both evaluate one
// definition.
//
// Two optional members make a mask_mod cheaper; every built-in here has the ones that apply:
//   BlockVisibility block_visibility(b, h, q_begin, q_end, kv_begin, kv_end) const
//       classifies a whole tile (empty, partial, full) without evaluating its elements, as
//       WindowMask does in O(1); BlockVisibility::kUnknown falls back to evaluating them.
//   Self with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const
//       the same mod bound to a sequence's lengths. Everything positional here is bottom-right
//       aligned (query i stands at key position i + Sk - Sq, as FlashAttention's causal mask),
//       which needs the lengths; in a varlen batch each sequence has its own, so the runner binds
//       them per sequence through bind_seqlens() and b is the sequence's index.
//
// Unlike PyTorch's example mods, causal here is bottom-right aligned: with Sq != Sk, PyTorch's
// `q_idx >= kv_idx` is top-left. The two agree when Sq == Sk.
#pragma once

#include <cstdint>

#include "flashcore/flex/mod_traits.hpp"
#include "flashcore/mask.hpp"

namespace flashcore::flex {

// Causal and sliding window are the existing WindowMask (flashcore/mask.hpp), so a flex problem
// with them takes the kernels' window path and gets no slower. Its lengths are bound by the runner.
using WindowMod = WindowMask<int64_t>;

// Query i sees keys up to its own position: window_right = 0, left unbounded.
inline WindowMod causal_mask() { return {0, 0, /*left=*/-1, /*right=*/0}; }
// Query i sees keys in [pos - left, pos + right], pos = i + Sk - Sq; a side < 0 is unbounded.
inline WindowMod sliding_window_mask(int64_t left, int64_t right) { return {0, 0, left, right}; }

// Sees everything (the mask_mod of a problem that has none).
struct NoMask {
  FLASHCORE_HOST_DEVICE bool operator()(int, int, int, int) const { return true; }
  FLASHCORE_HOST_DEVICE BlockVisibility block_visibility(int, int, int64_t, int64_t, int64_t,
                                                         int64_t) const {
    return BlockVisibility::kFull;
  }
};

// Document masking (packed sequences in one row): a query sees the keys of its own document.
// doc_ids_q is [B, Sq] and doc_ids_k [B, Sk], int32, rows batch_stride_q / batch_stride_k elements
// apart; for self-attention both point at one array. AND it with causal_mask() for causal
// documents. In a varlen batch the sequences already are the documents: do not combine the two.
struct DocumentMask {
  const int32_t* doc_ids_q = nullptr;
  const int32_t* doc_ids_k = nullptr;
  int64_t batch_stride_q = 0;
  int64_t batch_stride_k = 0;

  FLASHCORE_HOST_DEVICE bool operator()(int b, int, int q_idx, int kv_idx) const {
    return doc_ids_q[b * batch_stride_q + q_idx] == doc_ids_k[b * batch_stride_k + kv_idx];
  }
};

// Self-attention over one [B, S] array of document ids.
inline DocumentMask document_mask(const int32_t* doc_ids, int64_t seqlen) {
  return {doc_ids, doc_ids, seqlen, seqlen};
}

// Prefix-LM: the first prefix tokens are seen by every query (bidirectional), the rest causally.
// prefix_lengths (int32 [B], optional) gives a length per batch; without it every batch uses
// prefix_length. The causal part is bottom-right aligned, bound by with_seqlens.
struct PrefixLMMask {
  const int32_t* prefix_lengths = nullptr;
  int64_t prefix_length = 0;
  int64_t causal_offset = 0;  // Sk - Sq

  FLASHCORE_HOST_DEVICE int64_t prefix(int b) const {
    return prefix_lengths != nullptr ? prefix_lengths[b] : prefix_length;
  }
  FLASHCORE_HOST_DEVICE bool operator()(int b, int, int q_idx, int kv_idx) const {
    return kv_idx <= q_idx + causal_offset || kv_idx < prefix(b);
  }
  FLASHCORE_HOST_DEVICE PrefixLMMask with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const {
    return {prefix_lengths, prefix_length, seqlen_k - seqlen_q};
  }
  // Visibility only grows with q and shrinks with kv, so the tile's corners decide it exactly:
  // (q_begin, last key) is the hardest pair to see, (last query, kv_begin) the easiest.
  FLASHCORE_HOST_DEVICE BlockVisibility block_visibility(int b, int, int64_t q_begin, int64_t q_end,
                                                         int64_t kv_begin, int64_t kv_end) const {
    const auto sees = [&](int64_t q, int64_t kv) {
      return kv <= q + causal_offset || kv < prefix(b);
    };
    if (sees(q_begin, kv_end - 1)) return BlockVisibility::kFull;
    return sees(q_end - 1, kv_begin) ? BlockVisibility::kPartial : BlockVisibility::kEmpty;
  }
};

// A pair sees a key when both masks let it (PyTorch's and_masks).
template <typename A, typename B>
struct AndMask {
  A a;
  B b;

  FLASHCORE_HOST_DEVICE bool operator()(int batch, int h, int q_idx, int kv_idx) const {
    return a(batch, h, q_idx, kv_idx) && b(batch, h, q_idx, kv_idx);
  }
  FLASHCORE_HOST_DEVICE AndMask with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const {
    return {bind_seqlens(a, seqlen_q, seqlen_k), bind_seqlens(b, seqlen_q, seqlen_k)};
  }
  // Conclusive when a side is empty or full; two partial sides leave it to the elements.
  FLASHCORE_HOST_DEVICE BlockVisibility block_visibility(int batch, int h, int64_t q_begin,
                                                         int64_t q_end, int64_t kv_begin,
                                                         int64_t kv_end) const {
    const BlockVisibility va =
        flex::block_visibility(a, batch, h, q_begin, q_end, kv_begin, kv_end);
    if (va == BlockVisibility::kEmpty) return va;
    const BlockVisibility vb =
        flex::block_visibility(b, batch, h, q_begin, q_end, kv_begin, kv_end);
    if (vb == BlockVisibility::kEmpty) return vb;
    // Where one side sees the whole tile, the AND is the other side.
    if (va == BlockVisibility::kFull) return vb;
    if (vb == BlockVisibility::kFull) return va;
    return BlockVisibility::kUnknown;  // two partial sides may or may not overlap
  }
};

// A pair sees a key when either mask lets it (PyTorch's or_masks).
template <typename A, typename B>
struct OrMask {
  A a;
  B b;

  FLASHCORE_HOST_DEVICE bool operator()(int batch, int h, int q_idx, int kv_idx) const {
    return a(batch, h, q_idx, kv_idx) || b(batch, h, q_idx, kv_idx);
  }
  FLASHCORE_HOST_DEVICE OrMask with_seqlens(int64_t seqlen_q, int64_t seqlen_k) const {
    return {bind_seqlens(a, seqlen_q, seqlen_k), bind_seqlens(b, seqlen_q, seqlen_k)};
  }
  // Conclusive when a side is full or empty; two partial sides leave it to the elements.
  FLASHCORE_HOST_DEVICE BlockVisibility block_visibility(int batch, int h, int64_t q_begin,
                                                         int64_t q_end, int64_t kv_begin,
                                                         int64_t kv_end) const {
    const BlockVisibility va =
        flex::block_visibility(a, batch, h, q_begin, q_end, kv_begin, kv_end);
    if (va == BlockVisibility::kFull) return va;
    const BlockVisibility vb =
        flex::block_visibility(b, batch, h, q_begin, q_end, kv_begin, kv_end);
    if (vb == BlockVisibility::kFull) return vb;
    // Where one side sees nothing of the tile, the OR is the other side.
    if (va == BlockVisibility::kEmpty) return vb;
    if (vb == BlockVisibility::kEmpty) return va;
    return BlockVisibility::kUnknown;
  }
};

// and_masks(m1, m2, ...) and or_masks(m1, m2, ...): the combinators of PyTorch, any arity >= 1.
template <typename M>
M and_masks(const M& m) {
  return m;
}
template <typename M, typename... Rest>
auto and_masks(const M& m, const Rest&... rest) {
  using Tail = decltype(and_masks(rest...));
  return AndMask<M, Tail>{m, and_masks(rest...)};
}
template <typename M>
M or_masks(const M& m) {
  return m;
}
template <typename M, typename... Rest>
auto or_masks(const M& m, const Rest&... rest) {
  using Tail = decltype(or_masks(rest...));
  return OrMask<M, Tail>{m, or_masks(rest...)};
}

}  // namespace flashcore::flex
