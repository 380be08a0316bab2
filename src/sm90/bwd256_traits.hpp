// The sm90 backward's head dim 256 shape (bwd256_kernel.cuh): tiles, GEMMs, shared-memory layouts
// and storage. The hd64/hd128 kernel (bwd_traits.hpp) gives each consumer warpgroup 64 keys and
// keeps their dK and dV (64 keys x D fp32) in registers, 128 + 128 a thread at D = 256: too many.
// Here a CTA owns kBlockN = 64 keys and its two consumer warpgroups split the work of each step
// (kBlockM = 64 query rows) instead:
//   warpgroup 0: S^T = K Q^T    64 keys x 64 queries over D, then P^T (exp2 with the LSE) to shared
//                               memory;
//   warpgroup 1: dP^T = V dO^T  at the same time, then dS^T = P^T o (dP^T - D) from warpgroup 0's
//                               P^T (read in its own accumulator layout, the same for both
//                               warpgroups) to shared memory;
//   both, over their half of D: dV += P^T dO, dK += dS^T Q (64 keys x 128 dims each, held for the
//                               walk: 64 + 64 fp32 registers) and dQ = dS K (64 queries x 128
//                               dims, staged in shared memory for the dQ writer warp).
// Every GEMM reads both operands from shared memory (P^T and dS^T are K-major A tiles), so the two
// warpgroups run one code path per GEMM. Shared memory (227 KiB): K, V 32 KiB each; Q two stages
// of 32 KiB (it is read first and last in a step, so it loads a step ahead); dO one stage (its last
// reader, dV, retires mid-step, so the next dO loads under dK and dQ); P^T two stages of 8 KiB (the
// other warpgroup may still read the last one while the next is written); dS^T 8 KiB; dQ staging
// 32 KiB, one warpgroup's half at a time (warpgroup 1 finishes its dQ first).
#pragma once

// CuTe's tensor header must come before its atom headers, which assume it.
// clang-format off
#include <cute/tensor.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
// clang-format on
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>

#include <cutlass/gemm/collective/builders/sm90_common.inl>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "sm90/bwd_convert.cuh"
#include "sm90/sm90_bwd.hpp"
#include "sm90/tile_scheduler.hpp"
#include "sm90/tile_table.hpp"
#include "sm90/wgmma.hpp"

namespace flashcore::sm90 {

using namespace cute;

template <typename Element_, bool kSoftcap_>
struct Bwd256Traits {
  using Element = Element_;  // cutlass::half_t or cutlass::bfloat16_t
  static constexpr int kHeadDim = 256;
  static constexpr int kHalfDim = kHeadDim / 2;  // each consumer warpgroup's dims of dK, dV, dQ
  // Softcap's tanh: with it warpgroup 0 also hands over G = P (1 - tanh^2), dS's factor.
  static constexpr bool kSoftcap = kSoftcap_;
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kConsumerThreads = kConsumerWarpgroups * kWarpgroupThreads;
  static constexpr int kThreads = kWarpgroupThreads + kConsumerThreads;
  static constexpr int kBlockN = kRowsPerWarpgroup;  // keys per CTA
  static constexpr int kBlockM = 64;                 // query rows per step
  static_assert(kBlockN == bwd_block_n(kHeadDim) && kBlockM == bwd_block_m(kHeadDim),
                "the host sizes the grid and workspace with sm90_bwd.hpp's tiles");
  static constexpr int kStages = 2;  // Q / LSE / D ring; dO has one stage
  static constexpr int kPStages = 2;
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  // The dQ tile order (bwd_convert.cuh's DqTileOrder): dims split between the warpgroups.
  static constexpr bool kDqSplitsDims = true;
  // The sm90 backward refuses varlen at head dim 256 (sm90_bwd.cu); the shared convert kernel
  // (bwd_convert.cuh) asks.
  static constexpr bool kVarlen = false;

  // S^T and dP^T: one warpgroup each, 64 x 64 over K = D, both operands K-major.
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float,
                           Shape<Int<kBlockN>, Int<kBlockM>, Int<kHeadDim>>>()));
  // dV, dK (keys x dims over the queries: A = P^T or dS^T K-major, B = dO^T or Q^T MN-major) and
  // dQ (queries x dims over the keys: A = dS MN-major, B = K^T MN-major): the two warpgroups along
  // N, one half of D each.
  using WarpgroupsAlongN = Layout<Shape<_1, Int<kConsumerWarpgroups>, _1>>;
  using TiledMmaDkv =
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float,
                                                   Shape<Int<kBlockN>, Int<kHalfDim>, Int<kBlockM>>,
                                                   GMMA::Major::K, GMMA::Major::MN>(),
                              WarpgroupsAlongN{}));
  using TiledMmaDq =
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float,
                                                   Shape<Int<kBlockM>, Int<kHalfDim>, Int<kBlockN>>,
                                                   GMMA::Major::MN, GMMA::Major::MN>(),
                              WarpgroupsAlongN{}));
  static_assert(kWholeWgmmaN<TiledMmaSdP, kBlockM> && kWholeWgmmaN<TiledMmaDkv, kHalfDim> &&
                    kWholeWgmmaN<TiledMmaDq, kHalfDim>,
                "a wgmma N split in narrower instructions: this translation unit needs "
                "CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (wgmma.hpp, kWholeWgmmaN)");

  // Q and dO: kBlockM x D, K-major; Q^T and dO^T (D x kBlockM, MN-major) are the same bytes.
  using QAtom =
      decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element,
                                                                   Int<kBlockM>, Int<kHeadDim>>());
  using SmemLayoutQ =
      decltype(tile_to_shape(QAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{},
      make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  using SmemLayoutDo = decltype(tile_to_shape(QAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutDot = decltype(composition(
      SmemLayoutDo{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockM>>{}, Step<_2, _1>{})));
  // K and V: kBlockN x D, K-major, loaded once; K^T (D x kBlockN, MN-major) for dQ.
  using SmemLayoutK = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, Int<kBlockN>,
                                                          Int<kHeadDim>>(),
      Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  using SmemLayoutKt = decltype(composition(
      SmemLayoutK{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{})));
  // P^T, dS^T (and G^T with softcap): keys x queries with the queries contiguous, the K-major A of
  // dV and dK. A thread's accumulator register pairs are adjacent queries of one key: one 32-bit
  // store or load each, and the 128-byte swizzle puts a warp's 8 keys x 4 pairs on distinct
  // banks. dS (queries x keys, MN-major: the A of dQ) is the same bytes as dS^T, checked below.
  using ScoreAtom =
      decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element,
                                                                   Int<kBlockN>, Int<kBlockM>>());
  using SmemLayoutPt =
      decltype(tile_to_shape(ScoreAtom{}, Shape<Int<kBlockN>, Int<kBlockM>, Int<kPStages>>{}));
  using SmemLayoutDst = decltype(tile_to_shape(ScoreAtom{}, Shape<Int<kBlockN>, Int<kBlockM>>{}));
  using SmemLayoutDs = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::MN, Element, Int<kBlockM>,
                                                          Int<kBlockN>>(),
      Shape<Int<kBlockM>, Int<kBlockN>>{}));

  using GmemLayout =
      Layout<Shape<int32_t, int32_t, int32_t, int32_t>, Stride<int64_t, _1, int64_t, int64_t>>;
  using GmemTensor =
      decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemLayout{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutDo{},
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaK = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutK{},
                                      Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));

  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kKBytes = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kRowStatBytes = kBlockM * sizeof(float);
  static constexpr uint32_t kQStageBytes = kQBytes + 2 * kRowStatBytes;  // Q, LSE (log2), D
  using PipelineQ = cutlass::PipelineTmaAsync<kStages>;
  using PipelineDo = cutlass::PipelineTmaAsync<1>;
  static constexpr int kScoreElems = kBlockN * kBlockM;
  static constexpr int kDqHalfFloats = kBlockM * kHalfDim;

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>> k;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>> v;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutDo>> d_o;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutPt>> pt;
    alignas(1024) cute::array_aligned<Element, kScoreElems> ds;
    alignas(1024) cute::array_aligned<Element, kSoftcap ? kScoreElems : 8> g;
    alignas(128) float dq[kDqHalfFloats];  // one warpgroup's half, in DqTileOrder
    alignas(16) float lse[kStages][kBlockM];
    alignas(16) float delta[kStages][kBlockM];
    uint64_t kv_full;               // K and V of the CTA's n-th tile with steps landed: phase n % 2
    uint64_t kv_empty;              // every consumer thread has retired the GEMMs that read them
    TileRing::SharedStorage tiles;  // the persistent schedule's tile numbers (tile_scheduler.hpp)
    int last_piece;                 // a cut tile's piece arrived last (bwd_key_grad_fixup.hpp)
    typename PipelineQ::SharedStorage pipeline_q;
    typename PipelineDo::SharedStorage pipeline_do;
  };
  static constexpr int kSmemBytes = static_cast<int>(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "one CTA per SM must fit");
  static_assert(cute::cosize_v<SmemLayoutDst> == kScoreElems &&
                    cute::cosize_v<SmemLayoutDs> == kScoreElems,
                "dS and dS^T fill their buffer");
};

// dS (MN-major) and dS^T (K-major) name the same element at each (query, key): the consumers
// store dS^T and the dQ GEMM reads dS. Every query of every 9th key (each key mod 8, the swizzle's
// rows, and each 8-key atom): the compiler's constexpr budget does not reach all 4096 pairs.
template <typename Traits>
constexpr bool ds_views_agree() {
  constexpr typename Traits::SmemLayoutDs ds{};
  constexpr typename Traits::SmemLayoutDst dst{};
  for (int q = 0; q < Traits::kBlockM; ++q) {
    for (int k = 0; k < Traits::kBlockN; k += 9) {
      if (ds(q, k) != dst(k, q)) return false;
    }
  }
  return true;
}

// The warpgroups stage their dQ halves one after the other into one buffer, and the writer adds
// each to its half of the workspace's tile: half h (dims 128 h .. 128 h + 127) is the contiguous
// block of floats [h * kDqHalfFloats, (h + 1) * kDqHalfFloats), register pair k of warpgroup
// thread t at float 2 (128 k + t) of it (256 contiguous bytes per warp store).
template <typename Element, bool kSoftcap>
struct DqTileOrder<Bwd256Traits<Element, kSoftcap>> {
  using Traits = Bwd256Traits<Element, kSoftcap>;
  static constexpr int kPairs = Traits::kBlockM * Traits::kHalfDim / kWarpgroupThreads / 2;

  // thread: 0..255 over both consumer warpgroups.
  __device__ __forceinline__ static int offset(int thread, int k) {
    return (thread / kWarpgroupThreads) * Traits::kDqHalfFloats +
           (k * kWarpgroupThreads + thread % kWarpgroupThreads) * 2;
  }
  __device__ __forceinline__ static int2 coords(int thread, int k) {
    const AccumulatorCoords c = AccumulatorCoords::of(thread % kWarpgroupThreads);
    return make_int2(c.row(2 * k), (thread / kWarpgroupThreads) * Traits::kHalfDim + c.col(2 * k));
  }
};

}  // namespace flashcore::sm90
