// The sm90 backward kernel for head dim 256 (the tile: bwd256_traits.hpp; the consumers:
// bwd256_mainloop.hpp). Persistent: at most one CTA per SM, each running tiles (one key block of
// 64 keys of one (kv head, batch) pair) in bwd_tile_order.hpp's order, the first wave by CTA index
// and every later tile from a counter as a CTA frees up. Warp specialized as the hd64/hd128 kernel
// (bwd_kernel.cuh), whose walk, cut tail, preprocess, convert, deterministic turn and bulk
// reduction it reuses:
//   - producer warp: picks each tile and hands its number to the other roles (TileRing); per tile
//     K and V, once the consumers have retired the last tile's (kv_empty), then per step Q with
//     the rows' LSE and D into a two-stage ring and dO into a one-stage buffer (the consumers
//     release dO mid-step, Q at its end);
//   - dQ writer warp: per step, two bulk reductions, one per consumer warpgroup's half of dQ (D
//     split), out of one 32 KiB staging buffer that the warpgroups fill in turn;
//   - two consumer warpgroups, which store a tile's dK and dV while the producer loads the next
//     tile's K, V and first Q and dO: what one CTA per tile left idle between tiles, besides the
//     order's shorter tail.
// Included by sm90_bwd_hd256.cu only.
#pragma once

#include "sm90/bwd256_mainloop.hpp"
#include "sm90/bwd256_traits.hpp"
#include "sm90/bwd_kernel.cuh"
#include "sm90/tile_scheduler.hpp"

namespace flashcore::sm90 {

template <typename Traits>
struct Bwd256Load {
  using SharedStorage = typename Traits::SharedStorage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;

  // All 32 lanes of the producer warp: they wait on the rings together, one lane issues copies.
  __device__ static void run(const BwdKernelParams<Traits>& params, SharedStorage& smem,
                             typename Traits::PipelineQ& pipe_q,
                             typename Traits::PipelineDo& pipe_do) {
    const sm80::BwdParams& p = params.p;
    const bool issuer = cute::elect_one_sync();
    Tensor mQ =
        params.tma_q.get_tma_tensor(make_shape(p.seqlen_q, int{kHeadDim}, p.heads_q, p.batch));
    Tensor mdO =
        params.tma_do.get_tma_tensor(make_shape(p.seqlen_q, int{kHeadDim}, p.heads_q, p.batch));
    Tensor mK =
        params.tma_k.get_tma_tensor(make_shape(p.seqlen_k, int{kHeadDim}, p.heads_kv, p.batch));
    Tensor mV =
        params.tma_v.get_tma_tensor(make_shape(p.seqlen_k, int{kHeadDim}, p.heads_kv, p.batch));
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.d_o.data()), typename Traits::SmemLayoutDo{});
    using KvTile = Shape<Int<kBlockN>, Int<kHeadDim>>;
    using QTile = Shape<Int<kBlockM>, Int<kHeadDim>>;
    if (issuer) {
      cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_do.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
    }

    const BwdSchedule<Traits> schedule{params};
    auto write_q = cutlass::make_producer_start_state<typename Traits::PipelineQ>();
    auto write_do = cutlass::make_producer_start_state<typename Traits::PipelineDo>();
    BwdPieceCursor cursor;
    int kv_loads = 0;  // pieces whose K and V this CTA loaded
    BwdWalk walk;
    for (int index = cursor.first(params.tail.split);
         schedule.publish(smem, cursor.published, index, &walk);
         index = cursor.next(params.tail.split, p.tile_counter)) {
      if (walk.steps == 0) continue;  // dK = dV = 0: the consumers store them, nothing to load
      load_key_tiles(
          params, smem, kv_loads++, issuer,
          local_tile(mK(_, _, walk.kv_head, walk.batch), KvTile{}, make_coord(walk.n_block, _0{})),
          local_tile(mV(_, _, walk.kv_head, walk.batch), KvTile{}, make_coord(walk.n_block, _0{})));
      BwdWalk::Position at = walk.first();
      for (int step = 0; step < walk.steps; ++step, walk.advance(at)) {
        Tensor gQ =
            local_tile(mQ(_, _, at.head, walk.batch), QTile{}, make_coord(at.m_block, _0{}));
        Tensor gdO =
            local_tile(mdO(_, _, at.head, walk.batch), QTile{}, make_coord(at.m_block, _0{}));
        pipe_q.producer_acquire(write_q);
        if (issuer) {
          uint64_t* full = pipe_q.producer_get_barrier(write_q);
          auto q_views = tma_partition(params.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                       group_modes<0, 2>(gQ));
          copy(params.tma_q.with(*full, 0), get<0>(q_views), get<1>(q_views)(_, write_q.index()));
          // LSE and D rows: the workspace pads them to whole query blocks (16-byte aligned).
          const int64_t rows = walk.workspace_row<false>(p, at.head) + at.m_block * kBlockM;
          cute::SM90_BULK_COPY_G2S::copy(p.lse_log2 + rows, full, smem.lse[write_q.index()],
                                         Traits::kRowStatBytes);
          cute::SM90_BULK_COPY_G2S::copy(p.delta + rows, full, smem.delta[write_q.index()],
                                         Traits::kRowStatBytes);
        }
        ++write_q;
        pipe_do.producer_acquire(write_do);
        if (issuer) {
          uint64_t* full = pipe_do.producer_get_barrier(write_do);
          auto do_views = tma_partition(params.tma_do, _0{}, Layout<_1>{}, group_modes<0, 2>(sdO),
                                        group_modes<0, 2>(gdO));
          copy(params.tma_do.with(*full, 0), get<0>(do_views), get<1>(do_views));
        }
        ++write_do;
      }
    }
    // Keeps the warp alive until the consumers released every stage it filled.
    pipe_q.producer_tail(write_q);
    pipe_do.producer_tail(write_do);
  }
};

// The dQ writer warp (bwd_kernel.cuh's write_dq, with the tile in two halves): per step, warpgroup
// 1's half, then warpgroup 0's, each added to its half of the workspace's tile (DqTileOrder) with
// one bulk reduction once staged, and the buffer handed to the next warpgroup once read (its
// kDqEmpty; the warpgroups order their stores among themselves, bwd256_mainloop.hpp's stage_dq).
// In deterministic mode the step's turn is taken before the first half and passed after the
// second has completed.
template <typename Traits>
__device__ void write_dq256(const BwdKernelParams<Traits>& params,
                            typename Traits::SharedStorage& smem) {
  // kDqFull and kDqEmpty: this warp and the staging warpgroup.
  constexpr uint32_t kDqThreads = kWarpgroupThreads + cutlass::NumThreadsPerWarp;
  constexpr int kHalfBytes = Traits::kDqHalfFloats * static_cast<int>(sizeof(float));
  const sm80::BwdParams& p = params.p;
  const bool issuer = cute::elect_one_sync();
  const bool deterministic = p.dq_semaphore != nullptr;
  const BwdSchedule<Traits> schedule{params};
  BwdWalk walk;
  for (int taken = 0; schedule.take(smem, taken, &walk); ++taken) {
    if (walk.steps == 0) continue;
    // The buffer starts each tile empty, warpgroup 1's turn; each later hand-over matches one
    // wait.
    cutlass::arch::NamedBarrier::arrive(kDqThreads, barrier_id(Bwd256BarrierId::kDqEmpty0, 1));
    BwdWalk::Position at = walk.first();
    for (int step = 0; step < walk.steps; ++step, walk.advance(at)) {
      const int row0 = at.m_block * Traits::kBlockM;
      const int64_t head_row = walk.workspace_row<false>(p, at.head);
      int* const semaphore =
          deterministic
              ? p.dq_semaphore +
                    (static_cast<int64_t>(walk.batch) * p.heads_q + at.head) * p.num_m_blocks +
                    at.m_block
              : nullptr;
      float* accum = p.dq_accum + (head_row + row0) * Traits::kHeadDim;
      CUTLASS_PRAGMA_UNROLL
      for (int turn = 0; turn < 2; ++turn) {
        const int warpgroup = 1 - turn;
        cutlass::arch::NamedBarrier::sync(kDqThreads,
                                          barrier_id(Bwd256BarrierId::kDqFull0, warpgroup));
        if (issuer) {
          if (deterministic && turn == 0) {
            wait_for_dq_turn(
                semaphore, sm80::dq_turn<Traits::kBlockM, Traits::kBlockN>(p, row0, walk.n_block));
          }
          bulk_reduce_add_f32(accum + warpgroup * Traits::kDqHalfFloats, smem.dq, kHalfBytes);
          cute::tma_store_arrive();   // commit the bulk group
          cute::tma_store_wait<0>();  // ... and wait until its reads of the staging buffer are done
        }
        __syncwarp();
        if (turn == 0) {
          cutlass::arch::NamedBarrier::arrive(kDqThreads,
                                              barrier_id(Bwd256BarrierId::kDqEmpty0, 0));
        } else if (step + 1 < walk.steps) {
          cutlass::arch::NamedBarrier::arrive(kDqThreads,
                                              barrier_id(Bwd256BarrierId::kDqEmpty0, 1));
        }
      }
      if (deterministic && issuer) pass_dq_turn(semaphore);
    }
  }
  // The reductions themselves (not only their reads) complete before the warp exits.
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    bwd256_kernel(const __grid_constant__ BwdKernelParams<Traits> params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using PipelineQ = typename Traits::PipelineQ;
  using PipelineDo = typename Traits::PipelineDo;
  using SharedStorage = typename Traits::SharedStorage;
  extern __shared__ __align__(1024) char smem_bytes[];
  SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_bytes);

  const int warpgroup = cutlass::canonical_warp_group_idx();
  const bool is_producer = warpgroup == 0;
  const int warp_in_warpgroup = cutlass::canonical_warp_idx_sync() % 4;
  PipelineQ pipe_q(
      smem.pipeline_q,
      tma_pipeline_params<PipelineQ>(is_producer, Traits::kConsumerThreads, Traits::kQStageBytes),
      Shape<_1, _1, _1>{});
  PipelineDo pipe_do(
      smem.pipeline_do,
      tma_pipeline_params<PipelineDo>(is_producer, Traits::kConsumerThreads, Traits::kQBytes),
      Shape<_1, _1, _1>{});
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&smem.kv_full, 1);
    cutlass::arch::ClusterBarrier::init(&smem.kv_empty, Traits::kConsumerThreads);
    // The tile numbers' readers: the consumers and the dQ writer warp.
    TileRing::init(smem.tiles, Traits::kConsumerThreads + cutlass::NumThreadsPerWarp);
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    if (warp_in_warpgroup == 0) {
      Bwd256Load<Traits>::run(params, smem, pipe_q, pipe_do);
    } else if (warp_in_warpgroup == 1) {
      write_dq256<Traits>(params, smem);
    }
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
  Bwd256Mainloop<Traits> mainloop;
  mainloop.run(params, smem, pipe_q, pipe_do, threadIdx.x - kWarpgroupThreads);
#endif
}

// Preprocess, this kernel, convert (bwd_kernel.cuh's launch_backward with this tile).
template <typename Element, bool kSoftcap>
cudaError_t launch_backward256(const sm80::BwdParams& p, const BwdTail& tail, cudaStream_t stream) {
  using Traits = Bwd256Traits<Element, kSoftcap>;
  using CudaElement =
      std::conditional_t<std::is_same_v<Element, cutlass::half_t>, __half, __nv_bfloat16>;
  using RowTraits = sm80::BwdTraits<CudaElement, Traits::kHeadDim>;
  if (cudaError_t err = sm80::launch_bwd_preprocess<RowTraits, Traits::kBlockM>(p, stream);
      err != cudaSuccess) {
    return err;
  }
  BwdKernelParams<Traits> params{};
  params.p = p;
  auto q_tensor =
      bwd_gmem_tensor<Traits>(p.q, p.seqlen_q, p.heads_q, p.batch, p.q_seq, p.q_head, p.q_batch);
  auto do_tensor = bwd_gmem_tensor<Traits>(p.d_o, p.seqlen_q, p.heads_q, p.batch, p.do_seq,
                                           p.do_head, p.do_batch);
  auto k_tensor =
      bwd_gmem_tensor<Traits>(p.k, p.seqlen_k, p.heads_kv, p.batch, p.k_seq, p.k_head, p.k_batch);
  auto v_tensor =
      bwd_gmem_tensor<Traits>(p.v, p.seqlen_k, p.heads_kv, p.batch, p.v_seq, p.v_head, p.v_batch);
  using QTile = Shape<Int<Traits::kBlockM>, Int<Traits::kHeadDim>>;
  using KvTile = Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDim>>;
  const typename Traits::SmemLayoutDo q_smem{};
  params.tma_q = make_tma_copy(SM90_TMA_LOAD{}, q_tensor, q_smem, QTile{}, _1{});
  params.tma_do = make_tma_copy(SM90_TMA_LOAD{}, do_tensor, q_smem, QTile{}, _1{});
  params.tma_k =
      make_tma_copy(SM90_TMA_LOAD{}, k_tensor, typename Traits::SmemLayoutK{}, KvTile{}, _1{});
  params.tma_v =
      make_tma_copy(SM90_TMA_LOAD{}, v_tensor, typename Traits::SmemLayoutK{}, KvTile{}, _1{});

  auto kernel = bwd256_kernel<Traits>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  if (configured != cudaSuccess) return configured;
  detail::LaunchShape shape;
  if (cudaError_t err = persistent_schedule(&params, tail, &shape.grid); err != cudaSuccess)
    return err;
  shape.threads = Traits::kThreads;
  shape.smem_bytes = Traits::kSmemBytes;
  if (cudaError_t err = detail::launch_kernel(kernel, shape, stream, params); err != cudaSuccess) {
    return err;
  }
  return launch_bwd_convert<Traits, CudaElement>(p, stream);
}

template <typename Element>
cudaError_t launch_backward256_softcap(const sm80::BwdParams& p, const BwdTail& tail,
                                       cudaStream_t stream) {
  return p.softcapped ? launch_backward256<Element, true>(p, tail, stream)
                      : launch_backward256<Element, false>(p, tail, stream);
}

}  // namespace flashcore::sm90
