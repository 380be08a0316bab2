// The sm80 flex kernels against the float64 flex reference evaluating the same functors, on the
// shared case list (tests/support/flex_cases.cpp; test_flex_sm90.cpp runs it on sm90). Fresh random
// inputs every run (the seed is printed on failure), NaN-poisoned outputs. Skips loudly without a
// GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/problem.hpp"
#include "reference/tolerance.hpp"
#include "sm80/flex_fwd.hpp"
#include "tests/support/attention_case.hpp"
#include "tests/support/flex_case.hpp"

namespace flashcore::testing {
namespace {

void expect_sm80_matches_reference(const FlexCase& c) {
  FLASHCORE_SKIP_IF_PRUNED(c.dtype, c.head_dim);
  FlexResult r;
  run_flex_case(c, &r);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(r.provider, "sm80");
  EXPECT_EQ(r.nan_count, 0);
  EXPECT_LE(r.rel_l2, reference::parity_tolerance(c.dtype));
  EXPECT_LE(r.lse_max_abs, kLseTolerance);
  EXPECT_EQ(r.masked_row_errors, 0) << "of " << r.masked_rows << " fully masked rows";
}

class FlexSm80 : public ::testing::TestWithParam<FlexCase> {};

TEST_P(FlexSm80, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  expect_sm80_matches_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, FlexSm80, ::testing::ValuesIn(flex_cases()),
                         [](const auto& info) { return info.param.name; });

// The cases again with num_splits 1: the backend's own count splits the keys of most of the small
// cases above (sm80_flex_splits), and the unsplit kernel must stay checked on them too.
std::vector<FlexCase> unsplit_cases() {
  std::vector<FlexCase> cases;
  for (FlexCase c : flex_cases()) {
    if (!c.lengths_q.empty() || c.num_splits != 0) continue;  // varlen never splits
    c.num_splits = 1;
    cases.push_back(c);
  }
  return cases;
}

class FlexSm80Unsplit : public ::testing::TestWithParam<FlexCase> {};

TEST_P(FlexSm80Unsplit, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  expect_sm80_matches_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, FlexSm80Unsplit, ::testing::ValuesIn(unsplit_cases()),
                         [](const auto& info) { return info.param.name; });

// fn(c, problem) for every decode case of the shared list whose kernel this build has (with fresh
// inputs); false when there is none.
template <typename Fn>
bool for_each_decode_problem(Fn&& fn) {
  std::mt19937_64 rng(std::random_device{}());
  bool any = false;
  for (const FlexCase& c : flex_cases()) {
    if (!is_decode_case(c) ||
        detail::pruned_reason(c.dtype, detail::instantiated_head_dim(c.head_dim))[0] != '\0') {
      continue;
    }
    any = true;
    FlexData data;
    make_flex_data(c, &rng, &data);
    if (::testing::Test::HasFatalFailure()) return any;
    fn(c, detail::make_problem(data.params));
  }
  return any;
}

// The decode cases do reach the split: on this GPU the sm80 plan gives each more than one split
// (so FlexSm80 above checks the partials, the empty splits and the combine's sinks).
TEST(FlexSm80Splits, DecodeCasesAreSplit) {
  FLASHCORE_REQUIRE_GPU();
  cudaDeviceProp device{};
  ASSERT_EQ(cudaGetDeviceProperties(&device, 0), cudaSuccess);
  if (!for_each_decode_problem([&](const FlexCase& c, const detail::Problem& problem) {
        EXPECT_GT(detail::sm80_flex_splits(problem, device), 1) << c.name;
      })) {
    GTEST_SKIP() << "this build has none of the decode cases' kernels";
  }
}

// The decode cases of one query row under GQA, with no BlockMask or one broadcast over heads, run
// packed (a kv head's query heads as one tile's rows); the others do not.
TEST(FlexSm80Splits, GqaDecodeCasesArePacked) {
  FLASHCORE_REQUIRE_GPU();
  int packed = 0;
  if (!for_each_decode_problem([&](const FlexCase& c, const detail::Problem& problem) {
        const bool expected = c.seqlen_q == 1 && c.heads_q > c.heads_kv &&
                              (c.block_mask == BlockMaskKind::kNone || c.block_mask_broadcast);
        EXPECT_EQ(detail::sm80_flex_packs_heads(problem), expected) << c.name;
        packed += expected;
      })) {
    GTEST_SKIP() << "this build has none of the decode cases' kernels";
  }
  EXPECT_GT(packed, 0);
}

// The fp32 GPU oracle on varlen batches (it checks the fast kernels at sizes too large for the
// float64 reference) against that reference. fp32 arithmetic errs by about 1e-6, so 1e-4 is far
// below the half-precision bounds and still catches any wrong row, key or sequence.
constexpr double kOracleTolerance = 1e-4;
TEST(GpuOracleVarlen, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  for (const bool causal : {false, true}) {
    FlexCase c = make_flex_case("oracle_varlen", [](FlexCase& f) {
      f.lengths_q = {0, 1, 7, 300, 33};
      f.lengths_k = {4, 1, 7, 310, 0};
      f.heads_q = 4;
      f.window_left = 40;
    });
    c.causal = causal;
    c.gpu_oracle = true;
    FlexResult r;
    run_flex_case(c, &r);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(r.nan_count, 0);
    EXPECT_LE(r.rel_l2, kOracleTolerance);
    EXPECT_LE(r.lse_max_abs, kOracleTolerance);
    EXPECT_GT(r.masked_rows, 0);  // the sequence of 33 queries has no key
    EXPECT_EQ(r.masked_row_errors, 0);
  }
}

// Cases with fully masked rows must have some, or that part of the test cannot fail.
TEST(FlexSm80MaskedRows, CasesThatPromiseMaskedRowsHaveThem) {
  FLASHCORE_REQUIRE_GPU();
  int checked = 0;
  for (const char* name : kMaskedRowCases) {
    for (const FlexCase& c : flex_cases()) {
      if (c.name != name) continue;
      if (detail::pruned_reason(c.dtype, detail::instantiated_head_dim(c.head_dim))[0] != '\0')
        continue;  // this build left the case's kernel out
      ++checked;
      FlexResult r;
      run_flex_case(c, &r);
      if (::testing::Test::HasFatalFailure()) return;
      EXPECT_GT(r.masked_rows, 0) << name;
      EXPECT_EQ(r.masked_row_errors, 0) << name;
    }
  }
  if (checked == 0) GTEST_SKIP() << "this build has none of the masked-row cases' kernels";
}

}  // namespace
}  // namespace flashcore::testing
