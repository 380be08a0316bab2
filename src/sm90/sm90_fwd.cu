// Host side of the sm90 backend: which of its kernels runs a problem (the persistent kernel, or for
// grids too small for it the small-grid tiles of small_grid/), and for the persistent kernel the
// kernel's view of the problem (GQA packing for decode), the grid and split plan, the rejection
// reasons, and the launch of one instantiation plus, when split, the combine kernel. Varlen
// batches run on the persistent kernel; flex problems on the flex kernel (flex_fwd.cu).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/device_properties.hpp"
#include "common/launch_status.hpp"
#include "common/query_view.hpp"
#include "common/score_scaling.hpp"
#include "common/workspace_align.hpp"
#include "flashcore/varlen.hpp"
#include "sm80/combine.cuh"
#include "sm80/sink_rescale.hpp"
#include "sm80/split_kv.hpp"
#include "sm90/flex_fwd.hpp"
#include "sm90/head_group.hpp"
#include "sm90/instantiations.hpp"
#include "sm90/kernel_view.hpp"
#include "sm90/launch_args.hpp"
#include "sm90/sm90_fwd.hpp"
#include "sm90/small_grid/small_grid_fwd.hpp"
#include "sm90/tma_strides.hpp"
#include "sm90/tuned_tiles.hpp"
#include "sm90/varlen_tiles.hpp"

namespace flashcore::sm90 {

// Each input as its TMA descriptor will describe it.
static GmemInput gmem_input(const InputTensor& t, int64_t seqlen, int64_t heads) {
  return {t.data,        static_cast<int>(seqlen), static_cast<int>(heads),
          t.strides.seq, t.strides.head,           t.strides.batch};
}

LaunchArgs kernel_view(const detail::Problem& problem) {
  const AttentionParams& a = problem.params;
  LaunchArgs in{};
  FwdArgs& p = in.args;
  p.batch = static_cast<int>(a.batch);
  p.seqlen_k = static_cast<int>(a.seqlen_k);
  p.head_dim = static_cast<int>(a.head_dim);
  const detail::ScoreScaling scaling = detail::score_scaling(problem);
  p.scale_log2 = scaling.scale_log2;
  p.prescale = scaling.prescale;
  p.exp_factor = scaling.exp_factor;
  p.softcap_in = scaling.softcap_in;
  p.softcap_out = scaling.softcap_out;
  p.o = a.o.data;
  p.o_batch = a.o.strides.batch;
  p.lse = a.lse;
  in.k = gmem_input(a.k, a.seqlen_k, a.heads_kv);
  in.v = gmem_input(a.v, a.seqlen_k, a.heads_kv);
  in.bf16 = a.q.dtype == DType::kBFloat16;

  const detail::QueryView view = detail::query_view(problem);
  p.heads = view.heads;
  p.kv_group = view.kv_group;
  p.seqlen_q = view.seqlen_q;
  p.o_seq = view.o_seq;
  p.o_head = view.o_head;
  p.mask = view.mask;
  in.q = {a.q.data, view.seqlen_q, view.heads, view.q_seq, view.q_head, a.q.strides.batch};
  return in;
}

void use_packed_batch_strides(const AttentionParams& a, LaunchArgs* in) {
  in->q.batch_stride = a.seqlen_q * a.q.strides.seq;
  in->k.batch_stride = a.seqlen_k * a.k.strides.seq;
  in->v.batch_stride = a.seqlen_k * a.v.strides.seq;
}

}  // namespace flashcore::sm90

namespace flashcore::detail {
namespace {

using sm90::FwdArgs;
using sm90::GmemInput;
using sm90::kernel_view;
using sm90::LaunchArgs;

// Sizes stay in int inside the kernel: row + seqlen_k + window + 1 must not overflow.
constexpr int64_t kMaxSeqlen = int64_t{1} << 29;
// The persistent kernel leaves problems of at most half as many 128-row query blocks as SMs to the
// small-grid tiles and split-KV: measured on the H100 (132 SMs, docs/perf.md sm90 v4), B1 H8 D64
// fp16 at S1024 (64 blocks) took 10.2 us on the small-grid tiles against 15.7 on the persistent
// kernel, and at S2048 (128 blocks) 26.4 us against 23.5. Counted in 128-row blocks whatever the
// tile, so that the rule stays the measured amount of work.
constexpr int64_t kSmsPerBlockForSm80 = 2;
constexpr int64_t kAutoBlockRows = 128;
// The dynamic schedule's tile counter, at the start of the workspace (split-KV partials, which
// never share a launch with it, start there otherwise).
constexpr size_t kTileCounterBytes = 256;

int64_t kernel_rows(const FwdArgs& p) {
  return static_cast<int64_t>(p.batch) * p.heads * p.seqlen_q;
}

#if defined(FLASHCORE_SM90_SCHEDULE_VARIANTS)
// Lab builds only (CMake FLASHCORE_SM90_SCHEDULE_VARIANTS): FLASHCORE_SM90_SCHEDULE names the parts
// of the schedule to keep, from "pingpong", "overlap", "persistent", "dynamic" and "cluster" (comma
// separated; unset keeps all), so that docs/perf.md can measure what each gives. Without
// "persistent" every tile gets its own CTA (cluster); without "dynamic" masked problems follow the
// fixed sequence too; without "cluster" unmasked problems run one-CTA tiles. Pingpong and overlap
// variants exist for hd128 without softcap.
// Applied before the grid is sized; returns whether the grid stays persistent.
bool apply_schedule_knob(LaunchArgs* in) {
  const char* knob = std::getenv("FLASHCORE_SM90_SCHEDULE");
  if (knob == nullptr) return true;
  const std::string parts = std::string(",") + knob + ",";
  in->pingpong = parts.find(",pingpong,") != std::string::npos;
  in->intra_overlap = parts.find(",overlap,") != std::string::npos;
  if (parts.find(",dynamic,") == std::string::npos) in->dynamic = false;
  // The cluster kernel exists with the whole schedule only (sm90/launch.cuh).
  if (parts.find(",cluster,") == std::string::npos || !in->pingpong || !in->intra_overlap) {
    in->cluster_ctas = 1;
  }
  const bool persistent = parts.find(",persistent,") != std::string::npos;
  if (!persistent) in->dynamic = false;
  return persistent;
}
#endif

// A varlen batch as the persistent kernel reads it (sequence_view.hpp): batch sequences of packed
// rows, seqlen_q and seqlen_k the totals (LSE [Hq, total_q] keeps total_q as its row stride).
void bind_varlen(const AttentionParams& a, LaunchArgs* in) {
  in->args.cu_seqlens_q = a.cu_seqlens_q;
  in->args.cu_seqlens_k = a.cu_seqlens_k;
  sm90::use_packed_batch_strides(a, in);
}

// Grid, schedule and split count on this device.
LaunchArgs plan(const Problem& problem, const cudaDeviceProp& device) {
  LaunchArgs in = kernel_view(problem);
  FwdArgs& p = in.args;
  const AttentionParams& params = problem.params;
  const bool varlen = is_varlen(params);
  if (varlen) bind_varlen(params, &in);
  const int head_dim = sm90::instantiated_head_dim(params.head_dim);
  // The instantiation's tiles: the tile table's, or a reviewed row's (tuned_tiles.hpp).
  const int block_n = sm90::kernel_block_n(in.bf16, head_dim);
  const int block_m = sm90::kernel_block_m(in.bf16, head_dim);
  const int cluster_ctas = sm90::kernel_cluster_ctas(in.bf16, head_dim);
  // A varlen grid is planned for the longest sequence; the tiles past a shorter one are left out
  // of the schedule by a list (below) where there are any.
  const int64_t rows = varlen ? params.max_seqlen_q : p.seqlen_q;
  const int64_t keys = varlen ? params.max_seqlen_k : p.seqlen_k;
  p.num_m_blocks = static_cast<int>((rows + block_m - 1) / block_m);
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.heads;
  sm80::SplitInputs split{};
  split.ctas = pairs * p.num_m_blocks;
  split.kv_blocks = (keys + block_n - 1) / block_n;
  split.sm_count = device.multiProcessorCount;
  split.ctas_per_sm = 1;
  split.requested = varlen ? 1 : params.num_splits;  // sm90_rejects refuses varlen splits
  p.num_splits = sm80::choose_num_splits(split);
  // Persistent: one CTA per SM. With a causal or windowed mask the tiles differ in work, and each
  // CTA takes its next tile from a counter when it is ready for one (tile_scheduler.hpp). Measured
  // against the alternatives in docs/perf.md (sm90 v5): a fixed sequence left the CTAs that drew
  // long tiles behind (causal S4k hd128 0.89x cuDNN), and one CTA per tile, the hardware's own
  // dynamic launch, pays a CTA's setup per tile (causal S1k 0.80x against 0.93x persistent).
  // Unmasked, unsplit problems without softcap run in clusters that share K/V tiles
  // (tile_table.hpp, kKVClusterCtas); a tile index then names one query block per CTA of a cluster.
  // Only where each head's query blocks pair up exactly: with an odd count the last pair's second
  // CTA computes a block past the end, 1/(n+1) of the work wasted. Measured on the H100
  // (docs/perf.md, sm90 v6): hd128 S1k-8k +3-14%, hd256 S512-2k +3-8%, but hd64 S512 (three 192-row
  // blocks) -19% and S2k (eleven) -3%. Varlen tiles differ in work by their sequences' lengths:
  // the dynamic schedule, no clusters (a pair's blocks may lie in different sequences).
  const bool masked = p.mask.left >= 0 || p.mask.right >= 0;
  const bool softcap = p.softcap_out > 0.f;
  const bool blocks_pair_up = p.num_m_blocks % cluster_ctas == 0;
  // Sinks (only where sm90_dense_kernel_runs_sinks sends them here) run on the sinks variant,
  // which has no cluster kernel.
  const bool sinks = params.flex.sinks.enabled();
  if (sinks) p.sink_logits = params.flex.sinks.logits;
  in.dynamic = (masked || varlen) && p.num_splits == 1;
  in.cluster_ctas = !masked && !softcap && !varlen && !sinks && p.num_splits == 1 && blocks_pair_up
                        ? cluster_ctas
                        : 1;
  bool persistent = true;
#if defined(FLASHCORE_SM90_SCHEDULE_VARIANTS)
  persistent = apply_schedule_knob(&in);
#endif
  const int64_t m_groups = (p.num_m_blocks + in.cluster_ctas - 1) / in.cluster_ctas;
  const int64_t tiles = pairs * m_groups * p.num_splits;
  // Sequences shorter than the longest leave tiles with no rows in the grid: the listed kernel
  // takes the others from a list (varlen_tiles.hpp), unless every sequence is the longest (none is
  // empty), and where it exists (head dim, no softcap).
  if (varlen && in.dynamic && in.cluster_ctas == 1 && !softcap &&
      sm90::has_listed_varlen_kernel(head_dim) &&
      params.batch * params.max_seqlen_q != params.seqlen_q) {
    // At most batch * num_m_blocks entries, so the list's tiles fit the grid's int count.
    in.varlen_tile_capacity = static_cast<int>(
        sm90::varlen_tile_capacity(params.batch, params.seqlen_q, p.num_m_blocks, block_m));
  }
  p.o_by_tma = sm90::stores_o_by_tma(p, varlen);
  p.num_tiles = static_cast<int>(tiles);
  const int64_t clusters =
      persistent ? std::min<int64_t>(tiles, device.multiProcessorCount / in.cluster_ctas) : tiles;
  in.num_ctas = static_cast<int>(clusters * in.cluster_ctas);
  // A grid of one wave, a CTA per tile, runs each CTA's first tile and no other: the counter would
  // only tell every CTA that none is left. The fixed sequence runs it the same way (tile =
  // blockIdx.x, then an index past the tiles), with no counter to zero before the launch and no
  // workspace: a memset on the stream and 3-5 us of a call's host time (docs/perf.md, session 43).
  if (in.dynamic && in.varlen_tile_capacity == 0 && in.num_ctas >= tiles) in.dynamic = false;
  p.head_group = sm90::heads_per_group({pairs, m_groups * p.num_splits, clusters,
                                        sm90::kv_bytes_per_query_head(keys, head_dim, p.kv_group),
                                        int64_t{device.l2CacheSize}, !masked && !varlen});
  return in;
}

#if FLASHCORE_HAS_SM90
// Why the persistent kernel (TileShape::kLarge) cannot run the problem on this sm_90 device, or "".
const char* persistent_rejects(const Problem& problem, const cudaDeviceProp& device) {
  const AttentionParams& a = problem.params;
  const int head_dim = sm90::instantiated_head_dim(a.head_dim);
  if (head_dim == 0) return "has no kernel for this head_dim; use a multiple of 8 up to 256";
  if (const char* why = sm90::qkv_tma_rejects(a, /*packed=*/is_varlen(a))) return why;
  if (const char* why = pruned_reason(a.q.dtype, head_dim); why[0] != '\0') return why;
  bool has_kernel = false;
  int smem_bytes = 0;
  sm90::with_head_dim(head_dim, [&](auto d) {
    has_kernel = true;
    smem_bytes = sm90::smem_bytes_head_dim<decltype(d)::value>(a.q.dtype == DType::kBFloat16);
  });
  if (!has_kernel) return "has no kernel for this head_dim in this build";
  if (static_cast<size_t>(smem_bytes) > device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block than this GPU allows for this head_dim";
  }
  return "";
}
#endif

// Non-empty when the persistent kernel leaves the problem to smaller tiles, measured faster there.
const char* persistent_declines(const Problem& problem, const cudaDeviceProp& device) {
  if (is_varlen(problem.params)) return "";  // only the persistent kernel runs varlen batches
  const FwdArgs view = kernel_view(problem).args;
  const int64_t pairs = int64_t{view.batch} * view.heads;
  const int64_t blocks = pairs * ((view.seqlen_q + kAutoBlockRows - 1) / kAutoBlockRows);
  if (kSmsPerBlockForSm80 * blocks <= device.multiProcessorCount) {
    return "grids of at most one 128-row query block per two SMs";
  }
  // 192-row tiles (D <= 64) that do not fill one wave: B1 H8 D64 fp16 S2048 is 88 tiles on 132
  // SMs and took 28.3 us against 26.5 on the small-grid tiles (docs/perf.md, sm90 v5).
  const int block_m = sm90::kernel_block_m(problem.params.q.dtype == DType::kBFloat16,
                                           sm90::instantiated_head_dim(problem.params.head_dim));
  const int64_t tiles = pairs * ((view.seqlen_q + block_m - 1) / block_m);
  if (block_m > kAutoBlockRows && tiles < device.multiProcessorCount) {
    return "grids of fewer 192-row tiles than SMs";
  }
  return "";
}

// Which of the backend's kernels runs the problem: the tile asked for, or for kAuto the persistent
// kernel (kLarge) unless it leaves the problem to the small-grid tiles and one of them wins there
// (small_grid/heuristics.hpp). When none does, kLarge too: auto then passes the problem to the
// sm80 backend (sm90_auto_declines), and the backend named runs its persistent kernel.
TileShape resolved_tile(const Problem& problem, const cudaDeviceProp& device) {
  const TileShape tile = problem.params.tile;
  if (tile != TileShape::kAuto) return tile;
#if FLASHCORE_HAS_SM90
  if (persistent_declines(problem, device)[0] != '\0') {
    return sm90::small_grid::auto_tile(problem, device);
  }
#else
  (void)device;
#endif
  return TileShape::kLarge;
}

// Sinks and no other flex part: the dense kernels run them, on the persistent kernel's sinks
// variant where sm90_dense_kernel_runs_sinks says so, else without sinks and rescaled after
// (sm80/sink_rescale.hpp): decode grids (split, or heads packed into rows), the small-grid tiles,
// the head dims without the variant, softcap.
bool sinks_alone(const Problem& problem) {
  return problem.params.flex.sinks.enabled() && !problem.params.flex.has_mods();
}

// What the dense kernels run before the rescale: the problem without its sinks, LSE written to
// lse.
Problem without_sinks(const Problem& problem, float* lse) {
  Problem plain = problem;
  plain.params.flex.sinks = {};
  plain.params.lse = lse;
  return plain;
}

// The LSE the dense kernels write and the rescale reads, fp32 [B, Hq, Sq] ([Hq, total_q]): in the
// workspace, apart from the caller's LSE, which the rescale writes (in place, a row's threads
// would read what another had already rescaled).
size_t lse_scratch_bytes(const AttentionParams& a) {
  const int64_t batch = is_varlen(a) ? 1 : a.batch;
  return static_cast<size_t>(batch * a.heads_q * a.seqlen_q) * sizeof(float);
}

size_t dense_workspace_bytes(const Problem& problem, const cudaDeviceProp& device) {
#if FLASHCORE_HAS_SM90
  if (const TileShape tile = resolved_tile(problem, device); tile != TileShape::kLarge) {
    return sm90::small_grid::workspace_bytes(problem, device, tile);
  }
#endif
  const LaunchArgs in = plan(problem, device);
  if (in.varlen_tile_capacity > 0) {
    return kTileCounterBytes + sm90::varlen_tile_list_bytes(in.varlen_tile_capacity, in.args.heads);
  }
  if (in.dynamic) return kTileCounterBytes;
  return sm80::split_workspace_bytes(in.args.num_splits, kernel_rows(in.args), in.args.head_dim);
}

}  // namespace

bool sm90_dense_kernel_runs_sinks(const Problem& problem, const cudaDeviceProp& device) {
#if !FLASHCORE_HAS_SM90
  (void)problem;
  (void)device;
  return false;
#else
  const AttentionParams& a = problem.params;
  if (!sinks_alone(problem)) return false;
  if (a.softcap > 0.f || a.num_splits > 1) return false;
  if (a.tile != TileShape::kAuto && a.tile != TileShape::kLarge) return false;
  if (!sm90::has_sinks_kernel(sm90::instantiated_head_dim(a.head_dim))) return false;
  if (persistent_rejects(problem, device)[0] != '\0') return false;
  if (persistent_declines(problem, device)[0] != '\0') return false;  // never for varlen
  // Unpacked heads (a packed decode tile's rows are different heads) and one split (a sink joins
  // each row once, after any merge).
  const LaunchArgs in = plan(problem, device);
  return in.args.heads == a.heads_q && in.args.num_splits == 1;
#endif
}

bool sm90_needs_flex_kernel(const Problem& problem) {
  return problem.params.flex.active() && !sinks_alone(problem);
}

const char* sm90_rejects(const Problem& problem, const cudaDeviceProp& device) {
#if !FLASHCORE_HAS_SM90
  (void)problem;
  (void)device;
  return "is not in this build; build with 90a in FLASHCORE_CUDA_ARCHITECTURES";
#else
  const AttentionParams& a = problem.params;
  if (device.major != 9 || device.minor != 0) {
    return "needs an sm_90 GPU (H100, H200): its code is built for sm_90a (wgmma, TMA)";
  }
  if (a.seqlen_q > kMaxSeqlen || a.seqlen_k > kMaxSeqlen) {
    return "supports seqlen_q and seqlen_k up to 2^29";
  }
  if (sm90_needs_flex_kernel(problem)) return sm90_flex_rejects(problem, device);
  // Sinks alone: what the dense kernels need (the sinks variant runs a subset of their problems).
  const Problem plain = sinks_alone(problem) ? without_sinks(problem, a.lse) : problem;
  if (is_varlen(a)) {
    if (a.num_splits > 1) return "runs varlen batches unsplit; pass num_splits 0 or 1";
    if (a.tile != TileShape::kAuto && a.tile != TileShape::kLarge) {
      return "runs varlen batches on its persistent kernel; pass tile auto or large";
    }
  }
  // kAuto may run the persistent kernel, so it needs what that kernel needs; it picks a small-grid
  // tile only where that tile runs too.
  if (a.tile == TileShape::kAuto || a.tile == TileShape::kLarge) {
    return persistent_rejects(plain, device);
  }
  return sm90::small_grid::rejects(plain, device, a.tile);
#endif
}

const char* sm90_auto_declines(const Problem& problem, const cudaDeviceProp& device) {
  // A forced tile runs on the first backend that has it.
  if (problem.params.tile != TileShape::kAuto) return "";
  if (sm90_needs_flex_kernel(problem)) return sm90_flex_auto_declines(problem, device);
  const Problem plain = sinks_alone(problem) ? without_sinks(problem, problem.params.lse) : problem;
  if (persistent_declines(plain, device)[0] == '\0') return "";
  if (resolved_tile(plain, device) != TileShape::kLarge) return "";
  return "leaves grids too small for its persistent kernel, where none of its small-grid tiles "
         "wins (or has this head_dim), to the sm80 backend";
}

size_t sm90_workspace_bytes(const Problem& problem) {
  if (sm90_needs_flex_kernel(problem)) {
    return sm90_flex_workspace_bytes(problem, sm90_flex_kernel_head_dim(problem.params.head_dim));
  }
  cudaDeviceProp device{};
  if (!current_device_properties(&device).ok()) return 0;
  if (sinks_alone(problem) && !sm90_dense_kernel_runs_sinks(problem, device)) {
    const size_t dense = dense_workspace_bytes(without_sinks(problem, nullptr), device);
    return align_up(dense) + lse_scratch_bytes(problem.params);
  }
  return dense_workspace_bytes(problem, device);
}

#if FLASHCORE_HAS_SM90
namespace {

Status launch_dense(const Problem& problem, const cudaDeviceProp& device, void* workspace,
                    cudaStream_t stream) {
  if (const TileShape tile = resolved_tile(problem, device); tile != TileShape::kLarge) {
    return sm90::small_grid::launch(problem, device, tile, workspace, stream);
  }
  LaunchArgs in = plan(problem, device);
  FwdArgs& p = in.args;
  if (p.num_splits > 1) {
    p.o_partial = static_cast<float*>(workspace);
    p.lse_partial = p.o_partial + p.num_splits * kernel_rows(p) * p.head_dim;
  }
  if (in.dynamic) {
    // The first wave takes tiles 0..num_ctas-1 by CTA index; the counter hands out the rest.
    p.tile_counter = static_cast<int*>(workspace);
    if (in.varlen_tile_capacity > 0) {
      // The list's build zeroes the counter too.
      const sm90::VarlenTileList list =
          sm90::varlen_tile_list(p.tile_counter, static_cast<char*>(workspace) + kTileCounterBytes,
                                 in.varlen_tile_capacity);
      p.varlen_tiles = list.tiles;
      p.varlen_tile_count = list.count;
      const int block_m =
          sm90::kernel_block_m(in.bf16, sm90::instantiated_head_dim(problem.params.head_dim));
      if (Status s = launch_status(sm90::build_varlen_tile_list(list, p, block_m, stream),
                                   "sm90 varlen tile list");
          !s.ok()) {
        return s;
      }
    } else if (Status s = launch_status(cudaMemsetAsync(p.tile_counter, 0, sizeof(int), stream),
                                        "sm90 tile counter reset");
               !s.ok()) {
      return s;
    }
  }
  cudaError_t launched = cudaErrorInvalidValue;
  sm90::with_head_dim(problem.params.head_dim, [&](auto d) {
    launched = sm90::launch_head_dim<decltype(d)::value>(in, stream);
  });
  if (Status s = launch_status(launched, "sm90 fwd_kernel"); !s.ok()) return s;
  if (p.num_splits <= 1) return Status::Ok();

  // The sm80 backend's combine kernel merges the partials by their LSE; it reads the sizes and
  // output strides from its own parameter struct.
  sm80::FwdParams combine{};
  combine.o = p.o;
  combine.lse = p.lse;
  combine.o_batch = p.o_batch, combine.o_seq = p.o_seq, combine.o_head = p.o_head;
  combine.batch = p.batch;
  combine.heads = p.heads;
  combine.seqlen_q = p.seqlen_q;
  combine.num_splits = p.num_splits;
  combine.o_partial = p.o_partial;
  combine.lse_partial = p.lse_partial;
  const cudaError_t combined =
      in.bf16 ? sm80::launch_combine<__nv_bfloat16>(combine, p.head_dim, stream)
              : sm80::launch_combine<__half>(combine, p.head_dim, stream);
  return launch_status(combined, "sm90 combine_kernel");
}

// The dense kernels without the sinks, their LSE after their workspace, then the rescale that adds
// the sinks to O and writes the caller's LSE.
Status launch_with_sink_rescale(const Problem& problem, const cudaDeviceProp& device,
                                void* workspace, cudaStream_t stream) {
  const AttentionParams& a = problem.params;
  const size_t dense = dense_workspace_bytes(without_sinks(problem, nullptr), device);
  float* lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + align_up(dense));
  if (Status s = launch_dense(without_sinks(problem, lse), device, workspace, stream); !s.ok()) {
    return s;
  }
  sm80::SinkRescaleArgs rescale{};
  rescale.o = a.o.data;
  rescale.bf16 = a.o.dtype == DType::kBFloat16;
  rescale.o_strides = a.o.strides;
  rescale.batch = is_varlen(a) ? 1 : a.batch;
  rescale.seqlen = a.seqlen_q;
  rescale.heads = a.heads_q;
  rescale.head_dim = a.head_dim;
  rescale.lse_in = lse;
  rescale.lse_out = a.lse;
  rescale.sink_logits = a.flex.sinks.logits;
  return launch_status(sm80::launch_sink_rescale(rescale, stream), "sm90 sink rescale");
}

}  // namespace
#endif

Status launch_sm90(const Problem& problem, void* workspace, cudaStream_t stream) {
#if !FLASHCORE_HAS_SM90
  (void)problem;
  (void)workspace;
  (void)stream;
  return {StatusCode::kUnsupported, "sm90 is not in this build"};
#else
  if (sm90_needs_flex_kernel(problem)) return launch_sm90_flex(problem, workspace, stream);
  cudaDeviceProp device{};
  if (Status s = current_device_properties(&device); !s.ok()) return s;
  if (sinks_alone(problem) && !sm90_dense_kernel_runs_sinks(problem, device)) {
    return launch_with_sink_rescale(problem, device, workspace, stream);
  }
  return launch_dense(problem, device, workspace, stream);
#endif
}

}  // namespace flashcore::detail
