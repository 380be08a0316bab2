// Which strides a TMA descriptor can describe, for the host checks of every sm90 kernel (the
// forward, the flex forward and the backward) before they build descriptors: positive, below
// 2^40 bytes (validation already asks for 16-byte alignment). Elements are two bytes (fp16/bf16).
#pragma once

#include <cstdint>

#include "flashcore/attention.hpp"
#include "sm90/fwd_params.hpp"

namespace flashcore::sm90 {

inline constexpr int64_t kMaxTmaStrideBytes = int64_t{1} << 40;
inline constexpr int64_t kTmaElementBytes = 2;

// A stride (in elements) over an extent of one is never stepped, so any value does.
inline bool stride_fits_tma(int64_t elements, int64_t extent) {
  return extent <= 1 || (elements > 0 && elements * kTmaElementBytes < kMaxTmaStrideBytes);
}

// batch 1 for a packed (varlen) tensor, whose batch stride the descriptor does not use.
inline bool strides_fit_tma(const Strides& s, int64_t seqlen, int64_t heads, int64_t batch) {
  return stride_fits_tma(s.seq, seqlen) && stride_fits_tma(s.head, heads) &&
         stride_fits_tma(s.batch, batch);
}

// Whether the forward's TMA store of O can describe O (seqlen_q x head_dim x heads x batch as the
// kernel indexes it): every stride a positive multiple of 16 bytes below 2^40 bytes, extents of
// one included (the descriptor takes each stride as it is). Otherwise the kernel copies O out
// thread by thread, which any 16-byte-aligned strides allow.
inline bool o_fits_tma_store(int64_t seq_stride, int64_t head_stride, int64_t batch_stride) {
  constexpr int64_t kAlignElements = 16 / kTmaElementBytes;
  for (const int64_t stride : {seq_stride, head_stride, batch_stride}) {
    if (stride <= 0 || stride % kAlignElements != 0 ||
        stride * kTmaElementBytes >= kMaxTmaStrideBytes) {
      return false;
    }
  }
  return true;
}

// The forwards' rule for O's TMA store (sm90/o_store.hpp) over a planned problem: unsplit (a split
// writes fp32 partials), not packed (a varlen tile's box could reach into the next sequence's
// rows), and O's strides fit a descriptor. The kernel's traits may still leave it off (hd256).
inline bool stores_o_by_tma(const FwdArgs& p, bool packed) {
  return !packed && p.num_splits == 1 && o_fits_tma_store(p.o_seq, p.o_head, p.o_batch);
}

// The forwards' check of Q, K and V: the reason, or nullptr when every stride fits.
inline const char* qkv_tma_rejects(const AttentionParams& a, bool packed) {
  const int64_t batch = packed ? 1 : a.batch;
  if (strides_fit_tma(a.q.strides, a.seqlen_q, a.heads_q, batch) &&
      strides_fit_tma(a.k.strides, a.seqlen_k, a.heads_kv, batch) &&
      strides_fit_tma(a.v.strides, a.seqlen_k, a.heads_kv, batch)) {
    return nullptr;
  }
  return "needs Q, K and V strides that are positive and below 2^40 bytes (TMA descriptors)";
}

}  // namespace flashcore::sm90
