// Tile configuration of the sm80 forward kernel, one table entry per head dim, and the numbers
// derived from it (warps, fragments, shared memory). This is the only place tile sizes live.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cute/arch/mma_sm80.hpp>

namespace flashcore::sm80 {

inline constexpr int kWarpSize = 32;
inline constexpr int kMmaM = 16;  // mma.sync m16n8k16
inline constexpr int kMmaN = 8;
inline constexpr int kMmaK = 16;
inline constexpr int kChunkElems = 8;  // one 16-byte cp.async / ldmatrix row = 8 fp16/bf16

// Per head dim: BLOCK_M query rows per CTA, BLOCK_N keys per pipeline stage, warps, stages, and the
// CTAs per SM the register budget is capped for (__launch_bounds__ min blocks): without a cap
// ptxas takes up to 255 registers, which for 8 warps leaves one CTA, 8 warps, per SM.
// Each warp owns BLOCK_M / kWarps consecutive query rows (one or two m16 tiles): two tiles let a
// K/V fragment read from shared memory feed two MMAs, which is what keeps hd64/hd128 off the
// shared-memory bandwidth limit; at hd256 the O accumulator (16x256 fp32 = 128 registers per m16
// tile) only leaves room for one.
template <int kHeadDim>
struct TileConfig;

// 16 KiB Q + 3 x 16 KiB K/V stages = 64 KiB: three CTAs per SM by shared memory on A100 and H100;
// registers (64 O + 64 S accumulators per thread) allow two.
template <>
struct TileConfig<64> {
  static constexpr int kBlockM = 128, kBlockN = 64, kWarps = 4, kStages = 3, kMinCtasPerSm = 2;
};
// 32 KiB Q + 2 x 32 KiB K/V = 96 KiB, one CTA (8 warps, as FlashAttention-2 runs) per SM. One
// m16 tile per warp. Measured alternatives (H100, docs/perf-sm80-notes.md): two CTAs per SM (128
// registers) spilled load addresses inside the main loop; 4 warps x two m16 tiles with BLOCK_N 32
// (FlashAttention-2's reuse of each K/V fragment) was only 2.5% faster non-causal, 3% slower
// causal, and spilled; BLOCK_N 64 with two m16 tiles spilled the 128 O + 64 S accumulators.
template <>
struct TileConfig<128> {
  static constexpr int kBlockM = 128, kBlockN = 64, kWarps = 8, kStages = 2, kMinCtasPerSm = 1;
};
// The 128 O registers per thread leave one CTA per SM.
template <>
struct TileConfig<256> {
  static constexpr int kBlockM = 128, kBlockN = 32, kWarps = 8, kStages = 2, kMinCtasPerSm = 1;
};

template <typename Element>
struct MmaAtomFor;
template <>
struct MmaAtomFor<__half> {
  using Atom = cute::SM80_16x8x16_F32F16F16F32_TN;
};
template <>
struct MmaAtomFor<__nv_bfloat16> {
  using Atom = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};

template <typename Element_, int kHeadDim_>
struct KernelTraits : TileConfig<kHeadDim_> {
  using Element = Element_;
  using Config = TileConfig<kHeadDim_>;
  using MmaAtom = typename MmaAtomFor<Element>::Atom;

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = Config::kBlockM;
  static constexpr int kBlockN = Config::kBlockN;
  static constexpr int kWarps = Config::kWarps;
  static constexpr int kStages = Config::kStages;
  static constexpr int kMinCtasPerSm = Config::kMinCtasPerSm;
  static constexpr int kThreads = kWarps * kWarpSize;

  static constexpr int kWarpRows = kBlockM / kWarps;
  static constexpr int kWarpMTiles = kWarpRows / kMmaM;  // m16 tiles per warp
  static constexpr int kScoreNTiles = kBlockN / kMmaN;   // n8 tiles of S per m16 tile
  static constexpr int kOutNTiles = kHeadDim / kMmaN;    // n8 tiles of O per m16 tile
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;

  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKVTileBytes = kBlockN * kHeadDim * 2;  // one of K or V
  static constexpr int kStageBytes = 2 * kKVTileBytes;         // K then V
  static constexpr int kSmemBytes = kQBytes + kStages * kStageBytes;

  static_assert(kWarpRows % kMmaM == 0, "each warp owns whole m16 tiles");
  static_assert(kBlockN % kMmaK == 0 && kHeadDim % kMmaK == 0, "tiles are whole mma k-steps");
  static_assert(kStages >= 2, "the pipeline keeps one stage in flight while computing another");
};

}  // namespace flashcore::sm80
