// The per-step math of one warp of the sm80 backward (bwd_kernel.cuh): its five mma.sync GEMMs, the
// elementwise P / dS between them, and the P^T / dS^T tiles through which the warps of a key tile
// share them. Fragment conventions are the forward's (mainloop.hpp): m16n8k16, rows g = lane / 4
// and g + 8, columns (and B k rows) 2 * (lane % 4) and +1.
//
// The key-major products (rows = a warp's 16 keys, columns = query rows) take both operands from
// [row][dim] tiles, as the forward's Q K^T does. P^T and dS^T, [key][query] tiles, are the A
// operands of dV += P^T dO and dK += dS^T Q read as the forward reads Q (rows = keys, k = queries),
// and dS, the A operand of dQ = dS K, is dS^T read transposed.
#pragma once

#include <cstdint>

#include "common/score_scaling.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/mainloop.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

// The warp's kNTiles n8 tiles (from b_first_ntile) of A B^T: its 16 rows of a_tile (from a_row0)
// against rows [8 b_first_ntile, 8 (b_first_ntile + kNTiles)) of b_tile, both [row][dim] tiles of
// kHeadDim columns (tile_io.hpp's layout): dP^T = V dO^T or S^T = K Q^T. Loads as the forward's
// gemm_qk: A rows by plain ldmatrix, B^T rows by plain ldmatrix too.
template <typename Traits, int kNTiles>
__device__ __forceinline__ void gemm_key_major(const char* a_tile, int a_row0, const char* b_tile,
                                               int b_first_ntile, int lane,
                                               float (&c)[kNTiles][4]) {
  constexpr int kChunks = Traits::kChunksPerRow;
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.f;
  const LaneSwizzle a_xor = lane_swizzle(lane % 8, lane / 16);
  const LaneSwizzle b_xor = lane_swizzle(lane % 8, (lane / 8) % 2);
  const int b_row = b_first_ntile * kMmaN + lane % 8 + 8 * (lane / 16);
#pragma unroll
  for (int kk = 0; kk < Traits::kHeadDim / kMmaK; ++kk) {
    uint32_t a[4];
    ldsm_x4(a_tile, fragment_offset<kChunks>(a_row0 + lane % 16, 2 * kk, a_xor), a);
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      uint32_t b[4];
      ldsm_x4(b_tile, fragment_offset<kChunks>(b_row + np * 16, 2 * kk, b_xor), b);
      mma<Traits>(c[2 * np], a, b[0], b[1]);
      mma<Traits>(c[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// C += A B for A in registers (kKSteps k-steps) and B the n8 tiles [first_ntile,
// first_ntile + kNTiles) of rows [0, 16 kKSteps) of a [row][dim] tile of kHeadDim columns, read by
// ldmatrix.trans as the forward's gemm_pv reads V: dV += P^T dO, dK += dS^T Q (over query rows) and
// dQ += dS K (over keys).
template <typename Traits, int kKSteps, int kNTiles>
__device__ __forceinline__ void gemm_operand_by_tile(const uint32_t (&a)[kKSteps][4],
                                                     const char* b_tile, int first_ntile, int lane,
                                                     float (&c)[kNTiles][4]) {
  constexpr int kChunks = Traits::kChunksPerRow;
  const LaneSwizzle b_xor = lane_swizzle(lane % 8, lane / 16);
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
    for (int dp = 0; dp < kNTiles / 2; ++dp) {
      uint32_t b[4];
      ldsm_x4_trans(
          b_tile, fragment_offset<kChunks>(kk * kMmaK + lane % 16, first_ntile + 2 * dp, b_xor), b);
      mma<Traits>(c[2 * dp], a[kk], b[0], b[1]);
      mma<Traits>(c[2 * dp + 1], a[kk], b[2], b[3]);
    }
  }
}

// The recomputed probabilities and dS of kNTiles n8 tiles of query rows (from row0), in place: s
// holds raw S^T = K Q^T and becomes P^T; dp holds dP^T = V dO^T and becomes dS^T, the gradient of
// the raw (unscaled) scores divided by the softmax scale (the scale multiplies dK and dQ once, at
// their ends):
//   x = score in the log2 domain (softcapped: cap * tanh(s * scale / cap) * log2(e)),
//   P = exp2(x - LSE * log2(e)),  dS = P (dP - D) (times 1 - tanh^2 with softcap).
// lse_log2 and delta are those rows' (shared memory). Masked pairs (boundary tiles only) get
// x = -inf, so P = 0 and dS = 0; rows without keys carry LSE +inf (bwd_preprocess.cuh). The scaling
// is the forward's (common/score_scaling.hpp), so P is the P the forward normalized.
template <int kNTiles>
__device__ __forceinline__ void probabilities_and_ds(const BwdParams& p, bool needs_mask, int row0,
                                                     int key0, int lane, const float* lse_log2,
                                                     const float* delta, float (&s)[kNTiles][4],
                                                     float (&dp)[kNTiles][4]) {
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
    const int col = nt * kMmaN + 2 * (lane % 4);
    const float2 lse = *reinterpret_cast<const float2*>(lse_log2 + col);
    const float2 d = *reinterpret_cast<const float2*>(delta + col);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row0 + col + (e & 1);
      const int key = key0 + lane / 4 + 8 * (e >> 1);
      float x, dtanh = 1.f;
      if (p.softcapped) {
        // tanhf, as the sm80 forward's Softcap: P must be the P its LSE normalized, and
        // tanh.approx (2^-11 relative) would move P by up to cap * 2^-11 * log2(e) in the log2
        // domain, a bias of its own in every gradient.
        const float u = tanhf(s[nt][e] * p.softcap_in);
        x = u * p.softcap_out;
        dtanh = 1.f - u * u;
      } else {
        x = s[nt][e] * p.scale_log2;
      }
      if (needs_mask && !p.mask.visible(row, key)) x = -INFINITY;
      const float prob = fast_exp2(x - ((e & 1) ? lse.y : lse.x));
      s[nt][e] = prob;
      dp[nt][e] = prob * (dp[nt][e] - ((e & 1) ? d.y : d.x)) * dtanh;
    }
  }
}

// Key-major C fragments packed two 16-bit elements per register, in the A fragment order over
// their query rows: n8 tiles 2kk and 2kk + 1 are k-step kk (the forward's pack_probabilities).
template <typename Traits, int kNTiles>
__device__ __forceinline__ void pack_key_major(const float (&c)[kNTiles][4],
                                               uint32_t (&a)[kNTiles / 2][4]) {
  using Element = typename Traits::Element;
#pragma unroll
  for (int kk = 0; kk < kNTiles / 2; ++kk) {
    a[kk][0] = pack2<Element>(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = pack2<Element>(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = pack2<Element>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = pack2<Element>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

// Packed key-major fragments (pack_key_major) of k-steps [first_kstep, first_kstep + kKSteps) of
// the warp's keys (key_row0 .. +15) into a [key][query] tile of kBlockM columns (the tile_io.hpp
// swizzle): P^T or dS^T. Register j of k-step kk holds keys g (j even) or g + 8 (j odd) at query
// rows 16 kk + 8 (j / 2) + 2 (lane % 4) and +1: one 32-bit store each, conflict-free (the eight
// keys of a store land in eight different swizzle slots).
template <typename Traits, int kKSteps>
__device__ __forceinline__ void store_key_major(char* tile, int key_row0, int first_kstep, int lane,
                                                const uint32_t (&a)[kKSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = key_row0 + lane / 4 + 8 * (j % 2);
      const int chunk = 2 * (first_kstep + kk) + j / 2;
      *reinterpret_cast<uint32_t*>(tile + chunk_offset<Traits::kScoreChunksPerRow>(key, chunk) +
                                   4 * (lane % 4)) = a[kk][j];
    }
  }
}

// P^T or dS^T of the warp's keys (key_row0 .. +15) over every query row of the step, as A
// fragments: plain ldmatrix of the [key][query] tile, as the forward loads Q (lane l addresses
// key l % 16, chunk 2 kk + l / 16).
template <typename Traits>
__device__ __forceinline__ void load_key_major_operand(const char* tile, int key_row0, int lane,
                                                       uint32_t (&a)[Traits::kQueryKSteps][4]) {
  const LaneSwizzle x = lane_swizzle(lane % 8, lane / 16);
#pragma unroll
  for (int kk = 0; kk < Traits::kQueryKSteps; ++kk) {
    ldsm_x4(tile, fragment_offset<Traits::kScoreChunksPerRow>(key_row0 + lane % 16, 2 * kk, x),
            a[kk]);
  }
}

// dS as the A operand of dQ = dS K for 16 query rows (from query_row0), over every key of the
// tile: ldmatrix.trans of the [key][query] dS^T tile gives each lane query row g and keys
// 2 (lane % 4), +1, the A layout. Matrices 0-3: keys 0-7 / rows 0-7, keys 0-7 / rows 8-15,
// keys 8-15 / rows 0-7, keys 8-15 / rows 8-15 (a0..a3), so lane l addresses key
// 16 kk + l % 8 + 8 (l / 16) in chunk query_row0 / 8 + (l / 8) % 2.
template <typename Traits>
__device__ __forceinline__ void load_ds_operand(const char* ds_tile, int query_row0, int lane,
                                                uint32_t (&a)[Traits::kKeyKSteps][4]) {
  const LaneSwizzle x = lane_swizzle(lane % 8, (lane / 8) % 2);
#pragma unroll
  for (int kk = 0; kk < Traits::kKeyKSteps; ++kk) {
    ldsm_x4_trans(ds_tile,
                  fragment_offset<Traits::kScoreChunksPerRow>(
                      kk * kMmaK + lane % 8 + 8 * (lane / 16), query_row0 / kChunkElems, x),
                  a[kk]);
  }
}

}  // namespace flashcore::sm80
