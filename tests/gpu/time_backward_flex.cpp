// Times the flex backward (varlen and the built-in flex options, run by the sm80 backward; varlen
// also by the sm90 one) next to the dense backward on the same inputs: B4 H16 S4096 hd128 bf16,
// CUDA events, the median of 20 launches after 3 warm-ups, workspace preallocated. One line per
// family with its forward (kAuto), its backward and the dense sm80 backward of the same mask class
// for the ratio; varlen on both backwards, with its time per visible (query, key) pair against the
// dense kAuto causal one's; deterministic mode on documents (with and without a BlockMask) and
// varlen (sm80) against the same rows without it. Not a test: it prints numbers for
// docs/backward.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "common/fp16_bf16.hpp"
#include "event_timing.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/backward.hpp"
#include "flashcore/flex.hpp"

namespace {

using flashcore::AttentionParams;
using flashcore::BackwardParams;
using flashcore::DType;

constexpr int64_t B = 4, H = 16, S = 4096, D = 128, kDoc = 1024;

template <typename T>
bool upload(const std::vector<T>& host, void** out) {
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(out, host.size() * sizeof(T)));
  FLASHCORE_TIMING_CHECK_CUDA(
      cudaMemcpy(*out, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return true;
}

struct Buffers {
  void *q, *k, *v, *o, *d_o, *dq, *dk, *dv, *lse;
};

// Times forward and backward of f (o, lse set from buffers) and prints one line. The backward runs
// on backward (kAuto or kSm80), or on kSm80 where the forward does; deterministic as asked.
bool time_case(const char* name, AttentionParams f, const Buffers& m, float dense_ms,
               float* bwd_ms = nullptr, flashcore::Backend backward = flashcore::Backend::kAuto,
               bool deterministic = false) {
  const flashcore::Strides st = flashcore::bshd_strides(S, H, D);
  f.o = {m.o, f.q.dtype, st};
  f.lse = static_cast<float*>(m.lse);
  BackwardParams b;
  b.batch = f.batch;
  b.seqlen_q = f.seqlen_q;
  b.seqlen_k = f.seqlen_k;
  b.heads_q = f.heads_q;
  b.heads_kv = f.heads_kv;
  b.head_dim = f.head_dim;
  b.q = f.q;
  b.k = f.k;
  b.v = f.v;
  b.o = {m.o, f.q.dtype, st};
  b.d_o = {m.d_o, f.q.dtype, st};
  b.lse = f.lse;
  b.dq = {m.dq, f.q.dtype, st};
  b.dk = {m.dk, f.q.dtype, st};
  b.dv = {m.dv, f.q.dtype, st};
  b.causal = f.causal;
  b.cu_seqlens_q = f.cu_seqlens_q;
  b.cu_seqlens_k = f.cu_seqlens_k;
  b.max_seqlen_q = f.max_seqlen_q;
  b.max_seqlen_k = f.max_seqlen_k;
  b.flex = f.flex;
  b.backend = f.backend == flashcore::Backend::kSm80 ? flashcore::Backend::kSm80 : backward;
  b.deterministic = deterministic;
  const size_t bytes = flashcore::backward_workspace_bytes(b);
  if (bytes == 0) {
    std::fprintf(stderr, "%s: %s\n", name, flashcore::can_implement_backward(b).message.c_str());
    return false;
  }
  void* workspace;
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(&workspace, bytes));
  flashcore::RunInfo info;
  float fwd = 0, bwd = 0;
  const bool ok =
      flashcore::timing::median_ms([&] { return flashcore::run(f, &info).ok(); }, &fwd) &&
      flashcore::timing::median_ms(
          [&] { return flashcore::run_backward(b, workspace, bytes, nullptr).ok(); }, &bwd);
  FLASHCORE_TIMING_CHECK_CUDA(cudaDeviceSynchronize());
  FLASHCORE_TIMING_CHECK_CUDA(cudaFree(workspace));
  if (!ok) {
    std::fprintf(stderr, "%s: a launch failed\n", name);
    return false;
  }
  std::printf("%-34s | fwd %7.3f ms (%s) | bwd %7.3f ms (%s)", name, fwd, info.provider, bwd,
              flashcore::backend_name(flashcore::resolve_backward_backend(b)));
  if (dense_ms > 0) std::printf(" | %.2fx the dense sm80 backward", bwd / dense_ms);
  std::printf("\n");
  if (bwd_ms != nullptr) *bwd_ms = bwd;
  return true;
}

bool run_all() {
  std::mt19937_64 rng(1234);
  std::normal_distribution<float> normal;
  const size_t n = static_cast<size_t>(B * S * H * D);
  std::vector<uint16_t> bits(n);
  for (uint16_t& x : bits) x = flashcore::detail::float_to_bits(normal(rng), DType::kBFloat16);
  // One draw serves q, k, v and dO (their first elements reshuffled in between): the timings do
  // not depend on the values.
  Buffers m{};
  for (void** p : {&m.q, &m.k, &m.v, &m.d_o}) {
    if (!upload(bits, p)) return false;
    std::shuffle(bits.begin(), bits.begin() + 4096, rng);
  }
  for (void** p : {&m.o, &m.dq, &m.dk, &m.dv}) FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(p, n * 2));
  FLASHCORE_TIMING_CHECK_CUDA(cudaMalloc(&m.lse, static_cast<size_t>(B * H * S) * 4));

  AttentionParams base;
  base.batch = B;
  base.seqlen_q = base.seqlen_k = S;
  base.heads_q = base.heads_kv = H;
  base.head_dim = D;
  const flashcore::Strides st = flashcore::bshd_strides(S, H, D);
  base.q = {m.q, DType::kBFloat16, st};
  base.k = {m.k, DType::kBFloat16, st};
  base.v = {m.v, DType::kBFloat16, st};

  // Dense peers: the sm80 backward (the one the flex backward is built on) and kAuto (sm90).
  float dense = 0, dense_causal = 0, dense_auto_causal = 0;
  {
    AttentionParams f = base;
    f.backend = flashcore::Backend::kSm80;
    if (!time_case("dense sm80", f, m, 0, &dense)) return false;
    f.causal = true;
    if (!time_case("dense sm80 causal", f, m, 0, &dense_causal)) return false;
    f.backend = flashcore::Backend::kAuto;
    if (!time_case("dense kAuto causal", f, m, 0, &dense_auto_causal)) return false;
  }

  // Documents of 1024 (causal, as in packed pretraining), with and without a BlockMask built from
  // the mask (one for every batch and head: batch 1, heads 1).
  std::vector<int32_t> doc_ids(static_cast<size_t>(B * S));
  for (size_t i = 0; i < doc_ids.size(); ++i) doc_ids[i] = static_cast<int32_t>(i % S / kDoc);
  void* d_docs;
  if (!upload(doc_ids, &d_docs)) return false;
  {
    AttentionParams f = base;
    f.causal = true;
    f.flex.mask.documents = flashcore::flex::document_mask(static_cast<const int32_t*>(d_docs), S);
    float documents = 0, documents_deterministic = 0;
    if (!time_case("documents 1024 causal", f, m, dense_causal, &documents)) return false;
    if (!time_case("documents 1024 causal, deterministic", f, m, dense_causal,
                   &documents_deterministic, flashcore::Backend::kAuto, true)) {
      return false;
    }
    std::printf("  deterministic mode: %.2fx\n", documents_deterministic / documents);
    flashcore::flex::BuiltinMask host_mask;
    host_mask.window = flashcore::flex::causal_mask();
    host_mask.documents = flashcore::flex::document_mask(doc_ids.data(), S);
    const flashcore::flex::HostBlockMask blocks = flashcore::flex::build_block_mask_host(
        host_mask, flashcore::flex::block_mask_shape(1, 1, S, S, 128, 128));
    void *counts, *indices, *full_counts, *full_indices;
    if (!upload(blocks.kv_num_blocks, &counts) || !upload(blocks.kv_indices, &indices) ||
        !upload(blocks.full_kv_num_blocks, &full_counts) ||
        !upload(blocks.full_kv_indices, &full_indices)) {
      return false;
    }
    f.flex.block_mask = blocks.shape;
    f.flex.block_mask.kv_num_blocks = static_cast<const int32_t*>(counts);
    f.flex.block_mask.kv_indices = static_cast<const int32_t*>(indices);
    f.flex.block_mask.full_kv_num_blocks = static_cast<const int32_t*>(full_counts);
    f.flex.block_mask.full_kv_indices = static_cast<const int32_t*>(full_indices);
    float listed = 0, listed_deterministic = 0;
    if (!time_case("documents 1024 causal + BlockMask", f, m, dense_causal, &listed) ||
        !time_case("documents 1024 causal + BlockMask, deterministic", f, m, dense_causal,
                   &listed_deterministic, flashcore::Backend::kAuto, true)) {
      return false;
    }
    std::printf("  deterministic mode: %.2fx\n", listed_deterministic / listed);
  }
  {
    AttentionParams f = base;
    f.flex.mask.use_prefix_lm = true;
    f.flex.mask.prefix_lm.prefix_length = 1024;
    if (!time_case("prefix-LM 1024", f, m, dense)) return false;
  }
  {
    std::vector<float> slopes;
    for (int64_t h = 0; h < H; ++h) slopes.push_back(std::exp2(-8.f * (h + 1) / H));
    void* d_slopes;
    if (!upload(slopes, &d_slopes)) return false;
    AttentionParams f = base;
    f.causal = true;
    f.flex.score_mod.alibi.slopes = static_cast<const float*>(d_slopes);
    if (!time_case("ALiBi causal", f, m, dense_causal)) return false;
  }
  {
    // 16k tokens in four sequences of different lengths, causal.
    const std::vector<int32_t> cu = {0, 1024, 4096, 8192, 16384};
    void* d_cu;
    if (!upload(cu, &d_cu)) return false;
    AttentionParams f = base;
    f.causal = true;
    f.seqlen_q = f.seqlen_k = B * S;
    f.cu_seqlens_q = f.cu_seqlens_k = static_cast<const int32_t*>(d_cu);
    f.max_seqlen_q = f.max_seqlen_k = 8192;
    const flashcore::Strides packed = flashcore::bshd_strides(B * S, H, D);
    f.q.strides = f.k.strides = f.v.strides = packed;
    // Visible (query, key) pairs of the causal sequences against the dense causal batch's: the
    // backward's work, so the times compare per pair.
    double pairs = 0;
    for (size_t i = 1; i < cu.size(); ++i) {
      const double n = cu[i] - cu[i - 1];
      pairs += n * (n + 1) / 2;
    }
    const double dense_pairs = static_cast<double>(B) * S * (S + 1) / 2;
    // Each backward (kAuto: sm90 where it runs varlen), then the same in deterministic mode.
    for (flashcore::Backend backward : {flashcore::Backend::kAuto, flashcore::Backend::kSm80}) {
      float bwd = 0, deterministic = 0;
      const bool auto_backend = backward == flashcore::Backend::kAuto;
      if (!time_case(auto_backend ? "varlen 16k tokens (1k,3k,4k,8k) causal"
                                  : "varlen 16k tokens causal, sm80 bwd",
                     f, m, 0, &bwd, backward)) {
        return false;
      }
      std::printf(
          "  per visible pair (%.2fx the dense causal pairs): %.2fx the dense kAuto causal\n",
          pairs / dense_pairs, bwd / pairs / (dense_auto_causal / dense_pairs));
      if (!time_case(auto_backend ? "varlen 16k tokens causal, deterministic"
                                  : "varlen 16k tokens causal, deterministic, sm80 bwd",
                     f, m, 0, &deterministic, backward, true)) {
        return false;
      }
      std::printf("  deterministic mode: %.2fx\n", deterministic / bwd);
    }
  }
  return true;
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return run_all() ? 0 : 1;
}
