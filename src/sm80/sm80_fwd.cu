// Host side of the sm80 backend: the instantiation list (dtype x head dim, everything else is a
// runtime argument), the tile choice and the registry hooks. Planning and launching are shared
// with the sm90 backend's small-grid tiles (fwd_plan.hpp). The mma.sync tiles' kernels are compiled
// one head dim per translation unit (tile_launch.hpp).
#include <cstdint>
#include <type_traits>

#include "common/device_properties.hpp"
#include "common/feature_gates.hpp"
#include "common/head_dim.hpp"
#include "common/kernel_list.hpp"
#include "common/launch_status.hpp"
#include "common/pruning.hpp"
#include "sm80/flex_fwd.hpp"
#include "sm80/fwd_params.hpp"
#include "sm80/fwd_plan.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/sm80_fwd.hpp"
#include "sm80/tile_launch.hpp"

namespace flashcore::detail {
namespace {

using sm80::FwdParams;
using sm80::KernelTraits;

// Sizes stay in int inside the kernel: row + seqlen_k + window + 1 must not overflow.
constexpr int64_t kMaxSeqlen = int64_t{1} << 29;
constexpr int64_t kMaxGridYZ = 65535;  // heads go to gridDim.y, batch to gridDim.z

// The tiles of one (dtype, head dim), with_variant picks: the large one and the small-grid one.
// (On Hopper the sm90 backend runs this schedule's small-grid tiles with its own policies:
// src/sm90/small_grid/.)
template <typename Element, int kHeadDim>
struct Tiles {
  using Large = sm80::LargeTile<Element, kHeadDim>;
  using Small = sm80::SmallTile<Element, kHeadDim>;
};

// THE instantiation list: fn receives the tiles of one (dtype, head dim) (Tiles), every multiple
// of 32 up to 256; another multiple of 8 runs on the next one up (common/head_dim.hpp). Returns
// false when (dtype, head_dim) has no kernel, or was left out (common/pruning.hpp).
using ForwardKernels = KernelList<Tiles, 32, 64, 96, 128, 160, 192, 224, 256>;
template <typename Fn>
bool with_traits(DType dtype, int64_t head_dim, Fn&& fn) {
  return ForwardKernels::with(dtype, instantiated_head_dim(head_dim), fn);
}

// TileShape::kAuto takes the large tile unless its grid leaves SMs idle and the small tile's grid
// is at most two waves (sm80::small_tile_wins). A forced tile that cannot run was rejected by
// sm80_rejects. fn gets the chosen traits.
template <typename TilesT, typename Fn>
void with_variant(const Problem& problem, const cudaDeviceProp& device, Fn&& fn) {
  using Large = typename TilesT::Large;
  using Small = typename TilesT::Small;
  bool small = problem.params.tile == TileShape::kSmall;
  if (problem.params.tile == TileShape::kAuto) {
    const FwdParams view = sm80::kernel_view(problem);
    const bool small_fits = static_cast<size_t>(Small::kSmemBytes) <= device.sharedMemPerBlockOptin;
    small = sm80::small_tile_wins(sm80::query_tile_ctas(view, Large::kBlockM),
                                  sm80::query_tile_ctas(view, Small::kBlockM), small_fits,
                                  device.multiProcessorCount);
  }
  if (small) {
    fn(Small{});
  } else {
    fn(Large{});
  }
}

}  // namespace

const char* sm80_rejects(const Problem& problem, const cudaDeviceProp& device) {
  const AttentionParams& a = problem.params;
  if (device.major < 8) return "needs an sm_80 or newer GPU (mma.sync m16n8k16, cp.async)";
  if (a.seqlen_q > kMaxSeqlen || a.seqlen_k > kMaxSeqlen) {
    return "supports seqlen_q and seqlen_k up to 2^29";
  }
  if (a.heads_q > kMaxGridYZ || a.batch > kMaxGridYZ)
    return "supports batch and heads_q up to 65535";
  if (needs_flex_kernel(problem)) return sm80_flex_rejects(problem, device);
  if (a.tile == TileShape::kMedium || a.tile == TileShape::kCtaPair) {
    return a.tile == TileShape::kMedium
               ? "has no tile kMedium: that Hopper tile runs on backend sm90 (or auto)"
               : "has no tile kCtaPair: that Hopper tile runs on backend sm90 (or auto)";
  }
  int smem_bytes = 0;  // of the large tile, or the small one when forced (auto uses it if it fits)
  if (!with_traits(a.q.dtype, a.head_dim, [&](auto tiles) {
        using TilesT = decltype(tiles);
        smem_bytes =
            a.tile == TileShape::kSmall ? TilesT::Small::kSmemBytes : TilesT::Large::kSmemBytes;
      })) {
    const int instantiated = instantiated_head_dim(a.head_dim);
    return instantiated != 0 ? pruned_reason(a.q.dtype, instantiated)
                             : "has no kernel for this head_dim; use a multiple of 8 up to 256";
  }
  if (static_cast<size_t>(smem_bytes) > device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block than this GPU allows for this head_dim";
  }
  return "";
}

size_t sm80_workspace_bytes(const Problem& problem) {
  if (needs_flex_kernel(problem)) return sm80_flex_workspace_bytes(problem);
  cudaDeviceProp device{};
  if (!current_device_properties(&device).ok()) return 0;
  size_t bytes = 0;
  with_traits(problem.params.q.dtype, problem.params.head_dim, [&](auto tiles) {
    with_variant<decltype(tiles)>(problem, device, [&](auto chosen) {
      bytes = sm80::workspace_bytes<decltype(chosen)>(problem, device);
    });
  });
  return bytes;
}

Status launch_sm80(const Problem& problem, void* workspace, cudaStream_t stream) {
  if (needs_flex_kernel(problem)) return launch_sm80_flex(problem, workspace, stream);
  cudaDeviceProp device{};
  if (Status s = current_device_properties(&device); !s.ok()) return s;
  Status status = {StatusCode::kUnsupported, "sm80: head_dim has no kernel"};
  with_traits(problem.params.q.dtype, problem.params.head_dim, [&](auto tiles) {
    with_variant<decltype(tiles)>(problem, device, [&](auto chosen) {
      using Traits = decltype(chosen);
      // Launched plainly: the sm_80 tiles never wait for the previous grid (Independent). Their
      // kernels live in sm80_fwd_hd<D>.cu (tile_launch.hpp).
      status = sm80::launch_planned<Traits>(problem, device, workspace, stream,
                                            sm80::launch_tile<Traits>, "sm80 fwd_kernel",
                                            "sm80 combine_kernel");
    });
  });
  return status;
}

}  // namespace flashcore::detail
