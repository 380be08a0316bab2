// The flex backward (run_backward on varlen batches and the built-in flex options; the sm80
// backward runs them all, the sm90 one varlen batches and sinks without flex mods on an sm_90 GPU)
// against the float64 flex backward reference evaluating the same functors: dQ, dK and dV within
// the parity tolerance (rel L2 5e-3 fp16, 1e-2 bf16), NaN-poisoned gradients, NaN never passing,
// rows that see no key and keys no row sees exactly zero. The cases are the flex forward's list
// (every built-in mod, BlockMasks with partial tails, empty and full blocks, sinks, GQA, varlen
// with lengths 0, 1, 7 and long ones) at the head dims the backward has, plus the BlockMask,
// varlen (causal, windows, softcap, GQA, lengths around the query blocks), sinks and refusal cases
// of the backward's own; the cases sm90 runs also run on kSm90 and kSm80 by name. The random
// BlockMasks list blocks as full where their documents mask hides pairs: a full block that ran
// mask code would miss those pairs and fail the comparison. Fresh random inputs every run (the
// seed is printed on failure). Skips loudly without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/pruning.hpp"
#include "flashcore/backward.hpp"
#include "reference/tolerance.hpp"
#include "tests/support/attention_case.hpp"
#include "tests/support/flex_backward_case.hpp"
#include "tests/support/flex_case.hpp"

namespace flashcore::testing {
namespace {

// The sm90 backward runs varlen batches (head dims 64 and 128) and sinks (varlen there too, dense
// at 64, 128 and 256) with the dense options; every flex mod and BlockMask stays on sm80.
bool sm90_runs(const FlexCase& c) {
  const bool varlen = !c.lengths_q.empty();
  const bool head_dim = c.head_dim == 64 || c.head_dim == 128 || (!varlen && c.head_dim == 256);
  return (varlen || c.sinks) && head_dim && c.doc_span == 0 && c.prefix < 0 && !c.alibi &&
         c.bias_distance == 0 && c.block_mask == BlockMaskKind::kNone;
}

// The backend kAuto must resolve to on this GPU.
Backend expected_backend(const FlexCase& c) {
  if (c.backend != Backend::kAuto) return c.backend;
  return sm90_runs(c) && on_sm90() ? Backend::kSm90 : Backend::kSm80;
}

// The head dims the backward has kernels for (it has no rounded ones yet).
bool backward_head_dim(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// The cases as they are, plus a copy of each case the sm90 backward runs named for each backend
// (kAuto picks sm90 on an sm_90 GPU, so the sm80 one runs there only by name).
std::vector<FlexCase> with_backends_named(std::vector<FlexCase> cases) {
  for (size_t i = 0, n = cases.size(); i < n; ++i) {
    if (!sm90_runs(cases[i])) continue;
    for (Backend backend : {Backend::kSm90, Backend::kSm80}) {
      FlexCase named = cases[i];
      named.backend = backend;
      named.name += backend == Backend::kSm90 ? "_sm90" : "_sm80";
      cases.push_back(named);
    }
  }
  return cases;
}

// The flex forward's cases the backward runs as they are: head dims 64, 128 and 256 and
// BlockMask key blocks of 128 (the backward's one BlockMask rule).
std::vector<FlexCase> backward_flex_cases() {
  std::vector<FlexCase> cases;
  for (FlexCase c : flex_cases()) {
    if (!backward_head_dim(c.head_dim)) continue;
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
  // The dense options on varlen batches (the sm90 backward's): lengths on both sides of the query
  // block (64 rows at hd128, 128 at hd64) and the key block (128), so that tiles run into the next
  // sequence; bottom-right windows where the q and k lengths differ.
  cases.push_back(make_flex_case("varlen_window_gqa_hd64", [](FlexCase& c) {
    c.head_dim = 64, c.heads_q = 8, c.heads_kv = 2, c.window_left = 50, c.window_right = 0;
    c.lengths_q = {0, 1, 7, 1500, 129, 128}, c.lengths_k = {3, 1, 9, 1400, 0, 255};
    c.backend = Backend::kAuto;
  }));
  cases.push_back(make_flex_case("varlen_causal_softcap_hd64_fp16", [](FlexCase& c) {
    c.dtype = DType::kFloat16, c.head_dim = 64, c.causal = true, c.softcap = 12.f;
    c.lengths_q = {128, 129, 1, 0, 255, 300}, c.lengths_k = {200, 129, 0, 5, 255, 130};
    c.backend = Backend::kAuto;
  }));
  cases.push_back(make_flex_case("varlen_window_two_sides_gqa", [](FlexCase& c) {
    c.heads_q = 4, c.heads_kv = 1, c.window_left = 100, c.window_right = 30;
    c.lengths_q = {300, 64, 7, 65, 1}, c.lengths_k = {250, 70, 7, 129, 128};
    c.backend = Backend::kAuto;
  }));
  // Sinks on the dense options (the sm90 backward's too): varlen with lengths 0, 1 and 7, rows
  // that see no key (LSE is then the sink, not -inf, and their dQ must still be zero), and hd256.
  cases.push_back(make_flex_case("varlen_sinks_causal_gqa", [](FlexCase& c) {
    c.sinks = true, c.causal = true, c.heads_q = 8, c.heads_kv = 2;
    c.lengths_q = {0, 1, 7, 1500, 129}, c.lengths_k = {3, 1, 7, 1400, 255};
    c.backend = Backend::kAuto;
  }));
  cases.push_back(make_flex_case("sinks_rows_without_keys_hd64_fp16", [](FlexCase& c) {
    c.dtype = DType::kFloat16, c.head_dim = 64, c.sinks = true, c.causal = true, c.batch = 2;
    c.seqlen_q = 300, c.seqlen_k = 200;  // bottom-right: the first 100 rows see no key
    c.backend = Backend::kAuto;
  }));
  cases.push_back(make_flex_case("sinks_window_softcap_hd256", [](FlexCase& c) {
    c.head_dim = 256, c.sinks = true, c.window_left = 100, c.window_right = 0, c.softcap = 9.f;
    c.seqlen_q = 333, c.seqlen_k = 1000, c.heads_q = 4, c.heads_kv = 2;
    c.backend = Backend::kAuto;
  }));
  return with_backends_named(std::move(cases));
}

class BackwardFlex : public ::testing::TestWithParam<FlexCase> {};

// Why this build has no kernel for the case ("" when it has): a build pruned by
// FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES skips (loudly) what it left out instead of failing.
const char* pruned_for(const FlexCase& c) {
  return detail::pruned_reason(c.dtype, static_cast<int>(c.head_dim));
}

// No NaN, each gradient within the parity tolerance of the float64 reference, and the rows that
// see nothing (keys nobody sees) exactly zero.
void expect_matches_reference(const FlexCase& c, const FlexBackwardResult& r) {
  EXPECT_EQ(r.nan_count, 0);
  const double tolerance = reference::parity_tolerance(c.dtype);
  EXPECT_LE(r.rel_l2_dq, tolerance);
  EXPECT_LE(r.rel_l2_dk, tolerance);
  EXPECT_LE(r.rel_l2_dv, tolerance);
  if (c.sinks) EXPECT_LE(r.rel_l2_d_sinks, tolerance) << "the sink logits' gradient";
  EXPECT_EQ(r.zero_errors, 0) << "of " << r.zero_rows << " rows that must be zero";
}

TEST_P(BackwardFlex, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  const FlexCase& c = GetParam();
  if (const char* pruned = pruned_for(c); pruned[0] != '\0')
    GTEST_SKIP() << "this build " << pruned;
  if (c.backend == Backend::kSm90 && !on_sm90()) {
    GTEST_SKIP() << "the sm90 backward needs an sm_90 GPU";
  }
  FlexBackwardResult r;
  run_flex_backward_case(c, &r);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(r.backend, expected_backend(c))
      << "kAuto runs varlen batches and sinks without flex mods on sm90 (on an sm_90 GPU), the "
         "rest on sm80";
  expect_matches_reference(c, r);
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardFlex, ::testing::ValuesIn(backward_flex_cases()),
                         [](const auto& info) { return info.param.name; });

// The hd256 flex cases on the tile an A100 (163 KiB of shared memory per block) runs, 32 query
// rows a step, where a bigger GPU runs the 64-row one (sm80/bwd_kernel_traits.hpp).
class BackwardFlexA100Tile : public ::testing::TestWithParam<FlexCase> {};

TEST_P(BackwardFlexA100Tile, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  const FlexCase& c = GetParam();
  if (const char* pruned = pruned_for(c); pruned[0] != '\0')
    GTEST_SKIP() << "this build " << pruned;
  FlexBackwardResult r;
  run_flex_backward_case(c, &r, {.sm80_smem_per_block = size_t{163} * 1024});
  if (::testing::Test::HasFatalFailure()) return;
  expect_matches_reference(c, r);
}

std::vector<FlexCase> a100_tile_cases() {
  std::vector<FlexCase> cases;
  for (const FlexCase& c : backward_flex_cases()) {
    // The cases that run the sm80 backward on every GPU: kAuto's that sm90 does not take, and
    // the copies named for sm80.
    const bool sm80 = c.backend == Backend::kSm80 || (c.backend == Backend::kAuto && !sm90_runs(c));
    if (c.head_dim == 256 && sm80) cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardFlexA100Tile, ::testing::ValuesIn(a100_tile_cases()),
                         [](const ::testing::TestParamInfo<FlexCase>& info) {
                           return info.param.name;
                         });

// Deterministic mode on the flex backward: three runs on the same inputs give the same gradient
// bits, and they match the float64 reference. Varlen batches (GQA, causal, windows, softcap,
// lengths 0, 1 and 7; on sm90 where kAuto picks it, and on sm80 by name) and the built-in mods
// whose key blocks that see a query block are not one contiguous range (documents, prefix-LM),
// where the kernel counts the CTAs ahead of it itself; a long sequence so that up to 12 key blocks
// add to a query block, and hd256's 64-key blocks. With a BlockMask the kernel counts the CTAs
// ahead from the lists: random lists (partial, full, absent blocks, query blocks with none), a
// documents mask's own lists with kv blocks of 256 (two CTAs a block), and hd256 (two 64-key CTAs a
// 128-key block). (A document mask on a varlen batch is refused: its sequences are the documents.)
class BackwardFlexDeterministic : public ::testing::TestWithParam<FlexCase> {};

TEST_P(BackwardFlexDeterministic, BitwiseIdenticalAndMatchesReference) {
  FLASHCORE_REQUIRE_GPU();
  const FlexCase& c = GetParam();
  if (const char* pruned = pruned_for(c); pruned[0] != '\0')
    GTEST_SKIP() << "this build " << pruned;
  if (c.backend == Backend::kSm90 && !on_sm90()) {
    GTEST_SKIP() << "the sm90 backward needs an sm_90 GPU";
  }
  FlexBackwardResult r;
  run_flex_backward_case(c, &r, {.deterministic = true, .runs = 3});
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(r.backend, expected_backend(c));
  EXPECT_EQ(r.run_to_run_differences, 0) << "bytes differ between runs";
  expect_matches_reference(c, r);
}

std::vector<FlexCase> deterministic_cases() {
  std::vector<FlexCase> cases = {
      make_flex_case("varlen_causal_gqa_hd128",
                     [](FlexCase& c) {
                       c.causal = true, c.heads_q = 8, c.heads_kv = 2;
                       c.lengths_q = {0, 1, 7, 1500, 129}, c.lengths_k = {0, 1, 7, 1500, 255};
                     }),
      make_flex_case("varlen_window_hd64_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.head_dim = 64;
                       c.window_left = 300, c.window_right = 40;
                       c.lengths_q = {700, 64, 1}, c.lengths_k = {900, 70, 3};
                     }),
      // More key blocks than one query block sees, in sequences shorter than the longest, at
      // hd64's 128-row query blocks: the turns count only each sequence's own key blocks.
      make_flex_case("varlen_causal_softcap_gqa_hd64",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.causal = true, c.softcap = 5.f;
                       c.heads_q = 4, c.heads_kv = 2;
                       c.lengths_q = {129, 1100, 0, 300}, c.lengths_k = {700, 1300, 5, 300};
                     }),
      make_flex_case("documents_prefix_lm_alibi_hd128",
                     [](FlexCase& c) {
                       c.doc_span = 200, c.alibi = true, c.seqlen_q = c.seqlen_k = 1000;
                       c.heads_q = 4, c.heads_kv = 2, c.batch = 2;
                     }),
      make_flex_case("prefix_lm_softcap_hd64",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.prefix = 300, c.softcap = 8.f;
                       c.seqlen_q = 777, c.seqlen_k = 1500;
                     }),
      make_flex_case("hd256_varlen_causal_alibi_gqa",
                     [](FlexCase& c) {
                       c.head_dim = 256, c.causal = true, c.alibi = true;
                       c.heads_q = 2, c.heads_kv = 1;
                       c.lengths_q = {300, 0, 513}, c.lengths_k = {310, 5, 513};
                     }),
      make_flex_case("block_mask_random_gqa_softcap_hd64",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.block_mask = BlockMaskKind::kRandom;
                       c.q_block = 64, c.kv_block = 128;
                       c.heads_q = 4, c.heads_kv = 1, c.softcap = 6.f;
                       c.seqlen_q = 777, c.seqlen_k = 1500;
                     }),
      make_flex_case("block_mask_documents_kv256_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.doc_span = 200, c.causal = true;
                       c.block_mask = BlockMaskKind::kFromMask, c.q_block = 128, c.kv_block = 256;
                       c.seqlen_q = c.seqlen_k = 1000, c.heads_q = 4, c.heads_kv = 2, c.batch = 2;
                     }),
      make_flex_case("varlen_sinks_window_gqa_hd64",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.sinks = true, c.window_left = 200, c.window_right = 0;
                       c.heads_q = 4, c.heads_kv = 2;
                       c.lengths_q = {700, 0, 1, 300}, c.lengths_k = {900, 5, 1, 300};
                     }),
      make_flex_case("sinks_causal_gqa_hd128_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.sinks = true, c.causal = true;
                       c.heads_q = 4, c.heads_kv = 1, c.seqlen_q = 1000, c.seqlen_k = 1300;
                     }),
      make_flex_case("block_mask_random_hd256",
                     [](FlexCase& c) {
                       c.head_dim = 256, c.block_mask = BlockMaskKind::kRandom;
                       c.q_block = 64, c.kv_block = 128, c.seqlen_q = 500, c.seqlen_k = 700;
                     }),
  };
  for (FlexCase& c : cases) c.backend = Backend::kAuto;
  return with_backends_named(std::move(cases));
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardFlexDeterministic,
                         ::testing::ValuesIn(deterministic_cases()),
                         [](const ::testing::TestParamInfo<FlexCase>& info) {
                           return info.param.name;
                         });

// Cases built to have rows that see nothing and keys nobody sees must have them, or the zero check
// cannot fail.
TEST(BackwardFlexZeroRows, CasesThatPromiseThemHaveThem) {
  FLASHCORE_REQUIRE_GPU();
  int checked = 0;
  for (const char* name : {"documents_cross_masked_rows", "block_mask_random_empty_rows",
                           "varlen_plain_fp16", "sinks_rows_without_keys_hd64_fp16"}) {
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
// sm90 runs varlen batches but leaves the flex mods to sm80; deterministic mode runs varlen on
// both (kAuto: sm90 on an sm_90 GPU), the built-in mods and BlockMasks on sm80.
TEST(BackwardFlexRefusals, SaysWhy) {
  FLASHCORE_REQUIRE_GPU();
  const FlexCase base = make_flex_case("refusals", [](FlexCase& c) {
    c.lengths_q = {100, 7}, c.lengths_k = {100, 9};
  });
  FlexCase with_mod = base;
  with_mod.alibi = true;
  // Dense, no longer than base's packed rows, so that base's buffers hold its tensors.
  const FlexCase with_blocks = make_flex_case("refusals_blocks", [](FlexCase& c) {
    c.seqlen_q = c.seqlen_k = 100, c.doc_span = 30, c.block_mask = BlockMaskKind::kFromMask;
  });
  std::mt19937_64 rng(7);
  FlexData data, mod_data, blocks_data;
  make_flex_data(base, &rng, &data);
  make_flex_data(with_mod, &rng, &mod_data);
  make_flex_data(with_blocks, &rng, &blocks_data);
  if (::testing::Test::HasFatalFailure()) return;
  const size_t q_bytes = static_cast<size_t>(data.rows_q * base.heads_q * base.head_dim) * 2;
  const size_t k_bytes = static_cast<size_t>(data.rows_k * base.heads_kv * base.head_dim) * 2;
  DeviceBuffer o(q_bytes), d_o(q_bytes), dq(q_bytes), dk(k_bytes), dv(k_bytes);
  DeviceBuffer lse(static_cast<size_t>(data.rows_q * base.heads_q) * sizeof(float));
  auto backward_of = [&](const FlexData& d) {
    AttentionParams forward = d.params;
    forward.o = {o.get(), base.dtype, d.q_strides()};
    forward.lse = static_cast<float*>(lse.get());
    return flex_backward_params(forward, d_o.get(), dq.get(), dk.get(), dv.get(), d.q_strides(),
                                d.k_strides());
  };
  const BackwardParams p = backward_of(data);
  ASSERT_TRUE(can_implement_backward(p).ok()) << can_implement_backward(p).message;
  BackwardParams mod = backward_of(mod_data);
  ASSERT_TRUE(can_implement_backward(mod).ok()) << can_implement_backward(mod).message;
  EXPECT_EQ(resolve_backward_backend(mod), Backend::kSm80) << "flex mods run on sm80";

  BackwardParams sm90 = p;
  sm90.backend = Backend::kSm90;
  mod.backend = Backend::kSm90;
  const Status sm90_varlen = can_implement_backward(sm90);
  const Status sm90_mod = can_implement_backward(mod);
  EXPECT_EQ(sm90_mod.code, StatusCode::kUnsupported);
  if (on_sm90()) {
    EXPECT_TRUE(sm90_varlen.ok()) << sm90_varlen.message;
    EXPECT_NE(sm90_mod.message.find("flex"), std::string::npos) << sm90_mod.message;
  } else {
    EXPECT_NE(sm90_varlen.message.find("sm_90"), std::string::npos) << sm90_varlen.message;
  }

  // Deterministic varlen runs on both backwards; kAuto picks sm90 where it runs varlen.
  BackwardParams deterministic = p;
  deterministic.deterministic = true;
  for (Backend backend : {Backend::kAuto, Backend::kSm80}) {
    deterministic.backend = backend;
    const Status det = can_implement_backward(deterministic);
    EXPECT_TRUE(det.ok()) << backend_name(backend) << ": " << det.message;
  }
  deterministic.backend = Backend::kAuto;
  EXPECT_EQ(resolve_backward_backend(deterministic), on_sm90() ? Backend::kSm90 : Backend::kSm80);
  deterministic.backend = Backend::kSm90;
  const Status sm90_det = can_implement_backward(deterministic);
  EXPECT_EQ(sm90_det.ok(), on_sm90()) << sm90_det.message;
  BackwardParams blocks = backward_of(blocks_data);
  ASSERT_TRUE(can_implement_backward(blocks).ok()) << can_implement_backward(blocks).message;
  blocks.deterministic = true;
  const Status blocks_det = can_implement_backward(blocks);
  EXPECT_TRUE(blocks_det.ok()) << blocks_det.message;
  EXPECT_EQ(resolve_backward_backend(blocks), Backend::kSm80);
}

}  // namespace
}  // namespace flashcore::testing
