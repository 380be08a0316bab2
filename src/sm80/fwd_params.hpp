// What the sm80 kernels receive: the problem as the kernel sees it (after GQA packing for
// decode, see launch), int sizes, int64 element strides, and the split-KV workspace.
#pragma once

#include <cstdint>

#include "flashcore/mask.hpp"

namespace flashcore::sm80 {

// x / d for 0 <= x < 2^31 and d >= 1 as a multiply-high, an add and a shift (Granlund and
// Montgomery's round-up method, exact over that range; tests/cpu/test_fast_divisor.cpp): no
// divide routine and, unlike "d == 1 ? x : x / d", no branch. A CTA's setup before its first load
// is mostly waiting on the first reads of the launch's parameters (constant-cache misses, the top
// stall there in Nsight Compute); a branch in it kept the compiler from issuing the later reads
// up front, so their misses came one after another (docs/perf.md v9).
struct FastDivisor {
  int divisor;
  uint32_t multiplier;
  uint32_t shift;

  static FastDivisor of(int d) {
    uint32_t shift = 0;
    while ((int64_t{1} << shift) < d) ++shift;
    const uint64_t multiplier =
        ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - static_cast<uint64_t>(d))) /
            static_cast<uint64_t>(d) +
        1;
    return {d, static_cast<uint32_t>(multiplier), shift};
  }
  FLASHCORE_HOST_DEVICE int divide(int x) const {
    const uint32_t u = static_cast<uint32_t>(x);
#ifdef __CUDA_ARCH__
    const uint32_t high = __umulhi(u, multiplier);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{u} * multiplier) >> 32);
#endif
    return static_cast<int>((high + u) >> shift);  // high < u < 2^31: the sum fits 32 bits
  }
};

struct FwdParams {
  // num_splits and kv_group for the small-grid tiles' branch-free setup (tile_scheduler.hpp), first
  // so that they share a constant-cache line with the pointers. The large tiles keep the branches:
  // changing their setup (or this struct's order) moves their main-loop code, and the hd256 tile
  // measured 2-4% slower; as it is, their SASS is unchanged (docs/perf.md v9).
  FastDivisor split_divisor;
  FastDivisor kv_group_divisor;

  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // [batch, heads, seqlen_q] natural log, or null

  int64_t q_batch, q_seq, q_head;
  int64_t k_batch, k_seq, k_head;
  int64_t v_batch, v_seq, v_head;
  int64_t o_batch, o_seq, o_head;

  int batch;
  int heads;     // query heads as the kernel indexes them
  int kv_group;  // query heads per kv head
  int seqlen_q;
  int seqlen_k;

  WindowMask<int> mask;  // also masks the key tail: visible() requires key < seqlen_k
  float scale;           // softmax scale, used with softcap
  float scale_log2;      // scale * log2(e)
  Softcap softcap;
  // How scores reach the softmax. Without softcap (and with a positive scale) they stay raw dot
  // products: max commutes with a positive scale, so the softmax folds scale * log2(e) into its
  // one exp2 FFMA per element (exp_factor = scale_log2). Softcap needs the scaled score, and a
  // scale <= 0 would flip the max, so then prescale is set, the kernel takes the scores to the
  // log2 domain first, and exp_factor is 1. Host-computed: in the kernel both stay constant-bank
  // operands instead of taking registers.
  bool prescale;
  float exp_factor;

  int num_m_blocks;
  int num_splits;      // 1: write O and LSE directly; > 1: write partials for the combine kernel
  float* o_partial;    // [num_splits, batch, heads, seqlen_q, head_dim] fp32, normalized per split
  float* lse_partial;  // [num_splits, batch, heads, seqlen_q] natural-log LSE of each split
  // The caller's head dim, a multiple of 8 up to the instantiation's (common/head_dim.hpp): loads
  // zero-fill the dims past it, stores skip them, and the partials above are this wide. Last, so
  // that the fields before it keep their offsets (see the top of this struct).
  int head_dim;
};

}  // namespace flashcore::sm80
