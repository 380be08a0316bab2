// Tile configuration of the sm80 backward kernel (bwd_kernel.cuh), one table entry per head dim,
// and the numbers derived from it. The only place the backward's tile sizes live.
//
// A CTA owns kBlockN keys of one kv head and walks the query blocks (kBlockM rows) of every query
// head of its group. Each of the three phases of a step splits the CTA's work over its warps in
// its own layout (FlashAttention-2's AtomLayoutMSdP / NdKV / MdQ), warp w taking part
// w % kWarpsAlong of the first dimension and w / kWarpsAlong of the second:
//  - dP^T = V dO^T and S^T = K Q^T: kSdpWarpsKeys x (kWarps / kSdpWarpsKeys) over keys x query
//    rows; P^T and dS^T go to shared memory ([key][query] tiles) for the next two phases;
//  - dV += P^T dO and dK += dS^T Q: kDkvWarpsKeys x the rest over keys x head dims (registers,
//    the whole walk);
//  - dQ = dS K: kDqWarpsRows x the rest over query rows x head dims.
// A warp's tile in each phase is several m16 tiles by several n8 tiles, so that every ldmatrix
// feeds several MMAs: at hd128 320 MMAs per 152 ldmatrix.x4 a warp and step, where the first
// slice's one-m16-tile warps had 160 per 108 (docs/backward.md).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <numeric>

#include "sm80/kernel_traits.hpp"

namespace flashcore::sm80 {

// Per head dim: kBlockM query rows per step, kBlockN keys per CTA, kWarps, the warp layouts above
// and the CTAs per SM the register budget is capped for (__launch_bounds__ min blocks).
// kLargeSmem: a second tile for GPUs whose blocks get more shared memory than sm_80's 163 KiB
// (sm_90: 227 KiB); sm80_bwd.cu runs it where it fits and the first tile elsewhere. Only hd256
// has one.
template <int kHeadDim, bool kLargeSmem = false>
struct BwdTileConfig;
// 8 warps. Per thread (fp32): 32 S + 32 dP (32 keys x 32 query rows), 32 dK + 32 dV (32 keys x
// 32 dims), 16 dQ (16 rows x 32 dims); 221 registers (sm_90). 16 + 16 KiB K/V, 2 x (8 + 8) KiB
// Q/dO, 16 + 16 KiB P^T/dS^T and 0.5 KiB LSE/D = 96.5 KiB: fits sm_86/89's 99 KiB; one CTA per SM.
template <>
struct BwdTileConfig<64> {
  static constexpr int kBlockM = 64, kBlockN = 128, kWarps = 8;
  static constexpr int kSdpWarpsKeys = 4, kDkvWarpsKeys = 4, kDqWarpsRows = 4;
  static constexpr int kMinCtasPerSm = 1;
};
// 8 warps: 32 S + 32 dP (32 keys x 32 query rows), 64 dK + 64 dV (64 keys x 32 dims), 32 dQ
// (16 rows x 64 dims); 255 registers, no spills (sm_90). FlashAttention-2's hd128 layout (dK/dV
// 32 keys x 64 dims, dQ 32 x 32) has the same accumulator count but spilled 28-40 bytes (16 with
// dQ 16 x 64); this one loads 152 ldmatrix.x4 per warp per step for 320
// MMAs. 128 keys per CTA halve the dQ atomics per FLOP of the first slice's 64. 32 + 32 KiB K/V,
// 2 x (16 + 16) KiB Q/dO, 16 + 16 KiB P^T/dS^T and 0.5 KiB LSE/D = 160.5 KiB: one CTA per SM
// (sm_80's limit is 163 KiB).
// The split of S^T/dP^T is the one thing that differs by architecture, and only in device code
// (the host reads tile sizes, threads and shared memory, never the warp splits): sm_80's ptxas
// spills 24 bytes with 4 key warps (its scalar dQ reductions), none with 8, which the H100 ran in
// its tests too (55/55, 2% slower there: 7.42 against 7.26 ms at B4 H16 S4096).
template <>
struct BwdTileConfig<128> {
  static constexpr int kBlockM = 64, kBlockN = 128, kWarps = 8;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  static constexpr int kSdpWarpsKeys = 8;
#else
  static constexpr int kSdpWarpsKeys = 4;
#endif
  static constexpr int kDkvWarpsKeys = 2, kDqWarpsRows = 4;
  static constexpr int kMinCtasPerSm = 1;
};
// 8 warps, 64 keys per CTA and 32 query rows per step: dK + dV of 64 keys x 256 dims are already
// 128 fp32 registers a thread, so the tile's other accumulators must stay small: 8 S + 8 dP (16
// keys x 16 query rows), 64 dK + 64 dV (32 keys x 64 dims), 32 dQ (32 rows x 32 dims); 240-246
// registers, no spills. 32 + 32 KiB K/V, 2 x (16 + 16) KiB Q/dO, 4 + 4 KiB P^T/dS^T and 0.5 KiB
// LSE/D = 136.5 KiB: fits sm_80's 163 KiB with both stages (sm_86/89's 99 KiB refuse it with the
// shared-memory reason). S^T/dP^T are 64 x 32 over 8 warps, one m16 x two n8 tiles each, so those
// two GEMMs feed one MMA per ldmatrix (160 MMAs per 104 ldmatrix.x4 a warp and step).
template <>
struct BwdTileConfig<256> {
  static constexpr int kBlockM = 32, kBlockN = 64, kWarps = 8;
  static constexpr int kSdpWarpsKeys = 4, kDkvWarpsKeys = 2, kDqWarpsRows = 1;
  static constexpr int kMinCtasPerSm = 1;
};
// hd256 with 64 query rows a step, FlashAttention-2's hd256 tile: 16 S + 16 dP (16 keys x 32
// rows), dK/dV as above, 64 dQ (32 rows x 64 dims); 254-255 registers, no spills; 320 MMAs per 168
// ldmatrix.x4 a warp and step and half the barriers per FLOP. Its two stages of 32 + 32 KiB Q/dO
// make 208.5 KiB, which only GPUs like the H100 give a block; there it was 1.15x the 32-row tile
// (docs/backward.md).
template <>
struct BwdTileConfig<256, true> {
  static constexpr int kBlockM = 64, kBlockN = 64, kWarps = 8;
  static constexpr int kSdpWarpsKeys = 4, kDkvWarpsKeys = 2, kDqWarpsRows = 2;
  static constexpr int kMinCtasPerSm = 1;
};

// One phase's split of a rows x cols product over kWarps warps: kWarpsRows along the rows. A warp's
// tile is kMTiles m16 tiles by kNTiles n8 tiles.
template <int kRows, int kCols, int kWarps, int kWarpsRows>
struct WarpSplit {
  static constexpr int kWarpsCols = kWarps / kWarpsRows;
  static constexpr int kMTiles = kRows / kWarpsRows / kMmaM;
  static constexpr int kNTiles = kCols / kWarpsCols / kMmaN;
  __device__ __forceinline__ static int row0(int warp) {
    return warp % kWarpsRows * kMTiles * kMmaM;
  }
  __device__ __forceinline__ static int first_ntile(int warp) {
    return warp / kWarpsRows * kNTiles;
  }

  static_assert(kWarps % kWarpsRows == 0, "the warps form a grid");
  static_assert(kMTiles * kMmaM * kWarpsRows == kRows, "each warp owns whole m16 tiles");
  static_assert(kNTiles * kMmaN * kWarpsCols == kCols, "each warp owns whole n8 tiles");
  static_assert(kNTiles % 2 == 0, "a warp's n8 tiles are whole pairs (one ldmatrix.x4 each)");
};

template <typename Element_, int kHeadDim_, bool kLargeSmem_ = false>
struct BwdTraits {
  using Element = Element_;
  using Config = BwdTileConfig<kHeadDim_, kLargeSmem_>;
  using MmaAtom = typename MmaAtomFor<Element>::Atom;

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = Config::kBlockM;  // query rows per step
  static constexpr int kBlockN = Config::kBlockN;  // keys per CTA
  static constexpr int kWarps = Config::kWarps;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kMinCtasPerSm = Config::kMinCtasPerSm;

  // S^T and dP^T: keys x query rows; dK and dV: keys x dims; dQ: query rows x dims.
  using SdpSplit = WarpSplit<kBlockN, kBlockM, kWarps, Config::kSdpWarpsKeys>;
  using DkvSplit = WarpSplit<kBlockN, kHeadDim, kWarps, Config::kDkvWarpsKeys>;
  using DqSplit = WarpSplit<kBlockM, kHeadDim, kWarps, Config::kDqWarpsRows>;

  static constexpr int kHeadKSteps = kHeadDim / kMmaK;  // k-steps of S^T and dP^T (over dims)
  static constexpr int kQueryKSteps = kBlockM / kMmaK;  // k-steps of dV and dK (over queries)
  static constexpr int kKeyKSteps = kBlockN / kMmaK;    // k-steps of dQ (over keys)
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;
  static constexpr int kScoreChunksPerRow = kBlockM / kChunkElems;  // P^T, dS^T: keys x queries
  // cp.async tile loads (tile_io.hpp's load_tile_async reads these names).
  static constexpr int kLoadThreadsPerRow = std::gcd(kChunksPerRow, kThreads);

  static constexpr int tile_bytes(int rows) { return rows * kHeadDim * 2; }
  static constexpr int kKBytes = tile_bytes(kBlockN);
  static constexpr int kQBytes = tile_bytes(kBlockM);        // one stage of Q, and of dO
  static constexpr int kScoreBytes = kBlockN * kBlockM * 2;  // P^T or dS^T
  static constexpr int kRowStatBytes = kBlockM * 4;          // one stage of LSE (log2) or D
  static constexpr int kStages = 2;  // Q, dO, LSE and D of the next step land early
  // [K][V][Q stages][dO stages][P^T][dS^T][LSE stages][D stages]
  static constexpr int kVOffset = kKBytes;
  static constexpr int kQOffset = 2 * kKBytes;
  static constexpr int kDoOffset = kQOffset + kStages * kQBytes;
  static constexpr int kPOffset = kDoOffset + kStages * kQBytes;
  static constexpr int kDsOffset = kPOffset + kScoreBytes;
  static constexpr int kLseOffset = kDsOffset + kScoreBytes;
  static constexpr int kDeltaOffset = kLseOffset + kStages * kRowStatBytes;
  static constexpr int kSmemBytes = kDeltaOffset + kStages * kRowStatBytes;

  static_assert(kScoreChunksPerRow % 4 == 0,
                "P^T/dS^T rows are whole swizzle groups of eight, or one of four (tile_io.hpp)");
  static_assert(kRowStatBytes / 16 * 2 <= kThreads, "one 16-byte copy per thread for LSE and D");
};

}  // namespace flashcore::sm80
