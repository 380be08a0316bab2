// Host side of the sm90 backward: what it implements (dense and varlen batches; everything else
// is refused with a reason, and run_backward() then runs the sm80 backward), its workspace (the
// sm80 backward's layout with rows padded to this kernel's query block) and the launches.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/launch_status.hpp"
#include "common/pruning.hpp"
#include "sm80/bwd_workspace.hpp"
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
  if (a.flex.active()) {
    return "does not implement flex options yet (mask_mod, score_mod, BlockMask, sinks; the sm80 "
           "backward runs them)";
  }
  if (problem.is_varlen()) {
    if (a.head_dim == 256) return "runs varlen batches at head_dim 64 and 128 only";
    if (a.deterministic) {
      return "has no deterministic mode for varlen batches yet; pass deterministic=false";
    }
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

size_t sm90_backward_workspace_bytes(const BackwardProblem& problem) {
  return workspace_layout(problem, sm90::bwd_block_m(static_cast<int>(problem.params.head_dim)))
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
  const WorkspaceLayout w = workspace_layout(problem, block_m);
  const sm80::BwdParams p =
      backward_kernel_view(problem, workspace, block_m, sm90::bwd_block_n(head_dim));
  // The dQ accumulators and the tile counter (and deterministic mode's semaphores) start at zero;
  // LSE and D are written in full by the preprocess.
  char* base = static_cast<char*>(workspace);
  cudaError_t zeroed = cudaMemsetAsync(base + w.dq_accum, 0, w.lse_log2 - w.dq_accum, stream);
  if (zeroed == cudaSuccess && problem.params.deterministic) {
    zeroed = cudaMemsetAsync(base + w.semaphore, 0, w.total - w.semaphore, stream);
  }
  if (cudaError_t err = zeroed; err != cudaSuccess) {
    cudaGetLastError();
    return {StatusCode::kCudaError,
            std::string("sm90 backward: zeroing the workspace failed: ") + cudaGetErrorString(err)};
  }
  const bool bf16 = problem.params.q.dtype == DType::kBFloat16;
  cudaError_t err = cudaErrorInvalidDeviceFunction;
  if (head_dim == 64) {
    if constexpr (head_dim_built(64)) err = sm90::launch_backward_head_dim<64>(p, bf16, stream);
  } else if (head_dim == 128) {
    if constexpr (head_dim_built(128)) err = sm90::launch_backward_head_dim<128>(p, bf16, stream);
  } else if (head_dim == 256) {
    if constexpr (head_dim_built(256)) err = sm90::launch_backward_hd256(p, bf16, stream);
  }
  return launch_status(err, "sm90 backward");
#endif
}

}  // namespace flashcore::detail
