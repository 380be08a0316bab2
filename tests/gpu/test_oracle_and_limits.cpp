// The fp32 GPU oracle against the CPU reference, every backend against the oracle at shapes too
// large for the CPU, offsets beyond 2^31 elements, and failures that must write nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "flashcore/attention.hpp"
#include "flashcore/flashcore.h"
#include "tests/support/attention_case.hpp"

namespace flashcore::testing {
namespace {

class OracleTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(OracleTest, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  CaseData data(GetParam());
  data.compute_reference();
  SCOPED_TRACE("seed " + std::to_string(data.seed()));
  const OracleOutput oracle = run_oracle(data);
  std::vector<float> lse(oracle.lse.begin(), oracle.lse.end());
  const Errors e = compare(GetParam(), oracle.o, data.ref_o(), &lse, data.ref_lse());
  EXPECT_EQ(e.nan_count, 0);
  EXPECT_EQ(e.masked_row_errors, 0);
  EXPECT_LE(e.rel_l2, 1e-5) << "fp32 arithmetic lands far under 1e-3";
  EXPECT_LE(e.lse_max_abs, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Shapes, OracleTest,
                         ::testing::Values(AttentionCase{.batch = 2,
                                                         .seqlen_q = 127,
                                                         .seqlen_k = 1000,
                                                         .heads_q = 4,
                                                         .heads_kv = 2,
                                                         .head_dim = 128,
                                                         .causal = true,
                                                         .softcap = 20.f,
                                                         .layout = Layout::kBHSD},
                                           AttentionCase{.dtype = DType::kBFloat16,
                                                         .batch = 1,
                                                         .seqlen_q = 1000,
                                                         .seqlen_k = 127,
                                                         .heads_q = 8,
                                                         .heads_kv = 1,
                                                         .head_dim = 256,
                                                         .window_left = 16,
                                                         .window_right = 3},
                                           AttentionCase{.batch = 1,
                                                         .seqlen_q = 1,
                                                         .seqlen_k = 4097,
                                                         .heads_q = 2,
                                                         .heads_kv = 2,
                                                         .head_dim = 64,
                                                         .layout = Layout::kPadded}),
                         [](const auto& info) { return info.param.name(); });

// Shapes the CPU reference would take minutes on: every backend against the fp32 oracle.
class LargeShapeTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(LargeShapeTest, BackendsMatchOracle) {
  FLASHCORE_REQUIRE_GPU();
  const AttentionCase& c = GetParam();
  CaseData data(c);
  SCOPED_TRACE("seed " + std::to_string(data.seed()));
  const OracleOutput oracle = run_oracle(data);
  for (Backend backend : backends()) {
    if (backend == Backend::kScalar || backend == Backend::kWmma)
      continue;  // teaching kernels: slow here
    SCOPED_TRACE(std::string("backend ") + backend_name(backend));
    data.poison_outputs();
    const Status status = run(data.params(backend), nullptr);
    ASSERT_TRUE(status.ok()) << status.message;
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    bool padding_untouched = false;
    const std::vector<double> o = data.read_o(&padding_untouched);
    const std::vector<float> lse = data.read_lse();
    const Errors e = compare(c, o, oracle.o, &lse, oracle.lse);
    EXPECT_EQ(e.nan_count, 0);
    EXPECT_EQ(e.masked_row_errors, 0);
    EXPECT_LE(e.rel_l2, tolerance(c.dtype));
    EXPECT_LE(e.lse_max_abs, kLseTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LargeShapeTest,
                         ::testing::Values(AttentionCase{.dtype = DType::kBFloat16,
                                                         .batch = 2,
                                                         .seqlen_q = 4096,
                                                         .seqlen_k = 4096,
                                                         .heads_q = 16,
                                                         .heads_kv = 16,
                                                         .head_dim = 128},
                                           AttentionCase{.dtype = DType::kBFloat16,
                                                         .batch = 2,
                                                         .seqlen_q = 4096,
                                                         .seqlen_k = 4096,
                                                         .heads_q = 16,
                                                         .heads_kv = 16,
                                                         .head_dim = 128,
                                                         .causal = true},
                                           AttentionCase{.batch = 8,
                                                         .seqlen_q = 1,
                                                         .seqlen_k = 16384,
                                                         .heads_q = 32,
                                                         .heads_kv = 8,
                                                         .head_dim = 128},
                                           AttentionCase{.batch = 1,
                                                         .seqlen_q = 2048,
                                                         .seqlen_k = 8192,
                                                         .heads_q = 8,
                                                         .heads_kv = 8,
                                                         .head_dim = 256,
                                                         .causal = true,
                                                         .window_left = 1024}),
                         [](const auto& info) { return info.param.name(); });

// K and V whose second batch starts past 2^31 elements: 32-bit offsets would read batch 0 again.
TEST(LargeOffsets, BatchStrideBeyondTwoToThe31) {
  FLASHCORE_REQUIRE_GPU();
  constexpr int64_t kBatch = 2, kSeq = 64, kHeads = 2, kDim = 64;
  constexpr int64_t kHugeStride = (int64_t{1} << 31) + 1024;  // a multiple of 8 elements
  const AttentionCase c{.batch = kBatch,
                        .seqlen_q = kSeq,
                        .seqlen_k = kSeq,
                        .heads_q = kHeads,
                        .heads_kv = kHeads,
                        .head_dim = kDim};
  CaseData data(c);  // Q and O contiguous; K and V copied below into huge-stride buffers
  data.compute_reference();

  const size_t huge_elements =
      static_cast<size_t>(kHugeStride * (kBatch - 1) + kSeq * kHeads * kDim);
  DeviceBuffer k(huge_elements * 2), v(huge_elements * 2);
  if (k.get() == nullptr || v.get() == nullptr)
    GTEST_SKIP() << "GPU lacks 2 x 4.3 GB for this test";
  AttentionParams base = data.params(Backend::kAuto);
  const size_t batch_bytes = static_cast<size_t>(kSeq * kHeads * kDim) * 2;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (auto [dst, src] : {std::pair{k.get(), base.k.data}, std::pair{v.get(), base.v.data}}) {
      CUDA_ASSERT_OK(cudaMemcpy(static_cast<char*>(dst) + b * kHugeStride * 2,
                                static_cast<const char*>(src) + b * batch_bytes, batch_bytes,
                                cudaMemcpyDeviceToDevice));
    }
  }
  for (Backend backend : backends()) {
    SCOPED_TRACE(std::string("backend ") + backend_name(backend));
    AttentionParams p = data.params(backend);
    p.k = {k.get(), c.dtype, {kHugeStride, kHeads * kDim, kDim, 1}};
    p.v = {v.get(), c.dtype, {kHugeStride, kHeads * kDim, kDim, 1}};
    data.poison_outputs();
    const Status status = run(p, nullptr);
    ASSERT_TRUE(status.ok()) << status.message;
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    bool padding_untouched = false;
    const std::vector<double> o = data.read_o(&padding_untouched);
    const std::vector<float> lse = data.read_lse();
    const Errors e = compare(c, o, data.ref_o(), &lse, data.ref_lse());
    EXPECT_EQ(e.nan_count, 0);
    EXPECT_LE(e.rel_l2, tolerance(c.dtype));
  }
}

// A call that fails validation launches nothing: the poisoned output stays poisoned.
TEST(FailedCalls, WriteNothing) {
  FLASHCORE_REQUIRE_GPU();
  CaseData data({.batch = 1, .seqlen_q = 16, .seqlen_k = 16, .heads_q = 2, .heads_kv = 2});
  data.poison_outputs();
  AttentionParams p = data.params(Backend::kAuto);
  p.window_left = -5;
  EXPECT_EQ(run(p).code, StatusCode::kInvalidArgument);
  std::vector<uint16_t> host_q(16);
  p = data.params(Backend::kAuto);
  p.q.data = host_q.data();  // host memory: caught by the device check
  const Status host = run(p);
  EXPECT_EQ(host.code, StatusCode::kInvalidArgument);
  EXPECT_NE(host.message.find("host memory"), std::string::npos) << host.message;
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  bool padding_untouched = false;
  const std::vector<double> o = data.read_o(&padding_untouched);
  for (double x : o) ASSERT_TRUE(std::isnan(x)) << "a failed call wrote O";
}

TEST(CApi, RunsAndNamesTheProvider) {
  FLASHCORE_REQUIRE_GPU();
  const AttentionCase c{.batch = 1,
                        .seqlen_q = 33,
                        .seqlen_k = 65,
                        .heads_q = 4,
                        .heads_kv = 1,
                        .head_dim = 64,
                        .causal = true};
  CaseData data(c);
  data.compute_reference();
  data.poison_outputs();
  const AttentionParams p = data.params(Backend::kAuto);
  flashcore_attention_params cp;
  flashcore_attention_params_init(&cp);
  cp.dtype = FLASHCORE_FLOAT16;
  cp.batch = c.batch;
  cp.seqlen_q = c.seqlen_q;
  cp.seqlen_k = c.seqlen_k;
  cp.heads_q = c.heads_q;
  cp.heads_kv = c.heads_kv;
  cp.head_dim = c.head_dim;
  cp.q = p.q.data;
  cp.k = p.k.data;
  cp.v = p.v.data;
  cp.o = p.o.data;
  cp.lse = p.lse;
  cp.q_strides = {p.q.strides.batch, p.q.strides.seq, p.q.strides.head};
  cp.k_strides = {p.k.strides.batch, p.k.strides.seq, p.k.strides.head};
  cp.v_strides = {p.v.strides.batch, p.v.strides.seq, p.v.strides.head};
  cp.o_strides = {p.o.strides.batch, p.o.strides.seq, p.o.strides.head};
  cp.causal = 1;
  const char* provider = nullptr;
  ASSERT_EQ(flashcore_attention(&cp, &provider), FLASHCORE_OK) << flashcore_last_error();
  ASSERT_NE(provider, nullptr);
  EXPECT_STRNE(provider, "");
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  bool padding_untouched = false;
  const std::vector<double> o = data.read_o(&padding_untouched);
  const std::vector<float> lse = data.read_lse();
  const Errors e = compare(c, o, data.ref_o(), &lse, data.ref_lse());
  EXPECT_EQ(e.nan_count, 0);
  EXPECT_LE(e.rel_l2, tolerance(c.dtype));
}

}  // namespace
}  // namespace flashcore::testing
