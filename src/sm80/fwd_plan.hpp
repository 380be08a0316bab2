// Host side of the FA2-class schedule (fwd_kernel.cuh), shared by every backend that launches it:
// the kernel's view of the problem, the grid and split-KV plan of one tile, the rule that takes
// the small tile over the large one, and the launch of a planned kernel plus, when split, the
// combine kernel. The sm80 backend (sm80_fwd.cu) and the sm90 backend's small-grid tiles
// (src/sm90/small_grid/) both go through here, so the two plan and launch alike.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "common/launch_status.hpp"
#include "common/problem.hpp"
#include "common/query_view.hpp"
#include "common/score_scaling.hpp"
#include "sm80/combine.cuh"
#include "sm80/fwd_params.hpp"
#include "sm80/split_kv.hpp"

namespace flashcore::sm80 {

// Grids of the small tile up to this many waves beat the large tile's idle SMs (small_tile_wins).
inline constexpr int64_t kSmallTileMaxWaves = 2;

// The problem as the kernel indexes it (GQA packing for decode: common/query_view.hpp).
inline FwdParams kernel_view(const detail::Problem& problem) {
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
  p.head_dim = static_cast<int>(a.head_dim);
  p.seqlen_k = static_cast<int>(a.seqlen_k);
  const detail::ScoreScaling scaling = detail::score_scaling(problem);
  p.scale = scaling.scale;
  p.scale_log2 = scaling.scale_log2;
  p.softcap = problem.softcap;
  p.prescale = scaling.prescale;
  p.exp_factor = scaling.exp_factor;

  const detail::QueryView view = detail::query_view(problem);
  p.heads = view.heads;
  p.kv_group = view.kv_group;
  p.seqlen_q = view.seqlen_q;
  p.q_seq = view.q_seq, p.q_head = view.q_head;
  p.o_seq = view.o_seq, p.o_head = view.o_head;
  p.mask = view.mask;
  p.kv_group_divisor = FastDivisor::of(p.kv_group);
  return p;
}

// CTAs of a grid of block_m-row query tiles for this problem, before any split.
inline int64_t query_tile_ctas(const FwdParams& view, int64_t block_m) {
  return static_cast<int64_t>(view.batch) * view.heads * ((view.seqlen_q + block_m - 1) / block_m);
}

// TileShape::kAuto's rule between the large and the small tile: the small one (four times the
// large grid, keys split across warps) when the large grid leaves SMs idle and the small grid is
// at most kSmallTileMaxWaves waves. Beyond two waves every 32-row CTA re-reading its head's K/V
// costs more than the idle SMs (docs/perf-sm80-notes.md, v5). small_fits: the small tile's shared
// memory fits the device (not on sm_86/sm_89's 99 KiB at hd64 and hd128).
inline bool small_tile_wins(int64_t large_ctas, int64_t small_ctas, bool small_fits,
                            int64_t sm_count) {
  return large_ctas < sm_count && small_ctas <= kSmallTileMaxWaves * sm_count && small_fits;
}

inline int64_t kernel_rows(const FwdParams& p) {
  return static_cast<int64_t>(p.batch) * p.heads * p.seqlen_q;
}

// Points p at the split-KV partials in workspace (split_workspace_bytes of them): fp32 O
// [splits, B, Hq, Sq, head_dim], then LSE [splits, B, Hq, Sq]; splits 1 leaves p unsplit.
inline void use_split_partials(FwdParams& p, int splits, void* workspace) {
  if (splits <= 1) return;
  p.num_splits = splits;
  p.o_partial = static_cast<float*>(workspace);
  p.lse_partial = p.o_partial + splits * kernel_rows(p) * p.head_dim;
}

// Grid shape and split count for one instantiation on one device.
template <typename Traits>
FwdParams plan(const detail::Problem& problem, const cudaDeviceProp& device) {
  FwdParams p = kernel_view(problem);
  p.num_m_blocks = (p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  const int64_t smem_per_cta =
      Traits::kSmemBytes + static_cast<int64_t>(device.reservedSharedMemPerBlock);
  // Registers are capped by __launch_bounds__ for kMinCtasPerSm CTAs; residency is the smaller of
  // that and what shared memory allows.
  const int64_t ctas_per_sm = std::max<int64_t>(
      1, std::min<int64_t>(static_cast<int64_t>(device.sharedMemPerMultiprocessor) / smem_per_cta,
                           Traits::kMinCtasPerSm));
  SplitInputs in{};
  in.ctas = static_cast<int64_t>(p.batch) * p.heads * p.num_m_blocks;
  in.kv_blocks = (p.seqlen_k + Traits::kBlockKV - 1) / Traits::kBlockKV;
  in.sm_count = device.multiProcessorCount;
  in.ctas_per_sm = ctas_per_sm;
  in.requested = problem.params.num_splits;
  // The CTAs of a cluster split the keys themselves and merge without a workspace.
  p.num_splits = Traits::kClusterCtas > 1 ? 1 : choose_num_splits(in);
  p.split_divisor = FastDivisor::of(p.num_splits);
  return p;
}

template <typename Traits>
size_t workspace_bytes(const detail::Problem& problem, const cudaDeviceProp& device) {
  const FwdParams p = plan<Traits>(problem, device);
  return split_workspace_bytes(p.num_splits, kernel_rows(p), p.head_dim);
}

// Plans Traits' grid, then launch_fwd(p, dependent, stream) -> cudaError_t launches the kernel
// (launch_fwd_kernel<Traits>, or a function of another translation unit that does) and, when the
// keys are split, the combine kernel follows. The names say which backend's kernels failed.
// dependent asks for programmatic dependent launch (common/launch.hpp), which launch_fwd_kernel
// grants only to tiles whose GridDependency waits for the previous grid. Never for split launches:
// with the combine kernel also launched that way, B1 H8 S512 with 3 splits took 11.5 us
// against 10.4 plain (docs/perf.md v12).
template <typename Traits, typename LaunchFwd>
Status launch_planned(const detail::Problem& problem, const cudaDeviceProp& device, void* workspace,
                      cudaStream_t stream, LaunchFwd&& launch_fwd, const char* fwd_name,
                      const char* combine_name) {
  using Element = typename Traits::Element;
  FwdParams p = plan<Traits>(problem, device);
  use_split_partials(p, p.num_splits, workspace);
  const bool dependent = problem.params.enable_pdl && p.num_splits == 1;
  if (Status s = detail::launch_status(launch_fwd(p, dependent, stream), fwd_name); !s.ok()) {
    return s;
  }
  if (p.num_splits > 1) {
    return detail::launch_status(launch_combine<Element>(p, p.head_dim, stream), combine_name);
  }
  return Status::Ok();
}

}  // namespace flashcore::sm80
