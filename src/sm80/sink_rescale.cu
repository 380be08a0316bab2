#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "sm80/sink_rescale.hpp"

namespace flashcore::sm80 {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 8;  // fp16/bf16 elements in 16 bytes

// A row's sink weight exp(LSE - LSE'), written LSE' where asked (write_lse: one thread per row).
__device__ float sink_weight(const SinkRescaleArgs& a, int64_t b, int64_t h, int64_t i,
                             bool write_lse) {
  const int64_t lse_index = (b * a.heads + h) * a.seqlen + i;
  const float lse = a.lse_in[lse_index];
  const float sink = a.sink_logits[h];
  const float top = fmaxf(lse, sink);
  // A row without keys and a sink of -inf stays as it is: O = 0, LSE = -inf.
  const float with_sink = top == -INFINITY ? lse : top + logf(expf(lse - top) + expf(sink - top));
  if (write_lse && a.lse_out != nullptr) a.lse_out[lse_index] = with_sink;
  return top == -INFINITY ? 1.f : expf(lse - with_sink);  // 0 for a row that saw no key
}

// The rows in O's memory order (batch, row, head), so that consecutive threads read consecutive
// 16-byte chunks where O is contiguous: one chunk of kChunk elements per thread. Every chunk is an
// aligned 16 bytes: validation asks for a 16-byte aligned O whose head dim is contiguous and whose
// other strides are multiples of 8 elements, and the callers' head dims are multiples of 8.
template <typename T>
__global__ void __launch_bounds__(kThreads) sink_rescale_chunks(const SinkRescaleArgs a) {
  const int64_t chunks_per_row = a.head_dim / kChunk;
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (chunk >= a.batch * a.seqlen * a.heads * chunks_per_row) return;
  const int64_t row = chunk / chunks_per_row, c = chunk % chunks_per_row;
  const int64_t h = row % a.heads, i = (row / a.heads) % a.seqlen, b = row / (a.heads * a.seqlen);
  const float weight = sink_weight(a, b, h, i, /*write_lse=*/c == 0);
  T* o = static_cast<T*>(a.o) + b * a.o_strides.batch + i * a.o_strides.seq + h * a.o_strides.head +
         c * kChunk;
  uint4 bits = *reinterpret_cast<const uint4*>(o);
  T* values = reinterpret_cast<T*>(&bits);
  for (int e = 0; e < kChunk; ++e) values[e] = T(static_cast<float>(values[e]) * weight);
  *reinterpret_cast<uint4*>(o) = bits;
}

template <typename T>
cudaError_t launch_typed(const SinkRescaleArgs& a, cudaStream_t stream) {
  const int64_t chunks = a.batch * a.seqlen * a.heads * (a.head_dim / kChunk);
  const dim3 grid(static_cast<unsigned>((chunks + kThreads - 1) / kThreads));
  sink_rescale_chunks<T><<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_sink_rescale(const SinkRescaleArgs& args, cudaStream_t stream) {
  if (args.head_dim % kChunk != 0 || args.o_strides.dim != 1) return cudaErrorInvalidValue;
  if (args.batch * args.seqlen * args.heads == 0) return cudaSuccess;
  return args.bf16 ? launch_typed<__nv_bfloat16>(args, stream) : launch_typed<__half>(args, stream);
}

}  // namespace flashcore::sm80
