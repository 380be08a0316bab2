// The per-step math of one warp of the sm80 backward (bwd_kernel.cuh): its five mma.sync GEMMs, the
// elementwise P / dS between them, and the P^T / dS^T tiles through which the phases share them.
// Fragment conventions are the forward's (mainloop.hpp): m16n8k16, rows g = lane / 4 and g + 8,
// columns (and B k rows) 2 * (lane % 4) and +1.
//
// Every GEMM is warp_gemm over a warp tile of kM m16 tiles x kN n8 tiles: per k-step it loads the
// kM A fragments and then, per pair of n8 tiles, one B ldmatrix.x4 that feeds 2 kM MMAs. The
// operands come from shared-memory tiles in tile_io.hpp's swizzled [row][chunk] layout, read one of
// four ways:
//  - RowsA: A rows are tile rows, k runs along them (K in S^T = K Q^T, P^T in dV += P^T dO);
//  - RowsB: B columns are tile rows (Q in S^T = K Q^T: B = Q^T);
//  - ColsB: B k rows are tile rows (dO in dV += P^T dO, Q in dK, K in dQ): ldmatrix.trans;
//  - ColsA: A rows are tile columns (dS in dQ = dS K, read from the [key][query] dS^T tile):
//    ldmatrix.trans.
#pragma once

#include <cstdint>

#include "common/score_scaling.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/mainloop.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

template <int kM, int kN>
using WarpFrag = float[kM][kN][4];

template <int kM, int kN>
__device__ __forceinline__ void zero_frag(float (&c)[kM][kN][4]) {
#pragma unroll
  for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) c[mt][nt][0] = c[mt][nt][1] = c[mt][nt][2] = c[mt][nt][3] = 0.f;
  }
}

// A operand, rows [row0, row0 + 16 kM) of a [row][k] tile of kChunks chunks per row: plain
// ldmatrix (matrices rows 0-7 / 8-15 x k lo / hi; lane l addresses row l % 16, chunk 2 kk + l /
// 16).
template <int kChunks>
struct RowsA {
  const char* tile;
  int row0;
  LaneSwizzle x;
  __device__ __forceinline__ RowsA(const char* t, int r, int lane)
      : tile(t), row0(r + lane % 16), x(lane_swizzle(lane % 8, lane / 16)) {}
  __device__ __forceinline__ void operator()(int kk, int mt, uint32_t (&a)[4]) const {
    ldsm_x4(tile, fragment_offset<kChunks>(row0 + mt * kMmaM, 2 * kk, x), a);
  }
};

// B operand whose n columns are rows [n0, n0 + 8 kN) of a [row][k] tile: plain ldmatrix, one x4
// per pair of n8 tiles (matrices: rows 0-7 k lo, rows 0-7 k hi, rows 8-15 k lo, rows 8-15 k hi;
// lane l addresses row l % 8 + 8 (l / 16), chunk 2 kk + (l / 8) % 2).
template <int kChunks>
struct RowsB {
  const char* tile;
  int row0;
  LaneSwizzle x;
  __device__ __forceinline__ RowsB(const char* t, int n0, int lane)
      : tile(t), row0(n0 + lane % 8 + 8 * (lane / 16)), x(lane_swizzle(lane % 8, (lane / 8) % 2)) {}
  __device__ __forceinline__ void operator()(int kk, int np, uint32_t (&b)[4]) const {
    ldsm_x4(tile, fragment_offset<kChunks>(row0 + 16 * np, 2 * kk, x), b);
  }
};

// B operand whose k rows are tile rows 16 kk.. and n columns the n8 tiles from first_ntile (even)
// of a [k][n] tile: ldmatrix.trans, as the forward's gemm_pv reads V (lane l addresses row
// 16 kk + l % 16, chunk first_ntile + 2 np + l / 16).
template <int kChunks>
struct ColsB {
  const char* tile;
  int first_ntile;
  int row;
  LaneSwizzle x;
  __device__ __forceinline__ ColsB(const char* t, int ntile, int lane)
      : tile(t), first_ntile(ntile), row(lane % 16), x(lane_swizzle(lane % 8, lane / 16)) {}
  __device__ __forceinline__ void operator()(int kk, int np, uint32_t (&b)[4]) const {
    ldsm_x4_trans(tile, fragment_offset<kChunks>(kk * kMmaK + row, first_ntile + 2 * np, x), b);
  }
};

// A operand whose rows are tile columns [m0, m0 + 16 kM) (m0 a multiple of 16) and k the tile rows
// 16 kk..: ldmatrix.trans gives each lane row g and k 2 (lane % 4), +1. Matrices 0-3: k 0-7 /
// rows 0-7, k 0-7 / rows 8-15, k 8-15 / rows 0-7, k 8-15 / rows 8-15 (a0..a3), so lane l
// addresses tile row 16 kk + l % 8 + 8 (l / 16), chunk m0 / 8 + 2 mt + (l / 8) % 2.
template <int kChunks>
struct ColsA {
  const char* tile;
  int first_chunk;
  int row;
  LaneSwizzle x;
  __device__ __forceinline__ ColsA(const char* t, int m0, int lane)
      : tile(t),
        first_chunk(m0 / kChunkElems),
        row(lane % 8 + 8 * (lane / 16)),
        x(lane_swizzle(lane % 8, (lane / 8) % 2)) {}
  __device__ __forceinline__ void operator()(int kk, int mt, uint32_t (&a)[4]) const {
    ldsm_x4_trans(tile, fragment_offset<kChunks>(kk * kMmaK + row, first_chunk + 2 * mt, x), a);
  }
};

// C += A B over kKSteps k-steps for a warp tile of kM x kN (kN even) mma tiles.
template <typename Traits, int kKSteps, int kM, int kN, typename LoadA, typename LoadB>
__device__ __forceinline__ void warp_gemm(const LoadA& load_a, const LoadB& load_b,
                                          float (&c)[kM][kN][4]) {
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    uint32_t a[kM][4];
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) load_a(kk, mt, a[mt]);
#pragma unroll
    for (int np = 0; np < kN / 2; ++np) {
      uint32_t b[4];
      load_b(kk, np, b);
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) {
        mma<Traits>(c[mt][2 * np], a[mt], b[0], b[1]);
        mma<Traits>(c[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// The recomputed probabilities of a key-major warp tile (rows: keys from key0, 16 per m16 tile;
// columns: query rows from row0, 8 per n8 tile), in place: s holds raw S^T = K Q^T and becomes
// P^T, from
//   x = score in the log2 domain (softcapped: cap * tanh(s * scale / cap) * log2(e)),
//   P = exp2(x - LSE * log2(e)).
// g receives G = P (1 - tanh^2) (P without softcap) in fp16 pairs, which
// score_gradients turns into dS once dP^T is computed: holding G in 16 registers instead of the 32
// of fp32 P is what keeps the hd128 tile free of spills. G is in [0, 1], so fp16 keeps it to 2^-11
// relative (better than bf16's 2^-9), below the rounding dS then gets to the element type.
// lse_log2 holds those rows' LSE (shared memory). Masked pairs (needs_mask tiles only) get
// x = -inf, so P = 0 and dS = 0; rows without keys carry LSE +inf (bwd_preprocess.cuh). The scaling
// is the forward's (common/score_scaling.hpp), so P is the P the forward normalized.
template <int kM, int kN>
__device__ __forceinline__ void probabilities(const BwdParams& p, bool needs_mask, int row0,
                                              int key0, int lane, const float* lse_log2,
                                              float (&s)[kM][kN][4], __half2 (&g)[kM][kN][2]) {
#pragma unroll
  for (int nt = 0; nt < kN; ++nt) {
    const int col = nt * kMmaN + 2 * (lane % 4);
    const float2 lse = *reinterpret_cast<const float2*>(lse_log2 + col);
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
      float dtanh[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row0 + col + (e & 1);
        const int key = key0 + mt * kMmaM + lane / 4 + 8 * (e >> 1);
        float x;
        dtanh[e] = 1.f;
        if (p.softcapped) {
          // tanhf, as the sm80 forward's Softcap: P must be the P its LSE normalized, and
          // tanh.approx (2^-11 relative) would move P by up to cap * 2^-11 * log2(e) in the log2
          // domain, a bias of its own in every gradient.
          const float u = tanhf(s[mt][nt][e] * p.softcap_in);
          x = u * p.softcap_out;
          dtanh[e] = 1.f - u * u;
        } else {
          x = s[mt][nt][e] * p.scale_log2;
        }
        if (needs_mask && !p.mask.visible(row, key)) x = -INFINITY;
        s[mt][nt][e] = fast_exp2(x - ((e & 1) ? lse.y : lse.x));
      }
      g[mt][nt][0] = __floats2half2_rn(s[mt][nt][0] * dtanh[0], s[mt][nt][1] * dtanh[1]);
      g[mt][nt][1] = __floats2half2_rn(s[mt][nt][2] * dtanh[2], s[mt][nt][3] * dtanh[3]);
    }
  }
}

// dS^T of the tile, in place: dp holds dP^T = V dO^T and becomes dS = G (dP - D), the gradient of
// the raw (unscaled) scores divided by the softmax scale (the scale multiplies dK and dQ once, at
// their ends). delta holds the tile's rows' D (shared memory).
template <int kM, int kN>
__device__ __forceinline__ void score_gradients(int lane, const float* delta,
                                                const __half2 (&g)[kM][kN][2],
                                                float (&dp)[kM][kN][4]) {
#pragma unroll
  for (int nt = 0; nt < kN; ++nt) {
    const float2 d = *reinterpret_cast<const float2*>(delta + nt * kMmaN + 2 * (lane % 4));
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float2 gf = __half22float2(g[mt][nt][half]);
        dp[mt][nt][2 * half] = gf.x * (dp[mt][nt][2 * half] - d.x);
        dp[mt][nt][2 * half + 1] = gf.y * (dp[mt][nt][2 * half + 1] - d.y);
      }
    }
  }
}

// A key-major warp tile (rows: keys from key_row0; columns: the n8 tiles of query rows from
// first_ntile) into a [key][query] tile of kBlockM columns (the tile_io.hpp swizzle), in the
// element type: P^T or dS^T. A C fragment half is key g or g + 8 at query rows 2 (lane % 4), +1 of
// its n8 tile, i.e. of the chunk of that index: one 32-bit store each, conflict-free (the eight
// keys of a store land in eight different swizzle slots).
template <typename Traits, int kM, int kN>
__device__ __forceinline__ void store_key_major(char* tile, int key_row0, int first_ntile, int lane,
                                                const float (&c)[kM][kN][4]) {
  using Element = typename Traits::Element;
#pragma unroll
  for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int key = key_row0 + mt * kMmaM + lane / 4 + 8 * half;
        *reinterpret_cast<uint32_t*>(
            tile + chunk_offset<Traits::kScoreChunksPerRow>(key, first_ntile + nt) +
            4 * (lane % 4)) = pack2<Element>(c[mt][nt][2 * half], c[mt][nt][2 * half + 1]);
      }
    }
  }
}

// Adds two adjacent fp32 dQ values to the workspace: one 8-byte vector reduction on sm_90 (half
// the atomic instructions), two 4-byte ones before it.
__device__ __forceinline__ void atomic_add2(float* dst, float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(lo, hi));
#else
  atomicAdd(dst, lo);
  atomicAdd(dst + 1, hi);
#endif
}

}  // namespace flashcore::sm80
