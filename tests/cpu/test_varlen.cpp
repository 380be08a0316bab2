// Varlen batches on the CPU: what validation checks before any launch, the content checks of
// cu_seqlens, every backend's reason until its kernels land, the C ABI's fields, and the float64
// reference (each sequence equals a dense attention over its own rows). Fresh random inputs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/backend_registry.hpp"
#include "api/validate.hpp"
#include "common/head_dim.hpp"
#include "common/problem.hpp"
#include "common/pruning.hpp"
#include "flashcore/flashcore.h"
#include "flashcore/varlen.hpp"
#include "reference/cpu_reference.hpp"
#include "sm90/sm90_fwd.hpp"

namespace flashcore {
namespace {

// Three sequences packed into 14 query and 20 key rows. Fake, aligned device addresses:
// argument validation never dereferences them.
AttentionParams varlen_params() {
  AttentionParams p;
  p.batch = 3;
  p.seqlen_q = 14;
  p.seqlen_k = 20;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.head_dim = 64;
  auto* base = reinterpret_cast<char*>(uintptr_t{1} << 40);
  p.q = {base, DType::kFloat16, bshd_strides(14, 4, 64)};
  p.k = {base + (1 << 20), DType::kFloat16, bshd_strides(20, 2, 64)};
  p.v = {base + (2 << 20), DType::kFloat16, bshd_strides(20, 2, 64)};
  p.o = {base + (3 << 20), DType::kFloat16, bshd_strides(14, 4, 64)};
  p.cu_seqlens_q = reinterpret_cast<const int32_t*>(base + (4 << 20));
  p.cu_seqlens_k = reinterpret_cast<const int32_t*>(base + (5 << 20));
  p.max_seqlen_q = 7;
  p.max_seqlen_k = 12;
  return p;
}

TEST(VarlenValidation, ValidParamsPassWhateverTheBatchStride) {
  AttentionParams p = varlen_params();
  p.q.strides.batch = 123456;  // ignored: the sequences are packed along seq
  const Status s = detail::validate_arguments(p);
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST(VarlenValidation, RejectsWithMessagesThatNameTheFix) {
  struct Bad {
    const char* what;
    std::function<void(AttentionParams&)> mutate;
    const char* message_names;
  };
  const Bad cases[] = {
      {"only_q", [](AttentionParams& p) { p.cu_seqlens_k = nullptr; },
       "cu_seqlens_k is null but the other is set"},
      {"zero_max", [](AttentionParams& p) { p.max_seqlen_q = 0; }, "max_seqlen_q is 0"},
      {"max_above_total", [](AttentionParams& p) { p.max_seqlen_k = 21; }, "in [1, seqlen_k = 20]"},
      {"max_without_varlen",
       [](AttentionParams& p) {
         p.cu_seqlens_q = nullptr;
         p.cu_seqlens_k = nullptr;
       },
       "leave max_seqlen at 0"},
      {"misaligned",
       [](AttentionParams& p) {
         p.cu_seqlens_q =
             reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(p.cu_seqlens_q) + 2);
       },
       "cu_seqlens_q is not 4-byte aligned"},
  };
  for (const Bad& c : cases) {
    AttentionParams p = varlen_params();
    c.mutate(p);
    const Status s = detail::validate_arguments(p);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << c.what << ": " << s.message;
    EXPECT_NE(s.message.find(c.message_names), std::string::npos) << c.what << ": " << s.message;
  }
}

TEST(VarlenContents, CheckCuSeqlens) {
  const std::vector<int32_t> good = {0, 0, 7, 14};  // an empty sequence first
  EXPECT_TRUE(check_cu_seqlens("cu_seqlens_q", good.data(), 3, 14, 7).ok());
  struct Bad {
    std::vector<int32_t> cu;
    int64_t max_seqlen;
    const char* message_names;
  };
  const Bad cases[] = {
      {{1, 2, 7, 14}, 7, "cu_seqlens_q[0] is 1; it must be 0"},
      {{0, 7, 5, 14}, 9, "is not sorted: entry 2 (5) is below entry 1 (7)"},
      {{0, 7, 10, 13}, 7, "cu_seqlens_q[batch] is 13 but the packed tensors hold 14"},
      {{0, 2, 4, 14}, 7, "sequence 2 10 long, above max_seqlen 7"},
  };
  for (const Bad& c : cases) {
    const Status s = check_cu_seqlens("cu_seqlens_q", c.cu.data(), 3, 14, c.max_seqlen);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
    EXPECT_NE(s.message.find(c.message_names), std::string::npos) << s.message;
  }
}

// An sm_90 GPU as the backends' rejects() see it (nothing here asks the driver).
cudaDeviceProp h100_properties() {
  cudaDeviceProp hopper{};
  hopper.major = 9;
  hopper.minor = 0;
  hopper.multiProcessorCount = 132;
  hopper.sharedMemPerBlockOptin = 227 * 1024;
  return hopper;
}

TEST(VarlenBackends, Sm90AndSm80RunVarlenAndEveryOtherBackendSaysWhere) {
  const cudaDeviceProp hopper = h100_properties();
  const detail::Problem problem = detail::make_problem(varlen_params());
  size_t count = 0;
  const detail::BackendEntry* entries = detail::backend_entries(&count);
  ASSERT_GT(count, 0u);
  for (size_t i = 0; i < count; ++i) {
    const std::string why = entries[i].rejects(problem, hopper);
    if (entries[i].backend == Backend::kSm80) {
      // In a build pruned of this case's kernel, sm80 says that instead.
      const std::string pruned = detail::pruned_reason(
          problem.params.q.dtype, detail::instantiated_head_dim(problem.params.head_dim));
      if (pruned.empty()) {
        EXPECT_EQ(why, "") << "sm80 runs varlen batches";
      } else {
        EXPECT_NE(why.find(pruned), std::string::npos) << why;
      }
      continue;
    }
    if (entries[i].backend == Backend::kSm90) {
      // sm90 runs them where the build has it (and this case's kernel).
      if (why.find("in this build") == std::string::npos) {
        EXPECT_EQ(why, "") << "sm90 runs varlen batches";
      }
      continue;
    }
    if (entries[i].backend == Backend::kUnfused && why.find("not linked") != std::string::npos) {
      continue;  // this suite does not link the cuBLAS baseline; its rejects() has the same line
    }
    EXPECT_NE(why.find("varlen and flex mods run on the sm90 and sm80 backends"), std::string::npos)
        << entries[i].name << ": " << why;
  }
}

// sm90 runs a varlen batch without a flex part on its persistent kernel (any head dim up to 256,
// unsplit, tile auto or large) and one with a flex part on its flex kernel; auto never leaves a
// varlen batch to sm80 on an sm_90 GPU, however small.
TEST(VarlenBackends, Sm90RunsPlainVarlenOnItsPersistentKernel) {
  const cudaDeviceProp hopper = h100_properties();
  const AttentionParams plain = varlen_params();
  EXPECT_FALSE(detail::sm90_needs_flex_kernel(detail::make_problem(plain)));
  // Sinks alone run on the dense kernels (test_flex_params.cpp,
  // Sm90RunsSinksAloneOnTheDenseKernels); with ALiBi, on the flex kernel.
  AttentionParams alibi_sinks = plain;
  alibi_sinks.flex.sinks.logits = reinterpret_cast<const float*>(plain.o.data);
  alibi_sinks.flex.score_mod.alibi.slopes = reinterpret_cast<const float*>(plain.o.data);
  EXPECT_TRUE(detail::sm90_needs_flex_kernel(detail::make_problem(alibi_sinks)));

  const detail::BackendEntry* sm90 = detail::find_backend(Backend::kSm90);
  ASSERT_NE(sm90, nullptr);
  if (std::string(sm90->rejects(detail::make_problem(plain), hopper)).find("not in this build") !=
      std::string::npos) {
    GTEST_SKIP() << "sm90 varlen test skipped: this build has no sm_90a";
  }
  AttentionParams hd256 = plain;
  hd256.head_dim = 256;
  hd256.q.strides = hd256.o.strides = bshd_strides(14, 4, 256);
  hd256.k.strides = hd256.v.strides = bshd_strides(20, 2, 256);
  for (const AttentionParams& p : {plain, hd256}) {
    const detail::Problem problem = detail::make_problem(p);
    const std::string pruned =
        detail::pruned_reason(p.q.dtype, detail::instantiated_head_dim(p.head_dim));
    const std::string why = sm90->rejects(problem, hopper);
    if (pruned.empty()) {
      EXPECT_EQ(why, "") << "head_dim " << p.head_dim;
    } else {
      EXPECT_NE(why.find(pruned), std::string::npos) << why;
    }
    EXPECT_STREQ(detail::sm90_auto_declines(problem, hopper), "") << "head_dim " << p.head_dim;
  }
  AttentionParams split = plain;
  split.num_splits = 4;
  EXPECT_NE(std::string(sm90->rejects(detail::make_problem(split), hopper)).find("unsplit"),
            std::string::npos);
  AttentionParams small_tile = plain;
  small_tile.tile = TileShape::kSmall;
  EXPECT_NE(std::string(sm90->rejects(detail::make_problem(small_tile), hopper))
                .find("persistent kernel"),
            std::string::npos);
}

TEST(VarlenCAbi, FieldsReachValidation) {
  flashcore_attention_params c;
  flashcore_attention_params_init(&c);
  EXPECT_EQ(c.cu_seqlens_q, nullptr);
  EXPECT_EQ(c.max_seqlen_q, 0);
  const AttentionParams p = varlen_params();
  c.batch = p.batch;
  c.seqlen_q = p.seqlen_q;
  c.seqlen_k = p.seqlen_k;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.head_dim = p.head_dim;
  c.q = p.q.data;
  c.k = p.k.data;
  c.v = p.v.data;
  c.o = p.o.data;
  c.q_strides = {0, p.q.strides.seq, p.q.strides.head};
  c.k_strides = c.v_strides = {0, p.k.strides.seq, p.k.strides.head};
  c.o_strides = c.q_strides;
  c.cu_seqlens_q = p.cu_seqlens_q;  // and no cu_seqlens_k
  c.max_seqlen_q = 7;
  c.max_seqlen_k = 12;
  EXPECT_EQ(flashcore_attention(&c, nullptr), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("cu_seqlens_k is null"), std::string::npos)
      << flashcore_last_error();
}

// The reference on a packed batch: each sequence must equal a dense attention over its rows.
TEST(VarlenReference, EachSequenceIsItsOwnAttention) {
  const std::vector<int32_t> lengths_q = {0, 1, 7, 30, 5};
  const std::vector<int32_t> lengths_k = {3, 1, 7, 41, 0};  // the last sequence sees no key
  constexpr int64_t Hq = 4, Hkv = 2, D = 16;
  std::vector<int32_t> cu_q = {0}, cu_k = {0};
  for (size_t b = 0; b < lengths_q.size(); ++b) {
    cu_q.push_back(cu_q.back() + lengths_q[b]);
    cu_k.push_back(cu_k.back() + lengths_k[b]);
  }
  const int64_t total_q = cu_q.back(), total_k = cu_k.back();
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> normal;
  auto random = [&](int64_t n) {
    std::vector<double> x(static_cast<size_t>(n));
    for (double& e : x) e = normal(rng);
    return x;
  };
  const std::vector<double> q = random(total_q * Hq * D), k = random(total_k * Hkv * D),
                            v = random(total_k * Hkv * D);
  struct Options {
    bool causal;
    int64_t left;
    float softcap;
  };
  for (const Options& opt : {Options{false, -1, 0.f}, Options{true, -1, 0.f}, Options{true, 3, 0.f},
                             Options{false, -1, 2.5f}}) {
    AttentionParams p;
    p.batch = static_cast<int64_t>(lengths_q.size());
    p.seqlen_q = total_q;
    p.seqlen_k = total_k;
    p.heads_q = Hq;
    p.heads_kv = Hkv;
    p.head_dim = D;
    p.cu_seqlens_q = cu_q.data();  // host arrays: the reference reads them
    p.cu_seqlens_k = cu_k.data();
    p.max_seqlen_q = 30;
    p.max_seqlen_k = 41;
    p.causal = opt.causal;
    p.window_left = opt.left;
    p.softcap = opt.softcap;
    std::vector<double> o, lse;
    const Status s = reference::cpu_attention(p, q, k, v, &o, &lse);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_EQ(lse.size(), static_cast<size_t>(Hq * total_q));
    for (size_t b = 0; b < lengths_q.size(); ++b) {
      const int64_t nq = lengths_q[b], nk = lengths_k[b], q0 = cu_q[b], k0 = cu_k[b];
      if (nq == 0) continue;
      std::vector<double> want_o(static_cast<size_t>(nq * Hq * D), 0.0);
      std::vector<double> want_lse(static_cast<size_t>(nq * Hq),
                                   -std::numeric_limits<double>::infinity());
      if (nk > 0) {
        AttentionParams dense = p;
        dense.batch = 1;
        dense.seqlen_q = nq;
        dense.seqlen_k = nk;
        dense.cu_seqlens_q = dense.cu_seqlens_k = nullptr;
        dense.max_seqlen_q = dense.max_seqlen_k = 0;
        const std::vector<double> sq(q.begin() + q0 * Hq * D, q.begin() + (q0 + nq) * Hq * D);
        const std::vector<double> sk(k.begin() + k0 * Hkv * D, k.begin() + (k0 + nk) * Hkv * D);
        const std::vector<double> sv(v.begin() + k0 * Hkv * D, v.begin() + (k0 + nk) * Hkv * D);
        ASSERT_TRUE(reference::cpu_attention(dense, sq, sk, sv, &want_o, &want_lse).ok());
      }
      for (int64_t i = 0; i < nq * Hq * D; ++i) {
        ASSERT_NEAR(o[static_cast<size_t>(q0 * Hq * D + i)], want_o[static_cast<size_t>(i)], 1e-12)
            << "sequence " << b;
      }
      for (int64_t h = 0; h < Hq; ++h) {
        for (int64_t i = 0; i < nq; ++i) {
          const double got = lse[static_cast<size_t>(h * total_q + q0 + i)];
          const double want = want_lse[static_cast<size_t>(h * nq + i)];
          if (std::isinf(want)) {
            EXPECT_EQ(got, want) << "sequence " << b << " row " << i;
          } else {
            EXPECT_NEAR(got, want, 1e-12) << "sequence " << b << " row " << i;
          }
        }
      }
    }
  }
  // Bad host arrays fail instead of reading out of bounds.
  std::vector<int32_t> unsorted = cu_q;
  std::swap(unsorted[2], unsorted[3]);
  AttentionParams p;
  p.batch = static_cast<int64_t>(lengths_q.size());
  p.seqlen_q = total_q;
  p.seqlen_k = total_k;
  p.heads_q = Hq;
  p.heads_kv = Hkv;
  p.head_dim = D;
  p.cu_seqlens_q = unsorted.data();
  p.cu_seqlens_k = cu_k.data();
  std::vector<double> o, lse;
  const Status s = reference::cpu_attention(p, q, k, v, &o, &lse);
  EXPECT_NE(s.message.find("not sorted"), std::string::npos) << s.message;
}

}  // namespace
}  // namespace flashcore
