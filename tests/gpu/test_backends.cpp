// Every registered backend against the float64 CPU reference, on fresh random inputs, with
// poisoned outputs: both dtypes, every head dim, causal, windows, softcap, GQA 1/2/8, odd and
// unequal sequence lengths, BHSD and padded strides.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

#include "flashcore/attention.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::testing {
namespace {

// Head dims every backend must implement; others may be rejected with kUnsupported.
const std::set<int64_t> kRequiredHeadDims = {64, 128, 256};

std::vector<AttentionCase> backend_cases() {
  std::vector<AttentionCase> cases;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t d : {64, 128, 256}) {
      auto add = [&](AttentionCase c) {
        c.dtype = dtype;
        c.head_dim = d;
        cases.push_back(c);
      };
      add({.batch = 2, .seqlen_q = 128, .seqlen_k = 128, .heads_q = 4, .heads_kv = 4});
      add({.batch = 1,
           .seqlen_q = 127,
           .seqlen_k = 1000,
           .heads_q = 4,
           .heads_kv = 2,
           .causal = true});
      // Sq > Sk with causal: the first Sq - Sk rows see no key at all (O = 0, LSE = -inf).
      add({.batch = 1,
           .seqlen_q = 1000,
           .seqlen_k = 127,
           .heads_q = 2,
           .heads_kv = 1,
           .causal = true});
      add({.batch = 2,
           .seqlen_q = 1000,
           .seqlen_k = 1000,
           .heads_q = 2,
           .heads_kv = 2,
           .window_left = 64,
           .window_right = 0,
           .layout = Layout::kBHSD});
      add({.batch = 1,
           .seqlen_q = 7,
           .seqlen_k = 4097,
           .heads_q = 8,
           .heads_kv = 1,
           .window_left = 300,
           .window_right = 40,
           .softcap = 30.f});
      add({.batch = 3,
           .seqlen_q = 1,
           .seqlen_k = 4097,
           .heads_q = 8,
           .heads_kv = 1});  // decode, MQA
      add({.batch = 1,
           .seqlen_q = 4097,
           .seqlen_k = 7,
           .heads_q = 2,
           .heads_kv = 2,
           .softmax_scale = 0.3f,
           .layout = Layout::kPadded});
      add({.batch = 2,
           .seqlen_q = 1,
           .seqlen_k = 1,
           .heads_q = 8,
           .heads_kv = 2,
           .with_lse = false});
      add({.batch = 1,
           .seqlen_q = 128,
           .seqlen_k = 1000,
           .heads_q = 8,
           .heads_kv = 1,
           .causal = true,
           .window_left = 100,
           .softcap = 10.f,
           .layout = Layout::kPadded});
    }
    // Long causal self-attention at both tile-boundary-odd lengths, one head dim per dtype.
    cases.push_back({.dtype = dtype,
                     .batch = 1,
                     .seqlen_q = 4097,
                     .seqlen_k = 4097,
                     .heads_q = 2,
                     .heads_kv = 1,
                     .head_dim = 64,
                     .causal = true});
    // Head dims beyond the required set: implemented by some backends, rejected cleanly by others.
    for (int64_t d : {32, 96, 192}) {
      cases.push_back({.dtype = dtype,
                       .batch = 1,
                       .seqlen_q = 127,
                       .seqlen_k = 128,
                       .heads_q = 4,
                       .heads_kv = 2,
                       .head_dim = d,
                       .causal = true});
    }
  }
  return cases;
}

// One backend (and tile) on one case, checked against the float64 reference.
void check_backend(const AttentionCase& c, CaseData& data, Backend backend, TileShape tile,
                   int num_splits) {
  SCOPED_TRACE(std::string("backend ") + backend_name(backend) + ", tile " +
               std::to_string(static_cast<int>(tile)));
  AttentionParams params = data.params(backend);
  params.num_splits = num_splits;
  params.tile = tile;
  const Status can = can_implement(params);
  if (!can.ok()) {
    ASSERT_EQ(can.code, StatusCode::kUnsupported) << can.message;
    EXPECT_EQ(kRequiredHeadDims.count(c.head_dim), 0u)
        << backend_name(backend) << " must implement head_dim " << c.head_dim << ": "
        << can.message;
    std::cout << "[  NOTE    ] " << backend_name(backend) << " rejects " << c.name() << ": "
              << can.message << "\n";
    return;
  }
  data.poison_outputs();
  RunInfo info;
  const Status status = run(params, &info);
  ASSERT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(info.backend, backend);
  CUDA_ASSERT_OK(cudaDeviceSynchronize());

  bool padding_untouched = false;
  const std::vector<double> o = data.read_o(&padding_untouched);
  const std::vector<float> lse = data.read_lse();
  const Errors e = compare(c, o, data.ref_o(), c.with_lse ? &lse : nullptr, data.ref_lse());
  EXPECT_EQ(e.nan_count, 0) << "NaN/inf or unwritten elements";
  EXPECT_EQ(e.masked_row_errors, 0) << "fully masked rows must give O = 0 and LSE = -inf";
  EXPECT_TRUE(padding_untouched) << "wrote outside O's elements";
  EXPECT_LE(e.rel_l2, tolerance(c.dtype));
  if (c.with_lse) {
    EXPECT_LE(e.lse_max_abs, kLseTolerance);
  }
}

// A forced tile that only some (backend, head dim, device) have: where `expected` it must run and
// match the reference, everywhere else it must be rejected as unsupported.
void check_tile_where_expected(const AttentionCase& c, CaseData& data, Backend backend,
                               TileShape tile, int num_splits, bool expected) {
  AttentionParams params = data.params(backend);
  params.num_splits = num_splits;
  params.tile = tile;
  const Status can = can_implement(params);
  if (!expected) {
    EXPECT_EQ(can.code, StatusCode::kUnsupported)
        << backend_name(backend) << " tile " << static_cast<int>(tile) << " must be rejected here";
    return;
  }
  ASSERT_TRUE(can.ok()) << backend_name(backend) << " must run tile " << static_cast<int>(tile)
                        << " here: " << can.message;
  check_backend(c, data, backend, tile, num_splits);
}

// Runs every backend on one case (with a forced split-KV count when num_splits > 0). The backends
// with a tile choice also run with each of their tiles forced, so every kernel sees every case
// whichever one auto picks for it on this GPU:
//  - sm80: kLarge and kSmall; the Hopper tiles (kMedium, kCtaPair) are sm90's, never sm80's.
//  - sm90 (on an sm_90 GPU): kLarge (the persistent kernel) at every head dim; the small-grid
//    tiles kSmall at head dims 64, 128 and 256, kMedium and kCtaPair at 64 (kCtaPair splits the
//    keys itself and rejects a split count).
void check_all_backends(const AttentionCase& c, int num_splits) {
  FLASHCORE_SKIP_IF_PRUNED(c.dtype, c.head_dim);
  CaseData data(c);
  data.compute_reference();
  SCOPED_TRACE("seed " + std::to_string(data.seed()) + ", num_splits " +
               std::to_string(num_splits));
  cudaDeviceProp device{};
  CUDA_ASSERT_OK(cudaGetDeviceProperties(&device, 0));
  const bool sm90_gpu = device.major == 9 && device.minor == 0;
  const bool hd64 = c.head_dim == 64;
  const bool small_grid_head_dim = kRequiredHeadDims.count(c.head_dim) > 0;
  for (Backend backend : backends()) {
    check_backend(c, data, backend, TileShape::kAuto, num_splits);
    if (backend == Backend::kSm80) {
      check_backend(c, data, backend, TileShape::kLarge, num_splits);
      check_backend(c, data, backend, TileShape::kSmall, num_splits);
      check_tile_where_expected(c, data, backend, TileShape::kMedium, num_splits, false);
      check_tile_where_expected(c, data, backend, TileShape::kCtaPair, num_splits, false);
    }
    if (backend == Backend::kSm90 && sm90_gpu) {
      check_backend(c, data, backend, TileShape::kLarge, num_splits);
      check_tile_where_expected(c, data, backend, TileShape::kSmall, num_splits,
                                small_grid_head_dim);
      check_tile_where_expected(c, data, backend, TileShape::kMedium, num_splits, hd64);
      check_tile_where_expected(c, data, backend, TileShape::kCtaPair, num_splits,
                                hd64 && num_splits <= 1);
    }
  }
}

class BackendTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(BackendTest, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  check_all_backends(GetParam(), /*num_splits=*/0);
}

INSTANTIATE_TEST_SUITE_P(AllCases, BackendTest, ::testing::ValuesIn(backend_cases()),
                         [](const auto& info) { return info.param.name(); });

// Split-KV forced on and off, with split boundaries that cut through masked and tail tiles.
class SplitKvTest : public ::testing::TestWithParam<std::tuple<AttentionCase, int>> {};

TEST_P(SplitKvTest, AnySplitCountMatchesReference) {
  FLASHCORE_REQUIRE_GPU();
  check_all_backends(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Splits, SplitKvTest,
    ::testing::Combine(::testing::Values(AttentionCase{.batch = 1,
                                                       .seqlen_q = 512,
                                                       .seqlen_k = 512,
                                                       .heads_q = 8,
                                                       .heads_kv = 8,
                                                       .head_dim = 64},
                                         AttentionCase{.dtype = DType::kBFloat16,
                                                       .batch = 2,
                                                       .seqlen_q = 1,
                                                       .seqlen_k = 1000,
                                                       .heads_q = 16,
                                                       .heads_kv = 2,
                                                       .head_dim = 128},
                                         AttentionCase{.batch = 1,
                                                       .seqlen_q = 300,
                                                       .seqlen_k = 777,
                                                       .heads_q = 2,
                                                       .heads_kv = 1,
                                                       .head_dim = 256,
                                                       .causal = true,
                                                       .window_left = 200},
                                         AttentionCase{.dtype = DType::kBFloat16,
                                                       .batch = 1,
                                                       .seqlen_q = 1000,
                                                       .seqlen_k = 127,
                                                       .heads_q = 4,
                                                       .heads_kv = 4,
                                                       .head_dim = 64,
                                                       .causal = true,
                                                       .softcap = 5.f}),
                       ::testing::Values(1, 3, 7, 64)),
    [](const auto& info) {
      return std::get<0>(info.param).name() + "_splits" + std::to_string(std::get<1>(info.param));
    });

TEST(BackendSelection, AutoPicksAFusedBackendAndReportsIt) {
  FLASHCORE_REQUIRE_GPU();
  CaseData data({.batch = 1, .seqlen_q = 64, .seqlen_k = 64, .heads_q = 2, .heads_kv = 2});
  data.poison_outputs();
  RunInfo info;
  const Status status = run(data.params(Backend::kAuto), &info);
  ASSERT_TRUE(status.ok()) << status.message;
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  EXPECT_NE(info.backend, Backend::kUnfused) << "auto must not pick the S x S workspace path";
  EXPECT_EQ(info.backend, resolve_backend(data.params(Backend::kAuto)));
  EXPECT_STREQ(info.provider, backend_name(info.backend));
}

}  // namespace
}  // namespace flashcore::testing
