// The flex backward (run_backward on varlen batches and the built-in flex options; the sm80
// backward runs them) against the float64 flex backward reference evaluating the same functors:
// dQ, dK and dV within the parity tolerance (rel L2 5e-3 fp16, 1e-2 bf16), NaN-poisoned
// gradients, NaN never passing, rows that see no key and keys no row sees exactly zero. The cases
// are the flex forward's list (every built-in mod, BlockMasks with partial tails, empty and full
// blocks, sinks, GQA, varlen with lengths 0, 1, 7 and long ones) at the head dims the backward
// has, plus the BlockMask and refusal cases of the backward's own. The random BlockMasks list
// blocks as full where their documents mask hides pairs: a full block that ran mask code would
// miss those pairs and fail the comparison. Fresh random inputs every run
// (the seed is printed on failure). Skips loudly without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/pruning.hpp"
#include "flashcore/backward.hpp"
#include "reference/tolerance.hpp"
#include "tests/support/attention_case.hpp"
#include "tests/support/flex_backward_case.hpp"
#include "tests/support/flex_case.hpp"

namespace flashcore::testing {
namespace {

// The flex forward's cases the backward runs as they are: head dims 64 and 128 (the backward has
// no rounded ones yet) and BlockMask key blocks of 128 (its key block).
std::vector<FlexCase> backward_flex_cases() {
  std::vector<FlexCase> cases;
  for (FlexCase c : flex_cases()) {
    if (c.head_dim != 64 && c.head_dim != 128) continue;
    if (c.block_mask != BlockMaskKind::kNone && c.kv_block % 128 != 0) c.kv_block = 128;
    c.backend = Backend::kAuto;
    cases.push_back(c);
  }
  cases.push_back(make_flex_case("block_mask_random_gqa_softcap_hd64", [](FlexCase& c) {
    c.head_dim = 64, c.block_mask = BlockMaskKind::kRandom, c.q_block = 64, c.kv_block = 128;
    c.heads_q = 4, c.heads_kv = 1, c.softcap = 6.f, c.seqlen_q = 333, c.seqlen_k = 300;
    c.backend = Backend::kAuto;
  }));
  cases.push_back(make_flex_case("varlen_lengths_0_1_7_long_gqa_hd64", [](FlexCase& c) {
    c.head_dim = 64, c.heads_q = 8, c.heads_kv = 2, c.bias_distance = 40;
    c.lengths_q = {0, 1, 7, 1500}, c.lengths_k = {0, 1, 7, 1500};
    c.backend = Backend::kAuto;
  }));
  cases.push_back(make_flex_case("varlen_plain_fp16", [](FlexCase& c) {
    c.dtype = DType::kFloat16, c.lengths_q = {130, 0, 66}, c.lengths_k = {70, 9, 0};
    c.backend = Backend::kAuto;
  }));
  return cases;
}

class BackwardFlex : public ::testing::TestWithParam<FlexCase> {};

// Why this build has no kernel for the case ("" when it has): a build pruned by
// FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES skips (loudly) what it left out instead of failing.
const char* pruned_for(const FlexCase& c) {
  return detail::pruned_reason(c.dtype, static_cast<int>(c.head_dim));
}

TEST_P(BackwardFlex, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  const FlexCase& c = GetParam();
  if (const char* pruned = pruned_for(c); pruned[0] != '\0')
    GTEST_SKIP() << "this build " << pruned;
  FlexBackwardResult r;
  run_flex_backward_case(c, &r);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(r.backend, Backend::kSm80) << "kAuto runs varlen and flex backwards on sm80";
  EXPECT_EQ(r.nan_count, 0);
  const double tolerance = reference::parity_tolerance(c.dtype);
  EXPECT_LE(r.rel_l2_dq, tolerance);
  EXPECT_LE(r.rel_l2_dk, tolerance);
  EXPECT_LE(r.rel_l2_dv, tolerance);
  EXPECT_EQ(r.zero_errors, 0) << "of " << r.zero_rows << " rows that must be zero";
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardFlex, ::testing::ValuesIn(backward_flex_cases()),
                         [](const auto& info) { return info.param.name; });

// Cases built to have rows that see nothing and keys nobody sees must have them, or the zero check
// cannot fail.
TEST(BackwardFlexZeroRows, CasesThatPromiseThemHaveThem) {
  FLASHCORE_REQUIRE_GPU();
  int checked = 0;
  for (const char* name :
       {"documents_cross_masked_rows", "block_mask_random_empty_rows", "varlen_plain_fp16"}) {
    for (const FlexCase& c : backward_flex_cases()) {
      if (c.name != name) continue;
      if (const char* pruned = pruned_for(c); pruned[0] != '\0') {
        std::printf("[  NOTE    ] %s not checked: this build %s\n", name, pruned);
        continue;
      }
      ++checked;
      FlexBackwardResult r;
      run_flex_backward_case(c, &r);
      if (::testing::Test::HasFatalFailure()) return;
      EXPECT_GT(r.zero_rows, 0) << name;
      EXPECT_EQ(r.zero_errors, 0) << name;
    }
  }
  if (checked == 0) GTEST_SKIP() << "this build has none of the cases' kernels";
}

// What the flex backward does not run is refused before any launch, with the fix in the message:
// sm90 leaves varlen and flex to sm80; deterministic mode and BlockMask key blocks of 64 are not
// implemented.
TEST(BackwardFlexRefusals, SaysWhy) {
  FLASHCORE_REQUIRE_GPU();
  const FlexCase base = make_flex_case("refusals", [](FlexCase& c) {
    c.lengths_q = {100, 7}, c.lengths_k = {100, 9};
  });
  std::mt19937_64 rng(7);
  FlexData data;
  make_flex_data(base, &rng, &data);
  if (::testing::Test::HasFatalFailure()) return;
  const size_t q_bytes = static_cast<size_t>(data.rows_q * base.heads_q * base.head_dim) * 2;
  const size_t k_bytes = static_cast<size_t>(data.rows_k * base.heads_kv * base.head_dim) * 2;
  DeviceBuffer o(q_bytes), d_o(q_bytes), dq(q_bytes), dk(k_bytes), dv(k_bytes);
  DeviceBuffer lse(static_cast<size_t>(data.rows_q * base.heads_q) * sizeof(float));
  AttentionParams forward = data.params;
  forward.o = {o.get(), base.dtype, data.q_strides()};
  forward.lse = static_cast<float*>(lse.get());
  const BackwardParams p = flex_backward_params(forward, d_o.get(), dq.get(), dk.get(), dv.get(),
                                                data.q_strides(), data.k_strides());
  ASSERT_TRUE(can_implement_backward(p).ok()) << can_implement_backward(p).message;

  BackwardParams sm90 = p;
  sm90.backend = Backend::kSm90;
  const Status refused = can_implement_backward(sm90);
  EXPECT_EQ(refused.code, StatusCode::kUnsupported);
  if (refused.message.find("sm_90") == std::string::npos) {  // on an sm_90 GPU: the reason
    EXPECT_NE(refused.message.find("varlen"), std::string::npos) << refused.message;
  }

  BackwardParams deterministic = p;
  deterministic.deterministic = true;
  const Status no_det = can_implement_backward(deterministic);
  EXPECT_EQ(no_det.code, StatusCode::kUnsupported);
  EXPECT_NE(no_det.message.find("deterministic=false"), std::string::npos) << no_det.message;
}

}  // namespace
}  // namespace flashcore::testing
