// The per-KV-tile math of one warp: S = Q K^T on tensor cores, scores to the log2 domain with
// softcap and mask, and O += P V with P taken straight from the S accumulators.
//
// Fragment map (mma.m16n8k16, row.col): A (16x16) regs a0..a3 = rows g/g+8 x cols 0-7, then rows
// g/g+8 x cols 8-15; B (16x8) regs b0, b1 = k rows 0-7 and 8-15 at column g; C as in
// common/online_softmax.hpp. Here g = lane/4 and each register holds columns (or k rows) 2*(lane%4)
// and +1.
#pragma once

#include <cstdint>

#include "common/online_softmax.hpp"
#include "sm80/fwd_params.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

template <typename Traits>
using ScoreFrag = float[Traits::kWarpMTiles][Traits::kScoreNTiles][4];
template <typename Traits>
using OutFrag = float[Traits::kWarpMTiles][Traits::kOutNTiles][4];

template <typename Traits>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  Traits::MmaAtom::fma(c[0], c[1], c[2], c[3], a[0], a[1], a[2], a[3], b0, b1, c[0], c[1], c[2],
                       c[3]);
}

// S = Q K^T for the warp's rows. Q rows are the A operand (ldmatrix.x4: matrices rows 0-7/8-15 x
// cols lo/hi, so lane l addresses row l%16, chunk 2kk + l/16). K rows are keys, i.e. B^T, so plain
// ldmatrix gives B: one x4 covers two n8 key tiles (matrices: keys 0-7 dims lo, keys 0-7 dims hi,
// keys 8-15 dims lo, keys 8-15 dims hi; lane l addresses key l%8 + 8*(l/16), chunk 2kk + (l/8)%2).
template <typename Traits>
__device__ __forceinline__ void gemm_qk(const char* q_smem, const char* k_smem, int warp_row0,
                                        int lane, ScoreFrag<Traits>& s) {
  constexpr int kChunks = Traits::kChunksPerRow;
#pragma unroll
  for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < Traits::kScoreNTiles; ++nt) {
      s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
    }
  }
  // Every row below is a multiple of 8 plus the lane part, so row & 7 == lane % 8.
  const LaneSwizzle q_xor = lane_swizzle(lane % 8, lane / 16);
  const LaneSwizzle k_xor = lane_swizzle(lane % 8, (lane / 8) % 2);
#pragma unroll
  for (int kk = 0; kk < Traits::kHeadDim / kMmaK; ++kk) {
    uint32_t q_frag[Traits::kWarpMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
      ldsm_x4(q_smem, fragment_offset<kChunks>(warp_row0 + mt * kMmaM + lane % 16, 2 * kk, q_xor),
              q_frag[mt]);
    }
#pragma unroll
    for (int np = 0; np < Traits::kScoreNTiles / 2; ++np) {
      uint32_t k_frag[4];
      ldsm_x4(k_smem, fragment_offset<kChunks>(np * 16 + lane % 8 + 8 * (lane / 16), 2 * kk, k_xor),
              k_frag);
#pragma unroll
      for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
        mma<Traits>(s[mt][2 * np], q_frag[mt], k_frag[0], k_frag[1]);
        mma<Traits>(s[mt][2 * np + 1], q_frag[mt], k_frag[2], k_frag[3]);
      }
    }
  }
}

// With FwdParams::prescale only: raw dot products -> log2-domain scores, x = softcap(s * scale) *
// log2(e) or s * scale * log2(e). The branches here and in mask_scores are uniform and sit outside
// the element loops, so each loop compiles to straight-line code.
template <typename Traits>
__device__ __forceinline__ void prescale_scores(const FwdParams& p, ScoreFrag<Traits>& s) {
  const bool capped = p.softcap.cap > 0.f;
#pragma unroll
  for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < Traits::kScoreNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float& x = s[mt][nt][e];
        x = capped ? p.softcap(x * p.scale) * kLog2e : x * p.scale_log2;
      }
    }
  }
}

// Boundary tiles only: invisible (row, key) pairs, including keys >= seqlen_k, become -inf. The
// visible key range is computed once per row, then each element is two compares and a select.
template <typename Traits>
__device__ __forceinline__ void mask_scores(const FwdParams& p, int row0, int key0, int lane,
                                            ScoreFrag<Traits>& s) {
#pragma unroll
  for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + mt * kMmaM + lane / 4 + 8 * half;
      const int first = p.mask.first_key(row) - key0;
      const int end = p.mask.end_key(row) - key0;
#pragma unroll
      for (int nt = 0; nt < Traits::kScoreNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = nt * kMmaN + 2 * (lane % 4) + e;
          if (key < first || key >= end) s[mt][nt][2 * half + e] = -INFINITY;
        }
      }
    }
  }
}

// P in the input dtype as mma A fragments. The C fragments of S n8 tiles 2kk and 2kk+1 are exactly
// the A fragment of PV k-step kk (a0 = rows g cols 2t.. of tile 2kk, a1 = rows g+8 of tile 2kk,
// a2/a3 = the same of tile 2kk+1), so P never leaves registers; packing it right after the softmax
// halves the registers it holds during the PV GEMM.
template <typename Traits>
using ProbFrag = uint32_t[Traits::kWarpMTiles][Traits::kBlockN / kMmaK][4];

template <typename Traits>
__device__ __forceinline__ void pack_probabilities(const ScoreFrag<Traits>& s,
                                                   ProbFrag<Traits>& p) {
  using Element = typename Traits::Element;
#pragma unroll
  for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
    for (int kk = 0; kk < Traits::kBlockN / kMmaK; ++kk) {
      p[mt][kk][0] = pack2<Element>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      p[mt][kk][1] = pack2<Element>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      p[mt][kk][2] = pack2<Element>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      p[mt][kk][3] = pack2<Element>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
  }
}

// O += P V. V is stored [key][dim], i.e. B row-major, so ldmatrix.trans gives B: one x4 covers two
// n8 dim tiles (matrices: keys 0-7 dims lo, keys 8-15 dims lo, keys 0-7 dims hi, keys 8-15 dims
// hi; lane l addresses key l%16, chunk 2dp + l/16).
template <typename Traits>
__device__ __forceinline__ void gemm_pv(const char* v_smem, int lane, const ProbFrag<Traits>& p,
                                        OutFrag<Traits>& o) {
  constexpr int kChunks = Traits::kChunksPerRow;
  const LaneSwizzle v_xor = lane_swizzle(lane % 8, lane / 16);  // rows are kk * 16 + lane % 16
#pragma unroll
  for (int kk = 0; kk < Traits::kBlockN / kMmaK; ++kk) {
#pragma unroll
    for (int dp = 0; dp < Traits::kOutNTiles / 2; ++dp) {
      uint32_t v_frag[4];
      ldsm_x4_trans(v_smem, fragment_offset<kChunks>(kk * kMmaK + lane % 16, 2 * dp, v_xor),
                    v_frag);
#pragma unroll
      for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
        mma<Traits>(o[mt][2 * dp], p[mt][kk], v_frag[0], v_frag[1]);
        mma<Traits>(o[mt][2 * dp + 1], p[mt][kk], v_frag[2], v_frag[3]);
      }
    }
  }
}

// The sm_80 Mma policy of the schedule (kernel_traits.hpp): a key group is kRowWarps warps, each
// running mma.sync on its own rows.
struct WarpMma {
  // A warp whose rows all lie past seqlen_q may skip the math.
  static constexpr bool kEveryWarpComputes = false;

  template <typename Traits>
  __device__ __forceinline__ static void gemm_qk(const char* q_smem, const char* k_slice,
                                                 int warp_row0, int lane, ScoreFrag<Traits>& s) {
    sm80::gemm_qk<Traits>(q_smem, k_slice, warp_row0, lane, s);
  }
  template <typename Traits>
  __device__ __forceinline__ static void gemm_pv(const char* v_slice, int lane,
                                                 const ProbFrag<Traits>& p, OutFrag<Traits>& o) {
    sm80::gemm_pv<Traits>(v_slice, lane, p, o);
  }
  // Between a cp.async wait and the barrier that publishes the copies: ldmatrix reads shared memory
  // through the same (generic) proxy that cp.async wrote it through, so nothing.
  __device__ __forceinline__ static void fence_copies() {}
};

}  // namespace flashcore::sm80
