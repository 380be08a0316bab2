// The sm90 backward kernel's compile-time shape (bwd_kernel.cuh): tile sizes per head dim, the
// five tiled wgmma GEMMs, the shared-memory layouts the TMA writes and wgmma reads (each tile is
// stored once and read through transposed views where a GEMM needs it the other way round), the TMA
// copy types and the shared storage. Masks, GQA and the walk are runtime arguments, so one (dtype,
// head dim) pair is one instantiation per softcap and varlen flag.
//
// A CTA owns kBlockN = 128 keys of one kv head (two consumer warpgroups of 64 keys each) and walks
// kBlockM query rows at a time. The GEMMs, per warpgroup (FlashAttention-3's swapped S/dP):
//   S^T = K Q^T, dP^T = V dO^T   64 keys x kBlockM queries, both operands K-major in shared memory
//   dV += P^T dO, dK += dS^T Q   64 keys x D, P^T and dS^T from registers (the S^T/dP^T
//                                accumulators are exactly the A operand), dO and Q read MN-major
//   dQ = dS K                    kBlockM x D over the CTA's 128 keys: dS from shared memory (both
//                                warpgroups' keys, MN-major), K read MN-major; the warpgroups split
//                                D (kBlockM = 64) or the query rows (kBlockM = 128)
// Per consumer thread (fp32): dK + dV 64 + 64 (hd128) or 32 + 32 (hd64), S^T and dP^T 32 + 32
// (hd128, kBlockM 64) or 64 + 64 (hd64, kBlockM 128), dQ 32.
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

#include "sm90/sm90_bwd.hpp"
#include "sm90/tile_scheduler.hpp"
#include "sm90/tile_table.hpp"
#include "sm90/wgmma.hpp"

namespace flashcore::sm90 {

using namespace cute;

template <typename Element_, int kHeadDim_, bool kSoftcap_, bool kVarlen_ = false>
struct BwdTraits {
  using Element = Element_;  // cutlass::half_t or cutlass::bfloat16_t
  static constexpr int kHeadDim = kHeadDim_;
  // Softcap's tanh and its derivative per score: a kernel of its own, as the registers the
  // softcap path needs made the plain hd64 kernel spill when both shared one body.
  static constexpr bool kSoftcap = kSoftcap_;
  // Varlen batches (cu_seqlens): CTA (n, h, b) takes sequence b's keys; a kernel of its own, so
  // that the dense one compiles exactly as before (bwd_mainloop.hpp's BwdWalk).
  static constexpr bool kVarlen = kVarlen_;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "the sm90 backward has hd64 and hd128");
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kConsumerThreads = kConsumerWarpgroups * kWarpgroupThreads;
  static constexpr int kThreads = kWarpgroupThreads + kConsumerThreads;
  static constexpr int kBlockN = kConsumerWarpgroups * kRowsPerWarpgroup;  // keys per CTA
  // hd64's GEMMs are half as deep, so twice the query rows per step keep each wgmma as long (and
  // halve the steps, the barriers and the dQ reductions per FLOP); hd128's S^T and dP^T
  // accumulators at 128 rows would not fit next to dK and dV.
  static constexpr int kBlockM = bwd_block_m(kHeadDim);
  static_assert(kBlockN == bwd_block_n(kHeadDim),
                "the host sizes the grid with sm90_bwd.hpp's tiles");
  static constexpr int kStages = 2;  // Q / dO / LSE / D ring
  static constexpr int kDsStages = 2;
  // Registers after setmaxnreg: the producer warpgroup keeps few, the consumers take the rest
  // (65536 / 384 = 168 at launch; 24 + 2 x 240 = 504 <= 3 x 168).
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  // dQ's split over the two consumer warpgroups: along D when one warpgroup covers every query
  // row (kBlockM = 64), along the rows otherwise.
  static constexpr bool kDqSplitsDims = kBlockM == kRowsPerWarpgroup;
  // dK issued before the step's dS barrier (cuDNN 9.19's order: it runs while the warpgroups
  // meet), or after dQ (it runs while dQ is staged). Measured on the H100 (docs/perf.md, sm90
  // v9): before the barrier 2-3% faster at hd64, 1-3% slower on hd128's causal shapes.
  static constexpr bool kDkBeforeDsBarrier = kHeadDim == 64;

  using WarpgroupsAlongM = Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float,
                           Shape<Int<kRowsPerWarpgroup>, Int<kBlockM>, Int<kHeadDim>>>(),
      WarpgroupsAlongM{}));
  using TiledMmaDkv = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float,
                           Shape<Int<kRowsPerWarpgroup>, Int<kHeadDim>, Int<kBlockM>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      WarpgroupsAlongM{}));
  using DqAtomShape = std::conditional_t<
      kDqSplitsDims,
      Shape<Int<kRowsPerWarpgroup>, Int<kHeadDim / kConsumerWarpgroups>, Int<kBlockN>>,
      Shape<Int<kRowsPerWarpgroup>, Int<kHeadDim>, Int<kBlockN>>>;
  using DqWarpgroups =
      std::conditional_t<kDqSplitsDims, Layout<Shape<_1, Int<kConsumerWarpgroups>, _1>>,
                         WarpgroupsAlongM>;
  using TiledMmaDq =
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, DqAtomShape,
                                                   GMMA::Major::MN, GMMA::Major::MN>(),
                              DqWarpgroups{}));
  static_assert(kWholeWgmmaN<TiledMmaSdP, kBlockM> && kWholeWgmmaN<TiledMmaDkv, kHeadDim> &&
                    kWholeWgmmaN<TiledMmaDq, size<1>(DqAtomShape{})>,
                "a wgmma N split in narrower instructions: this translation unit needs "
                "CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (wgmma.hpp, kWholeWgmmaN)");

  // Q and dO: kBlockM x D, K-major (D contiguous), a ring of kStages; Q^T and dO^T (D x kBlockM,
  // MN-major) are the same bytes for the dK and dV GEMMs.
  using SmemLayoutQ = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, Int<kBlockM>,
                                                          Int<kHeadDim>>(),
      Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{},
      make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  // K and V: kBlockN x D, K-major, loaded once; K^T (D x kBlockN, MN-major) for dQ.
  using SmemLayoutK = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, Int<kBlockN>,
                                                          Int<kHeadDim>>(),
      Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  using SmemLayoutKt = decltype(composition(
      SmemLayoutK{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{})));
  // dS: kBlockM x kBlockN with the queries contiguous (MN-major A of dQ = dS K), and dS^T, the
  // view the consumers store their S^T-shaped fragments through: a fragment's register pairs are
  // adjacent queries of one key, so each pair is one 32-bit store, and the 128-byte swizzle puts
  // a warp's 8 keys x 4 pairs on distinct banks.
  using SmemLayoutDs = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::MN, Element, Int<kBlockM>,
                                                          Int<kBlockN>>(),
      Shape<Int<kBlockM>, Int<kBlockN>, Int<kDsStages>>{}));
  using SmemLayoutDst = decltype(composition(
      SmemLayoutDs{}, make_ordered_layout(Shape<Int<kBlockN>, Int<kBlockM>, Int<kDsStages>>{},
                                          Step<_2, _1, _3>{})));

  // Global tensors as the TMA sees them: (seq, dim, head, batch), int64 element strides, dim
  // contiguous. Rows past seqlen read as zeros. Varlen: the packed tensors as batch 1.
  using GmemLayout =
      Layout<Shape<int32_t, int32_t, int32_t, int32_t>, Stride<int64_t, _1, int64_t, int64_t>>;
  using GmemTensor =
      decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemLayout{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutQ{}),
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaK = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutK{},
                                      Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));

  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kKBytes = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kRowStatBytes = kBlockM * sizeof(float);
  // One stage of the ring: Q, dO, and the rows' LSE (log2) and D.
  static constexpr uint32_t kStageBytes = 2 * kQBytes + 2 * kRowStatBytes;
  using Pipeline = cutlass::PipelineTmaAsync<kStages>;

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>> k;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>> v;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>> d_o;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutDs>> ds;
    alignas(128) float dq[kBlockM * kHeadDim];  // in DqTileOrder (bwd_convert.cuh)
    alignas(16) float lse[kStages][kBlockM];
    alignas(16) float delta[kStages][kBlockM];
    uint64_t kv_full;               // K and V of the CTA's n-th tile with steps landed: phase n % 2
    uint64_t kv_empty;              // every consumer thread has retired the GEMMs that read them
    TileRing::SharedStorage tiles;  // the persistent schedule's tile numbers (tile_scheduler.hpp)
    int last_piece;                 // a cut tile's piece arrived last (bwd_key_grad_fixup.hpp)
    typename Pipeline::SharedStorage pipeline;
  };
  static constexpr int kSmemBytes = static_cast<int>(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "one CTA per SM must fit");
};

}  // namespace flashcore::sm90
