// The sm90 flex kernels (and varlen batches on the persistent kernel) against the float64 flex
// reference evaluating the same functors, on the shared case list (tests/support/flex_cases.cpp,
// which test_flex_sm80.cpp runs on sm80): fresh random inputs every run (the seed is printed on
// failure), NaN-poisoned outputs, fully masked rows checked to give O = 0 and the reference's LSE.
// Skips loudly unless the GPU is an sm_90 one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "reference/tolerance.hpp"
#include "tests/support/attention_case.hpp"
#include "tests/support/flex_case.hpp"

namespace flashcore::testing {
namespace {

#define FLASHCORE_REQUIRE_SM90_GPU()                                                           \
  do {                                                                                         \
    FLASHCORE_REQUIRE_GPU();                                                                   \
    cudaDeviceProp device{};                                                                   \
    ASSERT_EQ(cudaGetDeviceProperties(&device, 0), cudaSuccess);                               \
    if (device.major != 9 || device.minor != 0) {                                              \
      GTEST_SKIP() << "sm90 flex test skipped: the GPU is sm_" << device.major << device.minor \
                   << ", not sm_90";                                                           \
    }                                                                                          \
  } while (0)

// The sm90 flex kernels' head dims: 64, 128 and 256 (64-key tiles), a smaller head dim on the next
// one up. Forced splits run on auto, which must take them to sm80 (the CPU test
// FlexBackends.Sm90SaysWhichFlexProblemsItCannotRun checks sm90's reasons).
constexpr int64_t kSm90FlexMaxHeadDim = 256;
// A varlen case without a FlexAttention part: sm90's persistent kernel runs it, at every head dim
// (sm90_needs_flex_kernel).
bool plain_varlen(const FlexCase& c) {
  return !c.lengths_q.empty() && c.doc_span == 0 && c.prefix < 0 && !c.alibi &&
         c.bias_distance == 0 && !c.sinks && c.block_mask == BlockMaskKind::kNone;
}
// Sinks and no other flex part: sm90's dense kernels run them (sm90_needs_flex_kernel), at every
// head dim and split too (a varlen batch unsplit).
bool sinks_alone(const FlexCase& c) {
  return c.sinks && c.doc_span == 0 && c.prefix < 0 && !c.alibi && c.bias_distance == 0 &&
         c.block_mask == BlockMaskKind::kNone;
}
// A forced split (num_splits > 1) is sm80's: the sm90 flex kernel runs unsplit.
bool sm90_runs(const FlexCase& c) {
  if (sinks_alone(c)) return c.lengths_q.empty() || c.num_splits <= 1;
  return (c.head_dim <= kSm90FlexMaxHeadDim || plain_varlen(c)) && c.num_splits <= 1;
}
const char* expected_provider(const FlexCase& c) { return sm90_runs(c) ? "sm90" : "sm80"; }

// The case on sm90, BlockMasks of 64-key blocks included (two blocks to a 128-key tile; 64-row
// query blocks: each warpgroup walks its own block's lists).
FlexCase on_sm90(FlexCase c) {
  c.backend = sm90_runs(c) ? Backend::kSm90 : Backend::kAuto;
  return c;
}

void expect_matches_reference(const FlexCase& c) {
  FLASHCORE_SKIP_IF_PRUNED(c.dtype, c.head_dim);
  FlexResult r;
  run_flex_case(c, &r);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(r.provider, expected_provider(c));
  EXPECT_EQ(r.nan_count, 0);
  EXPECT_LE(r.rel_l2, reference::parity_tolerance(c.dtype));
  EXPECT_LE(r.lse_max_abs, kLseTolerance);
  EXPECT_EQ(r.masked_row_errors, 0) << "of " << r.masked_rows << " fully masked rows";
}

// On auto, the decode cases (one query tile per (batch, head), under half as many as SMs) leave the
// sm90 flex kernel for the sm80 one, which splits their keys (sm90_flex_auto_declines). Those with
// sinks alone go where the same problem without sinks goes (the dense kernels, then the sinks'
// rescale).
TEST(FlexSm90Auto, DecodeGridsRunSplitOnSm80) {
  FLASHCORE_REQUIRE_SM90_GPU();
  int checked = 0;
  for (FlexCase c : flex_cases()) {
    if (!is_decode_case(c) ||
        detail::pruned_reason(c.dtype, detail::instantiated_head_dim(c.head_dim))[0] != '\0') {
      continue;
    }
    ++checked;
    c.backend = Backend::kAuto;
    std::string provider = "sm80";
    if (sinks_alone(c)) {
      FlexCase no_sinks = c;
      no_sinks.sinks = false;
      FlexResult dense;
      run_flex_case(no_sinks, &dense);
      if (::testing::Test::HasFatalFailure()) return;
      provider = dense.provider;
    }
    FlexResult r;
    run_flex_case(c, &r);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(r.provider, provider) << c.name;
    EXPECT_EQ(r.nan_count, 0) << c.name;
    EXPECT_LE(r.rel_l2, reference::parity_tolerance(c.dtype)) << c.name;
    EXPECT_LE(r.lse_max_abs, kLseTolerance) << c.name;
    EXPECT_EQ(r.masked_row_errors, 0) << c.name;
  }
  if (checked == 0) GTEST_SKIP() << "this build has none of the decode cases' kernels";
}

// The flex kernel takes tiles from a counter only where its grid has more tiles than CTAs: a grid
// of one wave without a BlockMask (whose walks' build would zero the counter anyway) needs no
// workspace, and one tile more needs it again; a BlockMask always does (its walks). Each against
// the float64 reference, with tile counts made from this GPU's SM count (128-row tiles at every
// head dim).
TEST(FlexSm90Schedule, OnlyGridsOfMoreThanOneWaveTakeATileCounter) {
  FLASHCORE_REQUIRE_SM90_GPU();
  cudaDeviceProp device{};
  ASSERT_EQ(cudaGetDeviceProperties(&device, 0), cudaSuccess);
  const int64_t query_blocks = 3, sms = device.multiProcessorCount;
  for (const bool block_mask : {false, true}) {
    for (const int64_t heads : {sms / query_blocks, sms / query_blocks + 1}) {
      FlexCase c = make_flex_case("one_wave_edge", [](FlexCase& f) {
        f.head_dim = 64, f.causal = true, f.doc_span = 90, f.alibi = true;
        f.seqlen_q = 3 * 128 - 50, f.seqlen_k = 300;
      });
      c.heads_q = heads, c.heads_kv = 1, c.backend = Backend::kSm90;
      if (block_mask) c.block_mask = BlockMaskKind::kFromMask;
      c.name += (block_mask ? "_block_mask_heads_" : "_heads_") + std::to_string(heads);
      SCOPED_TRACE(c.name);
      FLASHCORE_SKIP_IF_PRUNED(c.dtype, c.head_dim);
      std::mt19937_64 rng(std::random_device{}());
      FlexData data;
      make_flex_data(c, &rng, &data);
      if (::testing::Test::HasFatalFailure()) return;
      DeviceBuffer o(static_cast<size_t>(data.rows_q * c.heads_q * c.head_dim) * sizeof(uint16_t));
      AttentionParams p = data.params;
      p.o = {o.get(), c.dtype, data.q_strides()};
      const bool one_wave = heads * query_blocks <= sms;
      EXPECT_EQ(workspace_size(p) == 0, one_wave && !block_mask) << workspace_size(p) << " bytes";
      expect_matches_reference(c);
    }
  }
}

class FlexSm90 : public ::testing::TestWithParam<FlexCase> {};

TEST_P(FlexSm90, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_SM90_GPU();
  expect_matches_reference(on_sm90(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Cases, FlexSm90, ::testing::ValuesIn(flex_cases()),
                         [](const auto& info) { return info.param.name; });

// The shared list's 64-key BlockMask cases again with 128-key blocks (the unpaired walk; at hd256,
// two 64-key tiles a block), and cases of 64-key blocks for sm90's paired steps: lists of odd
// lengths (the last step's second half empty), blocks that are not adjacent in one step (random
// lists) under a score_mod that reads kv_idx (ALiBi, softcap), document boundaries inside blocks,
// many tiles, GQA, key tails. Then the hd256 kernel's own (64-key tiles, 128 x 64 steps, Q freed
// after the last S GEMM and O stored from registers): 64- and 192-key blocks, merged walks, walks
// past 32 steps, ALiBi by columns, sinks, prefix-LM, head dims that run zero-filled on it, varlen.
std::vector<FlexCase> sm90_block_cases() {
  std::vector<FlexCase> cases;
  for (FlexCase c : flex_cases()) {
    if (c.block_mask == BlockMaskKind::kNone || c.kv_block != 64 ||
        c.head_dim > kSm90FlexMaxHeadDim) {
      continue;
    }
    c.kv_block = 128;
    c.num_splits = 0;  // sm90 runs unsplit (a forced split is the sm80 kernel's)
    c.name += "_as_kv128";
    cases.push_back(c);
  }
  cases.push_back(make_flex_case("kv64_causal_documents_alibi_gqa_many_tiles", [](FlexCase& f) {
    f.block_mask = BlockMaskKind::kFromMask, f.q_block = 128, f.kv_block = 64;
    f.causal = true, f.doc_span = 70, f.alibi = true, f.batch = 2, f.heads_q = 8, f.heads_kv = 2;
    f.seqlen_q = f.seqlen_k = 1000;
  }));
  cases.push_back(make_flex_case("kv64_random_q64_softcap_sinks_hd64_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 64, f.block_mask = BlockMaskKind::kRandom;
    f.q_block = f.kv_block = 64, f.softcap = 6.f, f.sinks = true;
    f.seqlen_q = 333, f.seqlen_k = 459, f.heads_q = 4, f.heads_kv = 4;
  }));
  cases.push_back(make_flex_case("kv64_random_q128_alibi_gqa", [](FlexCase& f) {
    f.block_mask = BlockMaskKind::kRandom, f.q_block = 128, f.kv_block = 64, f.alibi = true;
    f.seqlen_q = 517, f.seqlen_k = 705, f.heads_q = 4, f.heads_kv = 1, f.batch = 2;
  }));
  cases.push_back(make_flex_case("kv64_prefix_lm_tails", [](FlexCase& f) {
    f.block_mask = BlockMaskKind::kFromMask, f.q_block = 64, f.kv_block = 64, f.prefix = 150;
    f.seqlen_q = 190, f.seqlen_k = 621;
  }));
  cases.push_back(make_flex_case("kv64_window_documents_bias", [](FlexCase& f) {
    f.block_mask = BlockMaskKind::kFromMask, f.q_block = 128, f.kv_block = 64;
    f.window_left = 200, f.window_right = 30, f.doc_span = 40, f.bias_distance = 64;
    f.seqlen_q = f.seqlen_k = 640, f.heads_q = 2;
  }));
  // ALiBi alone runs in scores shifted by a constant per row (flex_steps.hpp's alibi_score): the
  // steps left of every row's diagonal by a term per column, the diagonal's and those right of it
  // exactly, and the LSE shifted back. A long causal walk with Sq != Sk and 8 heads (slopes up to
  // 0.5) with sinks, whose logits move with the rows; a non-causal batch whose rows see keys on
  // both sides of the diagonal.
  cases.push_back(make_flex_case("alibi_causal_long_walk_sinks_gqa", [](FlexCase& f) {
    f.causal = true, f.alibi = true, f.sinks = true;
    f.seqlen_q = 1000, f.seqlen_k = 4097, f.heads_q = 8, f.heads_kv = 2;
  }));
  cases.push_back(make_flex_case("alibi_both_sides_hd64_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 64, f.alibi = true;
    f.seqlen_q = 1000, f.seqlen_k = 700, f.heads_q = f.heads_kv = 8;
  }));
  // Walks of more than one chunk of step records (flex_load.hpp reads them 32 steps at a time, a
  // step per lane): a dense walk, a BlockMask of 128-key blocks and one of 64-key pairs, with
  // score_mods that read kv_idx so that a step loaded from the wrong key tile shows. The other
  // cases' walks fit one chunk.
  cases.push_back(make_flex_case("long_walk_dense_alibi", [](FlexCase& f) {
    f.alibi = true, f.seqlen_q = 130, f.seqlen_k = 9000;
  }));
  cases.push_back(make_flex_case("long_walk_kv128_block_mask_bias_gqa", [](FlexCase& f) {
    f.block_mask = BlockMaskKind::kFromMask, f.bias_distance = 700;
    f.seqlen_q = 200, f.seqlen_k = 4500, f.heads_q = 4, f.heads_kv = 2;
  }));
  cases.push_back(make_flex_case("long_walk_kv64_pairs_random_alibi_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.block_mask = BlockMaskKind::kRandom, f.kv_block = 64;
    f.alibi = true, f.seqlen_q = 256, f.seqlen_k = 9000;
  }));
  // Merged walks (query blocks shorter than the 128-row tile, sm90/flex_merged_walk.hpp): keys
  // a tile's two query blocks share, and keys only one lists (causal diagonals; random lists,
  // unsorted, with every fourth query block empty, so one warpgroup has nothing where the other
  // has a walk), more key units than one chunk of marks (70,000 keys: 1,094 64-key blocks), walks
  // past 32 steps, and query blocks of 192 rows (some tiles in one block, some across two).
  cases.push_back(make_flex_case("merged_q64_kv64_random_two_chunks_alibi_hd64", [](FlexCase& f) {
    f.head_dim = 64, f.block_mask = BlockMaskKind::kRandom, f.q_block = f.kv_block = 64;
    f.alibi = true, f.seqlen_q = 200, f.seqlen_k = 70000, f.heads_q = f.heads_kv = 2;
  }));
  cases.push_back(make_flex_case("merged_q64_kv128_causal_long_walk_bias", [](FlexCase& f) {
    f.block_mask = BlockMaskKind::kFromMask, f.q_block = 64, f.kv_block = 128, f.causal = true;
    f.bias_distance = 600, f.seqlen_q = 1000, f.seqlen_k = 4500, f.heads_q = 2, f.heads_kv = 1;
  }));
  cases.push_back(make_flex_case("merged_q64_kv64_causal_gqa_sinks", [](FlexCase& f) {
    f.block_mask = BlockMaskKind::kFromMask, f.q_block = f.kv_block = 64, f.causal = true;
    f.sinks = true, f.seqlen_q = f.seqlen_k = 1000, f.heads_q = 4, f.heads_kv = 2;
  }));
  cases.push_back(make_flex_case("merged_q192_kv64_documents_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.block_mask = BlockMaskKind::kFromMask, f.q_block = 192;
    f.kv_block = 64, f.doc_span = 100, f.seqlen_q = f.seqlen_k = 700, f.batch = 2;
  }));
  cases.push_back(make_flex_case("merged_q64_kv256_random_softcap", [](FlexCase& f) {
    f.block_mask = BlockMaskKind::kRandom, f.q_block = 64, f.kv_block = 256, f.softcap = 7.f;
    f.seqlen_q = 300, f.seqlen_k = 1300, f.heads_q = 3, f.heads_kv = 3;
  }));
  cases.push_back(make_flex_case("hd256_kv192_causal_documents_gqa", [](FlexCase& f) {
    f.head_dim = 256, f.block_mask = BlockMaskKind::kFromMask, f.q_block = 128, f.kv_block = 192;
    f.causal = true, f.doc_span = 90, f.seqlen_q = 1000, f.seqlen_k = 1127, f.heads_q = 4;
    f.heads_kv = 2, f.batch = 2;
  }));
  cases.push_back(make_flex_case("hd256_kv64_random_q128_softcap_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 256, f.block_mask = BlockMaskKind::kRandom;
    f.q_block = 128, f.kv_block = 64, f.softcap = 8.f, f.seqlen_q = 517, f.seqlen_k = 705;
  }));
  cases.push_back(make_flex_case("hd256_merged_q64_kv64_causal_sinks_gqa", [](FlexCase& f) {
    f.head_dim = 256, f.block_mask = BlockMaskKind::kFromMask, f.q_block = f.kv_block = 64;
    f.causal = true, f.sinks = true, f.seqlen_q = f.seqlen_k = 1000, f.heads_q = 4;
    f.heads_kv = 1;
  }));
  cases.push_back(make_flex_case("hd256_alibi_causal_long_walk_sinks_gqa", [](FlexCase& f) {
    f.head_dim = 256, f.causal = true, f.alibi = true, f.sinks = true;
    f.seqlen_q = 1000, f.seqlen_k = 4097, f.heads_q = 8, f.heads_kv = 2;
  }));
  cases.push_back(make_flex_case("hd256_long_walk_kv64_random_bias", [](FlexCase& f) {
    f.head_dim = 256, f.block_mask = BlockMaskKind::kRandom, f.kv_block = 64;
    f.bias_distance = 500, f.seqlen_q = 256, f.seqlen_k = 9000;
  }));
  cases.push_back(make_flex_case("hd256_prefix_lm_softcap_tails_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 256, f.prefix = 300, f.softcap = 15.f;
    f.seqlen_q = 777, f.seqlen_k = 1001;
  }));
  cases.push_back(make_flex_case("hd136_documents_alibi_zero_filled", [](FlexCase& f) {
    f.head_dim = 136, f.doc_span = 60, f.alibi = true, f.seqlen_q = f.seqlen_k = 400;
  }));
  cases.push_back(make_flex_case("hd224_varlen_alibi_causal_gqa", [](FlexCase& f) {
    f.head_dim = 224, f.causal = true, f.alibi = true, f.heads_q = 4, f.heads_kv = 2;
    f.lengths_q = {0, 1, 7, 700, 129}, f.lengths_k = {5, 1, 7, 650, 300};
  }));
  for (FlexCase& c : cases) c.backend = Backend::kSm90;
  return cases;
}

class FlexSm90Blocks : public ::testing::TestWithParam<FlexCase> {};

TEST_P(FlexSm90Blocks, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_SM90_GPU();
  expect_matches_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, FlexSm90Blocks, ::testing::ValuesIn(sm90_block_cases()),
                         [](const auto& info) { return info.param.name; });

// Varlen batches on sm90's persistent kernel (no flex part): every head dim, both dtypes, GQA,
// causal (bottom-right per sequence: a sequence with more queries than keys has rows that see
// nothing), windows, softcap, lengths 0, 1, 7, 127, 1000 and 4097 with Sq != Sk, and a batch of
// many sequences (more tiles than SMs, most of them past their sequence). A batch whose query
// lengths are not all the longest runs its listed tiles (src/sm90/varlen_tiles.hpp): every case
// below but the uniform one, with a loose max_seqlen_q and with one long sequence among short ones
// among them.
std::vector<FlexCase> sm90_varlen_cases() {
  std::vector<FlexCase> cases;
  const int64_t head_dims[] = {32, 64, 96, 128, 160, 192, 224, 256};
  for (size_t i = 0; i < std::size(head_dims); ++i) {
    FlexCase c;
    c.head_dim = head_dims[i];
    c.dtype = i % 2 == 0 ? DType::kBFloat16 : DType::kFloat16;
    c.heads_q = 4;
    c.heads_kv = i % 3 == 0 ? 1 : i % 3 == 1 ? 2 : 4;
    c.lengths_q = {1, 7, 127, 1000, 0, 300};
    c.lengths_k = {7, 1, 1000, 127, 5, 300};
    const char* variant = "";
    switch (i % 4) {
      case 0:
        c.causal = true, variant = "causal";
        break;
      case 1:
        c.window_left = 60, c.window_right = 0, variant = "window";
        break;
      case 2:
        c.causal = true, c.softcap = 8.f, variant = "causal_softcap";
        break;
      default:
        c.window_left = 90, c.window_right = 20, variant = "window_both_sides";
        break;
    }
    c.name = "varlen_" + std::string(variant) + "_hd" + std::to_string(c.head_dim) +
             (c.dtype == DType::kFloat16 ? "_fp16" : "_bf16");
    cases.push_back(c);
  }
  cases.push_back(make_flex_case("varlen_4097_causal_gqa", [](FlexCase& f) {
    f.causal = true, f.heads_q = 4, f.heads_kv = 1;
    f.lengths_q = {4097, 1, 127}, f.lengths_k = {1000, 7, 4097};
  }));
  cases.push_back(make_flex_case("varlen_many_sequences_hd64_fp16", [](FlexCase& f) {
    f.dtype = DType::kFloat16, f.head_dim = 64, f.causal = true, f.heads_q = 16, f.heads_kv = 4;
    for (int32_t b = 0; b < 40; ++b) {
      const int32_t length = b % 7 == 3 ? 0 : (b * 131) % 700 + 1;
      f.lengths_q.push_back(length);
      f.lengths_k.push_back(b % 5 == 2 ? length / 2 : length);
    }
  }));
  cases.push_back(make_flex_case("varlen_loose_max_seqlen_causal_gqa", [](FlexCase& f) {
    f.causal = true, f.heads_q = 4, f.heads_kv = 2;
    f.lengths_q = {128, 128, 0, 77, 128, 128, 128, 128, 1, 128, 128};
    f.lengths_k = f.lengths_q;
    f.max_seqlen_q = 1024;  // eight query blocks a sequence in the grid, one with rows
  }));
  cases.push_back(make_flex_case("varlen_one_long_many_short_hd64", [](FlexCase& f) {
    f.head_dim = 64, f.causal = true, f.heads_q = 2, f.heads_kv = 2;  // 192-row tiles
    for (int32_t b = 0; b < 30; ++b) f.lengths_q.push_back((b * 37) % 200 + 1);
    f.lengths_q.insert(f.lengths_q.begin() + 11, 2000);
    f.lengths_k = f.lengths_q;
  }));
  cases.push_back(make_flex_case("varlen_uniform_queries_window", [](FlexCase& f) {
    f.window_left = 100, f.window_right = 0;  // every query length the longest: no list
    f.lengths_q = {256, 256, 256}, f.lengths_k = {100, 256, 300};
  }));
  for (FlexCase& c : cases) c.backend = Backend::kSm90;
  return cases;
}

class FlexSm90Varlen : public ::testing::TestWithParam<FlexCase> {};

TEST_P(FlexSm90Varlen, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_SM90_GPU();
  expect_matches_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, FlexSm90Varlen, ::testing::ValuesIn(sm90_varlen_cases()),
                         [](const auto& info) { return info.param.name; });

// Cases with fully masked rows must have some on sm90 too, or that part of the test cannot fail.
TEST(FlexSm90MaskedRows, CasesThatPromiseMaskedRowsHaveThem) {
  FLASHCORE_REQUIRE_SM90_GPU();
  int checked = 0;
  for (const char* name : kMaskedRowCases) {
    for (const FlexCase& c : flex_cases()) {
      if (c.name != name) continue;
      if (detail::pruned_reason(c.dtype, detail::instantiated_head_dim(c.head_dim))[0] != '\0')
        continue;  // this build left the case's kernel out
      ++checked;
      FlexResult r;
      run_flex_case(on_sm90(c), &r);
      if (::testing::Test::HasFatalFailure()) return;
      EXPECT_EQ(r.provider, expected_provider(c)) << name;
      EXPECT_GT(r.masked_rows, 0) << name;
      EXPECT_EQ(r.masked_row_errors, 0) << name;
    }
  }
  if (checked == 0) GTEST_SKIP() << "this build has none of the masked-row cases' kernels";
}

// auto runs flex problems on sm90 where its flex kernel takes them (BlockMasks of 64-key blocks
// too; at hd256, whose tiles have 64 keys, 192-key blocks too), and on sm80 where it does not
// (192-key blocks up to hd128); varlen batches without a flex part on sm90's persistent kernel at
// every head dim.
TEST(FlexSm90Auto, AutoRunsFlexOnSm90AndFallsBackToSm80) {
  FLASHCORE_REQUIRE_SM90_GPU();
  FlexCase documents = make_flex_case("auto_documents", [](FlexCase& f) { f.doc_span = 30; });
  documents.backend = Backend::kAuto;
  FlexCase blocks_of_64 = make_flex_case("auto_kv_blocks_of_64", [](FlexCase& f) {
    f.doc_span = 30, f.block_mask = BlockMaskKind::kFromMask, f.q_block = f.kv_block = 64;
  });
  blocks_of_64.backend = Backend::kAuto;
  FlexCase blocks_of_192 = make_flex_case("auto_kv_blocks_of_192", [](FlexCase& f) {
    f.doc_span = 30, f.block_mask = BlockMaskKind::kFromMask, f.q_block = 64, f.kv_block = 192;
    f.seqlen_q = f.seqlen_k = 400;
  });
  blocks_of_192.backend = Backend::kAuto;
  FlexCase hd256 = make_flex_case("auto_hd256_causal_block_mask_128", [](FlexCase& f) {
    f.head_dim = 256, f.causal = true, f.doc_span = 30, f.block_mask = BlockMaskKind::kFromMask;
  });
  hd256.backend = Backend::kAuto;
  FlexCase hd256_blocks_of_192 = make_flex_case("auto_hd256_kv_blocks_of_192", [](FlexCase& f) {
    f.head_dim = 256, f.doc_span = 30, f.block_mask = BlockMaskKind::kFromMask, f.q_block = 64;
    f.kv_block = 192, f.seqlen_q = f.seqlen_k = 400;
  });
  hd256_blocks_of_192.backend = Backend::kAuto;
  FlexCase varlen_hd192 = make_flex_case("auto_hd192_varlen", [](FlexCase& f) {
    f.head_dim = 192, f.lengths_q = {7, 0, 300}, f.lengths_k = {7, 1, 290};
  });
  varlen_hd192.backend = Backend::kAuto;
  for (const FlexCase* c :
       {&documents, &blocks_of_64, &blocks_of_192, &hd256, &hd256_blocks_of_192, &varlen_hd192})
    FLASHCORE_SKIP_IF_PRUNED(c->dtype, c->head_dim);  // auto's choices need every case's kernel
  for (const auto& [c, provider] :
       {std::pair{documents, "sm90"}, std::pair{blocks_of_64, "sm90"},
        std::pair{blocks_of_192, "sm80"}, std::pair{hd256, "sm90"},
        std::pair{hd256_blocks_of_192, "sm90"}, std::pair{varlen_hd192, "sm90"}}) {
    FlexResult r;
    run_flex_case(c, &r);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(r.provider, provider) << c.name;
    EXPECT_EQ(r.nan_count, 0) << c.name;
    EXPECT_LE(r.rel_l2, reference::parity_tolerance(c.dtype)) << c.name;
  }
}

}  // namespace
}  // namespace flashcore::testing
