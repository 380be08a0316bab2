// Host side of the sm80 flex path: THE flex instantiation list (dtype x head dim 64 / 128 / 256,
// the built-in mods as runtime data), the problem as the flex kernel sees it, and the launch.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/device_properties.hpp"
#include "common/kernel_list.hpp"
#include "common/launch_status.hpp"
#include "common/pruning.hpp"
#include "sm80/flex_fwd.hpp"
#include "sm80/flex_launch.hpp"
#include "sm80/flex_view.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/split_kv.hpp"

namespace flashcore::detail {
namespace {

using sm80::BuiltinFlexParams;
using sm80::FlexTile;

// The flex kernels' head dims; a smaller multiple of 8 runs on the next one up (zero-filled dims,
// as common/head_dim.hpp describes for the dense kernels).
constexpr int kFlexHeadDims[] = {64, 128, 256};
constexpr int flex_head_dim(int64_t head_dim) {
  for (int d : kFlexHeadDims) {
    if (head_dim <= d) return d;
  }
  return 0;
}

// fn gets the flex tile of (dtype, head_dim); false when there is none in this build.
template <typename Fn>
bool with_flex_tile(DType dtype, int64_t head_dim, Fn&& fn) {
  return KernelList<FlexTile, 64, 128, 256>::with(dtype, flex_head_dim(head_dim), fn);
}

}  // namespace

const char* sm80_flex_rejects(const Problem& problem, const cudaDeviceProp& device) {
  const AttentionParams& a = problem.params;
  const int instantiated = flex_head_dim(a.head_dim);
  if (instantiated == 0) {
    return "runs varlen and flex problems with head_dim up to 256 (flex kernels for 64, 128 and "
           "256)";
  }
  if (const char* why = pruned_reason(a.q.dtype, instantiated); why[0] != '\0') return why;
  if (a.num_splits > 1 && is_varlen(a)) {
    return "runs varlen batches unsplit; pass num_splits 0 or 1";
  }
  if (a.tile != TileShape::kAuto && a.tile != TileShape::kLarge) {
    return "runs varlen and flex problems on one tile; pass tile auto or large";
  }
  const flex::BlockMask& m = a.flex.block_mask;
  if (a.flex.has_block_mask() && (m.q_block_size % sm80::kFlexQBlockMultiple != 0 ||
                                  m.kv_block_size % sm80::kFlexBlockKV != 0)) {
    return "runs BlockMasks whose q_block_size and kv_block_size are multiples of 64 (64 and 128 "
           "as a rule); rebuild the BlockMask with such block sizes";
  }
  int smem_bytes = 0;
  with_flex_tile(a.q.dtype, a.head_dim,
                 [&](auto tile) { smem_bytes = decltype(tile)::kSmemBytes; });
  if (static_cast<size_t>(smem_bytes) > device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block than this GPU allows for this head_dim";
  }
  return "";
}

bool sm80_flex_packs_heads(const Problem& problem, bool builtin_mask) {
  bool packs = false;
  with_flex_tile(problem.params.q.dtype, problem.params.head_dim, [&](auto tile) {
    packs = sm80::flex_packs_heads(problem, decltype(tile)::kBlockM, builtin_mask);
  });
  return packs;
}

int sm80_flex_splits(const Problem& problem, const cudaDeviceProp& device, bool builtin_mask) {
  const AttentionParams& a = problem.params;
  if (is_varlen(a)) return 1;
  int splits = 1;
  with_flex_tile(a.q.dtype, a.head_dim, [&](auto tile) {
    using Traits = decltype(tile);
    const int64_t smem_per_cta =
        Traits::kSmemBytes + static_cast<int64_t>(device.reservedSharedMemPerBlock);
    sm80::SplitInputs in{};
    in.ctas = sm80::flex_packs_heads(problem, Traits::kBlockM, builtin_mask)
                  ? a.batch * a.heads_kv  // one tile holds a kv head's query heads
                  : a.batch * a.heads_q * ((a.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM);
    // The keys' tiles bound every query tile's walk (a BlockMask lists at most these); a split
    // past a sparse walk's end finds no step and writes an empty partial.
    in.kv_blocks = (a.seqlen_k + sm80::kFlexBlockKV - 1) / sm80::kFlexBlockKV;
    in.sm_count = device.multiProcessorCount;
    in.ctas_per_sm = std::max<int64_t>(
        1, std::min<int64_t>(static_cast<int64_t>(device.sharedMemPerMultiprocessor) / smem_per_cta,
                             Traits::kMinCtasPerSm));
    in.requested = a.num_splits;
    splits = sm80::choose_num_splits(in);
  });
  return splits;
}

size_t sm80_flex_split_bytes(const Problem& problem, int splits) {
  const AttentionParams& a = problem.params;
  return sm80::split_workspace_bytes(splits, a.batch * a.heads_q * a.seqlen_q, a.head_dim);
}

size_t sm80_flex_workspace_bytes(const Problem& problem) {
  cudaDeviceProp device{};
  if (!current_device_properties(&device).ok()) return 0;
  return sm80_flex_split_bytes(problem, sm80_flex_splits(problem, device));
}

Status launch_sm80_flex(const Problem& problem, void* workspace, cudaStream_t stream) {
  cudaDeviceProp device{};
  if (Status s = current_device_properties(&device); !s.ok()) return s;
  const int splits = sm80_flex_splits(problem, device);
  Status status = {StatusCode::kUnsupported, "sm80: head_dim has no flex kernel"};
  with_flex_tile(problem.params.q.dtype, problem.params.head_dim, [&](auto tile) {
    using Traits = decltype(tile);
    BuiltinFlexParams fp = sm80::flex_view<Traits>(problem, sm80::builtin_mask(problem),
                                                   sm80::builtin_score_mod(problem));
    sm80::use_split_partials(fp.fwd, splits, workspace);
    status = launch_status(sm80::launch_flex_tile<Traits>(fp, stream),
                           "sm80 flex_fwd_kernel (or its combine_kernel)");
  });
  return status;
}

}  // namespace flashcore::detail
