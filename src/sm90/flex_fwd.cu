// Host side of the sm90 flex path: THE sm90 flex instantiation list (dtype x head dim 64 / 128 /
// 256, the built-in mods as runtime data), which problems it takes, its grid, and the launch.
#include <algorithm>
#include <cstdint>

#include "common/device_properties.hpp"
#include "common/flex_problem.hpp"
#include "common/kernel_list.hpp"
#include "common/launch_status.hpp"
#include "common/pruning.hpp"
#include "flashcore/varlen.hpp"
#include "sm80/flex_fwd.hpp"
#include "sm90/flex_fwd.hpp"
#include "sm90/flex_launch.hpp"
#include "sm90/flex_merged_walk.hpp"
#include "sm90/head_group.hpp"
#include "sm90/kernel_view.hpp"
#include "sm90/tma_strides.hpp"
#include "sm90/varlen_tiles.hpp"

namespace flashcore::detail {
namespace {

using sm90::FwdArgs;
using sm90::GmemInput;
using sm90::LaunchArgs;

// The kernel's query tiles per (sequence, head): the plan's grid, and the merged walks' count.
int flex_num_m_blocks(const AttentionParams& a) {
  const int64_t rows = is_varlen(a) ? a.max_seqlen_q : a.seqlen_q;
  return static_cast<int>((rows + sm90::kFlexTileRows - 1) / sm90::kFlexTileRows);
}

// Entries of a varlen batch's tile list (varlen_tiles.hpp), or 0 where the grid runs without one:
// sequences shorter than the longest leave tiles with no rows in the grid, and the producer then
// takes the others from the list, unless every sequence is the longest.
int flex_varlen_tile_capacity(const AttentionParams& a) {
  if (!is_varlen(a) || a.batch * a.max_seqlen_q == a.seqlen_q) return 0;
  // At most batch * num_m_blocks entries, so the list's tiles fit the grid's int count.
  return static_cast<int>(
      sm90::varlen_tile_capacity(a.batch, a.seqlen_q, flex_num_m_blocks(a), sm90::kFlexTileRows));
}

// The dynamic schedule's tile counter (FwdArgs::tile_counter).
constexpr size_t kTileCounterBytes = 256;
// The sm90 flex instantiation list as KernelList sees it (common/kernel_list.hpp): the kernels
// themselves are templates of sm90_fwd_hd<D>.cu, reached through launch_flex_head_dim<D>.
template <typename Element, int kHeadDim_>
struct FlexKernel {
  static constexpr int kHeadDim = kHeadDim_;
};
// fn(FlexKernel<Element, D>{}) for the flex instantiation of (dtype, head_dim) if this build has
// it.
template <typename Fn>
bool with_flex_kernel(DType dtype, int64_t head_dim, Fn&& fn) {
  return KernelList<FlexKernel, 64, 128, 256>::with(dtype, sm90_flex_kernel_head_dim(head_dim), fn);
}

}  // namespace

// The flex kernels' head dims; a smaller multiple of 8 runs on the next one up (zero-filled dims).
int sm90_flex_kernel_head_dim(int64_t head_dim) {
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : head_dim <= 256 ? 256 : 0;
}

// The problem as the flex kernel indexes it: the dense view without decode's GQA packing (mods see
// real query heads and rows), the packed tensors of a varlen batch as one sequence each, and the
// persistent grid over (query block, head, sequence) tiles.
LaunchArgs sm90_flex_plan(const Problem& problem, const cudaDeviceProp& device,
                          int kernel_head_dim) {
  const AttentionParams& a = problem.params;
  LaunchArgs in = sm90::kernel_view(problem);
  FwdArgs& p = in.args;
  p.heads = static_cast<int>(a.heads_q);
  p.kv_group = static_cast<int>(problem.group());
  p.seqlen_q = static_cast<int>(a.seqlen_q);
  p.o_seq = a.o.strides.seq;
  p.o_head = a.o.strides.head;
  in.q = GmemInput{a.q.data,
                   static_cast<int>(a.seqlen_q),
                   static_cast<int>(a.heads_q),
                   a.q.strides.seq,
                   a.q.strides.head,
                   a.q.strides.batch};
  const bool varlen = is_varlen(a);
  if (varlen) sm90::use_packed_batch_strides(a, &in);
  p.num_m_blocks = flex_num_m_blocks(a);
  p.num_splits = 1;
  p.o_by_tma = sm90::stores_o_by_tma(p, varlen);
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.heads;
  const int64_t tiles = pairs * p.num_m_blocks;
  p.num_tiles = static_cast<int>(tiles);
  in.num_ctas = static_cast<int>(std::min<int64_t>(tiles, device.multiProcessorCount));
  // Heads per group as the dense plan's dynamic schedule (head_group.hpp): as many as keep their
  // K and V within half of L2, lowered to a size that splits the pairs into equal groups.
  const int64_t keys = varlen ? a.max_seqlen_k : a.seqlen_k;
  p.head_group =
      sm90::heads_per_group({pairs, p.num_m_blocks, in.num_ctas,
                             sm90::kv_bytes_per_query_head(keys, kernel_head_dim, p.kv_group),
                             int64_t{device.l2CacheSize}, /*uniform_tiles=*/false});
  in.dynamic = true;
  in.cluster_ctas = 1;
  in.varlen_tile_capacity = flex_varlen_tile_capacity(a);
  in.enable_pdl = a.enable_pdl;
  return in;
}

const char* sm90_flex_shape_rejects(const Problem& problem, int kernel_head_dim) {
  const AttentionParams& a = problem.params;
  if (kernel_head_dim == 0) {
    return "runs varlen and flex problems with head_dim up to 256 (flex kernels for 64, 128 and "
           "256)";
  }
  if (a.head_dim > kernel_head_dim) return "has a kernel of a smaller head_dim than the problem's";
  if (a.num_splits > 1) return "runs varlen and flex problems unsplit; pass num_splits 0 or 1";
  if (a.tile != TileShape::kAuto && a.tile != TileShape::kLarge) {
    return "runs varlen and flex problems on one tile; pass tile auto or large";
  }
  const flex::BlockMask& m = a.flex.block_mask;
  // KV blocks are whole key tiles, except that 64-key blocks fill a 128-key tile two at a time
  // (flex_load.hpp, paired steps); at head dims above 128 the tiles have 64 keys.
  if (a.flex.has_block_mask() && (m.q_block_size % (sm90::kFlexTileRows / 2) != 0 ||
                                  (m.kv_block_size % sm90::flex_tile_keys(kernel_head_dim) != 0 &&
                                   m.kv_block_size != sm90::kFlexPairedBlockKeys))) {
    return "runs BlockMasks whose q_block_size is a multiple of 64 and kv_block_size 64 or a "
           "multiple of 128 (its 128-key tiles up to head_dim 128; multiples of 64 above); "
           "backend sm80 (or auto) runs other multiples of 64";
  }
  if (const char* why = sm90::qkv_tma_rejects(a, /*packed=*/is_varlen(a))) return why;
  return "";
}

const char* sm90_flex_auto_declines(const Problem& problem, const cudaDeviceProp& device,
                                    bool builtin_mask) {
  const AttentionParams& a = problem.params;
  if (a.num_splits != 0 || is_varlen(a)) return "";  // num_splits 1 asks for no split
  if (sm80_flex_rejects(problem, device)[0] != '\0') return "";
  // Decode under GQA, at any batch: the sm90 kernel reads each K/V tile once per query head.
  if (sm80_flex_packs_heads(problem, builtin_mask)) {
    return "leaves decode steps of grouped query heads (GQA) to the sm80 flex kernel, which packs "
           "a kv head's query heads into one tile and reads its keys once";
  }
  // Decode and short chunks only: one query tile per (batch, head), too few to fill half the SMs.
  if (a.seqlen_q > sm90::kFlexTileRows || 2 * a.batch * a.heads_q > device.multiProcessorCount) {
    return "";
  }
  if (sm80_flex_splits(problem, device, builtin_mask) < 2) return "";
  return "leaves flex problems of one query tile per (batch, head) that fill under half the SMs "
         "(decode) to the sm80 flex kernel, which splits their keys";
}

const char* sm90_flex_rejects(const Problem& problem, const cudaDeviceProp& device) {
  const AttentionParams& a = problem.params;
  const int kernel_head_dim = sm90_flex_kernel_head_dim(a.head_dim);
  if (const char* why = sm90_flex_shape_rejects(problem, kernel_head_dim); why[0] != '\0') {
    return why;
  }
  if (const char* why = pruned_reason(a.q.dtype, kernel_head_dim); why[0] != '\0') {
    return why;
  }
#if FLASHCORE_HAS_SM90
  int smem_bytes = 0;
  if (!with_flex_kernel(a.q.dtype, a.head_dim, [&](auto kernel) {
        smem_bytes = sm90::flex_smem_bytes_head_dim<decltype(kernel)::kHeadDim>(a.q.dtype ==
                                                                                DType::kBFloat16);
      })) {
    return "has no flex kernel for this head_dim in this build";
  }
  if (static_cast<size_t>(smem_bytes) > device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block than this GPU allows for this head_dim";
  }
#else
  (void)device;
#endif
  return "";
}

// Whether the plan's grid takes tiles from the counter: not a grid of one wave, a CTA per tile,
// where each CTA runs its first tile and no other and the counter would only tell it that none is
// left. The fixed sequence runs such a grid the same way, with no counter to zero before the
// launch (a memset on the stream, and 3-5 us of a short call's host time with its workspace;
// docs/perf.md, session 43). A varlen batch's tile list and a BlockMask's walks zero the counter in
// their builds, which run either way.
bool flex_uses_tile_counter(const LaunchArgs& plan) { return plan.num_ctas < plan.args.num_tiles; }

// The tile counter, then a BlockMask's merged walks (flex_merged_walk.hpp) or a varlen batch's
// tile list (varlen_tiles.hpp): a BlockMask is never on a varlen batch (validate_flex.cpp). None
// for a grid of one wave without either.
size_t sm90_flex_workspace_bytes(const Problem& problem, int kernel_head_dim) {
  const AttentionParams& a = problem.params;
  if (const int capacity = flex_varlen_tile_capacity(a); capacity > 0) {
    return kTileCounterBytes + sm90::varlen_tile_list_bytes(capacity, a.heads_q);
  }
  const size_t walk_bytes = sm90::merged_walk_bytes(
      a.flex.block_mask, a.seqlen_k, flex_num_m_blocks(a), sm90::flex_tile_keys(kernel_head_dim));
  if (!sm90::needs_merged_walks(a.flex.block_mask)) {
    cudaDeviceProp device{};
    if (current_device_properties(&device).ok() &&
        !flex_uses_tile_counter(sm90_flex_plan(problem, device, kernel_head_dim))) {
      return 0;
    }
  }
  return kTileCounterBytes + walk_bytes;
}

Status prepare_sm90_flex_workspace(const Problem& problem, int kernel_head_dim, void* workspace,
                                   LaunchArgs* plan, sm90::MergedWalks* walks,
                                   cudaStream_t stream) {
#if !FLASHCORE_HAS_SM90
  (void)problem, (void)kernel_head_dim, (void)workspace, (void)plan, (void)walks, (void)stream;
  return {StatusCode::kUnsupported, "sm90 is not in this build"};
#else
  // The first wave takes tiles 0..num_ctas-1 by CTA index; the counter hands out the rest.
  plan->args.tile_counter = static_cast<int*>(workspace);
  *walks = {};
  const flex::BlockMask& block_mask = problem.params.flex.block_mask;
  if (plan->varlen_tile_capacity == 0 && !sm90::needs_merged_walks(block_mask) &&
      !flex_uses_tile_counter(*plan)) {
    plan->args.tile_counter = nullptr;  // the fixed sequence (sm90_flex_workspace_bytes says why)
    return Status::Ok();
  }
  if (plan->varlen_tile_capacity > 0) {
    // The list's build zeroes the counter too. It reads the sequences from the grid's
    // cu_seqlens_q, which the flex kernel takes from FlexArgs instead.
    const sm90::VarlenTileList list = sm90::varlen_tile_list(
        plan->args.tile_counter, static_cast<char*>(workspace) + kTileCounterBytes,
        plan->varlen_tile_capacity);
    plan->args.varlen_tiles = list.tiles;
    plan->args.varlen_tile_count = list.count;
    FwdArgs grid = plan->args;
    grid.cu_seqlens_q = problem.params.cu_seqlens_q;
    return launch_status(sm90::build_varlen_tile_list(list, grid, sm90::kFlexTileRows, stream),
                         "sm90 flex varlen tile list");
  }
  if (!sm90::needs_merged_walks(block_mask)) {
    return launch_status(cudaMemsetAsync(plan->args.tile_counter, 0, sizeof(int), stream),
                         "sm90 flex tile counter reset");
  }
  // A BlockMask is never on a varlen batch (validate_flex.cpp): the plan's tiles are the mask's.
  // The build zeroes the counter too.
  return launch_status(
      sm90::build_merged_walks(block_mask, plan->args.seqlen_q, plan->args.seqlen_k,
                               plan->args.num_m_blocks, sm90::flex_tile_keys(kernel_head_dim),
                               problem.params.flex.mask.documents, plan->args.batch,
                               plan->args.tile_counter,
                               static_cast<char*>(workspace) + kTileCounterBytes, walks, stream),
      "sm90 flex merged walks");
#endif
}

Status launch_sm90_flex(const Problem& problem, void* workspace, cudaStream_t stream) {
#if !FLASHCORE_HAS_SM90
  (void)problem, (void)workspace, (void)stream;
  return {StatusCode::kUnsupported, "sm90 is not in this build"};
#else
  cudaDeviceProp device{};
  if (Status s = current_device_properties(&device); !s.ok()) return s;
  const AttentionParams& a = problem.params;
  const int kernel_head_dim = sm90_flex_kernel_head_dim(a.head_dim);
  LaunchArgs in = sm90_flex_plan(problem, device, kernel_head_dim);
  sm90::BuiltinFlexArgs flex{builtin_mask(problem), builtin_score_mod(problem),
                             problem.scale,         a.flex.block_mask,
                             a.flex.sinks,          a.cu_seqlens_q,
                             a.cu_seqlens_k};
  if (Status s = prepare_sm90_flex_workspace(problem, kernel_head_dim, workspace, &in, &flex.merged,
                                             stream);
      !s.ok()) {
    return s;
  }
  cudaError_t launched = cudaErrorInvalidValue;
  with_flex_kernel(a.q.dtype, a.head_dim, [&](auto kernel) {
    launched = sm90::launch_flex_head_dim<decltype(kernel)::kHeadDim>(in, flex, stream);
  });
  return launch_status(launched, "sm90 flex_fwd_kernel");
#endif
}

}  // namespace flashcore::detail
