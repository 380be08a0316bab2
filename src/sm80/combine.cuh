// Split-KV combine: merges the per-split partial O (each normalized by its own softmax sum) by
// their LSEs: LSE = log(sum_s exp(lse_s)), O = sum_s exp(lse_s - LSE) * O_s. With attention sinks
// (flashcore/flex/sinks.hpp) the head's sink joins the sum once, here, never per split:
// LSE = log(sum_s exp(lse_s) + exp(sink[h])).
#pragma once

#include <cstdint>

#include "common/launch.hpp"
#include "sm80/fwd_params.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

inline constexpr int kCombineThreads = 128;
inline constexpr int kCombineVector = 4;  // fp32 partial elements per thread (one float4)

// One thread per 4 head-dim elements of one (batch, head, row).
template <typename Element>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(const __grid_constant__ FwdParams p, int head_dim, const float* sink_logits) {
  const int64_t vectors_per_row = head_dim / kCombineVector;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads * p.seqlen_q;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kCombineThreads + threadIdx.x;
  if (idx >= rows * vectors_per_row) return;
  const int64_t row_index = idx / vectors_per_row;  // ((b * heads) + h) * seqlen_q + row
  const int col = static_cast<int>(idx % vectors_per_row) * kCombineVector;
  const int row = static_cast<int>(row_index % p.seqlen_q);
  const int64_t batch_head = row_index / p.seqlen_q;
  const int head = static_cast<int>(batch_head % p.heads);
  const int batch = static_cast<int>(batch_head / p.heads);
  const float sink = sink_logits != nullptr ? sink_logits[head] : -INFINITY;

  float max_lse = sink;
  for (int s = 0; s < p.num_splits; ++s)
    max_lse = fmaxf(max_lse, p.lse_partial[s * rows + row_index]);
  float out[kCombineVector] = {0.f, 0.f, 0.f, 0.f};
  // Every split empty and no sink: the row saw no key, O = 0 and LSE = -inf. With a sink and no
  // key, O = 0 and LSE = the sink, as the unsplit kernels give.
  float lse = -INFINITY;
  if (max_lse != -INFINITY) {
    float sum = sink_logits != nullptr ? expf(sink - max_lse) : 0.f;
    for (int s = 0; s < p.num_splits; ++s)
      sum += expf(p.lse_partial[s * rows + row_index] - max_lse);
    lse = max_lse + logf(sum);
    for (int s = 0; s < p.num_splits; ++s) {
      const float weight = expf(p.lse_partial[s * rows + row_index] - lse);
      if (weight == 0.f) continue;  // an empty split's O is 0, but skip its read
      const float4 part =
          *reinterpret_cast<const float4*>(p.o_partial + (s * rows + row_index) * head_dim + col);
      out[0] += weight * part.x;
      out[1] += weight * part.y;
      out[2] += weight * part.z;
      out[3] += weight * part.w;
    }
  }

  Element* o =
      static_cast<Element*>(p.o) + batch * p.o_batch + head * p.o_head + row * p.o_seq + col;
  const uint2 packed = make_uint2(pack2<Element>(out[0], out[1]), pack2<Element>(out[2], out[3]));
  *reinterpret_cast<uint2*>(o) = packed;
  if (col == 0 && p.lse != nullptr) p.lse[row_index] = lse;
}

// Launches the combine for the partials p describes (any backend that writes them in this layout);
// sink_logits: fp32 [heads] or null (flashcore/flex/sinks.hpp).
template <typename Element>
cudaError_t launch_combine(const FwdParams& p, int head_dim, cudaStream_t stream,
                           const float* sink_logits = nullptr) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads * p.seqlen_q;
  const int64_t vectors = rows * (head_dim / kCombineVector);
  detail::LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>((vectors + kCombineThreads - 1) / kCombineThreads));
  shape.threads = kCombineThreads;
  return detail::launch_kernel(combine_kernel<Element>, shape, stream, p, head_dim, sink_logits);
}

}  // namespace flashcore::sm80
