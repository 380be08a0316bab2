// The producer: one warp that issues every TMA load of a CTA's tiles. Per tile it loads Q once and
// then K and V one key block at a time, last block first (the order the consumers visit them),
// each into the next free stage of its ring. The first K block is issued before Q so that, with a
// single Q stage, it is in flight while the consumers still store the previous tile's O through
// that stage.
#pragma once

#include <cutlass/arch/barrier.h>

#include "sm90/fwd_params.hpp"
#include "sm90/kernel_traits.hpp"
#include "sm90/named_barriers.hpp"
#include "sm90/sequence_view.hpp"
#include "sm90/tile_scheduler.hpp"

namespace flashcore::sm90 {

template <typename Traits>
struct MainloopLoad {
  using Pipeline = typename Traits::Pipeline;
  using PipelineState = typename Pipeline::PipelineState;
  using PipelineQ = typename Traits::PipelineQ;
  using TileShape = typename Traits::TileShape;
  using SharedStorage = typename Traits::SharedStorage;

  // Called by all 32 lanes of the producer warp: they wait on the rings together, and one lane
  // issues the copies. kListed: a varlen batch's tiles come from its list (varlen_tiles.hpp).
  template <bool kListed>
  __device__ static void run(const FwdParams<Traits>& params, SharedStorage& smem,
                             PipelineQ& pipeline_q, Pipeline& pipeline_k, Pipeline& pipeline_v) {
    const FwdArgs& a = params.args;
    const bool issuer = cute::elect_one_sync();
    if (issuer) {
      cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
      if (a.o_by_tma) cute::prefetch_tma_descriptor(params.tma_o.get_tma_descriptor());
    }
    const int heads_kv = a.heads / a.kv_group;
    const int cluster_rank =
        Traits::kClusterCtas == 1 ? 0 : static_cast<int>(cute::block_rank_in_cluster());
    // A varlen batch is one TMA batch of packed rows (sequence_view.hpp).
    const int tma_batches = is_varlen_batch(a) ? 1 : a.batch;
    Tensor mQ =
        params.tma_q.get_tma_tensor(make_shape(a.seqlen_q, a.head_dim, a.heads, tma_batches));
    Tensor mK =
        params.tma_k.get_tma_tensor(make_shape(a.seqlen_k, a.head_dim, heads_kv, tma_batches));
    Tensor mV =
        params.tma_v.get_tma_tensor(make_shape(a.seqlen_k, a.head_dim, heads_kv, tma_batches));
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutV{});

    typename PipelineQ::PipelineState write_q = cutlass::make_producer_start_state<PipelineQ>();
    PipelineState write_k = cutlass::make_producer_start_state<Pipeline>();
    PipelineState write_v = cutlass::make_producer_start_state<Pipeline>();
    TileCursor<Traits::kClusterCtas> cursor;
    for (int tile_index = cursor.first();; tile_index = cursor.next(a)) {
      if constexpr (kListed) {
        // The counter runs over the list (its count was written before the launch), whose
        // entries are grid indices: the rest is the grid's code, on both sides.
        tile_index = tile_index < *a.varlen_tile_count ? a.varlen_tiles[tile_index] : a.num_tiles;
      }
      // The consumers learn every tile, decoded, and the end (an index past the last tile), from
      // here.
      if (tile_index >= a.num_tiles) {
        TileRing::publish(smem.tiles, cursor.taken, tile_index);
        break;
      }
      const Tile tile = TileScheduler<Traits::kClusterCtas>::decode(a, tile_index);
      TileRing::publish(smem.tiles, cursor.taken, tile_index, 0, tile);
      const SequenceView seq = sequence_view(a, tile.batch);
      if (past_sequence<Traits::kBlockM>(a, seq, tile.m_block)) continue;  // nobody computes it
      const BlockRange range = key_blocks<Traits::kBlockM, Traits::kBlockN>(a, seq.mask, tile);
      const int kv_head = tile.head / a.kv_group;
      const int tma_batch = is_varlen_batch(a) ? 0 : tile.batch;
      Tensor gQ =
          local_tile(domain_offset(make_coord(seq.q_start, _0{}), mQ(_, _, tile.head, tma_batch)),
                     select<0, 2>(TileShape{}), make_coord(tile.m_block, _0{}));
      Tensor gK =
          local_tile(domain_offset(make_coord(seq.k_start, _0{}), mK(_, _, kv_head, tma_batch)),
                     select<1, 2>(TileShape{}), make_coord(_, _0{}));
      Tensor gV =
          local_tile(domain_offset(make_coord(seq.k_start, _0{}), mV(_, _, kv_head, tma_batch)),
                     select<1, 2>(TileShape{}), make_coord(_, _0{}));
      // (global, shared) views of each copy; named pieces so the lambdas below can capture them.
      auto q_views = tma_partition(params.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                   group_modes<0, 2>(gQ));
      // In a cluster this CTA loads its share of each K and V tile, multicast to all (rank 0
      // otherwise: the whole tile).
      using ClusterLayout = Layout<Int<Traits::kClusterCtas>>;
      auto k_views = tma_partition(params.tma_k, cluster_rank, ClusterLayout{},
                                   group_modes<0, 2>(sK), group_modes<0, 2>(gK));
      auto v_views = tma_partition(params.tma_v, cluster_rank, ClusterLayout{},
                                   group_modes<0, 2>(sV), group_modes<0, 2>(gV));
      auto& tKgK = get<0>(k_views);
      auto& tKsK = get<1>(k_views);
      auto& tVgV = get<0>(v_views);
      auto& tVsV = get<1>(v_views);

      auto load_k = [&](int n_block) {
        pipeline_k.producer_acquire(write_k);
        if (issuer) {
          copy(params.tma_k.with(*pipeline_k.producer_get_barrier(write_k),
                                 static_cast<uint16_t>(Traits::kMulticastMask)),
               tKgK(_, n_block), tKsK(_, write_k.index()));
        }
        ++write_k;
      };
      auto load_v = [&](int n_block) {
        pipeline_v.producer_acquire(write_v);
        if (issuer) {
          copy(params.tma_v.with(*pipeline_v.producer_get_barrier(write_v),
                                 static_cast<uint16_t>(Traits::kMulticastMask)),
               tVgV(_, n_block), tVsV(_, write_v.index()));
        }
        ++write_v;
      };

      if (range.empty()) continue;  // the consumers write O = 0 without waiting for anything
      load_k(range.end - 1);
      pipeline_q.producer_acquire(write_q);
      if (issuer) {
        copy(params.tma_q.with(*pipeline_q.producer_get_barrier(write_q), 0), get<0>(q_views),
             get<1>(q_views)(_, write_q.index()));
      }
      ++write_q;
      load_v(range.end - 1);
      for (int n_block = range.end - 2; n_block >= range.begin; --n_block) {
        load_k(n_block);
        load_v(n_block);
      }
    }
    // Keeps the warp alive until the consumers released every stage it filled.
    pipeline_q.producer_tail(write_q);
    pipeline_k.producer_tail(write_k);
    pipeline_v.producer_tail(write_v);
  }
};

}  // namespace flashcore::sm90
