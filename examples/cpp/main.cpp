// Embeds flashcore: describes one attention problem, asks whether it can run here, and runs it
// when there is a GPU. Without one, can_implement() reports kNoDevice and the program says so.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <flashcore/attention.hpp>

int main() {
  constexpr int64_t kBatch = 1, kSeq = 256, kHeads = 4, kHeadDim = 64;
  const size_t elements = kBatch * kSeq * kHeads * kHeadDim;

  flashcore::AttentionParams p;
  p.batch = kBatch;
  p.seqlen_q = kSeq;
  p.seqlen_k = kSeq;
  p.heads_q = kHeads;
  p.heads_kv = kHeads;
  p.head_dim = kHeadDim;
  p.causal = true;
  void* buffers[4] = {};
  int device_count = 0;
  const bool has_gpu = cudaGetDeviceCount(&device_count) == cudaSuccess && device_count > 0;
  if (has_gpu) {
    for (void*& buffer : buffers) {
      if (cudaMalloc(&buffer, elements * 2) != cudaSuccess) return 1;
      if (cudaMemset(buffer, 0x3c, elements * 2) != cudaSuccess) return 1;  // fp16 ~1.0
    }
  } else {
    // Aligned stand-ins that are never dereferenced: validation gets past the pointer checks and
    // reaches the device check, which is the one this machine fails.
    for (int i = 0; i < 4; ++i) buffers[i] = reinterpret_cast<void*>(uintptr_t{1} << (20 + i));
  }
  const flashcore::Strides strides = flashcore::bshd_strides(kSeq, kHeads, kHeadDim);
  p.q = {buffers[0], flashcore::DType::kFloat16, strides};
  p.k = {buffers[1], flashcore::DType::kFloat16, strides};
  p.v = {buffers[2], flashcore::DType::kFloat16, strides};
  p.o = {buffers[3], flashcore::DType::kFloat16, strides};

  const flashcore::Status can = flashcore::can_implement(p);
  if (!has_gpu) {
    // The expected answer on a machine without a GPU: a clear status, nothing launched.
    std::printf("no GPU: can_implement says code %d, \"%s\"\n", static_cast<int>(can.code),
                can.message.c_str());
    return can.code == flashcore::StatusCode::kNoDevice ? 0 : 1;
  }
  flashcore::RunInfo info;
  const flashcore::Status ran = flashcore::run(p, &info);
  if (!ran.ok() || cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("flashcore failed: %s\n", ran.message.c_str());
    return 1;
  }
  std::printf("ran on provider %s\n", info.provider);
  for (void* buffer : buffers) cudaFree(buffer);
  return 0;
}
