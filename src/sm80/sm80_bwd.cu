// Host side of the sm80 backward: the instantiation list (dtype x head dim; masks, softcap, GQA
// and deterministic mode are runtime arguments), the workspace layout, the kernel view of the
// problem and the launches. The kernels are compiled one head dim per translation unit
// (bwd_launch.hpp).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/kernel_list.hpp"
#include "common/launch_status.hpp"
#include "common/pruning.hpp"
#include "common/query_view.hpp"
#include "common/score_scaling.hpp"
#include "sm80/bwd_kernel_traits.hpp"
#include "sm80/bwd_launch.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/sm80_bwd.hpp"

namespace flashcore::detail {
namespace {

using sm80::BwdParams;

// Sizes stay in int inside the kernels: row + seqlen_k + window + 1 must not overflow.
constexpr int64_t kMaxSeqlen = int64_t{1} << 29;
constexpr int64_t kMaxGridYZ = 65535;  // kv heads (or query heads) go to gridDim.y, batch to z
// Workspace arrays start on this boundary (16-byte cp.async and float4 accesses need 16).
constexpr size_t kWorkspaceAlign = 256;

// THE instantiation list of the backward: fn receives the traits of one (dtype, head dim).
// Returns false when (dtype, head_dim) has no kernel, or was left out (common/pruning.hpp).
using BackwardKernels = KernelList<sm80::BwdTraits, 64, 128>;
template <typename Fn>
bool with_traits(DType dtype, int64_t head_dim, Fn&& fn) {
  return BackwardKernels::with(dtype, head_dim, fn);
}

size_t align_up(size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// Where the workspace arrays of BwdParams lie, in bytes from its start.
struct WorkspaceLayout {
  int64_t seqlen_q_rounded;
  int64_t num_m_blocks;
  size_t dq_accum, lse_log2, delta, semaphore;
  size_t zeroed_bytes;  // [dq_accum, zeroed_bytes) and the semaphores start at zero
  size_t total;
};
WorkspaceLayout workspace_layout(const BackwardProblem& problem, int block_m) {
  const BackwardParams& a = problem.params;
  WorkspaceLayout w{};
  w.num_m_blocks = (a.seqlen_q + block_m - 1) / block_m;
  w.seqlen_q_rounded = w.num_m_blocks * block_m;
  const size_t rows = static_cast<size_t>(a.batch * a.heads_q * w.seqlen_q_rounded);
  w.dq_accum = 0;
  w.lse_log2 = align_up(rows * static_cast<size_t>(a.head_dim) * sizeof(float));
  w.delta = w.lse_log2 + align_up(rows * sizeof(float));
  w.semaphore = w.delta + align_up(rows * sizeof(float));
  const size_t semaphores =
      a.deterministic ? static_cast<size_t>(a.batch * a.heads_q * w.num_m_blocks) : 0;
  w.total = w.semaphore + align_up(semaphores * sizeof(int));
  return w;
}

template <typename Traits>
BwdParams kernel_view(const BackwardProblem& problem, void* workspace) {
  const BackwardParams& a = problem.params;
  const WorkspaceLayout w = workspace_layout(problem, Traits::kBlockM);
  char* base = static_cast<char*>(workspace);
  BwdParams p{};
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.o = a.o.data;
  p.d_o = a.d_o.data;
  p.lse = a.lse;
  p.dq = a.dq.data;
  p.dk = a.dk.data;
  p.dv = a.dv.data;
  auto strides = [](const Strides& s, int64_t* batch, int64_t* seq, int64_t* head) {
    *batch = s.batch;
    *seq = s.seq;
    *head = s.head;
  };
  strides(a.q.strides, &p.q_batch, &p.q_seq, &p.q_head);
  strides(a.k.strides, &p.k_batch, &p.k_seq, &p.k_head);
  strides(a.v.strides, &p.v_batch, &p.v_seq, &p.v_head);
  strides(a.o.strides, &p.o_batch, &p.o_seq, &p.o_head);
  strides(a.d_o.strides, &p.do_batch, &p.do_seq, &p.do_head);
  strides(a.dq.strides, &p.dq_batch, &p.dq_seq, &p.dq_head);
  strides(a.dk.strides, &p.dk_batch, &p.dk_seq, &p.dk_head);
  strides(a.dv.strides, &p.dv_batch, &p.dv_seq, &p.dv_head);
  p.dq_accum = reinterpret_cast<float*>(base + w.dq_accum);
  p.lse_log2 = reinterpret_cast<float*>(base + w.lse_log2);
  p.delta = reinterpret_cast<float*>(base + w.delta);
  p.dq_semaphore = a.deterministic ? reinterpret_cast<int*>(base + w.semaphore) : nullptr;
  p.batch = static_cast<int>(a.batch);
  p.heads_q = static_cast<int>(a.heads_q);
  p.heads_kv = static_cast<int>(a.heads_kv);
  p.kv_group = static_cast<int>(problem.group());
  p.seqlen_q = static_cast<int>(a.seqlen_q);
  p.seqlen_k = static_cast<int>(a.seqlen_k);
  p.seqlen_q_rounded = static_cast<int>(w.seqlen_q_rounded);
  p.num_m_blocks = static_cast<int>(w.num_m_blocks);
  p.num_n_blocks = static_cast<int>((a.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN);
  p.mask = WindowMask<int>{p.seqlen_q, p.seqlen_k, clamp_window(problem.mask.left, a.seqlen_k),
                           clamp_window(problem.mask.right, a.seqlen_q)};
  // The forward's score scaling (common/score_scaling.hpp), so that P is recomputed exactly as
  // the forward computed it.
  Problem forward{};
  forward.scale = problem.scale;
  forward.softcap = problem.softcap;
  const ScoreScaling scaling = score_scaling(forward);
  p.scale = scaling.scale;
  p.scale_log2 = scaling.scale_log2;
  p.softcapped = problem.softcap.cap > 0.f;
  p.softcap_in = scaling.softcap_in;
  p.softcap_out = scaling.softcap_out;
  return p;
}

}  // namespace

const char* sm80_backward_rejects(const BackwardProblem& problem, const cudaDeviceProp& device) {
  const BackwardParams& a = problem.params;
  if (device.major < 8) return "needs an sm_80 or newer GPU (mma.sync m16n8k16, cp.async)";
  if (a.seqlen_q > kMaxSeqlen || a.seqlen_k > kMaxSeqlen) {
    return "supports seqlen_q and seqlen_k up to 2^29";
  }
  if (a.heads_q > kMaxGridYZ || a.batch > kMaxGridYZ)
    return "supports batch and heads_q up to 65535";
  int smem_bytes = 0;
  if (!with_traits(a.q.dtype, a.head_dim,
                   [&](auto traits) { smem_bytes = decltype(traits)::kSmemBytes; })) {
    if (a.head_dim == 64 || a.head_dim == 128)
      return pruned_reason(a.q.dtype, static_cast<int>(a.head_dim));
    return "has backward kernels for head_dim 64 and 128 only (the other head dims, 256 "
           "included, are not written yet); pad the head dim to 64 or 128 with zeros";
  }
  if (static_cast<size_t>(smem_bytes) > device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block than this GPU allows for this head_dim";
  }
  return "";
}

size_t sm80_backward_workspace_bytes(const BackwardProblem& problem) {
  size_t bytes = 0;
  with_traits(problem.params.q.dtype, problem.params.head_dim, [&](auto traits) {
    bytes = workspace_layout(problem, decltype(traits)::kBlockM).total;
  });
  return bytes;
}

Status launch_sm80_backward(const BackwardProblem& problem, void* workspace, cudaStream_t stream) {
  Status status = {StatusCode::kUnsupported, "sm80 backward: head_dim has no kernel"};
  with_traits(problem.params.q.dtype, problem.params.head_dim, [&](auto traits) {
    using Traits = decltype(traits);
    const WorkspaceLayout w = workspace_layout(problem, Traits::kBlockM);
    const BwdParams p = kernel_view<Traits>(problem, workspace);
    // The dQ accumulators and the semaphores start at zero; LSE and D are written in full.
    char* base = static_cast<char*>(workspace);
    cudaError_t err = cudaMemsetAsync(base + w.dq_accum, 0, w.lse_log2 - w.dq_accum, stream);
    if (err == cudaSuccess && problem.params.deterministic) {
      err = cudaMemsetAsync(base + w.semaphore, 0, w.total - w.semaphore, stream);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      status = {
          StatusCode::kCudaError,
          std::string("sm80 backward: zeroing the workspace failed: ") + cudaGetErrorString(err)};
      return;
    }
    status = launch_status(sm80::launch_backward<Traits>(p, problem.params.deterministic, stream),
                           "sm80 backward");
  });
  return status;
}

}  // namespace flashcore::detail
