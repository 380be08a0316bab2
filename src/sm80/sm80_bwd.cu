// Host side of the sm80 backward: the instantiation lists (dtype x head dim; masks, softcap, GQA
// and deterministic mode are runtime arguments; varlen and the built-in flex options run the flex
// kernel), the workspace layout, the kernel view of the
// problem and the launches. The kernels are compiled one head dim per translation unit
// (bwd_launch.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/flex_problem.hpp"
#include "common/kernel_list.hpp"
#include "common/launch_status.hpp"
#include "common/pruning.hpp"
#include "sm80/bwd_kernel_traits.hpp"
#include "sm80/bwd_launch.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/bwd_sink_grad.hpp"
#include "sm80/bwd_workspace.hpp"
#include "sm80/sm80_bwd.hpp"

namespace flashcore::detail {
namespace {

using sm80::BwdParams;

// Sizes stay in int inside the kernels: row + seqlen_k + window + 1 must not overflow.
constexpr int64_t kMaxSeqlen = int64_t{1} << 29;
constexpr int64_t kMaxGridYZ = 65535;  // kv heads (or query heads) go to gridDim.y, batch to z

// THE instantiation lists of the backward: fn receives the traits of one (dtype, head dim) tile.
// BackwardKernels has a tile for every head dim; LargeSmemKernels the tiles that need more shared
// memory per block than an A100 gives (bwd_kernel_traits.hpp), which run where they fit.
using BackwardKernels = KernelList<sm80::BwdTraits, 64, 128, 256>;
template <typename Element, int kHeadDim>
using LargeSmemTraits = sm80::BwdTraits<Element, kHeadDim, true>;
using LargeSmemKernels = KernelList<LargeSmemTraits, 256>;

// The tile a GPU that gives a block smem_per_block bytes runs: the large one where the head dim
// has one and it fits. Returns false when (dtype, head_dim) has no kernel, or was left out
// (common/pruning.hpp).
template <typename Fn>
bool with_traits(DType dtype, int64_t head_dim, size_t smem_per_block, Fn&& fn) {
  bool large_fits = false;
  LargeSmemKernels::with(dtype, head_dim, [&](auto traits) {
    large_fits = static_cast<size_t>(decltype(traits)::kSmemBytes) <= smem_per_block;
  });
  return large_fits ? LargeSmemKernels::with(dtype, head_dim, fn)
                    : BackwardKernels::with(dtype, head_dim, fn);
}
// The BlockMask blocks the flex backward runs: its walk classifies one BlockMask block per step,
// so a BlockMask block must be whole steps (query blocks) by whole CTAs (key blocks) of whichever
// tile runs. One rule for every tile: 64 x 128 is a multiple of each tile's blocks.
constexpr int64_t kFlexBlockM = 64;
constexpr int64_t kFlexBlockN = 128;
template <typename Traits>
constexpr bool kFlexRuleFits =
    kFlexBlockM % Traits::kBlockM == 0 && kFlexBlockN % Traits::kBlockN == 0;
static_assert(kFlexRuleFits<sm80::BwdTraits<__half, 64>> &&
                  kFlexRuleFits<sm80::BwdTraits<__half, 128>> &&
                  kFlexRuleFits<sm80::BwdTraits<__half, 256>> &&
                  kFlexRuleFits<sm80::BwdTraits<__half, 256, true>>,
              "every backward tile runs the BlockMasks of one rule");

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
  if (!with_traits(a.q.dtype, a.head_dim, device.sharedMemPerBlockOptin,
                   [&](auto traits) { smem_bytes = decltype(traits)::kSmemBytes; })) {
    if (a.head_dim == 64 || a.head_dim == 128 || a.head_dim == 256)
      return pruned_reason(a.q.dtype, static_cast<int>(a.head_dim));
    return "has backward kernels for head_dim 64, 128 and 256 only (the other head dims are not "
           "written yet); pad the head dim to 64, 128 or 256 with zeros";
  }
  if (static_cast<size_t>(smem_bytes) > device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block than this GPU allows for this head_dim";
  }
  if (problem.is_flex()) {
    const flex::BlockMask& m = a.flex.block_mask;
    if (a.flex.has_block_mask() &&
        (m.q_block_size % kFlexBlockM != 0 || m.kv_block_size % kFlexBlockN != 0)) {
      return "runs BlockMasks whose q_block_size is a multiple of 64 and kv_block_size a multiple "
             "of 128 (its key block); rebuild the BlockMask with such block sizes (128, 128 is "
             "PyTorch's default)";
    }
  }
  return "";
}

// The most either tile of the head dim needs: the query does not know the device, so whichever tile
// the launch picks fits.
size_t sm80_backward_workspace_bytes(const BackwardProblem& problem) {
  size_t bytes = 0;
  auto take = [&](auto traits) {
    bytes = std::max(bytes, workspace_layout(problem, decltype(traits)::kBlockM).total);
  };
  BackwardKernels::with(problem.params.q.dtype, problem.params.head_dim, take);
  LargeSmemKernels::with(problem.params.q.dtype, problem.params.head_dim, take);
  return bytes;
}

Status launch_sm80_backward(const BackwardProblem& problem, void* workspace, cudaStream_t stream) {
  int device = 0, smem_per_block = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return {StatusCode::kCudaError, std::string("sm80 backward: reading the device's shared "
                                                "memory per block failed: ") +
                                        cudaGetErrorString(err)};
  }
  return launch_sm80_backward_tile(problem, workspace, static_cast<size_t>(smem_per_block), stream);
}

Status launch_sm80_backward_tile(const BackwardProblem& problem, void* workspace,
                                 size_t smem_per_block, cudaStream_t stream) {
  Status status = {StatusCode::kUnsupported, "sm80 backward: head_dim has no kernel"};
  with_traits(problem.params.q.dtype, problem.params.head_dim, smem_per_block, [&](auto traits) {
    using Traits = decltype(traits);
    const WorkspaceLayout w = workspace_layout(problem, Traits::kBlockM);
    const BwdParams p = backward_kernel_view(problem, workspace, Traits::kBlockM, Traits::kBlockN);
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
    if (problem.is_flex()) {
      // The forward's built-in mods: the window ANDed into the mask, softcap last.
      const Problem forward = make_problem(forward_params(problem.params));
      const sm80::BuiltinBwdFlexParams fp{p, builtin_mask(forward), builtin_score_mod(forward),
                                          problem.params.flex.block_mask};
      err = sm80::launch_flex_backward<Traits>(fp, stream);
    } else {
      err = sm80::launch_backward<Traits>(p, problem.params.deterministic, stream);
    }
    if (err == cudaSuccess && problem.params.d_sinks != nullptr) {
      err = sm80::launch_sink_grad(p, problem.params.flex.sinks.logits, problem.params.d_sinks,
                                   stream);
    }
    status = launch_status(err, problem.is_flex() ? "sm80 flex backward" : "sm80 backward");
  });
  return status;
}

}  // namespace flashcore::detail
