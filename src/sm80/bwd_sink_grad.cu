// The sinks' gradient reduction (bwd_sink_grad.hpp says what and why).
#include <cub/block/block_reduce.cuh>

#include "common/launch.hpp"
#include "common/online_softmax.hpp"
#include "sm80/bwd_sink_grad.hpp"

namespace flashcore::sm80 {
namespace {

// Enough threads to keep the loads of a head's rows in flight: 16k rows a head take 16 loads of
// each array per thread.
constexpr int kSinkGradThreads = 1024;

// One CTA per query head. The workspace's rows of head h are seqlen_q_rounded consecutive floats
// per batch entry ([batch, heads_q, rows]) or one run of them for a varlen batch ([heads_q, rows],
// every row written by the preprocess, the padding and the rows no sequence has as LSE +inf and
// D 0, which add exp2(-inf) * 0 = 0).
__global__ void __launch_bounds__(kSinkGradThreads)
    sink_grad_kernel(const __grid_constant__ BwdParams p, const float* sink_logits,
                     float* d_sinks) {
  using BlockReduce = cub::BlockReduce<float, kSinkGradThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const int head = blockIdx.x;
  const float sink_log2 = sink_logits[head] * kLog2e;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int runs = varlen ? 1 : p.batch;
  float sum = 0.f;
  for (int run = 0; run < runs; ++run) {
    const int64_t first = (static_cast<int64_t>(run) * p.heads_q + head) * p.seqlen_q_rounded;
    const float* lse_log2 = p.lse_log2 + first;
    const float* delta = p.delta + first;
#pragma unroll 4
    for (int row = threadIdx.x; row < p.seqlen_q_rounded; row += kSinkGradThreads) {
      sum += exp2f(sink_log2 - lse_log2[row]) * delta[row];
    }
  }
  const float total = BlockReduce(reduce_storage).Sum(sum);
  if (threadIdx.x == 0) d_sinks[head] = -total;
}

}  // namespace

cudaError_t launch_sink_grad(const BwdParams& p, const float* sink_logits, float* d_sinks,
                             cudaStream_t stream) {
  detail::LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(p.heads_q));
  shape.threads = kSinkGradThreads;
  return detail::launch_kernel(sink_grad_kernel, shape, stream, p, sink_logits, d_sinks);
}

}  // namespace flashcore::sm80
