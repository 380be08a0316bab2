// The sm90 backend's small-grid tiles (tile_table.hpp): their instantiation list, their rejection
// reasons, kAuto's pick among them (heuristics.hpp) and their launches. Planning and launching
// are the FA2-class schedule's own (src/sm80/fwd_plan.hpp); the cluster-pair kernels are compiled
// in cta_pair_fwd.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/kernel_list.hpp"
#include "common/pruning.hpp"
#include "sm80/fwd_kernel.cuh"
#include "sm80/fwd_plan.hpp"
#include "sm90/small_grid/cta_pair_fwd.hpp"
#include "sm90/small_grid/heuristics.hpp"
#include "sm90/small_grid/small_grid_fwd.hpp"
#include "sm90/small_grid/tile_table.hpp"

namespace flashcore::sm90::small_grid {
namespace {

using detail::Problem;

// As in the sm80 backend: sizes stay in int inside the kernel, heads go to gridDim.y and batch to
// gridDim.z.
constexpr int64_t kMaxSeqlen = int64_t{1} << 29;
constexpr int64_t kMaxGridYZ = 65535;

// Stands in for the Hopper tiles of head dims that have none.
struct NoTile {};

// The tiles of one (dtype, head dim): the small one, and for hd64 the two Hopper tiles. The large
// tile's rows (sm80's table) are what the rule measures grids against.
template <typename Element, int kHeadDim>
struct Tiles {
  static constexpr bool kHasHopperTiles = kHeadDim == kHopperTileHeadDim;
  static constexpr int kLargeBlockM = sm80::TileConfig<kHeadDim>::kBlockM;
  using Small = sm80::KernelTraits<Element, kHeadDim, SmallTileConfig<kHeadDim>>;
  using Medium =
      std::conditional_t<kHasHopperTiles,
                         sm80::KernelTraits<Element, kHeadDim, MediumTileConfig<kHeadDim>>, NoTile>;
  using CtaPair = std::conditional_t<kHasHopperTiles, CtaPairTraits<Element>, NoTile>;
};

// THE instantiation list of the small-grid tiles: the head dims of sm80's small-grid table
// (src/sm80/kernel_traits.hpp; one that is missing here runs on the sm80 backend instead, launched
// plainly). fn receives the tiles of one (dtype, head dim); false when (dtype, head_dim) has none,
// or was left out (common/pruning.hpp).
using SmallGridKernels = detail::KernelList<Tiles, 64, 128, 256>;
template <typename Fn>
bool with_tiles(DType dtype, int64_t head_dim, Fn&& fn) {
  return SmallGridKernels::with(dtype, head_dim, fn);
}

// fn gets the traits of `tile` (kSmall, kMedium or kCtaPair) for the problem's dtype and head dim;
// nothing happens when it has none (rejects says why).
template <typename Fn>
void with_tile(const Problem& problem, TileShape tile, Fn&& fn) {
  with_tiles(problem.params.q.dtype, problem.params.head_dim, [&](auto tiles) {
    using TilesT = decltype(tiles);
    if (tile == TileShape::kSmall) fn(typename TilesT::Small{});
    if constexpr (TilesT::kHasHopperTiles) {
      if (tile == TileShape::kMedium) fn(typename TilesT::Medium{});
      if (tile == TileShape::kCtaPair) fn(typename TilesT::CtaPair{});
    }
  });
}

}  // namespace

const char* rejects(const Problem& problem, const cudaDeviceProp& device, TileShape tile) {
  const AttentionParams& a = problem.params;
  if (a.seqlen_q > kMaxSeqlen || a.seqlen_k > kMaxSeqlen) {
    return "supports seqlen_q and seqlen_k up to 2^29";
  }
  if (a.heads_q > kMaxGridYZ || a.batch > kMaxGridYZ) {
    return "runs its small-grid tiles for batch and heads_q up to 65535";
  }
  if (tile == TileShape::kMedium && a.head_dim != kHopperTileHeadDim) {
    return "has tile kMedium for head_dim 64 only";
  }
  if (tile == TileShape::kCtaPair && a.head_dim != kHopperTileHeadDim) {
    return "has tile kCtaPair for head_dim 64 only";
  }
  if (tile == TileShape::kCtaPair && a.num_splits > 1) {
    return "runs tile kCtaPair with the keys split across its CTA pair, not num_splits; use "
           "num_splits 0 or 1";
  }
  int smem_bytes = 0;
  with_tile(problem, tile, [&](auto traits) { smem_bytes = decltype(traits)::kSmemBytes; });
  if (smem_bytes == 0) {
    const bool listed = a.head_dim == 64 || a.head_dim == 128 || a.head_dim == 256;
    return listed ? detail::pruned_reason(a.q.dtype, static_cast<int>(a.head_dim))
                  : "has tile kSmall for head_dim 64, 128 and 256 only";
  }
  if (static_cast<size_t>(smem_bytes) > device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block for this tile than this GPU allows";
  }
  return "";
}

TileShape auto_tile(const Problem& problem, const cudaDeviceProp& device) {
  const sm80::FwdParams view = sm80::kernel_view(problem);
  TileGrids grids;
  grids.num_splits = problem.params.num_splits;
  const bool listed = with_tiles(problem.params.q.dtype, problem.params.head_dim, [&](auto tiles) {
    using TilesT = decltype(tiles);
    grids.large_ctas = sm80::query_tile_ctas(view, TilesT::kLargeBlockM);
    grids.small_ctas = sm80::query_tile_ctas(view, TilesT::Small::kBlockM);
    if constexpr (TilesT::kHasHopperTiles) {
      grids.medium_ctas = sm80::query_tile_ctas(view, TilesT::Medium::kBlockM);
    }
  });
  if (!listed) return TileShape::kLarge;
  grids.small_runs = rejects(problem, device, TileShape::kSmall)[0] == '\0';
  grids.medium_runs = rejects(problem, device, TileShape::kMedium)[0] == '\0';
  grids.cta_pair_runs = rejects(problem, device, TileShape::kCtaPair)[0] == '\0';
  return choose_tile(grids, device.multiProcessorCount);
}

size_t workspace_bytes(const Problem& problem, const cudaDeviceProp& device, TileShape tile) {
  size_t bytes = 0;
  with_tile(problem, tile,
            [&](auto traits) { bytes = sm80::workspace_bytes<decltype(traits)>(problem, device); });
  return bytes;
}

Status launch(const Problem& problem, const cudaDeviceProp& device, TileShape tile, void* workspace,
              cudaStream_t stream) {
  Status status = {StatusCode::kUnsupported, "sm90: no small-grid tile for this problem"};
  with_tile(problem, tile, [&](auto traits) {
    using Traits = decltype(traits);
    using Element = typename Traits::Element;
    constexpr const char* kFwdName = "sm90 small-grid fwd_kernel";
    constexpr const char* kCombineName = "sm90 combine_kernel";
    if constexpr (Traits::kClusterCtas > 1) {
      status = sm80::launch_planned<Traits>(problem, device, workspace, stream,
                                            launch_cta_pair<Element>, kFwdName, kCombineName);
    } else {
      status =
          sm80::launch_planned<Traits>(problem, device, workspace, stream,
                                       sm80::launch_fwd_kernel<Traits>, kFwdName, kCombineName);
    }
  });
  return status;
}

}  // namespace flashcore::sm90::small_grid
