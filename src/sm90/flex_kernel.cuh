// The sm90 flex kernel: the persistent, warp-specialized kernel of fwd_kernel.cuh (the same TMA
// rings, tile scheduler, consumer mainloop, epilogue and O store) over the key tiles of a block
// walk (common/block_walk.hpp), with the mods applied on the way into the online softmax and the
// sink added when it finishes:
//  - the producer walks (flex_load.hpp) and leaves a step record with each K stage;
//  - the consumers run MainloopMma::run_steps with FlexSteps (flex_steps.hpp): full tiles run no
//    mask code, partial tiles call mask_mod per element (the built-in mask: per-row key ranges and
//    document ids, common/flex_builtin.hpp), score_mod runs on every visible score;
//  - varlen: tile (m, h, b) is rows [m * kBlockM, ...) of sequence b; tiles past the sequence are
//    skipped by both sides; O and LSE ([Hq, total_q]) are stored for the sequence's rows only;
//  - a row that sees nothing gets O = 0 and LSE = -inf (the sink's logit with sinks).
// Templated on the mods, as the sm80 flex kernel: the library instantiates it with the built-ins
// selected at run time. One tile shape per head dim (FlexTraits: 128 query rows; 128-key tiles,
// which BlockMasks of 64-key blocks fill two at a time, or 64-key tiles at D = 256), never split,
// the dynamic schedule (tiles differ in work) wherever the grid has more tiles than CTAs.
#pragma once

#include <cutlass/arch/reg_reconfig.h>

#include <algorithm>
#include <new>

#include "common/flex_sequence.hpp"
#include "common/launch.hpp"
#include "common/online_softmax.hpp"
#include "sm90/dependent_launch.hpp"
#include "sm90/epilogue.hpp"
#include "sm90/flex_load.hpp"
#include "sm90/flex_params.hpp"
#include "sm90/flex_steps.hpp"
#include "sm90/fwd_kernel.cuh"
#include "sm90/launch.cuh"
#include "sm90/launch_args.hpp"
#include "sm90/o_store.hpp"
#include "sm90/sequence_view.hpp"

namespace flashcore::sm90 {

// The flex tile: two consumer warpgroups (128 rows, so a BlockMask query block of a multiple of 64
// rows covers each warpgroup's rows whole), flex_tile_keys' key tiles (a KV block must be whole
// tiles, or two 64-key blocks fill one), two K/V stages, the dense hd128 kernel's registers. At
// D = 256 only one Q stage fits beside them: the consumers free it after their last S GEMM and
// store O from registers (KernelTraits::kReleasesQEarly), as the dense kernel does there.
template <typename Element, int kHeadDim>
using FlexTraits =
    KernelTraits<Element, kHeadDim, 1,
                 TileConfig<flex_tile_keys(kHeadDim), kStages, 2, consumer_registers_for(2)>>;

// Whether the consumers make Q's descriptors again at each S GEMM (remade_q_operand): at D = 256,
// where O takes 128 registers a thread. Held through the loop there, they and the score_mod's
// state were spilled inside it (the built-in score_mod's kernel; 5 local loads a step).
template <typename Traits>
inline constexpr bool kFlexRemakesQOperand = Traits::kHeadDim == 256;

// Whether the score_mod changes nothing (at run time for the built-in one).
template <typename ScoreMod>
__device__ __forceinline__ bool identity_score_mod(const ScoreMod& score_mod) {
  if constexpr (detail::HasIsIdentity<ScoreMod>::value) {
    return score_mod.is_identity();
  } else {
    (void)score_mod;
    return false;
  }
}

template <typename Traits, typename Mask, typename ScoreMod, bool kPaired>
struct FlexStorage {
  using Walk = detail::KvTileWalk<Traits::kBlockN>;
  using TileState = typename FlexSteps<Traits, Mask, ScoreMod, kPaired>::TileState;
  typename Traits::SharedStorage base;
  int steps[kPaired ? 2 : 1][Traits::kStages];   // FlexStep of each K stage (paired: two words)
  alignas(16) unsigned char walk[sizeof(Walk)];  // the producer's walk of its tile
  alignas(16) unsigned char tile[2][sizeof(TileState)];  // each consumer warpgroup's tile state
};

// kPaired: BlockMasks of 64-key blocks, two to a step (flex_load.hpp).
template <typename Traits, typename Mask, typename ScoreMod, bool kPaired>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    flex_fwd_kernel(const __grid_constant__ FlexParams<Traits, Mask, ScoreMod> fp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(
      Traits::kConsumerWarpgroups == 2 && Traits::kClusterCtas == 1,
      "FlexSteps and FlexStep's masking per warpgroup assume two 64-row warpgroups, one CTA");
  using Pipeline = typename Traits::Pipeline;
  using PipelineQ = typename Traits::PipelineQ;
  using Storage = FlexStorage<Traits, Mask, ScoreMod, kPaired>;
  using Steps = FlexSteps<Traits, Mask, ScoreMod, kPaired>;
  using TileState = typename Steps::TileState;
  extern __shared__ __align__(1024) char smem_bytes[];
  Storage& smem = *reinterpret_cast<Storage*>(smem_bytes);
  const FwdArgs& a = fp.fwd.args;

  const int warpgroup = cutlass::canonical_warp_group_idx();
  const bool is_producer = warpgroup_role(warpgroup) == WarpgroupRole::kProducer;
  const int warp_in_warpgroup = cutlass::canonical_warp_idx_sync() % 4;
  const auto kv_params =
      tma_pipeline_params<Pipeline>(is_producer, Traits::kConsumerThreads, Traits::kKVBytes);
  Pipeline pipeline_k(smem.base.pipeline_k, kv_params, Shape<_1, _1, _1>{});
  Pipeline pipeline_v(smem.base.pipeline_v, kv_params, Shape<_1, _1, _1>{});
  // O by TMA (o_store.hpp, as the dense kernel; not for varlen batches): the storer warp takes
  // every tile from the ring beside the consumers and is the Q ring's only releasing thread.
  const bool o_by_tma = a.o_by_tma;
  PipelineQ pipeline_q(
      smem.base.pipeline_q,
      tma_pipeline_params<PipelineQ>(is_producer, OStore<Traits>::q_stage_releasers(o_by_tma),
                                     Traits::kQBytes),
      Shape<_1, _1, _1>{});
  if (threadIdx.x == 0) {
    TileRing::init(smem.base.tiles, OStore<Traits>::tile_ring_takers(o_by_tma));
    if (o_by_tma) OStore<Traits>::init(smem.base);
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();
  // Launched dependently (launch_flex_kernel) after the walks' build, the varlen tile list or, in
  // a grid of one wave, the caller's previous kernel, this grid's setup above ran beside that
  // kernel: nothing global may be read or written before it has finished (its walks, its tile
  // list, the tile counter it zeroed; the caller's q, k, v, and o, which it may still read).
  // Returns at once otherwise. Then the next kernel, if it is launched dependently too, may start
  // its own setup as this grid's CTAs finish.
  DependentLaunch::wait_for_prior_grid();
  DependentLaunch::allow_dependent_launch();

  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegisters>();
    const ProducerWarp warp_role = producer_warp(warp_in_warpgroup);
    if (warp_role == ProducerWarp::kLoad) {
      FlexLoad<Traits, Mask, ScoreMod, Storage, kPaired>::run(fp, smem, pipeline_q, pipeline_k,
                                                              pipeline_v);
    } else if (warp_role == ProducerWarp::kStoreO && o_by_tma) {
      using Store = typename OStore<Traits>::TileStore;
      // The consumers' own cases below, from the producer's step count.
      OStore<Traits>::run(fp.fwd, smem.base, [](const Tile&, int num_steps) {
        return num_steps == kNoRows ? Store::kNone
               : num_steps == 0     ? Store::kReleaseQOnly
                                    : Store::kStore;
      });
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
  using Mma = MainloopMma<Traits, Variant<false>>;
  const int thread = threadIdx.x - kWarpgroupThreads;
  Mma mma;
  mma.warpgroup = warpgroup - 1;
  mma.start_turns();
  auto thr_qk = mma.mma_qk.get_slice(mma.warpgroup * kWarpgroupThreads);
  auto thr_pv = mma.mma_pv.get_slice(mma.warpgroup * kWarpgroupThreads);
  Tensor sQ = make_tensor(make_smem_ptr(smem.base.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.base.k.data()), typename Traits::SmemLayoutK{});
  Tensor sVt = make_tensor(make_smem_ptr(smem.base.v.data()), typename Traits::SmemLayoutVt{});
  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);
  Tensor tSrK = thr_qk.partition_fragment_B(sK);
  Tensor tOrV = thr_pv.partition_fragment_B(sVt);
  Tensor tOrO = partition_fragment_C(mma.mma_pv, select<0, 2>(typename Traits::TileShape{}));
  TileState& tile_state = *reinterpret_cast<TileState*>(smem.tile[mma.warpgroup]);
  const uint32_t wg_barrier = barrier_id(NamedBarrierId::kEpilogue0, mma.warpgroup);

  typename Pipeline::PipelineState read_k, read_v;
  typename PipelineQ::PipelineState read_q;
  int stores = 0;  // tiles this warpgroup staged for the storer warp
  for (int tiles_taken = 0;; ++tiles_taken) {
    int num_steps = 0;  // the producer's count of the tile's walk (kNoRows: nothing to do)
    Tile tile;          // decoded by the producer
    const int tile_index = TileRing::take(smem.base.tiles, tiles_taken, &num_steps, &tile);
    if (tile_index >= a.num_tiles) break;
    if (num_steps == kNoRows) continue;  // a varlen tile past its sequence
    const detail::FlexSequence seq = detail::flex_sequence(
        fp.flex.cu_seqlens_q, fp.flex.cu_seqlens_k, tile.batch, a.seqlen_q, a.seqlen_k);
    const int row0 = tile.m_block * Traits::kBlockM;
    const int b = tile.batch, h = tile.head;

    // The output view: a varlen sequence is batch 0 of tensors that start at its first row.
    const FwdArgs out = sequence_output<typename Traits::Element>(a, seq.q_start);
    if (fp.flex.cu_seqlens_q != nullptr) tile.batch = 0;
    const bool sinks = fp.flex.sinks.enabled();
    if (num_steps == 0) {
      Epilogue<Traits>::store_empty_rows(out, tile, seq.seqlen_q,
                                         sinks ? fp.flex.sinks.logit(h) : -INFINITY, mma.warpgroup,
                                         thread);
      // The producer loaded Q before it knew the walk was empty (flex_load.hpp): wait for the
      // load to land, so the stage's barrier phases stay paired, and free the stage unread (the
      // storer warp does both where it stores O).
      if (!o_by_tma) {
        pipeline_q.consumer_wait(read_q);
        smem.base.pipeline_q.empty_barrier_[read_q.index()].arrive();
      }
      ++read_q;
      continue;
    }

    // The tile's state (the mods bound to this sequence), in shared memory: the warpgroup's first
    // thread writes it once every thread is past the previous tile.
    cutlass::arch::NamedBarrier::sync(kWarpgroupThreads, wg_barrier);
    if (thread % kWarpgroupThreads == 0) {
      const ScoreMod score_mod = flex::bind_seqlens(fp.flex.score_mod, seq.seqlen_q, seq.seqlen_k);
      new (&tile_state) TileState{flex::bind_seqlens(fp.flex.mask, seq.seqlen_q, seq.seqlen_k),
                                  score_mod,
                                  b,
                                  h,
                                  row0,
                                  seq.seqlen_q,
                                  seq.seqlen_k,
                                  Steps::bind_terms(score_mod, h)};
    }
    cutlass::arch::NamedBarrier::sync(kWarpgroupThreads, wg_barrier);
    const bool fold_scale = identity_score_mod(fp.flex.score_mod) && fp.flex.scale > 0.f;
    Steps steps{&smem.steps[0][0],
                tile_state,
                mma.warpgroup,
                fp.flex.scale,
                fold_scale,
                fold_scale ? fp.flex.scale * kLog2e : 1.f,
                Steps::alibi_columns_for(fp.flex.score_mod)};
    pipeline_q.consumer_wait(read_q);
    OnlineSoftmax<1> softmax;
    const int q_stage = read_q.index();
    auto q_read = [&] {
      if constexpr (Traits::kReleasesQEarly) smem.base.pipeline_q.empty_barrier_[q_stage].arrive();
    };
    if constexpr (kFlexRemakesQOperand<Traits>) {
      mma.run_steps(steps, num_steps, remade_q_operand<Traits>(smem.base.q.data(), thr_qk, q_stage),
                    tSrK, tOrV, tOrO, softmax, pipeline_k, pipeline_v, read_k, read_v, StepSpan{},
                    q_read);
    } else {
      mma.run_steps(steps, num_steps, tSrQ(_, _, _, q_stage), tSrK, tOrV, tOrO, softmax, pipeline_k,
                    pipeline_v, read_k, read_v, StepSpan{}, q_read);
    }
    float inv_sum[1][2], lse[1][2];
    steps.finalize(softmax, sinks ? fp.flex.sinks.logit(h) * kLog2e : -INFINITY, inv_sum, lse);
    if constexpr (Traits::kReleasesQEarly) {
      Epilogue<Traits>::store_unstaged_normalized(out, tile, seq.seqlen_q, tOrO, inv_sum, lse);
    } else {
      typename Traits::Element* o_stage = smem.base.q.data() + q_stage * Traits::kQTileElements;
      if (o_by_tma) {
        Epilogue<Traits>::stage(out, tile, seq.seqlen_q, tOrO, inv_sum, lse, mma.mma_pv, o_stage,
                                Epilogue<Traits>::thread_index_here());
        OStore<Traits>::staged(smem.base, mma.warpgroup, stores++);
      } else {
        Epilogue<Traits>::store_normalized(out, tile, seq.seqlen_q, mma.warpgroup, tOrO, inv_sum,
                                           lse, mma.mma_pv, o_stage);
        cutlass::arch::fence_view_async_shared();
        smem.base.pipeline_q.empty_barrier_[q_stage].arrive();
      }
    }
    ++read_q;
  }
#endif
}

// Whether kernels of these traits have a paired twin (two 64-key BlockMask blocks to a step,
// flex_load.hpp): 128-key tiles only, since 64-key BlockMask blocks are whole tiles of the others.
template <typename Traits>
inline constexpr bool kHasPairedKernels = Traits::kBlockN == kFlexTileKeys;

template <typename Traits, typename Mask, typename ScoreMod, bool kPaired = true>
constexpr int flex_smem_bytes() {
  return static_cast<int>(sizeof(FlexStorage<Traits, Mask, ScoreMod, kPaired>));
}

// The launch of one instantiation: TMA descriptors over the packed tensors (batch 1 for varlen),
// the shared-memory limit, the persistent grid of in.num_ctas CTAs.
template <typename Traits, bool kPaired, typename Mask, typename ScoreMod>
cudaError_t launch_flex_kernel(const LaunchArgs& in, const FlexArgs<Mask, ScoreMod>& flex,
                               cudaStream_t stream) {
  constexpr int kSmemBytes = flex_smem_bytes<Traits, Mask, ScoreMod, kPaired>();
  static_assert(kSmemBytes <= Traits::kSmemLimitBytes);
  const auto kernel = flex_fwd_kernel<Traits, Mask, ScoreMod, kPaired>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (configured != cudaSuccess) return configured;
  // The descriptors see a varlen batch as one sequence of every packed row.
  LaunchArgs tma = in;
  if (flex.cu_seqlens_q != nullptr) tma.args.batch = 1;
  FlexParams<Traits, Mask, ScoreMod> fp{make_fwd_params<Traits>(tma), flex, {}, {}};
  const bool o_by_tma = fp.fwd.args.o_by_tma;  // as make_fwd_params built the descriptors
  fp.fwd.args = in.args;
  fp.fwd.args.o_by_tma = o_by_tma;
  if constexpr (kPaired) {
    // Steps of two 64-key blocks (flex_load.hpp): K and V a block at a time.
    using Half = FlexHalfTma<Traits>;
    const int d = tma.args.head_dim, b = tma.args.batch;
    fp.tma_k_half = make_tma_copy(SM90_TMA_LOAD{}, make_gmem_tensor<Traits>(tma.k, d, b),
                                  typename Half::SmemLayoutK{}, typename Half::HalfShape{}, _1{});
    fp.tma_v_half = make_tma_copy(SM90_TMA_LOAD{}, make_gmem_tensor<Traits>(tma.v, d, b),
                                  typename Half::SmemLayoutV{}, typename Half::HalfShape{}, _1{});
  }
  detail::LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(in.num_ctas));
  shape.threads = Traits::kThreads;
  shape.smem_bytes = kSmemBytes;
  // Right after the walks' build or the tile list (prepare_sm90_flex_workspace), whose kernels
  // allow it, the CTAs start while that kernel finishes, instead of a launch latency after it.
  // Not after the counter's memset (no BlockMask, not varlen, more tiles than CTAs): a
  // programmatic dependency is on a kernel. A grid of one wave without either build has no
  // counter (prepare_sm90_flex_workspace) and is the call's first operation: with enable_pdl it
  // starts beside whatever kernel precedes it in the stream.
  const bool builds_before = flex.merged.records != nullptr || in.varlen_tile_capacity > 0;
  const bool first_operation = in.args.tile_counter == nullptr && !builds_before;
  shape.dependent = builds_before || (first_operation && in.enable_pdl);
  return detail::launch_kernel(kernel, shape, stream, fp);
}

}  // namespace flashcore::sm90
