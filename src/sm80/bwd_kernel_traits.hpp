// Tile configuration of the sm80 backward kernel (bwd_kernel.cuh), one table entry per head dim,
// and the numbers derived from it. The only place the backward's tile sizes live.
//
// A CTA owns kBlockN keys of one kv head and walks the query blocks (kBlockM rows) of every query
// head of its group. Its warps form kKeyTiles x kDimSplit: warp w owns the 16 keys of key tile
// w % kKeyTiles and part w / kKeyTiles of the work the five GEMMs split:
//  - dP^T = V dO^T and S^T = K Q^T: its keys x its part of the query rows; P^T and dS^T go to
//    shared memory ([key][query] tiles), so that every warp of the key tile reads all of them;
//  - dV += P^T dO and dK += dS^T Q: its keys x its part of the head dims (registers, whole walk);
//  - dQ = dS K: the 16 query rows of row tile w % kKeyTiles x its part of the head dims.
// kDimSplit 2 halves the dK and dV accumulators a thread holds (the register budget of hd128).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <numeric>

#include "sm80/kernel_traits.hpp"

namespace flashcore::sm80 {

// Per head dim: kBlockM query rows per step, kBlockN keys per CTA (kBlockN / 16 key tiles),
// kDimSplit warps per key tile, and the CTAs per SM the register budget is capped for
// (__launch_bounds__ min blocks). Registers count fp32 accumulators per thread.
template <int kHeadDim>
struct BwdTileConfig;
// 4 warps: 32 dK + 32 dV, 32 S + 32 dP, 32 dQ accumulators. 8 + 8 KiB K/V, 2 x (8 + 8) KiB Q/dO,
// 8 + 8 KiB P^T/dS^T and 1 KiB LSE/D = 65 KiB: two CTAs per SM on sm_80 and sm_90.
template <>
struct BwdTileConfig<64> {
  static constexpr int kBlockM = 64, kBlockN = 64, kDimSplit = 1, kMinCtasPerSm = 2;
};
// 8 warps, two per key tile: 32 dK + 32 dV, 16 S + 16 dP, 32 dQ accumulators. One warp per key
// tile (64 + 64 dK/dV accumulators next to the scores) needed 24-56 bytes of spills at 255
// registers (ptxas, sm_90), however the scores were split. 16 + 16 KiB K/V, 2 x (16 + 16) KiB
// Q/dO, 8 + 8 KiB P^T/dS^T and 1 KiB LSE/D = 113 KiB: one CTA per SM (8 warps, as two of the
// 4-warp hd64 CTAs).
template <>
struct BwdTileConfig<128> {
  static constexpr int kBlockM = 64, kBlockN = 64, kDimSplit = 2, kMinCtasPerSm = 1;
};

template <typename Element_, int kHeadDim_>
struct BwdTraits {
  using Element = Element_;
  using Config = BwdTileConfig<kHeadDim_>;
  using MmaAtom = typename MmaAtomFor<Element>::Atom;

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = Config::kBlockM;  // query rows per step
  static constexpr int kBlockN = Config::kBlockN;  // keys per CTA
  static constexpr int kKeyTiles = kBlockN / kMmaM;
  static constexpr int kDimSplit = Config::kDimSplit;
  static constexpr int kWarps = kKeyTiles * kDimSplit;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kMinCtasPerSm = Config::kMinCtasPerSm;

  static constexpr int kQueryNTiles = kBlockM / kMmaN;               // n8 tiles of S^T / dP^T
  static constexpr int kPartQueryNTiles = kQueryNTiles / kDimSplit;  // a warp's share of them
  static constexpr int kQueryKSteps = kBlockM / kMmaK;  // k-steps of dV and dK (over queries)
  static constexpr int kKeyKSteps = kBlockN / kMmaK;    // k-steps of dQ (over keys)
  static constexpr int kOutNTiles = kHeadDim / kMmaN;   // n8 tiles of dK, dV and dQ
  static constexpr int kPartOutNTiles = kOutNTiles / kDimSplit;  // a warp's share of them
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

  static_assert(kBlockM == kKeyTiles * kMmaM, "each key tile's warps own one m16 tile of dQ rows");
  static_assert(kPartQueryNTiles % 2 == 0, "a warp's query rows are whole k-steps");
  static_assert(kPartOutNTiles % 2 == 0, "a warp's head dims are whole n8 pairs");
  static_assert(kScoreChunksPerRow % 8 == 0,
                "P^T/dS^T rows are whole swizzle groups (tile_io.hpp)");
  static_assert(kRowStatBytes / 16 * 2 <= kThreads, "one 16-byte copy per thread for LSE and D");
};

}  // namespace flashcore::sm80
