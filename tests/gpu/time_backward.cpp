// Times run_backward (and the forward, for the forward + backward total) on a few training shapes
// with CUDA events: the median of timing::kIterations launches after timing::kWarmup, inputs
// random, workspace preallocated. Prints one line per shape with the backward's TFLOP/s (2.5x the
// forward's FLOPs, the convention of FlashAttention's benchmarks) and the workspace the backward
// needs. Not a test: scripts/backward_device.sh runs it next to torch's SDPA backward
// (scripts/time_sdpa_backward.py).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "common/backward_problem.hpp"
#include "common/fp16_bf16.hpp"
#include "event_timing.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/backward.hpp"
#include "sm80/sm80_bwd.hpp"
#include "sm90/sm90_bwd.hpp"

namespace {

struct Shape {
  int64_t batch, heads_q, heads_kv, seqlen, head_dim;
  bool causal;
  flashcore::DType dtype;
  bool deterministic;
  float softcap = 0.f;
  flashcore::Backend backend = flashcore::Backend::kAuto;
};

// A device buffer of n 16-bit elements: a block of kRandomBlock values drawn from N(0, 1),
// repeated (drawing every element on the host took seconds per shape; the timings do not depend
// on the values repeating).
constexpr size_t kRandomBlock = size_t{1} << 20;
bool random_buffer(size_t n, flashcore::DType dtype, std::mt19937_64* rng, void** out) {
  std::normal_distribution<float> normal;
  std::vector<uint16_t> bits(std::min(n, kRandomBlock));
  for (uint16_t& b : bits) b = flashcore::detail::float_to_bits(normal(*rng), dtype);
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(out, n * 2));
  auto* dst = static_cast<char*>(*out);
  FLASHCORE_TIMING_CHECK_CUDA(
      cudaMemcpy(dst, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  for (size_t done = bits.size(); done < n;) {
    const size_t count = std::min(done, n - done);
    FLASHCORE_TIMING_CHECK_CUDA(
        cudaMemcpy(dst + done * 2, dst, count * 2, cudaMemcpyDeviceToDevice));
    done += count;
  }
  return true;
}

bool time_shape(const Shape& s) {
  std::mt19937_64 rng(1234);
  const int64_t B = s.batch, Hq = s.heads_q, Hkv = s.heads_kv, S = s.seqlen, D = s.head_dim;
  const size_t nq = static_cast<size_t>(B * S * Hq * D), nk = static_cast<size_t>(B * S * Hkv * D);
  void *q, *k, *v, *o, *d_o, *dq, *dk, *dv, *lse;
  if (!random_buffer(nq, s.dtype, &rng, &q) || !random_buffer(nk, s.dtype, &rng, &k) ||
      !random_buffer(nk, s.dtype, &rng, &v) || !random_buffer(nq, s.dtype, &rng, &d_o)) {
    return false;
  }
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(&o, nq * 2));
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(&dq, nq * 2));
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(&dk, nk * 2));
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(&dv, nk * 2));
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(&lse, static_cast<size_t>(B * Hq * S) * 4));

  flashcore::AttentionParams f;
  f.batch = B;
  f.seqlen_q = f.seqlen_k = S;
  f.heads_q = Hq;
  f.heads_kv = Hkv;
  f.head_dim = D;
  f.q = {q, s.dtype, flashcore::bshd_strides(S, Hq, D)};
  f.k = {k, s.dtype, flashcore::bshd_strides(S, Hkv, D)};
  f.v = {v, s.dtype, flashcore::bshd_strides(S, Hkv, D)};
  f.o = {o, s.dtype, flashcore::bshd_strides(S, Hq, D)};
  f.lse = static_cast<float*>(lse);
  f.causal = s.causal;
  f.softcap = s.softcap;

  flashcore::BackwardParams b;
  b.batch = B;
  b.seqlen_q = b.seqlen_k = S;
  b.heads_q = Hq;
  b.heads_kv = Hkv;
  b.head_dim = D;
  b.q = f.q;
  b.k = f.k;
  b.v = f.v;
  b.o = {o, s.dtype, f.o.strides};
  b.d_o = {d_o, s.dtype, f.o.strides};
  b.lse = f.lse;
  b.dq = {dq, s.dtype, f.o.strides};
  b.dk = {dk, s.dtype, f.k.strides};
  b.dv = {dv, s.dtype, f.v.strides};
  b.causal = s.causal;
  b.softcap = s.softcap;
  b.deterministic = s.deterministic;
  b.backend = s.backend;
  const size_t workspace_bytes = flashcore::backward_workspace_bytes(b);
  if (workspace_bytes == 0) {
    std::fprintf(stderr, "backward: %s\n", flashcore::can_implement_backward(b).message.c_str());
    return false;
  }
  void* workspace;
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  flashcore::RunInfo info;
  float fwd_ms = 0, bwd_ms = 0;
  bool ok = flashcore::timing::median_ms([&] { return flashcore::run(f, &info).ok(); }, &fwd_ms) &&
            flashcore::timing::median_ms(
                [&] {
                  const flashcore::Status st =
                      flashcore::run_backward(b, workspace, workspace_bytes, nullptr);
                  if (!st.ok()) std::fprintf(stderr, "backward: %s\n", st.message.c_str());
                  return st.ok();
                },
                &bwd_ms);
  FLASHCORE_TIMING_CHECK_CUDA(cudaDeviceSynchronize());
  const double fwd_flops = 4.0 * B * Hq * S * S * D * (s.causal ? 0.5 : 1.0);
  std::printf(
      "B%lld Hq%lld Hkv%lld S%lld D%lld %s%s%s%s | fwd %.3f ms (%s) | bwd %.3f ms %.1f TFLOP/s "
      "(%s) | fwd+bwd %.3f ms | workspace %.1f MiB\n",
      static_cast<long long>(B), static_cast<long long>(Hq), static_cast<long long>(Hkv),
      static_cast<long long>(S), static_cast<long long>(D),
      s.dtype == flashcore::DType::kBFloat16 ? "bf16" : "fp16", s.causal ? " causal" : "",
      s.deterministic ? " deterministic" : "", s.softcap > 0.f ? " softcap" : "", fwd_ms,
      info.provider, bwd_ms, 2.5 * fwd_flops / (bwd_ms * 1e-3) / 1e12,
      flashcore::backend_name(flashcore::resolve_backward_backend(b)), fwd_ms + bwd_ms,
      workspace_bytes / 1048576.0);
  for (void* p : {q, k, v, o, d_o, dq, dk, dv, lse, workspace})
    FLASHCORE_TIMING_CHECK_CUDA(cudaFree(p));
  return ok;
}

}  // namespace

// Optional arguments: the indices of the shapes to time, in order (one index for profiling a single
// launch with ncu).
int main(int argc, char** argv) {
  using flashcore::DType;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is measured, also under timeout
  const Shape shapes[] = {
      // The FA3 grid's hidden 2048 at 16k tokens: hd128 (16 heads) and hd64 (32 heads).
      {4, 16, 16, 4096, 128, false, DType::kBFloat16, false},
      {4, 16, 16, 4096, 128, true, DType::kBFloat16, false},
      {2, 16, 16, 8192, 128, false, DType::kBFloat16, false},
      {2, 16, 16, 8192, 128, true, DType::kBFloat16, false},
      {4, 32, 32, 4096, 64, false, DType::kBFloat16, false},
      {4, 32, 32, 4096, 64, true, DType::kBFloat16, false},
      {2, 32, 32, 8192, 64, false, DType::kBFloat16, false},
      {2, 32, 32, 8192, 64, true, DType::kBFloat16, false},
      {4, 16, 16, 4096, 128, false, DType::kFloat16, false},
      // GQA 8:1: the kv head's CTAs walk every query head of the group.
      {4, 16, 2, 4096, 128, true, DType::kBFloat16, false},
      // Deterministic mode's cost, next to the same shapes above.
      {4, 16, 16, 4096, 128, false, DType::kBFloat16, true},
      {4, 16, 16, 4096, 128, true, DType::kBFloat16, true},
      {4, 32, 32, 4096, 64, true, DType::kBFloat16, true},
      // ... and on the sm80 backward (what an A100 runs).
      {4, 16, 16, 4096, 128, false, DType::kBFloat16, true, 0.f, flashcore::Backend::kSm80},
      {4, 16, 16, 4096, 128, true, DType::kBFloat16, true, 0.f, flashcore::Backend::kSm80},
      // Softcap (Gemma-style cap 30): the tanh and its derivative per score.
      {4, 16, 16, 4096, 128, false, DType::kBFloat16, false, 30.f},
      {4, 32, 32, 4096, 64, true, DType::kBFloat16, false, 30.f},
      // Head dim 256 (kAuto: the sm90 backward on an H100).
      {4, 16, 16, 4096, 256, false, DType::kBFloat16, false},
      {4, 16, 16, 4096, 256, true, DType::kBFloat16, false},
      {2, 16, 16, 8192, 256, false, DType::kBFloat16, false},
      {2, 16, 16, 8192, 256, true, DType::kBFloat16, false},
      {4, 16, 16, 4096, 256, false, DType::kFloat16, false},
      {4, 16, 16, 4096, 256, true, DType::kBFloat16, true},
      // ... and on the sm80 backward (what an A100 runs), against which kAuto's choice is made.
      {4, 16, 16, 4096, 256, false, DType::kBFloat16, false, 0.f, flashcore::Backend::kSm80},
      {4, 16, 16, 4096, 256, true, DType::kBFloat16, false, 0.f, flashcore::Backend::kSm80},
      // Softcap at hd256 (the softcap kernel of the sm90 hd256 backward).
      {4, 16, 16, 4096, 256, true, DType::kBFloat16, false, 30.f},
      // The FA3 grid's longest length, 16k tokens in one sequence: hd128 and hd256.
      {1, 16, 16, 16384, 128, false, DType::kBFloat16, false},
      {1, 16, 16, 16384, 128, true, DType::kBFloat16, false},
      {1, 16, 16, 16384, 256, false, DType::kBFloat16, false},
      {1, 16, 16, 16384, 256, true, DType::kBFloat16, false},
      // Fewer tiles than an H100 has SMs (16 key blocks x 4 heads = 64): the sm90 backward's tail
      // split (src/sm90/bwd_tail_split.hpp) runs them as ranges of half a tile on 128 SMs.
      {1, 4, 4, 2048, 128, false, DType::kBFloat16, false},
  };
  bool ok = true;
  const int count = static_cast<int>(sizeof(shapes) / sizeof(shapes[0]));
  if (argc > 1) {
    for (int a = 1; a < argc; ++a) {
      const int index = std::atoi(argv[a]);
      if (index < 0 || index >= count) {
        std::fprintf(stderr, "shape index %d out of range [0, %d)\n", index, count);
        return 1;
      }
      ok = time_shape(shapes[index]) && ok;
    }
    return ok ? 0 : 1;
  }
  for (const Shape& shape : shapes) ok = time_shape(shape) && ok;
  // The workspace (the backward's extra memory besides its gradients) at B2 H16 D128, two lengths:
  // the sm90 backward's on this GPU, not causal (with the tail split's slots) and causal, and the
  // sm80 backward's.
  for (int64_t S : {8192, 16384}) {
    flashcore::BackwardParams b;
    b.batch = 2;
    b.seqlen_q = b.seqlen_k = S;
    b.heads_q = b.heads_kv = 16;
    b.head_dim = 128;
    b.q.dtype = DType::kBFloat16;
    const auto problem = flashcore::detail::make_backward_problem(b);
    b.causal = true;
    const auto causal = flashcore::detail::make_backward_problem(b);
    constexpr double kMiB = 1048576.0;
    std::printf("workspace B2 H16 S%lld D128: sm90 %.1f MiB (causal %.1f MiB), sm80 %.1f MiB\n",
                static_cast<long long>(S),
                flashcore::detail::sm90_backward_workspace_bytes(problem) / kMiB,
                flashcore::detail::sm90_backward_workspace_bytes(causal) / kMiB,
                flashcore::detail::sm80_backward_workspace_bytes(problem) / kMiB);
  }
  return ok ? 0 : 1;
}
