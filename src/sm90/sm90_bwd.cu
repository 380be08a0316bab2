// Host side of the sm90 backward: what it implements (dense and varlen batches, with or without
// attention sinks; everything else is refused with a reason, and run_backward() then runs the sm80
// backward), its workspace (the sm80 backward's layout with rows padded to this kernel's query
// block) and the launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/device_properties.hpp"
#include "common/key_block_rows.hpp"
#include "common/launch_status.hpp"
#include "common/pruning.hpp"
#include "sm80/bwd_sink_grad.hpp"
#include "sm80/bwd_workspace.hpp"
#include "sm90/bwd_key_tiles.hpp"
#include "sm90/sm90_bwd.hpp"
#include "sm90/tma_strides.hpp"

namespace flashcore::detail {
namespace {

// Sizes stay in int inside the kernel: row + seqlen_k + window + 1 must not overflow.
constexpr int64_t kMaxSeqlen = int64_t{1} << 29;
constexpr int64_t kMaxGridYZ = 65535;  // kv heads go to gridDim.y, batch to z

}  // namespace

const char* sm90_backward_rejects(const BackwardProblem& problem, const cudaDeviceProp& device) {
  const BackwardParams& a = problem.params;
#if !FLASHCORE_HAS_SM90
  (void)a;
  (void)device;
  return "is not in this build; build with 90a in FLASHCORE_CUDA_ARCHITECTURES";
#else
  if (device.major != 9 || device.minor != 0) {
    return "needs an sm_90 GPU (H100, H200): its code is built for sm_90a (wgmma, TMA)";
  }
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) {
    return "has kernels for head_dim 64, 128 and 256 only";
  }
  if (const char* why = pruned_reason(a.q.dtype, static_cast<int>(a.head_dim)); why[0] != '\0') {
    return why;
  }
  // Sinks need nothing here: the forward's LSE already holds each row's sink term, so the P this
  // kernel recomputes is the one the forward normalized, and D = rowsum(dO * O) is still
  // sum_j P_ij dP_ij (a sink has no value). The mods and BlockMasks change P itself.
  if (a.flex.has_mods()) {
    return "does not implement flex mods yet (mask_mod, score_mod, BlockMask; the sm80 backward "
           "runs them)";
  }
  if (problem.is_varlen() && a.head_dim == 256) {
    return "runs varlen batches at head_dim 64 and 128 only";
  }
  if (a.seqlen_q > kMaxSeqlen || a.seqlen_k > kMaxSeqlen) {
    return "supports seqlen_q and seqlen_k up to 2^29";
  }
  if (a.heads_kv > kMaxGridYZ || a.batch > kMaxGridYZ) {
    return "supports batch and heads_kv up to 65535";
  }
  // Varlen's packed tensors are one batch entry to the descriptors.
  const int64_t tma_batch = problem.is_varlen() ? 1 : a.batch;
  if (!sm90::strides_fit_tma(a.q.strides, a.seqlen_q, a.heads_q, tma_batch) ||
      !sm90::strides_fit_tma(a.d_o.strides, a.seqlen_q, a.heads_q, tma_batch) ||
      !sm90::strides_fit_tma(a.k.strides, a.seqlen_k, a.heads_kv, tma_batch) ||
      !sm90::strides_fit_tma(a.v.strides, a.seqlen_k, a.heads_kv, tma_batch)) {
    return "needs Q, K, V and dO strides that are positive and below 2^40 bytes (TMA)";
  }
  return "";
#endif
}

sm90::BwdTailSplit sm90_backward_tail_split(const BackwardProblem& problem, int ctas) {
  const BackwardParams& a = problem.params;
  const int head_dim = static_cast<int>(a.head_dim);
  const int block_m = sm90::bwd_block_m(head_dim);
  const int block_n = sm90::bwd_block_n(head_dim);
  const int64_t num_m_blocks = (a.seqlen_q + block_m - 1) / block_m;
  // The tile order's count (sm80::BwdParams, backward_kernel_view): a varlen batch's key blocks
  // cover its longest sequence, for each of its sequences.
  const int64_t key_rows = problem.is_varlen() ? a.max_seqlen_k : a.seqlen_k;
  const int64_t num_n_blocks = (key_rows + block_n - 1) / block_n;
  const int64_t tiles = a.heads_kv * a.batch * num_n_blocks;
  const int64_t walk = num_m_blocks * problem.group();
  int64_t tile_steps = 0;  // unless every tile walks the same steps
  // Deterministic mode runs each tile's walk in one CTA, and varlen tiles differ.
  if (!problem.is_varlen() && !a.deterministic && num_n_blocks > 0 && tiles <= INT32_MAX &&
      walk <= INT32_MAX) {
    // The rows seeing a key block move right with it (common/key_block_rows.hpp): if the first
    // key block is seen by the last row and the last key block by the first row, every key block
    // is seen by every row.
    const int seqlen_q = static_cast<int>(a.seqlen_q);
    const int seqlen_k = static_cast<int>(a.seqlen_k);
    const WindowMask<int> mask{seqlen_q, seqlen_k, clamp_window(problem.mask.left, a.seqlen_k),
                               clamp_window(problem.mask.right, a.seqlen_q)};
    const int last_block = static_cast<int>((num_n_blocks - 1) * block_n);
    if (rows_seeing_keys(mask, 0, std::min(block_n, seqlen_k)).end == seqlen_q &&
        rows_seeing_keys(mask, last_block, seqlen_k).begin == 0) {
      tile_steps = walk;
    }
  }
  return sm90::BwdTailSplit::of(static_cast<int>(std::min<int64_t>(tiles, INT32_MAX)),
                                static_cast<int>(tile_steps), ctas);
}

namespace {

// How the launch on the current device cuts the schedule's last tiles, the workspace slots its cut
// tiles need, and the bytes of a varlen batch's key tile list (0: none).
struct SchedulePlan {
  sm90::BwdTailSplit split;
  KeyGradSlots slots;
  size_t key_tile_list_bytes;
};

#if FLASHCORE_HAS_SM90
// Whether a varlen batch's grid has tiles past a sequence's keys (sm90/bwd_key_tiles.hpp): some
// sequence has fewer keys than the longest.
bool lists_key_tiles(const BackwardProblem& problem) {
  const BackwardParams& a = problem.params;
  return problem.is_varlen() && a.batch * a.max_seqlen_k != a.seqlen_k;
}
#endif

SchedulePlan schedule_plan(const BackwardProblem& problem) {
  cudaDeviceProp device{};
  const int ctas =
      current_device_properties(&device).ok() ? device.multiProcessorCount : 1;  // 1: no cut
  const sm90::BwdTailSplit split = sm90_backward_tail_split(problem, ctas);
  const int head_dim = static_cast<int>(problem.params.head_dim);
  size_t list_bytes = 0;
#if FLASHCORE_HAS_SM90
  // Varlen never cuts its tiles, so the split's tiles are the order's.
  if (lists_key_tiles(problem)) list_bytes = sm90::bwd_key_tile_list_bytes(split.num_tiles());
#endif
  return {split,
          {static_cast<size_t>(split.slots()),
           static_cast<size_t>(2 * sm90::bwd_block_n(head_dim)) * head_dim},
          list_bytes};
}

}  // namespace

size_t sm90_backward_workspace_bytes(const BackwardProblem& problem) {
  const SchedulePlan plan = schedule_plan(problem);
  return workspace_layout(problem, sm90::bwd_block_m(static_cast<int>(problem.params.head_dim)),
                          plan.slots, plan.key_tile_list_bytes)
      .total;
}

Status launch_sm90_backward(const BackwardProblem& problem, void* workspace, cudaStream_t stream) {
#if !FLASHCORE_HAS_SM90
  (void)problem;
  (void)workspace;
  (void)stream;
  return {StatusCode::kUnsupported, "sm90 backward is not in this build"};
#else
  const int head_dim = static_cast<int>(problem.params.head_dim);
  const int block_m = sm90::bwd_block_m(head_dim);
  const SchedulePlan plan = schedule_plan(problem);
  const WorkspaceLayout w =
      workspace_layout(problem, block_m, plan.slots, plan.key_tile_list_bytes);
  const sm80::BwdParams p =
      backward_kernel_view(problem, workspace, block_m, sm90::bwd_block_n(head_dim), plan.slots);
  char* base = static_cast<char*>(workspace);
  const bool cut = plan.split.slots() > 0;
  const sm90::BwdTail tail{plan.split,
                           cut ? reinterpret_cast<float*>(base + w.key_grad_partials) : nullptr,
                           cut ? reinterpret_cast<int*>(base + w.key_grad_arrivals) : nullptr};
  // The dQ accumulators, the tile counter and the cut tiles' sums and counters (and deterministic
  // mode's semaphores) start at zero; LSE and D are written in full by the preprocess.
  cudaError_t zeroed = cudaMemsetAsync(base + w.dq_accum, 0, w.lse_log2 - w.dq_accum, stream);
  if (zeroed == cudaSuccess && problem.params.deterministic) {
    zeroed = cudaMemsetAsync(base + w.semaphore, 0, w.key_tile_list - w.semaphore, stream);
  }
  if (cudaError_t err = zeroed; err != cudaSuccess) {
    cudaGetLastError();
    return {StatusCode::kCudaError,
            std::string("sm90 backward: zeroing the workspace failed: ") + cudaGetErrorString(err)};
  }
  const sm90::BwdKeyTileList key_tiles =
      plan.key_tile_list_bytes > 0
          ? sm90::bwd_key_tile_list(base + w.key_tile_list, plan.split.num_tiles())
          : sm90::BwdKeyTileList{};
  const bool bf16 = problem.params.q.dtype == DType::kBFloat16;
  cudaError_t err = cudaErrorInvalidDeviceFunction;
  if (head_dim == 64) {
    if constexpr (head_dim_built(64))
      err = sm90::launch_backward_head_dim<64>(p, tail, key_tiles, bf16, stream);
  } else if (head_dim == 128) {
    if constexpr (head_dim_built(128))
      err = sm90::launch_backward_head_dim<128>(p, tail, key_tiles, bf16, stream);
  } else if (head_dim == 256) {
    if constexpr (head_dim_built(256)) err = sm90::launch_backward_hd256(p, tail, bf16, stream);
  }
  if (err == cudaSuccess && problem.params.d_sinks != nullptr) {
    err =
        sm80::launch_sink_grad(p, problem.params.flex.sinks.logits, problem.params.d_sinks, stream);
  }
  return launch_status(err, "sm90 backward");
#endif
}

}  // namespace flashcore::detail
