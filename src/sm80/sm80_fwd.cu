// Host side of the sm80 kernel: the instantiation list (dtype x head dim, everything else is a
// runtime argument), the kernel's view of the problem, the split-KV plan and the launches. The
// mma.sync tiles' kernels are compiled one head dim per translation unit (tile_launch.hpp).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/device_properties.hpp"
#include "common/head_dim.hpp"
#include "common/launch_status.hpp"
#include "common/pruning.hpp"
#include "common/query_view.hpp"
#include "common/score_scaling.hpp"
#include "sm80/combine.cuh"
#include "sm80/fwd_kernel.cuh"
#include "sm80/fwd_params.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/launch.hpp"
#include "sm80/sm80_fwd.hpp"
#include "sm80/split_kv.hpp"
#include "sm80/tile_launch.hpp"
#include "sm80/warpgroup_pair.hpp"

namespace flashcore::detail {
namespace {

using sm80::FwdParams;
using sm80::KernelTraits;

// Sizes stay in int inside the kernel: row + seqlen_k + window + 1 must not overflow.
constexpr int64_t kMaxSeqlen = int64_t{1} << 29;
constexpr int64_t kMaxGridYZ = 65535;      // heads go to gridDim.y, batch to gridDim.z
constexpr int64_t kSmallTileMaxWaves = 2;  // see with_variant

// Stands in for the Hopper tiles of head dims that have none.
struct NoWarpgroupTile {};

// The tiles of one (dtype, head dim), with_variant picks: the large one, the small-grid one and,
// for hd64 only, the two sm_90a wgmma tiles (four warpgroups per CTA; one per CTA in cluster
// pairs).
template <typename Element, int kHeadDim>
struct Tiles {
  template <typename Config>
  using HopperOnly =
      std::conditional_t<kHeadDim == 64, KernelTraits<Element, kHeadDim, Config>, NoWarpgroupTile>;
  using Large = sm80::LargeTile<Element, kHeadDim>;
  using Small = sm80::SmallTile<Element, kHeadDim>;
  using Warpgroup = HopperOnly<sm80::WarpgroupTileConfig<kHeadDim>>;
  using WarpgroupPair = HopperOnly<sm80::WarpgroupPairTileConfig<kHeadDim>>;
};

// THE instantiation list: fn receives the tiles of one (dtype, head dim) (Tiles), every multiple
// of 32 up to 256; another multiple of 8 runs on the next one up (common/head_dim.hpp). Returns
// false when (dtype, head_dim) has no kernel, or was left out (common/pruning.hpp).
template <typename Element, int kHeadDim, typename Fn>
bool call_if_built(Fn& fn) {
  constexpr DType kDType = std::is_same_v<Element, __half> ? DType::kFloat16 : DType::kBFloat16;
  if constexpr (kernel_built(kDType, kHeadDim)) fn(Tiles<Element, kHeadDim>{});
  return kernel_built(kDType, kHeadDim);
}
template <typename Element, typename Fn>
bool with_head_dim(int64_t head_dim, Fn&& fn) {
  switch (instantiated_head_dim(head_dim)) {
    case 32:
      return call_if_built<Element, 32>(fn);
    case 64:
      return call_if_built<Element, 64>(fn);
    case 96:
      return call_if_built<Element, 96>(fn);
    case 128:
      return call_if_built<Element, 128>(fn);
    case 160:
      return call_if_built<Element, 160>(fn);
    case 192:
      return call_if_built<Element, 192>(fn);
    case 224:
      return call_if_built<Element, 224>(fn);
    case 256:
      return call_if_built<Element, 256>(fn);
    default:
      return false;
  }
}
template <typename Fn>
bool with_traits(DType dtype, int64_t head_dim, Fn&& fn) {
  return dtype == DType::kFloat16 ? with_head_dim<__half>(head_dim, fn)
                                  : with_head_dim<__nv_bfloat16>(head_dim, fn);
}

// The problem as the kernel indexes it (GQA packing for decode: common/query_view.hpp).
FwdParams kernel_view(const Problem& problem) {
  const AttentionParams& a = problem.params;
  FwdParams p{};
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.o = a.o.data;
  p.lse = a.lse;
  p.q_batch = a.q.strides.batch, p.q_seq = a.q.strides.seq, p.q_head = a.q.strides.head;
  p.k_batch = a.k.strides.batch, p.k_seq = a.k.strides.seq, p.k_head = a.k.strides.head;
  p.v_batch = a.v.strides.batch, p.v_seq = a.v.strides.seq, p.v_head = a.v.strides.head;
  p.o_batch = a.o.strides.batch, p.o_seq = a.o.strides.seq, p.o_head = a.o.strides.head;
  p.batch = static_cast<int>(a.batch);
  p.seqlen_k = static_cast<int>(a.seqlen_k);
  p.head_dim = static_cast<int>(a.head_dim);
  const ScoreScaling scaling = score_scaling(problem);
  p.scale = scaling.scale;
  p.scale_log2 = scaling.scale_log2;
  p.softcap = problem.softcap;
  p.prescale = scaling.prescale;
  p.exp_factor = scaling.exp_factor;

  const QueryView view = query_view(problem);
  p.heads = view.heads;
  p.kv_group = view.kv_group;
  p.seqlen_q = view.seqlen_q;
  p.q_seq = view.q_seq, p.q_head = view.q_head;
  p.o_seq = view.o_seq, p.o_head = view.o_head;
  p.mask = view.mask;
  p.kv_group_divisor = sm80::FastDivisor::of(p.kv_group);
  return p;
}

// Grid shape and split count for one instantiation on one device.
template <typename Traits>
FwdParams plan(const Problem& problem, const cudaDeviceProp& device) {
  FwdParams p = kernel_view(problem);
  p.num_m_blocks = (p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  const int64_t smem_per_cta =
      Traits::kSmemBytes + static_cast<int64_t>(device.reservedSharedMemPerBlock);
  // Registers are capped by __launch_bounds__ for kMinCtasPerSm CTAs; residency is the smaller of
  // that and what shared memory allows.
  const int64_t ctas_per_sm = std::max<int64_t>(
      1, std::min<int64_t>(static_cast<int64_t>(device.sharedMemPerMultiprocessor) / smem_per_cta,
                           Traits::kMinCtasPerSm));
  sm80::SplitInputs in{};
  in.ctas = static_cast<int64_t>(p.batch) * p.heads * p.num_m_blocks;
  in.kv_blocks = (p.seqlen_k + Traits::kBlockKV - 1) / Traits::kBlockKV;
  in.sm_count = device.multiProcessorCount;
  in.ctas_per_sm = ctas_per_sm;
  in.requested = problem.params.num_splits;
  // A cluster pair splits the keys in two itself and merges without a workspace.
  p.num_splits = Traits::kClusterCtas > 1 ? 1 : sm80::choose_num_splits(in);
  p.split_divisor = sm80::FastDivisor::of(p.num_splits);
  return p;
}

// Whether the warpgroup tile can run on this device: an sm_90 GPU, sm_90a machine code for it in
// this build (a build for sm_80 only runs its sm_80 code on Hopper, where that tile traps) and
// room for its shared memory. The code check asks the runtime which binary it would load, once
// (only ever on an sm_90 device, so the answer holds for every device that reaches it).
template <typename WarpgroupTraits>
bool warpgroup_tile_runs(const cudaDeviceProp& device) {
  if constexpr (std::is_same_v<WarpgroupTraits, NoWarpgroupTile>) {
    return false;
  } else {
    if (device.major != 9) return false;
    static const bool has_sm90a_code = [] {
      cudaFuncAttributes attributes{};
      cudaError_t err = cudaSuccess;
      if constexpr (WarpgroupTraits::kClusterCtas > 1) {
        err = sm80::warpgroup_pair_attributes<typename WarpgroupTraits::Element>(&attributes);
      } else {
        err = cudaFuncGetAttributes(&attributes, sm80::fwd_kernel<WarpgroupTraits>);
      }
      if (err != cudaSuccess) {
        (void)cudaGetLastError();  // not sticky; keep it out of the launch's error check
        return false;
      }
      return attributes.binaryVersion == 90;
    }();
    return has_sm90a_code &&
           static_cast<size_t>(WarpgroupTraits::kSmemBytes) <= device.sharedMemPerBlockOptin;
  }
}

// TileShape::kAuto takes the large tile unless its grid leaves SMs idle. Then it takes the small
// tile (four times the large grid, keys split across warps) if that grid is one wave at most. If
// it is more, it takes a Hopper tile where those run (hd64): the four-warpgroup one while its grid
// (twice the large grid) is one wave at most, else the cluster-pair one (four times the large
// grid, up to four small CTAs per SM); elsewhere the small tile up to two waves. Measured on the
// H100 (docs/perf.md v8, v11): within one wave the small tile's 32-row CTAs win (B1 H8 S512: 6.4
// vs 7.9 us for the warpgroup tile's 64 CTAs, which leave half the SMs idle); past it the
// warpgroup tile wins (B1 H12 S512: 8.2 vs 11.2 us, B1 H8 S1024: 11.8 vs 16.5); past one wave of
// its own the pair does (B1 H32 S512: 10.8 vs 13.0 us, B1 H8 S2048: 27.0 vs 33.0). Beyond two waves
// every 32-row CTA re-reading its head's K/V costs more than the idle SMs (docs/perf-sm80-notes.md,
// v5). The small tile must also fit the device's shared memory. A forced tile that cannot run was
// rejected by sm80_rejects. fn gets the chosen traits.
template <typename TilesT, typename Fn>
void with_variant(const Problem& problem, const cudaDeviceProp& device, Fn&& fn) {
  using Large = typename TilesT::Large;
  using Small = typename TilesT::Small;
  using Warpgroup = typename TilesT::Warpgroup;
  using WarpgroupPair = typename TilesT::WarpgroupPair;
  constexpr bool kHasHopperTiles = !std::is_same_v<Warpgroup, NoWarpgroupTile>;
  const TileShape tile = problem.params.tile;
  if (tile == TileShape::kWarpgroup || tile == TileShape::kWarpgroupPair) {
    if constexpr (kHasHopperTiles) {
      if (tile == TileShape::kWarpgroup) {
        fn(Warpgroup{});
      } else {
        fn(WarpgroupPair{});
      }
    }
    return;
  }
  bool small = tile == TileShape::kSmall;
  if (tile == TileShape::kAuto) {
    const FwdParams p = kernel_view(problem);
    const int64_t heads = static_cast<int64_t>(p.batch) * p.heads;
    auto ctas = [&](int64_t block_m) { return heads * ((p.seqlen_q + block_m - 1) / block_m); };
    const int64_t large_ctas = ctas(Large::kBlockM);
    const int64_t small_ctas = ctas(Small::kBlockM);
    const int64_t sms = device.multiProcessorCount;
    const bool small_fits = static_cast<size_t>(Small::kSmemBytes) <= device.sharedMemPerBlockOptin;
    if constexpr (kHasHopperTiles) {
      if (large_ctas < sms && !(small_fits && small_ctas <= sms)) {
        // The pair splits the keys itself, so a caller's split count keeps the warpgroup tile.
        const bool pair = ctas(Warpgroup::kBlockM) > sms && problem.params.num_splits <= 1;
        if (pair && warpgroup_tile_runs<WarpgroupPair>(device)) {
          fn(WarpgroupPair{});
          return;
        }
        if (!pair && warpgroup_tile_runs<Warpgroup>(device)) {
          fn(Warpgroup{});
          return;
        }
      }
    }
    small = large_ctas < sms && small_ctas <= kSmallTileMaxWaves * sms && small_fits;
  }
  if (small) {
    fn(Small{});
  } else {
    fn(Large{});
  }
}

// Whether launches on this device may take programmatic dependent launch (AttentionParams::
// enable_pdl): an sm_90+ GPU running code compiled from compute_90 or newer, where the kernels'
// griddepcontrol.wait exists (a build for sm_80 only runs its sm_80 code on Hopper, without it).
// Every kernel of the library is built for the same architectures, so the combine kernel answers
// for all; asked once (only ever on an sm_90+ device).
bool dependent_launch_runs(const cudaDeviceProp& device) {
  if (device.major < 9) return false;
  static const bool built_for_sm90 = [] {
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, sm80::combine_kernel<__half>) != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky; keep it out of the launch's error check
      return false;
    }
    return attributes.ptxVersion >= 90;
  }();
  return built_for_sm90;
}

int64_t kernel_rows(const FwdParams& p) {
  return static_cast<int64_t>(p.batch) * p.heads * p.seqlen_q;
}

template <typename Traits>
Status launch_with(const Problem& problem, const cudaDeviceProp& device, void* workspace,
                   cudaStream_t stream) {
  using Element = typename Traits::Element;
  FwdParams p = plan<Traits>(problem, device);
  if (p.num_splits > 1) {
    p.o_partial = static_cast<float*>(workspace);
    p.lse_partial = p.o_partial + p.num_splits * kernel_rows(p) * p.head_dim;
  }

  // Programmatic dependent launch for the small-grid tiles, which are launch-bound (the launch and
  // setup are a large part of their time) and wait for the previous kernel before their first
  // global access. Not for the large tiles (no wait: their SASS stays as measured, and a launch is
  // a small part of their time), and not for split launches: with the combine kernel also launched
  // that way, B1 H8 S512 with 3 splits took 11.5 us against 10.4 plain (docs/perf.md v12).
  const bool pdl = problem.params.enable_pdl && Traits::kSmallGrid && p.num_splits == 1 &&
                   dependent_launch_runs(device);
  // The pair's kernels are compiled in their own file (warpgroup_pair.hpp), the mma.sync tiles'
  // in one per head dim (tile_launch.hpp).
  const cudaError_t launched = [&] {
    if constexpr (Traits::kClusterCtas > 1) {
      return sm80::launch_warpgroup_pair<Element>(p, pdl, stream);
    } else if constexpr (Traits::kWarpgroupMma) {
      return sm80::launch_fwd_kernel<Traits>(p, pdl, stream);
    } else {
      return sm80::launch_tile<Traits>(p, pdl, stream);
    }
  }();
  if (Status s = launch_status(launched, "sm80 fwd_kernel"); !s.ok()) return s;

  if (p.num_splits > 1) {
    return launch_status(sm80::launch_combine<Element>(p, p.head_dim, stream),
                         "sm80 combine_kernel");
  }
  return Status::Ok();
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
  int smem_bytes = 0;  // of the large tile, or the small one when forced (auto uses it if it fits)
  bool hopper_tile_runs = false;
  const bool hopper_tile = a.tile == TileShape::kWarpgroup || a.tile == TileShape::kWarpgroupPair;
  if (!with_traits(a.q.dtype, a.head_dim, [&](auto tiles) {
        using TilesT = decltype(tiles);
        smem_bytes =
            a.tile == TileShape::kSmall ? TilesT::Small::kSmemBytes : TilesT::Large::kSmemBytes;
        // Asked only when forced: this runs on every call's validation.
        if (hopper_tile) {
          hopper_tile_runs = a.tile == TileShape::kWarpgroup
                                 ? warpgroup_tile_runs<typename TilesT::Warpgroup>(device)
                                 : warpgroup_tile_runs<typename TilesT::WarpgroupPair>(device);
        }
      })) {
    const int instantiated = instantiated_head_dim(a.head_dim);
    return instantiated != 0 ? pruned_reason(a.q.dtype, instantiated)
                             : "has no kernel for this head_dim; use a multiple of 8 up to 256";
  }
  if (a.tile == TileShape::kWarpgroupPair && a.num_splits > 1) {
    return "tile kWarpgroupPair splits the keys across its CTA pair itself; use num_splits 0 or 1";
  }
  if (hopper_tile && !hopper_tile_runs) {
    return a.tile == TileShape::kWarpgroup
               ? "tile kWarpgroup needs head_dim 64, an sm_90 GPU and a build with sm_90a code"
               : "tile kWarpgroupPair needs head_dim 64, an sm_90 GPU and a build with sm_90a code";
  }
  if (static_cast<size_t>(smem_bytes) > device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block than this GPU allows for this head_dim";
  }
  return "";
}

size_t sm80_workspace_bytes(const Problem& problem) {
  cudaDeviceProp device{};
  if (!current_device_properties(&device).ok()) return 0;
  size_t bytes = 0;
  with_traits(problem.params.q.dtype, problem.params.head_dim, [&](auto tiles) {
    with_variant<decltype(tiles)>(problem, device, [&](auto chosen) {
      using Traits = decltype(chosen);
      const FwdParams p = plan<Traits>(problem, device);
      bytes = sm80::split_workspace_bytes(p.num_splits, kernel_rows(p), p.head_dim);
    });
  });
  return bytes;
}

Status launch_sm80(const Problem& problem, void* workspace, cudaStream_t stream) {
  cudaDeviceProp device{};
  if (Status s = current_device_properties(&device); !s.ok()) return s;
  Status status = {StatusCode::kUnsupported, "sm80: head_dim has no kernel"};
  with_traits(problem.params.q.dtype, problem.params.head_dim, [&](auto tiles) {
    with_variant<decltype(tiles)>(problem, device, [&](auto chosen) {
      status = launch_with<decltype(chosen)>(problem, device, workspace, stream);
    });
  });
  return status;
}

}  // namespace flashcore::detail
