// What only the sm90 backend's persistent kernel (TileShape::kLarge) has: every head dim that is a
// multiple of 8 (rounded up to an instantiation, zero-filled by the TMA), the persistent
// scheduler's edges (fewer tiles than SMs, more tiles than CTAs, partial head groups, longest-first
// causal order), and auto's choice on an H100 between it, the small-grid tiles and the sm80
// backend. The shared cases (odd lengths, GQA, windows, softcap, strides, splits) run on sm90, with
// each of its tiles forced, through test_backends.cpp, which walks every registered backend.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flashcore/attention.hpp"
#include "src/common/head_dim.hpp"
#include "src/common/pruning.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::testing {
namespace {

// Skips (loudly) unless the device is an sm_90 GPU and this build has the sm90 kernel the case
// needs (a build pruned by FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES leaves some out).
#define FLASHCORE_REQUIRE_SM90(params)                                                             \
  do {                                                                                             \
    FLASHCORE_REQUIRE_GPU();                                                                       \
    cudaDeviceProp device{};                                                                       \
    CUDA_ASSERT_OK(cudaGetDeviceProperties(&device, 0));                                           \
    if (device.major != 9) GTEST_SKIP() << "sm90 test skipped: the GPU is not sm_90";              \
    const char* pruned =                                                                           \
        detail::pruned_reason((params).q.dtype, detail::instantiated_head_dim((params).head_dim)); \
    if (pruned[0] != '\0') GTEST_SKIP() << "sm90 test skipped: this build " << pruned;             \
    const Status can = can_implement(params);                                                      \
    ASSERT_TRUE(can.ok()) << "sm90 must run on an sm_90 GPU: " << can.message;                     \
  } while (0)

void expect_matches(const AttentionCase& c, CaseData& data, const std::vector<double>& ref_o,
                    const std::vector<double>& ref_lse, int num_splits) {
  AttentionParams params = data.params(Backend::kSm90);
  params.num_splits = num_splits;
  // The persistent kernel even where kAuto would take a small-grid tile (short grids).
  params.tile = TileShape::kLarge;
  FLASHCORE_REQUIRE_SM90(params);
  data.poison_outputs();
  RunInfo info;
  const Status status = run(params, &info);
  ASSERT_TRUE(status.ok()) << status.message;
  EXPECT_STREQ(info.provider, "sm90");
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  bool padding_untouched = false;
  const std::vector<double> o = data.read_o(&padding_untouched);
  const std::vector<float> lse = data.read_lse();
  const Errors e = compare(c, o, ref_o, c.with_lse ? &lse : nullptr, ref_lse);
  EXPECT_EQ(e.nan_count, 0) << "NaN/inf or unwritten elements";
  EXPECT_EQ(e.masked_row_errors, 0) << "fully masked rows must give O = 0 and LSE = -inf";
  EXPECT_TRUE(padding_untouched) << "wrote outside O's elements";
  EXPECT_LE(e.rel_l2, tolerance(c.dtype));
  if (c.with_lse) EXPECT_LE(e.lse_max_abs, kLseTolerance);
}

// Every multiple of 8 up to 256, against the float64 reference: the multiples of 32 run their own
// instantiation, the others the next one up with zero-filled dims and masked stores.
class Sm90HeadDimTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(Sm90HeadDimTest, MatchesFloat64Reference) {
  const AttentionCase& c = GetParam();
  FLASHCORE_REQUIRE_GPU();  // before the float64 reference, which a skipped case need not pay for
  CaseData data(c);
  data.compute_reference();
  SCOPED_TRACE("seed " + std::to_string(data.seed()));
  expect_matches(c, data, data.ref_o(), data.ref_lse(), /*num_splits=*/1);
}

std::vector<AttentionCase> head_dim_cases() {
  std::vector<AttentionCase> cases;
  for (int64_t d = 8; d <= 256; d += 8) {
    const DType dtype = (d / 8) % 2 == 0 ? DType::kBFloat16 : DType::kFloat16;
    // Alternate the features so every head dim meets a tail, GQA and a mask or padded strides.
    if (d % 16 == 0) {
      cases.push_back({.dtype = dtype,
                       .batch = 2,
                       .seqlen_q = 127,
                       .seqlen_k = 300,
                       .heads_q = 4,
                       .heads_kv = 2,
                       .head_dim = d,
                       .causal = true});
    } else {
      cases.push_back({.dtype = dtype,
                       .batch = 1,
                       .seqlen_q = 200,
                       .seqlen_k = 129,
                       .heads_q = 2,
                       .heads_kv = 1,
                       .head_dim = d,
                       .window_left = 50,
                       .softcap = 15.f,
                       .layout = Layout::kPadded});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryMultipleOf8, Sm90HeadDimTest, ::testing::ValuesIn(head_dim_cases()),
                         [](const auto& info) { return info.param.name(); });

// Scores spread far wider than the default scale gives (softmax scale 1): the mainloop's lazy row
// max (OnlineSoftmax::update_scores: a row keeps a stale max unless a block raises it by more than
// 2^8) then both moves mid-row, rescaling O, and keeps a max that a later block exceeds by less
// than 2^8. Walked as the kernel walks (last key block first), a row of these shapes moves its max
// 0.5-1.5 times after its first block and keeps it under a larger block 1.5-2 times (a host
// simulation of the walk over the same distribution); at the default scale the first block's max
// almost never moves, so the other suites do not reach those paths. Each mainloop: hd64 (three
// consumer warpgroups, four max chains), hd128 unmasked (CTA pairs) and causal, and hd256 (80-key
// blocks, one max chain); against the float64 reference (Sm90HeadDimTest's check).
std::vector<AttentionCase> wide_score_cases() {
  std::vector<AttentionCase> cases;
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const int64_t d : {64, 128, 256}) {
      for (const bool causal : {false, true}) {
        cases.push_back({.dtype = dtype,
                         .batch = 1,
                         .seqlen_q = causal ? 1000 : 256,
                         .seqlen_k = 1000,
                         .heads_q = 2,
                         .heads_kv = 1,
                         .head_dim = d,
                         .causal = causal,
                         .softmax_scale = 1.f});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(WideScores, Sm90HeadDimTest, ::testing::ValuesIn(wide_score_cases()),
                         [](const auto& info) { return info.param.name(); });

// Shapes whose tile counts cross the persistent grid's edges, checked against the fp32 oracle.
class Sm90SchedulerTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(Sm90SchedulerTest, MatchesOracle) {
  const AttentionCase& c = GetParam();
  FLASHCORE_REQUIRE_GPU();
  CaseData data(c);
  SCOPED_TRACE("seed " + std::to_string(data.seed()));
  const OracleOutput oracle = run_oracle(data);
  expect_matches(c, data, oracle.o, oracle.lse, /*num_splits=*/0);
}

INSTANTIATE_TEST_SUITE_P(
    Edges, Sm90SchedulerTest,
    ::testing::Values(
        // 400 causal 192-row tiles over at most 132 CTAs: each CTA runs several, longest first.
        AttentionCase{.batch = 2,
                      .seqlen_q = 777,
                      .seqlen_k = 1500,
                      .heads_q = 40,
                      .heads_kv = 10,
                      .head_dim = 64,
                      .causal = true},
        // Long keys make head groups of 3 (K/V sized to L2), with a partial last group.
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 1,
                      .seqlen_q = 300,
                      .seqlen_k = 16384,
                      .heads_q = 8,
                      .heads_kv = 8,
                      .head_dim = 128},
        // Fewer tiles than SMs, and a tile count that is not a multiple of the grid.
        AttentionCase{.batch = 3,
                      .seqlen_q = 129,
                      .seqlen_k = 2000,
                      .heads_q = 5,
                      .heads_kv = 5,
                      .head_dim = 256,
                      .window_left = 700,
                      .window_right = 20},
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 4,
                      .seqlen_q = 2048,
                      .seqlen_k = 2048,
                      .heads_q = 33,
                      .heads_kv = 3,
                      .head_dim = 96,
                      .causal = true,
                      .layout = Layout::kBHSD},
        // Unmasked problems whose query blocks pair up run in CTA pairs that share K/V
        // (multicast): four blocks per head at hd128, the last one partial; 180 pair tiles over
        // at most 66 clusters; GQA 5:1; keys not a multiple of the key tile.
        AttentionCase{.batch = 3,
                      .seqlen_q = 500,
                      .seqlen_k = 1000,
                      .heads_q = 30,
                      .heads_kv = 6,
                      .head_dim = 128},
        // Fewer pair tiles (6) than clusters, 192-row tiles, a single-key tail block.
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 1,
                      .seqlen_q = 700,
                      .seqlen_k = 4097,
                      .heads_q = 3,
                      .heads_kv = 3,
                      .head_dim = 64},
        // Three 192-row blocks per head, which cannot pair into CTA clusters: one-CTA tiles on
        // the fixed sequence of an unmasked problem, the last block partial; GQA 3:1.
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 5,
                      .seqlen_q = 500,
                      .seqlen_k = 1000,
                      .heads_q = 12,
                      .heads_kv = 4,
                      .head_dim = 64},
        // A causal window: 192-row tiles of different key ranges taken from the dynamic counter,
        // some with fully masked key blocks skipped.
        AttentionCase{.batch = 2,
                      .seqlen_q = 2000,
                      .seqlen_k = 2100,
                      .heads_q = 8,
                      .heads_kv = 2,
                      .head_dim = 64,
                      .causal = true,
                      .window_left = 300}),
    [](const auto& info) { return info.param.name(); });

// The dynamic schedule's counter only where the grid has more tiles than CTAs: a masked grid of
// one wave (a CTA per tile) runs the fixed sequence, so it needs no workspace (the counter it
// would zero before the launch), and one tile more makes it dynamic again. Both against the fp32
// oracle, on the persistent kernel, with the tile counts made from this GPU's SM count (128-row
// tiles at hd128).
TEST(Sm90Schedule, OnlyGridsOfMoreThanOneWaveTakeATileCounter) {
  FLASHCORE_REQUIRE_GPU();
  cudaDeviceProp device{};
  CUDA_ASSERT_OK(cudaGetDeviceProperties(&device, 0));
  const int64_t query_blocks = 4, sms = device.multiProcessorCount;
  for (const int64_t heads : {sms / query_blocks, sms / query_blocks + 1}) {
    const AttentionCase c{.dtype = DType::kBFloat16,
                          .batch = 1,
                          .seqlen_q = 128 * query_blocks,
                          .seqlen_k = 700,
                          .heads_q = heads,
                          .heads_kv = 1,
                          .head_dim = 128,
                          .causal = true};
    SCOPED_TRACE(c.name());
    CaseData data(c);
    AttentionParams params = data.params(Backend::kSm90);
    params.tile = TileShape::kLarge;
    FLASHCORE_REQUIRE_SM90(params);
    const bool one_wave = heads * query_blocks <= sms;
    EXPECT_EQ(workspace_size(params) == 0, one_wave) << workspace_size(params) << " bytes";
    const OracleOutput oracle = run_oracle(data);
    expect_matches(c, data, oracle.o, oracle.lse, /*num_splits=*/0);
  }
}

// Half-block edges: a warpgroup's 64 rows that see only one half of a key block (a causal
// diagonal, a window's left edge, a sequence's last keys), rows past the sequence in a tile's last
// warpgroup, and 192-row tiles whose first warpgroup sees none of the tile's last block. Where
// tiles are not 128 x 128 (192 rows at D <= 64, 96 or 80 keys at D > 128) a warpgroup skips the
// steps none of its rows sees and takes their turns empty (docs/perf.md, "Session 35"); the kernel
// runs the other steps whole, masked per element (session 24 measured narrowing them). These
// cases put each kind at a block's edge.
INSTANTIATE_TEST_SUITE_P(
    HalfBlockEdges, Sm90SchedulerTest,
    ::testing::Values(
        // Causal diagonals: the first warpgroup's rows see the first half of the diagonal block.
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 2,
                      .seqlen_q = 640,
                      .seqlen_k = 640,
                      .heads_q = 6,
                      .heads_kv = 2,
                      .head_dim = 128,
                      .causal = true},
        // A window whose left edge is half a block left of each tile's second warpgroup: that
        // warpgroup sees the second half of its last block.
        AttentionCase{.batch = 1,
                      .seqlen_q = 1024,
                      .seqlen_k = 1024,
                      .heads_q = 4,
                      .heads_kv = 4,
                      .head_dim = 128,
                      .causal = true,
                      .window_left = 128},
        // 40 rows in the last tile (its second warpgroup has none) and 44 keys in the last block
        // (every row sees its first half only), not causal: whole steps elsewhere.
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 3,
                      .seqlen_q = 296,
                      .seqlen_k = 300,
                      .heads_q = 4,
                      .heads_kv = 1,
                      .head_dim = 128},
        // 192-row tiles over 128-key blocks: a warpgroup whose rows end at a block's start sees
        // none of the diagonal's last block, the next one half of it; bottom-right causal.
        AttentionCase{.batch = 2,
                      .seqlen_q = 1000,
                      .seqlen_k = 1064,
                      .heads_q = 8,
                      .heads_kv = 2,
                      .head_dim = 64,
                      .causal = true},
        // 96-key blocks at hd192, causal, a partial last tile.
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 2,
                      .seqlen_q = 500,
                      .seqlen_k = 500,
                      .heads_q = 3,
                      .heads_kv = 3,
                      .head_dim = 192,
                      .causal = true},
        // Sq > Sk bottom-right: the first rows see no key at all (O = 0, LSE = -inf).
        AttentionCase{.batch = 1,
                      .seqlen_q = 700,
                      .seqlen_k = 127,
                      .heads_q = 2,
                      .heads_kv = 2,
                      .head_dim = 128,
                      .causal = true},
        // The same at hd64: rows up to 447 see no key, so the third tile's first warpgroup skips
        // every step its second and third run.
        AttentionCase{.batch = 1,
                      .seqlen_q = 700,
                      .seqlen_k = 252,
                      .heads_q = 3,
                      .heads_kv = 1,
                      .head_dim = 64,
                      .causal = true},
        // gpt-oss's sliding window (128 keys) over 192-row tiles, GQA 8:1: a tile's last
        // warpgroups see none of its first block (steps skipped at the end of the walk).
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 2,
                      .seqlen_q = 1000,
                      .seqlen_k = 1000,
                      .heads_q = 8,
                      .heads_kv = 1,
                      .head_dim = 64,
                      .causal = true,
                      .window_left = 127},
        // 80-key blocks at hd256 under a causal window (steps skipped at both ends), and a last
        // tile whose second warpgroup's rows (576-639) are all past the sequence's 540.
        AttentionCase{.dtype = DType::kBFloat16,
                      .batch = 2,
                      .seqlen_q = 540,
                      .seqlen_k = 540,
                      .heads_q = 4,
                      .heads_kv = 2,
                      .head_dim = 256,
                      .causal = true,
                      .window_left = 200}),
    [](const auto& info) { return info.param.name(); });

// On an H100 (132 SMs), auto runs sm90 everywhere it was measured faster: its persistent kernel on
// grids that fill the GPU, its small-grid tiles on the small grids (decode, the canonical shape),
// and the sm80 backend's large tile on the few grids in between where that was faster.
TEST(Sm90Auto, PicksAsMeasured) {
  FLASHCORE_REQUIRE_GPU();
  cudaDeviceProp device{};
  CUDA_ASSERT_OK(cudaGetDeviceProperties(&device, 0));
  if (device.major != 9) GTEST_SKIP() << "sm90 test skipped: the GPU is not sm_90";
  CaseData large({.dtype = DType::kBFloat16,
                  .batch = 4,
                  .seqlen_q = 2048,
                  .seqlen_k = 2048,
                  .heads_q = 16,
                  .heads_kv = 16,
                  .head_dim = 128});
  CaseData decode(
      {.batch = 4, .seqlen_q = 1, .seqlen_k = 4096, .heads_q = 32, .heads_kv = 8, .head_dim = 128});
  CaseData canonical({.batch = 1, .seqlen_q = 512, .seqlen_k = 512, .heads_q = 8, .heads_kv = 8});
  // 128 192-row tiles (fewer than SMs: the persistent kernel declines), 192 large-tile CTAs (the
  // Hopper tiles need fewer than 132) and 768 small ones (more than two waves): the large tile.
  CaseData between({.batch = 1,
                    .seqlen_q = 3072,
                    .seqlen_k = 3072,
                    .heads_q = 8,
                    .heads_kv = 8,
                    .head_dim = 64});
  // The choices below are among the kernels of a full build.
  for (const CaseData* c : {&large, &decode, &canonical, &between}) {
    const AttentionParams p = c->params(Backend::kAuto);
    const char* pruned =
        detail::pruned_reason(p.q.dtype, detail::instantiated_head_dim(p.head_dim));
    if (pruned[0] != '\0')
      GTEST_SKIP() << "auto's choices need every case's kernel; this build " << pruned;
  }
  EXPECT_EQ(resolve_backend(large.params(Backend::kAuto)), Backend::kSm90);
  EXPECT_EQ(resolve_backend(decode.params(Backend::kAuto)), Backend::kSm90);
  EXPECT_EQ(resolve_backend(canonical.params(Backend::kAuto)), Backend::kSm90);
  if (device.multiProcessorCount != 132) {
    GTEST_SKIP() << "the in-between grid is sized for 132 SMs";
  }
  EXPECT_EQ(resolve_backend(between.params(Backend::kAuto)), Backend::kSm80);
}

}  // namespace
}  // namespace flashcore::testing
