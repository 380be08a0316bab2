// The sm90 backward kernel (FlashAttention-3's backward design, written here). Persistent: at
// most one CTA per SM, each running tiles (one key block of 128 keys of one (kv head, batch) pair)
// in bwd_tile_order.hpp's order, the first wave by CTA index and every later tile from a counter
// as a CTA frees up (what one CTA per tile left idle between tiles, K/V loads and dK/dV stores,
// now overlaps the next tile's; cuDNN's backward is persistent too). Where every tile walks the
// same steps, the last wave and a half of tiles run as equal ranges of steps (bwd_tail_split.hpp),
// whose cut tiles' dK and dV meet in the workspace (bwd_key_grad_fixup.hpp). A varlen batch's
// counter runs over its tiles that hold keys, listed before the launch (bwd_key_tiles.hpp), where
// a sequence shorter than the longest leaves grid tiles past its keys. Warp specialized:
//   - producer warp (warpgroup 0, warp 0): picks each tile (or piece of one) and hands its
//     number to the other roles (TileRing); per piece TMA loads of K and V once the consumers have
//     retired the last tile's (kv_empty), then per step of the walk Q and dO tiles and the rows'
//     LSE and D (bulk copies) into a two-stage ring;
//   - dQ writer warp (warpgroup 0, warp 1): per step, adds the consumers' fp32 dQ tile to the
//     workspace's accumulators with one bulk reduction (cp.reduce.async.bulk .add.f32), so the
//     consumers never wait on global atomics;
//   - two consumer warpgroups (bwd_mainloop.hpp): the five wgmma GEMMs, P and dS; dK and dV in
//     registers for a tile's whole walk, stored while the producer loads the next tile.
// The preprocess kernel (D, LSE log2) is the sm80 backward's (sm80/bwd_preprocess.cuh, plain CUDA
// on the same workspace); the dQ convert is this backward's own (bwd_convert.cuh), as the
// accumulators are in the consumers' staging order.
// Included by sm90_bwd_hd<D>.cu only.
#pragma once

#include <cutlass/arch/reg_reconfig.h>

#include <algorithm>
#include <cute/arch/copy_sm90_tma.hpp>
#include <type_traits>

#include "common/device_properties.hpp"
#include "common/launch.hpp"
#include "common/pruning.hpp"
#include "sm80/bwd_dq_order.hpp"
#include "sm80/bwd_kernel_traits.hpp"
#include "sm80/bwd_preprocess.cuh"
#include "sm90/bwd_convert.cuh"
#include "sm90/bwd_key_tiles.hpp"
#include "sm90/bwd_mainloop.hpp"
#include "sm90/bwd_traits.hpp"

namespace flashcore::sm90 {

// Adds bytes of fp32 from shared to global memory, element-wise, as one asynchronous bulk
// operation of this thread's bulk group.
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem, const float* smem, int bytes) {
  const auto smem_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gmem),
      "r"(smem_addr), "r"(bytes)
      : "memory");
}

// All 32 lanes of the producer warp, for a tile with steps: once the consumers have retired the
// GEMMs that read the CTA's previous K and V (kv_empty; loaded: the tiles whose K and V the CTA
// loaded before), one lane loads this tile's (gK, gV: its key rows in global memory), completing
// kv_full's phase loaded % 2. Both sm90 backwards' producers.
template <typename Traits, typename SharedStorage, typename GmemTile>
__device__ void load_key_tiles(const BwdKernelParams<Traits>& params, SharedStorage& smem,
                               int loaded, bool issuer, const GmemTile& gK, const GmemTile& gV) {
  if (loaded > 0) cutlass::arch::ClusterBarrier::wait(&smem.kv_empty, (loaded - 1) & 1);
  if (!issuer) return;
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutK{});
  auto k_views =
      tma_partition(params.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
  auto v_views =
      tma_partition(params.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
  cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&smem.kv_full,
                                                                 2 * Traits::kKBytes);
  copy(params.tma_k.with(smem.kv_full, 0), get<0>(k_views), get<1>(k_views));
  copy(params.tma_v.with(smem.kv_full, 0), get<0>(v_views), get<1>(v_views));
}

template <typename Traits>
struct BwdLoad {
  using Pipeline = typename Traits::Pipeline;
  using SharedStorage = typename Traits::SharedStorage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;

  // All 32 lanes of the producer warp: they wait on the ring together, one lane issues copies.
  __device__ static void run(const BwdKernelParams<Traits>& params, SharedStorage& smem,
                             Pipeline& pipeline) {
    const sm80::BwdParams& p = params.p;
    const bool issuer = cute::elect_one_sync();
    const int tma_batch = Traits::kVarlen ? 1 : p.batch;  // varlen: the packed tensors
    Tensor mQ =
        params.tma_q.get_tma_tensor(make_shape(p.seqlen_q, int{kHeadDim}, p.heads_q, tma_batch));
    Tensor mdO =
        params.tma_do.get_tma_tensor(make_shape(p.seqlen_q, int{kHeadDim}, p.heads_q, tma_batch));
    Tensor mK =
        params.tma_k.get_tma_tensor(make_shape(p.seqlen_k, int{kHeadDim}, p.heads_kv, tma_batch));
    Tensor mV =
        params.tma_v.get_tma_tensor(make_shape(p.seqlen_k, int{kHeadDim}, p.heads_kv, tma_batch));
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.d_o.data()), typename Traits::SmemLayoutQ{});
    using KvTile = Shape<Int<kBlockN>, Int<kHeadDim>>;
    using QTile = Shape<Int<kBlockM>, Int<kHeadDim>>;
    if (issuer) {
      cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_do.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
    }

    const BwdSchedule<Traits> schedule{params};
    typename Pipeline::PipelineState write = cutlass::make_producer_start_state<Pipeline>();
    BwdPieceCursor cursor;
    int kv_loads = 0;  // pieces whose K and V this CTA loaded
    BwdWalk walk;
    for (int index = listed(params, cursor.first(params.tail.split));
         schedule.publish(smem, cursor.published, index, &walk);
         index = listed(params, cursor.next(params.tail.split, p.tile_counter))) {
      if (walk.steps == 0) continue;  // dK = dV = 0: the consumers store them, nothing to load
      load_key_tiles(params, smem, kv_loads++, issuer,
                     local_tile(sequence_rows(mK, walk.kv_head, walk, walk.k_start), KvTile{},
                                make_coord(walk.n_block, _0{})),
                     local_tile(sequence_rows(mV, walk.kv_head, walk, walk.k_start), KvTile{},
                                make_coord(walk.n_block, _0{})));
      BwdWalk::Position at = walk.first();
      for (int step = 0; step < walk.steps; ++step, walk.advance(at)) {
        const int head = at.head;
        const int m_block = at.m_block;
        pipeline.producer_acquire(write);
        if (issuer) {
          uint64_t* full = pipeline.producer_get_barrier(write);
          Tensor gQ = local_tile(sequence_rows(mQ, head, walk, walk.q_start), QTile{},
                                 make_coord(m_block, _0{}));
          Tensor gdO = local_tile(sequence_rows(mdO, head, walk, walk.q_start), QTile{},
                                  make_coord(m_block, _0{}));
          auto q_views = tma_partition(params.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                       group_modes<0, 2>(gQ));
          auto do_views = tma_partition(params.tma_do, _0{}, Layout<_1>{}, group_modes<0, 2>(sdO),
                                        group_modes<0, 2>(gdO));
          copy(params.tma_q.with(*full, 0), get<0>(q_views), get<1>(q_views)(_, write.index()));
          copy(params.tma_do.with(*full, 0), get<0>(do_views), get<1>(do_views)(_, write.index()));
          // LSE and D rows: the workspace pads them to whole query blocks (16-byte aligned).
          const int64_t rows = walk.workspace_row<Traits::kVarlen>(p, head) + m_block * kBlockM;
          cute::SM90_BULK_COPY_G2S::copy(p.lse_log2 + rows, full, smem.lse[write.index()],
                                         Traits::kRowStatBytes);
          cute::SM90_BULK_COPY_G2S::copy(p.delta + rows, full, smem.delta[write.index()],
                                         Traits::kRowStatBytes);
        }
        ++write;
      }
    }
    // Keeps the warp alive until the consumers released every stage it filled.
    pipeline.producer_tail(write);
  }

  // A varlen batch's counter runs over its list of the tiles that hold keys (bwd_key_tiles.hpp):
  // position index's tile, or the end past the list. Varlen never cuts tiles, so a piece is a tile.
  __device__ static int listed(const BwdKernelParams<Traits>& params, int index) {
    if constexpr (Traits::kVarlen) {
      if (params.listed_tiles != nullptr) {
        return index < *params.listed_count ? params.listed_tiles[index]
                                            : params.tail.split.end_piece();
      }
    }
    return index;
  }

  // The (row, dim) slice of head of m whose rows the walk's tiles count from: batch entry
  // walk.batch, or varlen's packed rows from the sequence's first (start).
  template <typename GmemTensor>
  __device__ static auto sequence_rows(const GmemTensor& m, int head, const BwdWalk& walk,
                                       int start) {
    if constexpr (Traits::kVarlen) {
      return domain_offset(make_coord(start, _0{}), m(_, _, head, _0{}));
    } else {
      (void)start;
      return m(_, _, head, walk.batch);
    }
  }
};

// Deterministic mode's order (sm80/bwd_dq_order.hpp): the key blocks add their dQ tile to a query
// block in decreasing order, counted by a semaphore per (batch, query head, query block). Called
// by one lane of the dQ writer warp, which alone touches the semaphore, so no barrier is needed
// around the turn.
__device__ __forceinline__ void wait_for_dq_turn(const int* semaphore, int turn) {
  sm80::spin_until_turn(semaphore, turn);
  // The bulk reduction that follows runs in the async proxy: order it after the acquire, that is
  // after the earlier key blocks' reductions.
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// After this lane's bulk reduction has completed (its writes, not only its reads of the staging
// buffer), publish it and pass the turn to the next key block.
__device__ __forceinline__ void pass_dq_turn(int* semaphore) {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
  sm80::publish_turn(semaphore);
}

// The dQ writer warp: per step, waits for the consumers' staged dQ tile, adds it to the
// workspace's accumulators with one bulk reduction (the tile is one contiguous block of them, in
// DqTileOrder; rows past seqlen_q included: the workspace pads each sequence to whole query
// blocks, and the convert kernel never reads them), and hands the staging buffer back once the
// reduction has read it. One reduction of 32 KB instead of one per query row: the per-row
// reductions (128 a step at hd64) were a limit of their own (docs/perf.md, sm90 v4). In
// deterministic mode (the workspace has semaphores) each reduction waits for its turn and passes it
// on when complete; the consumers wait only for the staging buffer, so the next step's GEMMs run
// meanwhile.
template <typename Traits>
__device__ void write_dq(const BwdKernelParams<Traits>& params,
                         typename Traits::SharedStorage& smem) {
  constexpr uint32_t kThreads = Traits::kConsumerThreads + cutlass::NumThreadsPerWarp;
  constexpr int kTileBytes = Traits::kBlockM * Traits::kHeadDim * static_cast<int>(sizeof(float));
  const sm80::BwdParams& p = params.p;
  const bool issuer = cute::elect_one_sync();
  const bool deterministic = p.dq_semaphore != nullptr;
  const BwdSchedule<Traits> schedule{params};
  BwdWalk walk;
  for (int taken = 0; schedule.take(smem, taken, &walk); ++taken) {
    if (walk.steps == 0) continue;
    // The staging buffer starts each tile empty; each later release matches one consumer wait,
    // so every arrival on the barrier is consumed before the CTA exits.
    cutlass::arch::NamedBarrier::arrive(kThreads, barrier_id(BwdBarrierId::kDqEmpty));
    BwdWalk::Position at = walk.first();
    for (int step = 0; step < walk.steps; ++step, walk.advance(at)) {
      cutlass::arch::NamedBarrier::sync(kThreads, barrier_id(BwdBarrierId::kDqFull));
      const int m_block = at.m_block;
      const int64_t head_row = static_cast<int64_t>(walk.batch) * p.heads_q + at.head;
      int* const semaphore =
          deterministic ? p.dq_semaphore + head_row * p.num_m_blocks + m_block : nullptr;
      if (issuer) {
        const int row0 = m_block * Traits::kBlockM;
        if (deterministic) {
          // Varlen: the turn among the sequence's own key blocks, under its mask.
          wait_for_dq_turn(semaphore, sm80::dq_turn<Traits::kBlockM, Traits::kBlockN>(
                                          walk.window<Traits::kVarlen>(p), row0, walk.n_block));
        }
        const int64_t tile_row = walk.workspace_row<Traits::kVarlen>(p, at.head) + row0;
        float* accum = p.dq_accum + tile_row * Traits::kHeadDim;
        bulk_reduce_add_f32(accum, smem.dq, kTileBytes);
        cute::tma_store_arrive();   // commit the bulk group
        cute::tma_store_wait<0>();  // ... and wait until its reads of the staging buffer are done
      }
      __syncwarp();
      if (step + 1 < walk.steps) {
        cutlass::arch::NamedBarrier::arrive(kThreads, barrier_id(BwdBarrierId::kDqEmpty));
      }
      if (deterministic && issuer) pass_dq_turn(semaphore);
    }
  }
  // The reductions themselves (not only their reads) complete before the warp exits.
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    bwd_kernel(const __grid_constant__ BwdKernelParams<Traits> params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Pipeline = typename Traits::Pipeline;
  using SharedStorage = typename Traits::SharedStorage;
  extern __shared__ __align__(1024) char smem_bytes[];
  SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_bytes);

  const int warpgroup = cutlass::canonical_warp_group_idx();
  const bool is_producer = warpgroup == 0;
  const int warp_in_warpgroup = cutlass::canonical_warp_idx_sync() % 4;
  Pipeline pipeline(
      smem.pipeline,
      tma_pipeline_params<Pipeline>(is_producer, Traits::kConsumerThreads, Traits::kStageBytes),
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
      BwdLoad<Traits>::run(params, smem, pipeline);
    } else if (warp_in_warpgroup == 1) {
      write_dq<Traits>(params, smem);
    }
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
  BwdMainloop<Traits> mainloop;
  mainloop.run(params, smem, pipeline, threadIdx.x - kWarpgroupThreads);
#endif
}

// The persistent schedule of a launch: its tile order into params, and the grid, one CTA per SM
// (the shared memory allows no second) or one per tile if there are fewer tiles.
template <typename Traits>
cudaError_t persistent_schedule(BwdKernelParams<Traits>* params, const BwdTail& tail, dim3* grid) {
  cudaDeviceProp device{};
  // The launch's problem passed the device checks already; this is the cached query.
  if (!detail::current_device_properties(&device).ok()) return cudaErrorNoDevice;
  params->order = BwdTileOrder::of(params->p, Traits::kHeadDim,
                                   static_cast<int>(sizeof(typename Traits::Element)));
  // The split was planned from the problem (sm90_bwd.cu) before the workspace was laid out; a plan
  // of other tiles than the order's would name tiles that do not exist.
  if (tail.split.num_tiles() != params->order.num_tiles()) return cudaErrorInvalidValue;
  params->tail = tail;
  *grid = dim3(static_cast<unsigned>(std::min(tail.split.num_units(), device.multiProcessorCount)));
  return cudaSuccess;
}

template <typename Traits>
auto bwd_gmem_tensor(const void* data, int seqlen, int heads, int batch, int64_t seq_stride,
                     int64_t head_stride, int64_t batch_stride) {
  using Element = typename Traits::Element;
  return make_tensor(make_gmem_ptr(static_cast<const Element*>(data)),
                     make_layout(make_shape(seqlen, int{Traits::kHeadDim}, heads, batch),
                                 make_stride(seq_stride, _1{}, head_stride, batch_stride)));
}

// The three launches of one backward (the workspace's dQ accumulators zeroed by the caller):
// preprocess, this kernel, convert; the softcap and varlen kernels are instantiations of their
// own. Element is cutlass::half_t or cutlass::bfloat16_t.
template <typename Element, int kHeadDim, bool kSoftcap, bool kVarlen>
cudaError_t launch_backward(const sm80::BwdParams& p, const BwdTail& tail,
                            const BwdKeyTileList& key_tiles, cudaStream_t stream) {
  using Traits = BwdTraits<Element, kHeadDim, kSoftcap, kVarlen>;
  // The preprocess and convert kernels take the CUDA element type and read only its chunking.
  using CudaElement =
      std::conditional_t<std::is_same_v<Element, cutlass::half_t>, __half, __nv_bfloat16>;
  using RowTraits = sm80::BwdTraits<CudaElement, kHeadDim>;
  if (cudaError_t err = sm80::launch_bwd_preprocess<RowTraits, Traits::kBlockM>(p, stream);
      err != cudaSuccess) {
    return err;
  }
  BwdKernelParams<Traits> params{};
  params.p = p;
  // Varlen: the packed tensors as one batch entry of every row; their batch strides are never
  // used, and the descriptors get valid ones.
  const int batch = kVarlen ? 1 : p.batch;
  const int64_t q_batch = kVarlen ? p.seqlen_q * p.q_seq : p.q_batch;
  const int64_t do_batch = kVarlen ? p.seqlen_q * p.do_seq : p.do_batch;
  const int64_t k_batch = kVarlen ? p.seqlen_k * p.k_seq : p.k_batch;
  const int64_t v_batch = kVarlen ? p.seqlen_k * p.v_seq : p.v_batch;
  auto q_tensor =
      bwd_gmem_tensor<Traits>(p.q, p.seqlen_q, p.heads_q, batch, p.q_seq, p.q_head, q_batch);
  auto do_tensor =
      bwd_gmem_tensor<Traits>(p.d_o, p.seqlen_q, p.heads_q, batch, p.do_seq, p.do_head, do_batch);
  auto k_tensor =
      bwd_gmem_tensor<Traits>(p.k, p.seqlen_k, p.heads_kv, batch, p.k_seq, p.k_head, k_batch);
  auto v_tensor =
      bwd_gmem_tensor<Traits>(p.v, p.seqlen_k, p.heads_kv, batch, p.v_seq, p.v_head, v_batch);
  using QTile = Shape<Int<Traits::kBlockM>, Int<kHeadDim>>;
  using KvTile = Shape<Int<Traits::kBlockN>, Int<kHeadDim>>;
  const auto q_smem = take<0, 2>(typename Traits::SmemLayoutQ{});
  params.tma_q = make_tma_copy(SM90_TMA_LOAD{}, q_tensor, q_smem, QTile{}, _1{});
  params.tma_do = make_tma_copy(SM90_TMA_LOAD{}, do_tensor, q_smem, QTile{}, _1{});
  params.tma_k =
      make_tma_copy(SM90_TMA_LOAD{}, k_tensor, typename Traits::SmemLayoutK{}, KvTile{}, _1{});
  params.tma_v =
      make_tma_copy(SM90_TMA_LOAD{}, v_tensor, typename Traits::SmemLayoutK{}, KvTile{}, _1{});

  auto kernel = bwd_kernel<Traits>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  if (configured != cudaSuccess) return configured;
  detail::LaunchShape shape;
  if (cudaError_t err = persistent_schedule(&params, tail, &shape.grid); err != cudaSuccess)
    return err;
  if constexpr (kVarlen) {
    if (key_tiles.enabled()) {
      // Built from the order the kernel runs; a list names whole tiles, which varlen's are.
      if (tail.split.split_steps != 0) return cudaErrorInvalidValue;
      if (cudaError_t err =
              build_bwd_key_tile_list(key_tiles, params.order, p, Traits::kBlockN, stream);
          err != cudaSuccess) {
        return err;
      }
      params.listed_tiles = key_tiles.tiles;
      params.listed_count = key_tiles.count;
    }
  }
  shape.threads = Traits::kThreads;
  shape.smem_bytes = Traits::kSmemBytes;
  if (cudaError_t err = detail::launch_kernel(kernel, shape, stream, params); err != cudaSuccess) {
    return err;
  }
  return launch_bwd_convert<Traits, CudaElement>(p, stream);
}

template <typename Element, int kHeadDim, bool kVarlen>
cudaError_t launch_backward_softcap(const sm80::BwdParams& p, const BwdTail& tail,
                                    const BwdKeyTileList& key_tiles, cudaStream_t stream) {
  return p.softcapped
             ? launch_backward<Element, kHeadDim, true, kVarlen>(p, tail, key_tiles, stream)
             : launch_backward<Element, kHeadDim, false, kVarlen>(p, tail, key_tiles, stream);
}

template <typename Element, int kHeadDim>
cudaError_t launch_backward_varlen(const sm80::BwdParams& p, const BwdTail& tail,
                                   const BwdKeyTileList& key_tiles, cudaStream_t stream) {
  return p.cu_seqlens_q != nullptr
             ? launch_backward_softcap<Element, kHeadDim, true>(p, tail, key_tiles, stream)
             : launch_backward_softcap<Element, kHeadDim, false>(p, tail, key_tiles, stream);
}

template <int kHeadDim>
cudaError_t launch_backward_head_dim(const sm80::BwdParams& p, const BwdTail& tail,
                                     const BwdKeyTileList& key_tiles, bool bf16,
                                     cudaStream_t stream) {
  if (bf16) {
    if constexpr (detail::kernel_built(DType::kBFloat16, kHeadDim)) {
      return launch_backward_varlen<cutlass::bfloat16_t, kHeadDim>(p, tail, key_tiles, stream);
    }
  } else {
    if constexpr (detail::kernel_built(DType::kFloat16, kHeadDim)) {
      return launch_backward_varlen<cutlass::half_t, kHeadDim>(p, tail, key_tiles, stream);
    }
  }
  return cudaErrorInvalidDeviceFunction;
}

#define FLASHCORE_SM90_BWD_INSTANTIATE(D)                                                  \
  template cudaError_t launch_backward_head_dim<D>(const sm80::BwdParams&, const BwdTail&, \
                                                   const BwdKeyTileList&, bool, cudaStream_t);

}  // namespace flashcore::sm90
