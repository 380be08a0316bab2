// The sm80 flex kernels against the float64 flex reference evaluating the same functors: every
// built-in mod, combinations, BlockMasks (built from the mask, and random ones with empty rows and
// unsorted lists), partial tail blocks, document boundaries inside blocks, fully masked rows,
// sinks, GQA, head dims 64 / 128 and a rounded one, and varlen batches with lengths 0, 1, 7 and one
// long sequence. Fresh random inputs every run (the seed is printed on failure), NaN-poisoned
// outputs. Skips loudly without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reference/tolerance.hpp"
#include "tests/support/attention_case.hpp"
#include "tests/support/flex_case.hpp"

namespace flashcore::testing {
namespace {

FlexCase with(std::string name, void (*edit)(FlexCase&)) {
  FlexCase c;
  c.name = std::move(name);
  edit(c);
  return c;
}

std::vector<FlexCase> flex_cases() {
  std::vector<FlexCase> cases = {
      with("sinks_only_fp16", [](FlexCase& c) { c.dtype = DType::kFloat16, c.sinks = true; }),
      with("sinks_causal_gqa",
           [](FlexCase& c) {
             c.sinks = true, c.causal = true, c.heads_q = 4, c.heads_kv = 1, c.seqlen_q = 200;
             c.seqlen_k = 200;
           }),
      with("documents", [](FlexCase& c) { c.doc_span = 40, c.seqlen_q = c.seqlen_k = 300; }),
      with("documents_causal_fp16",
           [](FlexCase& c) {
             c.dtype = DType::kFloat16, c.doc_span = 40, c.causal = true, c.batch = 2;
             c.seqlen_q = c.seqlen_k = 257;
           }),
      // Separate q and k documents: queries whose document has no key are fully masked rows.
      with("documents_cross_masked_rows",
           [](FlexCase& c) { c.doc_span = 20, c.seqlen_q = 150, c.seqlen_k = 190; }),
      with("prefix_lm", [](FlexCase& c) { c.prefix = 150, c.seqlen_q = c.seqlen_k = 300; }),
      with("alibi_causal_fp16",
           [](FlexCase& c) {
             c.dtype = DType::kFloat16, c.alibi = true, c.causal = true, c.heads_q = 4;
             c.heads_kv = 2, c.seqlen_q = 100, c.seqlen_k = 260;
           }),
      with("relative_bias",
           [](FlexCase& c) { c.bias_distance = 300, c.seqlen_q = c.seqlen_k = 300; }),
      with("relative_bias_clipped", [](FlexCase& c) { c.bias_distance = 17, c.seqlen_k = 333; }),
      with("alibi_softcap_window",
           [](FlexCase& c) {
             c.alibi = true, c.softcap = 5.f, c.window_left = 70, c.window_right = 10;
             c.seqlen_q = c.seqlen_k = 320;
           }),
      with("everything_hd64",
           [](FlexCase& c) {
             c.head_dim = 64, c.doc_span = 60, c.causal = true, c.alibi = true,
             c.bias_distance = 64;
             c.softcap = 8.f, c.sinks = true, c.seqlen_q = c.seqlen_k = 300, c.heads_q = 4;
           }),
      with("rounded_hd40_fp16",
           [](FlexCase& c) {
             c.dtype = DType::kFloat16, c.head_dim = 40, c.alibi = true, c.seqlen_q = 90;
             c.seqlen_k = 150;
           }),
      with("rounded_hd96", [](FlexCase& c) { c.head_dim = 96, c.prefix = 40, c.seqlen_q = 130; }),
      // BlockMasks: from the mask (tails partial or full, 64/128 blocks), and random lists.
      with("block_mask_causal_documents_128",
           [](FlexCase& c) {
             c.doc_span = 50, c.causal = true, c.block_mask = BlockMaskKind::kFromMask;
             c.seqlen_q = c.seqlen_k = 300;
           }),
      with("block_mask_documents_64_fp16",
           [](FlexCase& c) {
             c.dtype = DType::kFloat16, c.doc_span = 30, c.block_mask = BlockMaskKind::kFromMask;
             c.q_block = c.kv_block = 64, c.seqlen_q = 250, c.seqlen_k = 250, c.batch = 2;
           }),
      with("block_mask_q64_kv128_window",
           [](FlexCase& c) {
             c.window_left = 100, c.window_right = 0, c.block_mask = BlockMaskKind::kFromMask;
             c.q_block = 64, c.kv_block = 128, c.seqlen_q = 200, c.seqlen_k = 333;
           }),
      with("block_mask_random_empty_rows",
           [](FlexCase& c) {
             c.block_mask = BlockMaskKind::kRandom, c.q_block = 64, c.kv_block = 64;
             c.seqlen_q = 300, c.seqlen_k = 270, c.doc_span = 25;
           }),
      with("block_mask_random_sinks_gqa_fp16",
           [](FlexCase& c) {
             c.dtype = DType::kFloat16, c.block_mask = BlockMaskKind::kRandom, c.sinks = true;
             c.heads_q = 4, c.heads_kv = 2, c.seqlen_q = 260, c.seqlen_k = 400, c.alibi = true;
           }),
      // Varlen: lengths 0, 1, 7 and a long sequence, k lengths of their own (one empty).
      with("varlen",
           [](FlexCase& c) {
             c.lengths_q = {0, 1, 7, 700}, c.lengths_k = {5, 1, 7, 650};
           }),
      with("varlen_causal_gqa_softcap_fp16",
           [](FlexCase& c) {
             c.dtype = DType::kFloat16, c.causal = true, c.softcap = 10.f, c.heads_q = 6;
             c.heads_kv = 2, c.lengths_q = {7, 0, 1, 513, 64}, c.lengths_k = {7, 3, 0, 513, 200};
           }),
      with("varlen_window_alibi_sinks_hd64",
           [](FlexCase& c) {
             c.head_dim = 64, c.window_left = 50, c.window_right = 0, c.alibi = true,
             c.sinks = true;
             c.lengths_q = {1, 7, 300, 0}, c.lengths_k = {1, 9, 300, 4};
           }),
      with("varlen_prefix_lm",
           [](FlexCase& c) {
             c.prefix = 100, c.lengths_q = {200, 7, 1}, c.lengths_k = {200, 7, 1};
           }),
  };
  return cases;
}

class FlexSm80 : public ::testing::TestWithParam<FlexCase> {};

TEST_P(FlexSm80, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  const FlexCase& c = GetParam();
  FlexResult r;
  run_flex_case(c, &r);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(r.provider, "sm80");
  EXPECT_EQ(r.nan_count, 0);
  EXPECT_LE(r.rel_l2, reference::parity_tolerance(c.dtype));
  EXPECT_LE(r.lse_max_abs, kLseTolerance);
  EXPECT_EQ(r.masked_row_errors, 0) << "of " << r.masked_rows << " fully masked rows";
}

INSTANTIATE_TEST_SUITE_P(Cases, FlexSm80, ::testing::ValuesIn(flex_cases()),
                         [](const auto& info) { return info.param.name; });

// auto takes sm80 for flex problems: the sm90 backend rejects them (for now).
TEST(FlexSm80Auto, AutoRunsFlexOnSm80) {
  FLASHCORE_REQUIRE_GPU();
  FlexCase c = with("auto_documents", [](FlexCase& f) { f.doc_span = 30; });
  c.backend = Backend::kAuto;
  FlexResult r;
  run_flex_case(c, &r);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(r.provider, "sm80");
  EXPECT_LE(r.rel_l2, reference::parity_tolerance(c.dtype));
}

// The fp32 GPU oracle on varlen batches (it checks the fast kernels at sizes too large for the
// float64 reference) against that reference. fp32 arithmetic errs by about 1e-6, so 1e-4 is far
// below the half-precision bounds and still catches any wrong row, key or sequence.
constexpr double kOracleTolerance = 1e-4;
TEST(GpuOracleVarlen, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  for (const bool causal : {false, true}) {
    FlexCase c = with("oracle_varlen", [](FlexCase& f) {
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
  for (const char* name : {"documents_cross_masked_rows", "block_mask_random_empty_rows"}) {
    for (const FlexCase& c : flex_cases()) {
      if (c.name != name) continue;
      FlexResult r;
      run_flex_case(c, &r);
      if (::testing::Test::HasFatalFailure()) return;
      EXPECT_GT(r.masked_rows, 0) << name;
      EXPECT_EQ(r.masked_row_errors, 0) << name;
    }
  }
}

}  // namespace
}  // namespace flashcore::testing
