// The sm90 forward kernel's compile-time shape: the tile table (one row per head dim), the shared-
// memory layouts the TMA writes and wgmma reads, the two tiled MMAs and the TMA copy types. Every
// runtime choice (masks, softcap, GQA, splits) stays out of here, so one (dtype, head dim) pair is
// one instantiation.
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
#include <type_traits>

#include "sm90/tile_scheduler.hpp"
#include "sm90/tile_table.hpp"
#include "sm90/tuned_tiles.hpp"
#include "sm90/wgmma.hpp"

namespace flashcore::sm90 {

using namespace cute;

// Register budgets after setmaxnreg (sm_90a). A CTA of n warpgroups is launched with
// 65536 / (128 n) registers per thread (rounded down to a multiple of 8); setmaxnreg moves them
// between warpgroups. The producer keeps only addressing registers; the consumers share the rest
// (rounded down to setmaxnreg's multiple of 8): 24 + 2 x 240 with two consumer warpgroups,
// 24 + 3 x 160 with three. Each consumer thread holds its O accumulator (up to 128 fp32 at hd256),
// one S tile and P.
inline constexpr int kRegisterFile = 65536;
inline constexpr int kProducerRegisters = 24;
constexpr int consumer_registers_for(int consumer_warpgroups) {
  const int warpgroups = consumer_warpgroups + 1;
  const int launch = kRegisterFile / (warpgroups * kWarpgroupThreads) / 8 * 8;
  return (launch * warpgroups - kProducerRegisters) / consumer_warpgroups / 8 * 8;
}

// The knobs the tile table fixes per head dim, as one type: the shipped kernels take
// ProductionConfig (DefaultConfig unless a reviewed row replaces it), and the tuner
// (`flashcore-bench tune`, docs/lab.md) instantiates others from generated translation units
// without touching the shipped instantiation list.
template <int kBlockN_, int kStages_, int kConsumerWarpgroups_, int kConsumerRegisters_>
struct TileConfig {
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr int kConsumerWarpgroups = kConsumerWarpgroups_;
  static constexpr int kConsumerRegisters = kConsumerRegisters_;
};
template <int kHeadDim>
using DefaultConfig = TileConfig<block_n_for(kHeadDim), kStages, consumer_warpgroups_for(kHeadDim),
                                 consumer_registers_for(consumer_warpgroups_for(kHeadDim))>;

// The config an instantiation ships with: the tile table's row, or the reviewed row of the tuned
// table for its dtype and head dim (tuned_tiles.hpp).
template <typename Element, int kHeadDim,
          bool kReviewed =
              has_reviewed_tile(std::is_same_v<Element, cutlass::bfloat16_t>, kHeadDim)>
struct ProductionConfigOf {
  using type = DefaultConfig<kHeadDim>;
};
template <typename Element, int kHeadDim>
struct ProductionConfigOf<Element, kHeadDim, true> {
  static constexpr TunedTile kRow =
      reviewed_tile(std::is_same_v<Element, cutlass::bfloat16_t>, kHeadDim);
  using type =
      TileConfig<kRow.block_n, kRow.stages, kRow.consumer_warpgroups, kRow.consumer_registers>;
};
template <typename Element, int kHeadDim>
using ProductionConfig = typename ProductionConfigOf<Element, kHeadDim>::type;

template <typename Element_, int kHeadDim_, int kClusterCtas_ = 1,
          typename Config = ProductionConfig<Element_, kHeadDim_>>
struct KernelTraits {
  using Element = Element_;  // cutlass::half_t or cutlass::bfloat16_t
  static constexpr int kHeadDim = kHeadDim_;
  // CTAs of a cluster that run neighbouring query blocks of one head and share its K and V tiles:
  // each CTA loads 1/kClusterCtas of every K and V tile and the TMA multicasts it into the shared
  // memory of all of them (tile_table.hpp, kKVClusterCtas).
  static constexpr int kClusterCtas = kClusterCtas_;
  using ClusterShape = Shape<Int<kClusterCtas>, _1, _1>;
  static constexpr uint16_t kMulticastMask = (1u << kClusterCtas) - 1;
  static constexpr int kConsumerWarpgroups = Config::kConsumerWarpgroups;
  static constexpr int kConsumerThreads = kConsumerWarpgroups * kWarpgroupThreads;
  static constexpr int kThreads = kWarpgroupThreads + kConsumerThreads;
  static constexpr int kConsumerRegisters = Config::kConsumerRegisters;
  static constexpr int kBlockM = kConsumerWarpgroups * kRowsPerWarpgroup;
  static constexpr int kBlockN = Config::kBlockN;
  static constexpr int kStages = Config::kStages;  // hides tile_table.hpp's in the layouts below
  // The row max of a block as four independent fmax chains (OnlineSoftmax::update_scores) with
  // three consumer warpgroups: their GEMMs are half as long as at D = 128 (D <= 64), so less of
  // a warpgroup's softmax hides under the others' GEMMs and the max's dependent FMNMX chain shows
  // (+1.2-2% at hd64 on the H200; -0.9% to +0.7% at D 96-192, where it stays one chain;
  // docs/perf.md, session 32). The chains split a row's kBlockN / 8 accumulator tiles (8 keys
  // each: AccumulatorCoords) evenly, which a tuner's key tile may not allow.
  static constexpr int kMaxChains = kConsumerWarpgroups == 3 && (kBlockN / 8) % 4 == 0 ? 4 : 1;
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "instantiations are multiples of 32");

  using TileShape = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;

  // S = Q K^T: both operands K-major in shared memory. O += P V: P from registers, V^T read
  // MN-major (V's rows are keys, its contiguous dim is O's N). Both tiled over the consumer
  // warpgroups along M.
  using ConsumerLayout = Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  using TiledMmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float,
                           Shape<Int<kRowsPerWarpgroup>, Int<kBlockN>, Int<kHeadDim>>>(),
      ConsumerLayout{}));
  using TiledMmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float,
                           Shape<Int<kRowsPerWarpgroup>, Int<kHeadDim>, Int<kBlockN>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      ConsumerLayout{}));
  static_assert(kWholeWgmmaN<TiledMmaQK, kBlockN> && kWholeWgmmaN<TiledMmaPV, kHeadDim>,
                "a wgmma N split in narrower instructions: this translation unit needs "
                "CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (src/CMakeLists.txt, "
                "FLASHCORE_SM90_EXTENDED_MMA_HEAD_DIMS)");

  // Q's ring: kQStages tiles (see kQStages below), one tile of it as the S GEMM and the epilogue
  // see it.
  using SmemLayoutQTile = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, Int<kBlockM>,
                                                          Int<kHeadDim>>(),
      Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutK = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, Int<kBlockN>,
                                                          Int<kHeadDim>>(),
      Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));
  // V^T (D x keys) as the PV GEMM reads it, and the same bytes seen as V (keys x D) for the TMA.
  using SmemLayoutVt = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::MN, Element, Int<kHeadDim>,
                                                          Int<kBlockN>>(),
      Shape<Int<kHeadDim>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{}));
  using SmemLayoutV = decltype(composition(
      SmemLayoutVt{},
      make_ordered_layout(Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}, Step<_2, _1, _3>{})));

  // Global tensors as the TMA sees them: (seq, dim, head, batch) with int64 element strides; the
  // dim is contiguous. Rows past seqlen and dims past head_dim read as zeros.
  using GmemLayout =
      Layout<Shape<int32_t, int32_t, int32_t, int32_t>, Stride<int64_t, _1, int64_t, int64_t>>;
  using GmemTensor =
      decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemLayout{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutQTile{},
                                      select<0, 2>(TileShape{}), _1{}));
  using TmaLoadKV = std::conditional_t<kClusterCtas == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
  using TmaK = decltype(make_tma_copy(TmaLoadKV{}, GmemTensor{}, take<0, 2>(SmemLayoutK{}),
                                      select<1, 2>(TileShape{}), Int<kClusterCtas>{}));
  using TmaV = decltype(make_tma_copy(TmaLoadKV{}, GmemTensor{}, take<0, 2>(SmemLayoutV{}),
                                      select<1, 2>(TileShape{}), Int<kClusterCtas>{}));

  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kKVBytes = kBlockN * kHeadDim * sizeof(Element);

  // Q has a ring of its own. With two stages (where two Q tiles and both K/V rings fit in one
  // CTA's 227 KiB: D <= 160) the next tile's Q loads during this tile's whole main loop, and the
  // epilogue stages O in the tile's own Q stage, whose last reader (the last S GEMM) has retired
  // by then, then frees the stage once O has left it.
  // With one (D >= 192) the next tile's Q can load only once this tile's stage is free. The
  // consumers free it as soon as their last S GEMM has retired (kReleasesQEarly; run_steps'
  // q_read), so the load runs under the last step and the epilogue, and they store O straight
  // from the accumulators (Epilogue::store_unstaged). Staged in Q, O held the stage through the
  // epilogue and the next tile waited for Q's load after it: 11-15% of the consumers' stall
  // samples at hd256 B32 H8 S512 (ncu, H200; docs/perf.md, session 37).
  static constexpr int kSmemLimitBytes = 227 * 1024;
  static constexpr int kBarrierBytes = 1024;
  static constexpr int kQStages =
      2 * kQBytes + 2 * kStages * kKVBytes + kBarrierBytes <= kSmemLimitBytes ? 2 : 1;
  static constexpr bool kReleasesQEarly = kQStages == 1;
  // Where the main loop has no register left for Q's wgmma descriptor, the consumers make it again
  // at each S GEMM (a few uniform-datapath instructions a step; fwd_kernel.cuh). Held through the
  // loop of the hd256 cluster kernel, whose loop holds the most (O alone is 128 registers a
  // thread), it was spilled inside the HGMMA span once that kernel freed Q early: one STL and two
  // LDL a step (docs/perf.md, session 38).
  static constexpr bool kRemakesQOperand = kClusterCtas > 1 && kHeadDim == 256;

  // O's TMA store (o_store.hpp): each consumer warpgroup's 64 rows of the staged tile are stored
  // in boxes one swizzle atom wide. The staged tile has Q's layout, whose atoms run
  // down the rows first, so a warpgroup's rows of one atom column are contiguous and in the same
  // layout as a box of its own, while its atom columns lie kBlockM rows apart.
  using SmemAtomQ =
      decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element,
                                                                   Int<kBlockM>, Int<kHeadDim>>());
  // Not where Q is freed early (kReleasesQEarly above: O is not staged there), which covers
  // D = 256: its kernels have one Q stage. Staged there, O's TMA store gained nothing in the
  // cluster kernel and made it spill (H200; docs/perf.md, session 36).
  static constexpr bool kStoresOByTma = !kReleasesQEarly;
  static constexpr int kOBoxColumns = cute::size<1>(SmemAtomQ{});
  static constexpr int kOBoxes = kHeadDim / kOBoxColumns;
  using OBoxShape = Shape<Int<kRowsPerWarpgroup>, Int<kOBoxColumns>>;
  using SmemLayoutOBox = decltype(tile_to_shape(SmemAtomQ{}, OBoxShape{}));
  using GmemTensorOut =
      decltype(make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)), GmemLayout{}));
  using TmaO = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensorOut{}, SmemLayoutOBox{},
                                      OBoxShape{}, _1{}));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;

  using PipelineQ = cutlass::PipelineTmaAsync<kQStages>;
  using SmemLayoutQ = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, Int<kBlockM>,
                                                          Int<kHeadDim>>(),
      Shape<Int<kBlockM>, Int<kHeadDim>, Int<kQStages>>{}));
  static constexpr int kQTileElements = cute::cosize_v<SmemLayoutQTile>;

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>> k;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>> v;
    typename PipelineQ::SharedStorage pipeline_q;
    typename Pipeline::SharedStorage pipeline_k;
    typename Pipeline::SharedStorage pipeline_v;
    TileRing::SharedStorage tiles;
    // O by TMA (o_store.hpp): consumer warpgroup w arrives on o_staged[w][n % 2] once its rows of
    // its n-th stored tile are staged. Two a warpgroup, used by turns: with one, a warpgroup could
    // complete its next phase (its next tile, whose Q stage is the other one and may already be
    // loaded) before the storer has waited for this one, and the storer's parity wait would never
    // return. Two cannot be lapped: a warpgroup's tile after next needs the Q stage this tile's
    // store releases, which the storer does after its wait.
    cutlass::arch::ClusterBarrier o_staged[kConsumerWarpgroups][2];
  };
  static constexpr int kSmemBytes = static_cast<int>(sizeof(SharedStorage));
  static_assert(kSmemBytes <= kSmemLimitBytes, "the tile table's shapes must fit one CTA");
};

}  // namespace flashcore::sm90
