// Attention sinks with no other flex part on sm90's dense kernels: the persistent kernel's sinks
// variant (src/sm90/fwd_kernel.cuh Variant::kSinks; sm90_dense_kernel_runs_sinks picks the
// problems), and elsewhere the dense kernels without them plus the rescale. Each case first asserts
// that the routing sends it where its suite says on this GPU, so that a case that drifted to
// another path fails instead of passing on the wrong kernel, then runs against the float64
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

// The GPU's properties, or a skip (with the reason) unless it is an sm_90 one.
#define FLASHCORE_REQUIRE_SM90_GPU(device)                                        \
  do {                                                                            \
    FLASHCORE_REQUIRE_GPU();                                                      \
    ASSERT_EQ(cudaGetDeviceProperties(&(device), 0), cudaSuccess);                \
    if ((device).major != 9 || (device).minor != 0) {                             \
      GTEST_SKIP() << "sm90 sinks test skipped: the GPU is sm_" << (device).major \
                   << (device).minor << ", not sm_90";                            \
    }                                                                             \
  } while (0)

// The case's problem as the routing sees it (fresh inputs; nothing is launched here): the output
// only lends its strides.
detail::Problem routed_problem(const FlexCase& c) {
  std::mt19937_64 rng(1);
  FlexData data;
  make_flex_data(c, &rng, &data);
  AttentionParams routed = data.params;
  routed.o = {const_cast<void*>(routed.q.data), c.dtype, data.q_strides()};
  return detail::make_problem(routed);
}

// Runs the case on the GPU against the float64 reference: on sm90, no NaN, within tolerance, rows
// that see no key written as such (and some, where bottom-right causal with Sq > Sk leaves them).
void expect_matches_reference(const FlexCase& c) {
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
  cudaDeviceProp device{};
  FLASHCORE_REQUIRE_SM90_GPU(device);
  const FlexCase& c = GetParam();
  FLASHCORE_SKIP_IF_PRUNED(c.dtype, c.head_dim);
  const detail::Problem problem = routed_problem(c);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_TRUE(detail::sm90_dense_kernel_runs_sinks(problem, device))
      << "the routing no longer sends this case to the persistent kernel's sinks variant";
  expect_matches_reference(c);
}

INSTANTIATE_TEST_SUITE_P(Cases, SinksSm90Dense, ::testing::ValuesIn(dense_sinks_cases()),
                         [](const auto& info) { return info.param.name; });

// Sinks alone where the variant does not run: the dense kernels without them, then the rescale
// (src/sm80/sink_rescale.hpp). gpt-oss's decode (query heads packed into rows, keys split) and a
// chunk of 7 queries on auto, which must stay on sm90; on sm90 by name, hd256 with softcap and
// causal Sq > Sk (rows that see no key), hd96 fp16 with a window, a forced split, and a varlen
// batch at hd160 (lengths 0, 1, 7).
std::vector<FlexCase> rescaled_sinks_cases() {
  std::vector<FlexCase> cases;
  cases.push_back(make_flex_case("gpt_oss_decode_hd64", [](FlexCase& f) {
    f.head_dim = 64, f.batch = 8, f.heads_q = 64, f.heads_kv = 8, f.seqlen_q = 1;
    f.seqlen_k = 4097, f.backend = Backend::kAuto;
  }));
  cases.push_back(make_flex_case("gpt_oss_chunk7_window_hd64_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 64, f.batch = 2, f.heads_q = 64, f.heads_kv = 8;
    f.seqlen_q = 7, f.seqlen_k = 3000, f.causal = true, f.window_left = 127, f.window_right = 0;
    f.backend = Backend::kAuto;
  }));
  cases.push_back(make_flex_case("hd256_softcap_causal_rows_without_keys", [](FlexCase& f) {
    f.head_dim = 256, f.softcap = 15.f, f.causal = true, f.seqlen_q = 500, f.seqlen_k = 300;
    f.heads_q = 4, f.heads_kv = 2, f.backend = Backend::kSm90;
  }));
  cases.push_back(make_flex_case("hd96_window_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 96, f.window_left = 64, f.window_right = 16;
    f.seqlen_q = 700, f.seqlen_k = 1001, f.batch = 2, f.backend = Backend::kSm90;
  }));
  cases.push_back(make_flex_case("forced_split_hd128", [](FlexCase& f) {
    f.seqlen_q = 1, f.seqlen_k = 5000, f.heads_q = 8, f.heads_kv = 8, f.num_splits = 4;
    f.backend = Backend::kSm90;
  }));
  cases.push_back(make_flex_case("varlen_hd160_causal", [](FlexCase& f) {
    f.head_dim = 160, f.causal = true, f.heads_q = 4, f.heads_kv = 1;
    f.lengths_q = {1, 7, 0, 300, 127}, f.lengths_k = {7, 1, 5, 300, 1000};
    f.backend = Backend::kSm90;
  }));
  for (FlexCase& c : cases) c.sinks = true;
  return cases;
}

class SinksSm90Rescaled : public ::testing::TestWithParam<FlexCase> {};

TEST_P(SinksSm90Rescaled, RunOnTheDenseKernelsAndMatchFloat64Reference) {
  cudaDeviceProp device{};
  FLASHCORE_REQUIRE_SM90_GPU(device);
  const FlexCase& c = GetParam();
  FLASHCORE_SKIP_IF_PRUNED(c.dtype, c.head_dim);
  const detail::Problem problem = routed_problem(c);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_FALSE(detail::sm90_needs_flex_kernel(problem));
  ASSERT_FALSE(detail::sm90_dense_kernel_runs_sinks(problem, device))
      << "the variant takes this case now: it no longer tests the rescale";
  expect_matches_reference(c);
}

INSTANTIATE_TEST_SUITE_P(Cases, SinksSm90Rescaled, ::testing::ValuesIn(rescaled_sinks_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace flashcore::testing
