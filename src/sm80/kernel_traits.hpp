// Tile configuration of the sm80 forward kernel, one table entry per head dim, and the numbers
// derived from it (warps, fragments, shared memory). This is the only place the sm_80 tile sizes
// live; the Hopper tiles that reuse this schedule have theirs in
// src/sm90/small_grid/tile_table.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cute/arch/mma_sm80.hpp>
#include <numeric>
#include <type_traits>

namespace flashcore::sm80 {

inline constexpr int kWarpSize = 32;
inline constexpr int kMmaM = 16;  // mma.sync m16n8k16
inline constexpr int kMmaN = 8;
inline constexpr int kMmaK = 16;
inline constexpr int kChunkElems = 8;  // one 16-byte cp.async / ldmatrix row = 8 fp16/bf16

// Per head dim: BLOCK_M query rows per CTA, BLOCK_N keys per warp per KV step, the warp grid
// (kRowWarps along the rows x kKeyGroups along the keys), K/V stages (1: the two-barrier schedule,
// >= 2: a ring; see fwd_kernel.cuh), and the CTAs per SM the register budget is capped for
// (__launch_bounds__ min blocks; 2 CTAs of 4 warps leave 255 registers per thread).
// Each warp owns BLOCK_M / kRowWarps consecutive query rows (one or two m16 tiles). On the H100 the
// shared-memory pipe (128 B/clk, one ldmatrix.x4 = 4 clk) limits mma.sync unless each K/V fragment
// feeds about three MMAs: two m16 tiles per warp give four per x4, one tile only two. At hd256 the
// O accumulator (16x256 fp32 = 128 registers per m16 tile) only leaves room for one.
// Measured choices and rejected alternatives: docs/perf-sm80-notes.md.
template <int kHeadDim>
struct TileConfig;

// Registers below count fp32 accumulators per thread: O is (m16 tiles per warp) x D / 2, S is
// (m16 tiles per warp) x BLOCK_N / 2. The head dims FlashAttention-2 also instantiates (32, 96,
// 160, 192, 224) start from its A100 tiles, with one m16 tile per warp where two spilled; every
// entry compiles without spills on sm_80 and sm_90a (ptxas figures in docs/perf.md, "sm80: every
// head dim").
//
// 8 KiB Q + 3 x (8 KiB K + 8 KiB V) = 56 KiB, two CTAs per SM; 32 O + 128 S accumulators. A KV
// step of hd32 is two k-steps of Q K^T, so the softmax and the barrier dominate it: 128-key tiles
// (FlashAttention-2's hd32 tile) halve the steps, and the ring of hd64 hides the loads.
template <>
struct TileConfig<32> {
  static constexpr int kBlockM = 128, kBlockN = 128, kRowWarps = 4, kKeyGroups = 1, kStages = 3,
                       kMinCtasPerSm = 2;
};
// 16 KiB Q + 3 x 16 KiB K/V = 64 KiB; registers (64 O + 64 S accumulators per thread) allow two
// CTAs per SM. A KV step is short at hd64, so the 3-deep ring (loads two steps ahead) pays: the
// two-barrier schedule was 7% slower here.
template <>
struct TileConfig<64> {
  static constexpr int kBlockM = 128, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 3,
                       kMinCtasPerSm = 2;
};
// 24 KiB Q + 12 KiB K + 12 KiB V = 48 KiB, two CTAs per SM; FlashAttention-2's hd96 tile (two
// m16 tiles per warp, 96 O + 64 S accumulators). A 2-stage ring spilled 64 bytes (sm_80) and 84
// (sm_90a) at 255 registers.
template <>
struct TileConfig<96> {
  static constexpr int kBlockM = 128, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 1,
                       kMinCtasPerSm = 2;
};
// 32 KiB Q + 16 KiB K + 16 KiB V = 64 KiB, two 4-warp CTAs per SM with two m16 tiles per warp
// (FlashAttention-2's hd128 tile). The 128 O + 64 S accumulators leave no registers for a K/V
// ring: a 2-stage ring needed 80 bytes of spills (ptxas, sm_90a).
template <>
struct TileConfig<128> {
  static constexpr int kBlockM = 128, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 1,
                       kMinCtasPerSm = 2;
};
// 20 KiB Q + 20 KiB K + 20 KiB V = 60 KiB: two 4-warp CTAs per SM, one m16 tile per warp (80 O
// + 32 S accumulators), the hd192/hd256 schedule. FlashAttention-2's A100 tile (128 rows, two m16
// tiles per warp, 32-key tiles: 160 O + 32 S) spilled 28 bytes at 255 registers (sm_90a).
template <>
struct TileConfig<160> {
  static constexpr int kBlockM = 64, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 1,
                       kMinCtasPerSm = 2;
};
// 24 KiB Q + 24 KiB K + 24 KiB V = 72 KiB: two 4-warp CTAs per SM (144 KiB, A100 too), one m16
// tile per warp (96 O + 32 S accumulators); two tiles would need 192 O accumulators, too many
// next to S and the fragments. The hd256 schedule: one CTA computes while the other waits.
template <>
struct TileConfig<192> {
  static constexpr int kBlockM = 64, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 1,
                       kMinCtasPerSm = 2;
};
// 28 KiB Q + 28 KiB K + 28 KiB V = 84 KiB: two 4-warp CTAs per SM on the H100 (one on A100's
// 164 KiB, as hd256), one m16 tile per warp (112 O + 32 S accumulators).
template <>
struct TileConfig<224> {
  static constexpr int kBlockM = 64, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 1,
                       kMinCtasPerSm = 2;
};
// 32 KiB Q + 32 KiB K + 32 KiB V = 96 KiB: two 4-warp CTAs per SM on the H100 (one on A100's
// 163 KiB), so one CTA computes while the other waits at a barrier; 5% faster than one 8-warp
// CTA of 128 rows.
template <>
struct TileConfig<256> {
  static constexpr int kBlockM = 64, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 1,
                       kMinCtasPerSm = 2;
};

// Small grids (the TileConfig grid leaves SMs idle, e.g. B1 H8 S512): 32-row CTAs (two
// row warps), one m16 tile per warp, and kKeyGroups warps per row tile that each take their own
// BLOCK_N-key slice of every KV step; their softmax states merge in shared memory at the end
// (key_group_merge.hpp). Versus splitting keys across CTAs this needs no second launch and no
// workspace, and B1 H8 S512 runs as 128 CTAs of two or four KV steps instead of 32 CTAs of eight.
// Measured on the H100 against 64-row CTAs (4 row warps x 2 key groups) and the large tile:
// docs/perf-sm80-notes.md (v5). On GPUs that give a CTA less shared memory (sm_86/sm_89: 99 KiB)
// the hd64 and hd128 tiles do not fit and auto keeps the large tile.
template <int kHeadDim>
struct SmallGridTileConfig;
// 2 KiB Q + 2 stages x (16 KiB K + 16 KiB V) = 66 KiB; 8 warps (16 O + 32 S accumulators);
// loads one step ahead, as hd64.
template <>
struct SmallGridTileConfig<32> {
  static constexpr int kBlockM = 32, kBlockN = 64, kRowWarps = 2, kKeyGroups = 4, kStages = 2,
                       kMinCtasPerSm = 1;
};
// 4 KiB Q + 2 stages x (32 KiB K + 32 KiB V) = 132 KiB; 8 warps; loads one step ahead.
template <>
struct SmallGridTileConfig<64> {
  static constexpr int kBlockM = 32, kBlockN = 64, kRowWarps = 2, kKeyGroups = 4, kStages = 2,
                       kMinCtasPerSm = 1;
};
// 8 KiB Q + 64 KiB K + 64 KiB V = 136 KiB; 8 warps.
template <>
struct SmallGridTileConfig<128> {
  static constexpr int kBlockM = 32, kBlockN = 64, kRowWarps = 2, kKeyGroups = 4, kStages = 1,
                       kMinCtasPerSm = 1;
};
// 6 KiB Q + 48 KiB K + 48 KiB V = 102 KiB; 8 warps (48 O + 32 S accumulators), as hd128. A
// second stage would take 198 KiB, more than A100 gives a CTA.
template <>
struct SmallGridTileConfig<96> {
  static constexpr int kBlockM = 32, kBlockN = 64, kRowWarps = 2, kKeyGroups = 4, kStages = 1,
                       kMinCtasPerSm = 1;
};
// From hd160 on, 32-key slices keep four key groups (8 warps) within A100's 163 KiB per CTA:
// 10 KiB Q + 40 KiB K + 40 KiB V = 90 KiB (80 O + 16 S accumulators).
template <>
struct SmallGridTileConfig<160> {
  static constexpr int kBlockM = 32, kBlockN = 32, kRowWarps = 2, kKeyGroups = 4, kStages = 1,
                       kMinCtasPerSm = 1;
};
// 12 KiB Q + 48 KiB K + 48 KiB V = 108 KiB; 8 warps (96 O + 16 S accumulators).
template <>
struct SmallGridTileConfig<192> {
  static constexpr int kBlockM = 32, kBlockN = 32, kRowWarps = 2, kKeyGroups = 4, kStages = 1,
                       kMinCtasPerSm = 1;
};
// 14 KiB Q + 56 KiB K + 56 KiB V = 126 KiB; 8 warps (112 O + 16 S accumulators).
template <>
struct SmallGridTileConfig<224> {
  static constexpr int kBlockM = 32, kBlockN = 32, kRowWarps = 2, kKeyGroups = 4, kStages = 1,
                       kMinCtasPerSm = 1;
};
// 16 KiB Q + 32 KiB K + 32 KiB V = 80 KiB; 4 warps (the 128-register O accumulator of hd256
// leaves no room for more per SM).
template <>
struct SmallGridTileConfig<256> {
  static constexpr int kBlockM = 32, kBlockN = 32, kRowWarps = 2, kKeyGroups = 2, kStages = 1,
                       kMinCtasPerSm = 1;
};

// The flex kernel's tile (flex_kernel.cuh), head dims 64 and 128: TileConfig<128>'s shape, 128
// query rows (four warps of two m16 tiles, so each K/V fragment feeds four MMAs), 64-key K/V tiles
// (the smallest KV block a BlockMask may use with it), the two-barrier schedule, two CTAs per SM.
// hd128: 32 KiB Q + 16 KiB K + 16 KiB V = 64 KiB, 128 O + 64 S accumulators, as the dense tile.
// The first flex tile had 64 rows (one m16 tile per warp) and ran at a quarter of the dense rate
// (docs/flex.md). A BlockMask's query blocks may be 64 rows: a tile then spans two and walks both
// blocks' lists (common/block_walk.hpp), each warp computing only its own block's steps.
template <int kHeadDim>
struct FlexTileConfig {
  static_assert(kHeadDim == 64 || kHeadDim == 128,
                "this flex tile is for head dims 64 and 128; 256 has its own (below)");
  static constexpr int kBlockM = 128, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 1,
                       kMinCtasPerSm = 2;
};
// hd256: the dense hd256 tile as it is (64 query rows, four warps of one m16 tile, 64-key K/V
// tiles, 96 KiB): two m16 tiles per warp would need 256 O accumulators. Its 64 rows lie in one
// BlockMask query block, so each step is every warp's. 96 KiB fits the 99 KiB a block may opt into
// on sm_86/sm_89 as well as A100's 163 KiB and the H100's 227 KiB.
template <>
struct FlexTileConfig<256> : TileConfig<256> {};
// BlockMask query blocks the flex tile takes: multiples of 64 rows, so that a 128-row tile (aligned
// to 128) spans at most two blocks, split at row 64, and each warp's 32 rows lie in one.
inline constexpr int kFlexQBlockMultiple = 64;

// What the schedule of fwd_kernel.cuh leaves to the architecture that runs it. A tile config may
// name a policy of each kind; the tables above name none and get the sm_80 ones:
//  - Mma: how a key group runs S = Q K^T and O += P V on its slice of a K/V tile. WarpMma
//    (mainloop.hpp): each warp issues mma.sync on its own m16 rows.
//  - CtaSplit: how many CTAs split one query tile's keys (consecutive CTAs along x, launched as a
//    cluster of that size) and how their softmax states merge. SingleCta: one CTA sees every key.
//  - GridDependency: whether the kernel may start while the previous kernel in the stream still
//    runs. Independent: it may not, and is launched plainly.
// Hopper's policies (wgmma, cluster pairs merging through distributed shared memory, programmatic
// dependent launch) live in src/sm90/small_grid/; nothing here depends on them.
struct WarpMma;  // mainloop.hpp
struct SingleCta {
  static constexpr int kClusterCtas = 1;
  // Floats per thread that a CTA of the split receives from the others: none.
  static constexpr int exchange_floats(int /*warp_m_tiles*/, int /*out_n_tiles*/) { return 0; }
  __device__ __forceinline__ static void on_kernel_entry() {}
};
struct Independent {
  static constexpr bool kWaitsForPriorGrid = false;
  __device__ __forceinline__ static void allow_dependent_launch() {}
  __device__ __forceinline__ static void wait_for_prior_grid() {}
};

// The policy of one kind a tile config names, or the sm_80 default.
template <typename Config, typename = void>
struct MmaOf {
  using type = WarpMma;
};
template <typename Config>
struct MmaOf<Config, std::void_t<typename Config::Mma>> {
  using type = typename Config::Mma;
};
template <typename Config, typename = void>
struct CtaSplitOf {
  using type = SingleCta;
};
template <typename Config>
struct CtaSplitOf<Config, std::void_t<typename Config::CtaSplit>> {
  using type = typename Config::CtaSplit;
};
template <typename Config, typename = void>
struct GridDependencyOf {
  using type = Independent;
};
template <typename Config>
struct GridDependencyOf<Config, std::void_t<typename Config::GridDependency>> {
  using type = typename Config::GridDependency;
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

template <typename Element_, int kHeadDim_, typename Config_ = TileConfig<kHeadDim_>>
struct KernelTraits {
  using Element = Element_;
  using Config = Config_;
  using MmaAtom = typename MmaAtomFor<Element>::Atom;
  using Mma = typename MmaOf<Config>::type;
  using CtaSplit = typename CtaSplitOf<Config>::type;
  using GridDependency = typename GridDependencyOf<Config>::type;

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = Config::kBlockM;
  static constexpr int kBlockN = Config::kBlockN;  // keys per warp slice
  static constexpr int kRowWarps = Config::kRowWarps;
  static constexpr int kKeyGroups = Config::kKeyGroups;
  static constexpr int kStages = Config::kStages;
  static constexpr int kMinCtasPerSm = Config::kMinCtasPerSm;
  static constexpr int kClusterCtas = CtaSplit::kClusterCtas;
  // The small-grid tiles (keys split across warps or CTAs) take the branch-free setup.
  static constexpr bool kSmallGrid = kKeyGroups > 1 || kClusterCtas > 1;
  static constexpr int kWarps = kRowWarps * kKeyGroups;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kBlockKV = kBlockN * kKeyGroups;  // keys per K/V tile (one KV step)

  static constexpr int kWarpRows = kBlockM / kRowWarps;
  static constexpr int kWarpMTiles = kWarpRows / kMmaM;  // m16 tiles per warp
  static constexpr int kScoreNTiles = kBlockN / kMmaN;   // n8 tiles of S per m16 tile
  static constexpr int kOutNTiles = kHeadDim / kMmaN;    // n8 tiles of O per m16 tile
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;
  // cp.async tile loads (tile_io.hpp): kLoadThreadsPerRow threads share a row, each copying every
  // kLoadThreadsPerRow-th chunk of it. All of a row's chunks (one each) where the CTA's threads
  // divide into rows (hd64, 128, 256); four or eight where they do not (12, 20, 24 or 28 chunks).
  static constexpr int kLoadThreadsPerRow = std::gcd(kChunksPerRow, kThreads);

  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKVTileBytes = kBlockKV * kHeadDim * 2;             // one of K or V
  static constexpr int kSliceBytes = kBlockN * kHeadDim * 2;               // one warp's keys of it
  static constexpr int kWorkBytes = kQBytes + kStages * 2 * kKVTileBytes;  // Q, [stage][K, V]
  // Where the CTAs of a split exchange their states (CtaSplit), apart from the Q and K/V tiles this
  // CTA may still be reading when the others' states arrive.
  static constexpr int kExchangeFloats = CtaSplit::exchange_floats(kWarpMTiles, kOutNTiles);
  static constexpr int kExchangeBytes = kThreads * kExchangeFloats * 4;
  static constexpr int kSmemBytes = kWorkBytes + kExchangeBytes;

  static_assert(kWarpRows % kMmaM == 0, "each warp owns whole m16 tiles");
  static_assert(kClusterCtas == 1 || kKeyGroups == 1,
                "CTAs that split a query tile's keys do not split them across warps too");
  static_assert(kBlockN % kMmaK == 0 && kHeadDim % kMmaK == 0, "tiles are whole mma k-steps");
  static_assert(kHeadDim % 32 == 0, "rows are whole groups of four 16-byte chunks (tile_io.hpp)");
};

// The two mma.sync tiles of one (dtype, head dim): the large one (TileConfig) and the small-grid
// one (SmallGridTileConfig).
template <typename Element, int kHeadDim>
using LargeTile = KernelTraits<Element, kHeadDim>;
template <typename Element, int kHeadDim>
using SmallTile = KernelTraits<Element, kHeadDim, SmallGridTileConfig<kHeadDim>>;
// The flex kernel's tile (FlexTileConfig).
template <typename Element, int kHeadDim>
using FlexTile = KernelTraits<Element, kHeadDim, FlexTileConfig<kHeadDim>>;

}  // namespace flashcore::sm80
