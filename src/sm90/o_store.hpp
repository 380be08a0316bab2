// O's TMA store in the dense and flex forwards (FwdArgs::o_by_tma: unsplit, unpacked problems;
// KernelTraits::kStoresOByTma: head dims up to 224). A consumer warpgroup stages its 64 rows of O
// in the tile's Q stage (Epilogue::stage), fences them for the async proxy, arrives on its staged
// barrier and goes on to its next tile. The producer warpgroup's second warp
// (ProducerWarp::kStoreO) waits for each warpgroup's rows, stores them with the TMA (rows past the
// sequence and dims past head_dim fall outside the descriptor, which the TMA does not write),
// waits until the TMA has read the stage and only then releases it to the Q loads. The consumers
// thus neither copy O out nor wait for the store; with the copy-out by the consumers' own threads
// (the path split and varlen problems keep), each tile's end held its warpgroup for the stores'
// shared-memory reads and address math.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cute/arch/copy_sm90_tma.hpp>

#include "sm90/epilogue.hpp"
#include "sm90/fwd_params.hpp"
#include "sm90/kernel_traits.hpp"
#include "sm90/tile_scheduler.hpp"

namespace flashcore::sm90 {

template <typename Traits>
struct OStore {
  using Element = typename Traits::Element;
  using SharedStorage = typename Traits::SharedStorage;
  static constexpr int kWarpgroups = Traits::kConsumerWarpgroups;
  static constexpr int kStorerThreads = 32;  // one warp, which takes every tile from the tile ring

  // The arrivals that free a Q stage: every consumer thread's, or the storer's alone.
  __host__ __device__ static constexpr int q_stage_releasers(bool o_by_tma) {
    return o_by_tma ? 1 : Traits::kConsumerThreads;
  }
  // The threads that take each tile from the tile ring: the consumers, and the storer warp.
  __host__ __device__ static constexpr int tile_ring_takers(bool o_by_tma) {
    return Traits::kConsumerThreads + (o_by_tma ? kStorerThreads : 0);
  }

  // One thread, before the CTA-wide sync that publishes barrier initialization
  // (KernelTraits::SharedStorage::o_staged says why two barriers a warpgroup).
  __device__ static void init(SharedStorage& smem) {
    for (int warpgroup = 0; warpgroup < kWarpgroups; ++warpgroup) {
      for (int turn = 0; turn < 2; ++turn) smem.o_staged[warpgroup][turn].init(kWarpgroupThreads);
    }
  }

  // Every thread of a consumer warpgroup, after staging its rows of its stores-th stored tile:
  // the stmatrix writes (generic proxy) are made visible to the TMA's reads (async proxy), then
  // the thread arrives.
  __device__ static void staged(SharedStorage& smem, int warpgroup, int stores) {
    tma_store_fence();
    smem.o_staged[warpgroup][stores % 2].arrive();
  }

  // What the storer does with a tile, as the kernel's consumers treat it.
  enum class TileStore {
    kNone,          // no Q loaded and nothing staged (a tile past a sequence, an empty range)
    kReleaseQOnly,  // Q loaded, but the consumers write O = 0 themselves (an empty flex walk)
    kStore,         // the consumers stage O in the tile's Q stage
  };

  // The storer warp (all 32 lanes): takes every tile from the tile ring as the consumers do and
  // classifies it as they do (classify(tile, payload) -> TileStore, payload: the producer's word
  // for the tile). For each stored tile it stores each warpgroup's rows once they are staged, in
  // warpgroup order (the order pingpong finishes them in), then releases the Q stage: the Q ring's
  // only consumer arrival in this mode, the stage being free once the TMA has read it.
  template <typename Classify>
  __device__ static void run(const FwdParams<Traits>& params, SharedStorage& smem,
                             const Classify& classify) {
    const FwdArgs& a = params.args;
    const bool issuer = cute::elect_one_sync();
    Tensor mO = params.tma_o.get_tma_tensor(make_shape(a.seqlen_q, a.head_dim, a.heads, a.batch));
    auto cta_tma = params.tma_o.get_slice(_0{});
    typename Traits::PipelineQ::PipelineState stage_q;
    int stores = 0;
    for (int taken = 0;; ++taken) {
      Tile tile;
      int payload = 0;
      const int tile_index = TileRing::take(smem.tiles, taken, &payload, &tile);
      if (tile_index >= a.num_tiles) break;
      const TileStore kind = classify(tile, payload);
      if (kind == TileStore::kNone) continue;
      if (kind == TileStore::kStore) {
        Element* o_stage = smem.q.data() + stage_q.index() * Traits::kQTileElements;
        Tensor gO = mO(_, _, tile.head, tile.batch);
        for (int warpgroup = 0; warpgroup < kWarpgroups; ++warpgroup) {
          smem.o_staged[warpgroup][stores % 2].wait((stores / 2) % 2);
          if (!issuer) continue;
          const int box_row = tile.m_block * kWarpgroups + warpgroup;
          CUTLASS_PRAGMA_UNROLL
          for (int box = 0; box < Traits::kOBoxes; ++box) {
            if (box * Traits::kOBoxColumns >= a.head_dim) break;  // columns the caller lacks
            Tensor sBox =
                make_tensor(make_smem_ptr(o_stage + Epilogue<Traits>::box_offset(warpgroup, box)),
                            typename Traits::SmemLayoutOBox{});
            Tensor gBox = local_tile(gO, typename Traits::OBoxShape{}, make_coord(box_row, box));
            copy(params.tma_o, cta_tma.partition_S(sBox), cta_tma.partition_D(gBox));
          }
        }
        if (issuer) {
          tma_store_arrive();
          tma_store_wait<0>();
        }
        ++stores;
      } else {
        // Nothing to store: the stage is released once its load has landed, so that its
        // barriers' phases stay paired.
        smem.pipeline_q.full_barrier_[stage_q.index()].wait(stage_q.phase());
      }
      if (issuer) smem.pipeline_q.empty_barrier_[stage_q.index()].arrive();
      ++stage_q;
    }
  }
};

}  // namespace flashcore::sm90
