// Attention sinks with no other flex part on sm90's persistent kernel (its sinks variant,
// src/sm90/fwd_kernel.cuh Variant::kSinks; sm90_dense_kernel_runs_sinks picks the problems): each
// case first asserts that the routing sends it there on this GPU, so that a case that drifted back
// to the flex kernel fails instead of passing on the wrong kernel, then runs against the float64
// flex reference (fresh random inputs, NaN-poisoned outputs, rows that see no key: O = 0 and
// LSE = the head's sink). Skips loudly unless the GPU is an sm_90 one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/problem.hpp"
#include "reference/tolerance.hpp"
#include "sm90/sm90_fwd.hpp"
#include "tests/support/attention_case.hpp"
#include "tests/support/flex_case.hpp"

namespace flashcore::testing {
namespace {

// Dense grids the persistent kernel runs unsplit on an H100 or H200 (132 SMs): more query tiles
// than SMs, also at hd64's 192-row tiles. Head dims 64 and 128 and ones rounded up to them, both
// dtypes, GQA, causal with more queries than keys (the first rows see nothing, whole tiles of them
// too), windows, no mask (which would run in clusters without sinks), Sq != Sk and odd lengths.
std::vector<FlexCase> dense_sinks_cases() {
  std::vector<FlexCase> cases;
  cases.push_back(make_flex_case("causal_gqa_hd64", [](FlexCase& f) {
    f.head_dim = 64, f.causal = true, f.heads_q = 32, f.heads_kv = 8;
    f.seqlen_q = f.seqlen_k = 1000;
  }));
  cases.push_back(make_flex_case("causal_rows_without_keys_hd64_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 64, f.causal = true, f.heads_q = f.heads_kv = 24;
    f.seqlen_q = 1201, f.seqlen_k = 700;
  }));
  cases.push_back(make_flex_case("window_gqa_hd120", [](FlexCase& f) {
    f.head_dim = 120, f.window_left = 100, f.window_right = 0, f.batch = 2;
    f.heads_q = 16, f.heads_kv = 4, f.seqlen_q = f.seqlen_k = 777;
  }));
  cases.push_back(make_flex_case("no_mask_sq127_sk1000_hd128_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.batch = 5, f.heads_q = f.heads_kv = 32;
    f.seqlen_q = 127, f.seqlen_k = 1000;
  }));
  cases.push_back(make_flex_case("window_both_sides_hd56_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 56, f.window_left = 40, f.window_right = 300;
    f.batch = 3, f.heads_q = 16, f.heads_kv = 2, f.seqlen_q = 1000, f.seqlen_k = 4097;
  }));
  // Varlen batches: lengths 0, 1, 7, 127, 1000 with Sq != Sk (the listed kernel: not every query
  // length is the longest), one long sequence among short ones, and uniform query lengths (the
  // unlisted kernel).
  cases.push_back(make_flex_case("varlen_causal_gqa_hd64", [](FlexCase& f) {
    f.head_dim = 64, f.causal = true, f.heads_q = 8, f.heads_kv = 2;
    f.lengths_q = {1, 7, 127, 1000, 0, 300}, f.lengths_k = {7, 1, 1000, 127, 5, 300};
  }));
  cases.push_back(make_flex_case("varlen_one_long_many_short_window_hd128_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.window_left = 200, f.window_right = 0, f.heads_q = 4;
    for (int32_t b = 0; b < 20; ++b) f.lengths_q.push_back((b * 37) % 200 + 1);
    f.lengths_q.insert(f.lengths_q.begin() + 7, 2000);
    f.lengths_k = f.lengths_q;
  }));
  cases.push_back(make_flex_case("varlen_uniform_queries_causal_hd128", [](FlexCase& f) {
    f.causal = true, f.heads_q = 4, f.heads_kv = 1;
    f.lengths_q = {256, 256, 256}, f.lengths_k = {100, 256, 300};
  }));
  for (FlexCase& c : cases) c.sinks = true, c.backend = Backend::kAuto;
  return cases;
}

class SinksSm90Dense : public ::testing::TestWithParam<FlexCase> {};

TEST_P(SinksSm90Dense, RunOnThePersistentKernelAndMatchFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  cudaDeviceProp device{};
  ASSERT_EQ(cudaGetDeviceProperties(&device, 0), cudaSuccess);
  if (device.major != 9 || device.minor != 0) {
    GTEST_SKIP() << "sm90 sinks test skipped: the GPU is sm_" << device.major << device.minor
                 << ", not sm_90";
  }
  const FlexCase& c = GetParam();
  FLASHCORE_SKIP_IF_PRUNED(c.dtype, c.head_dim);
  {
    std::mt19937_64 rng(1);
    FlexData data;
    make_flex_data(c, &rng, &data);
    if (::testing::Test::HasFatalFailure()) return;
    AttentionParams routed = data.params;
    // The routing reads the output's strides only (nothing is launched here).
    routed.o = {const_cast<void*>(routed.q.data), c.dtype, data.q_strides()};
    ASSERT_TRUE(detail::sm90_dense_kernel_runs_sinks(detail::make_problem(routed), device))
        << "the routing no longer sends this case to the persistent kernel's sinks variant";
  }
  FlexResult r;
  run_flex_case(c, &r);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(r.provider, "sm90");
  EXPECT_EQ(r.nan_count, 0);
  EXPECT_LE(r.rel_l2, reference::parity_tolerance(c.dtype));
  EXPECT_LE(r.lse_max_abs, kLseTolerance);
  EXPECT_EQ(r.masked_row_errors, 0) << "of " << r.masked_rows << " rows that see no key";
  bool rows_without_keys = c.causal && c.seqlen_q > c.seqlen_k;
  for (size_t i = 0; c.causal && i < c.lengths_q.size(); ++i) {
    rows_without_keys |= c.lengths_q[i] > c.lengths_k[i];
  }
  if (rows_without_keys) {
    EXPECT_GT(r.masked_rows, 0) << "bottom-right causal with Sq > Sk must leave rows without keys";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SinksSm90Dense, ::testing::ValuesIn(dense_sinks_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace flashcore::testing
