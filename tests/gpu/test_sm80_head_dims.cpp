// The sm80 backend at every head dim it instantiates (each multiple of 32 up to 256) and at head
// dims that round up to one (src/common/head_dim.hpp: zero-filled loads, masked stores), on both
// of its mma.sync tiles, against the float64 reference with poisoned outputs. The shared cases
// (test_backends.cpp) cover the required head dims on every backend; these add the others.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "flashcore/attention.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::testing {
namespace {

// Head dims with an instantiation of their own, and ones that run on the next one up (from 8
// dims short of it to 24 dims short), as real models use (80, 112) and others.
const std::vector<int64_t> kInstantiated = {32, 64, 96, 128, 160, 192, 224, 256};
const std::vector<int64_t> kRoundedUp = {8, 40, 56, 72, 80, 112, 136, 200, 248};

struct HeadDimCase {
  AttentionCase c;
  int num_splits;  // 0: the heuristic; > 1 forces split-KV (partials as wide as the caller's D)
};

std::vector<HeadDimCase> head_dim_cases() {
  std::vector<int64_t> dims = kInstantiated;
  dims.insert(dims.end(), kRoundedUp.begin(), kRoundedUp.end());
  std::vector<HeadDimCase> cases;
  for (int64_t d : dims) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      // Tails in both lengths (7 queries, 127 keys), GQA 2:1, causal bottom-right.
      cases.push_back({{.dtype = dtype,
                        .batch = 2,
                        .seqlen_q = 7,
                        .seqlen_k = 127,
                        .heads_q = 4,
                        .heads_kv = 2,
                        .head_dim = d,
                        .causal = true},
                       0});
      // Padded rows (poisoned in the inputs, so a read past the caller's D gives NaN; checked
      // untouched in O), a sliding window, GQA 4:1, query and key tails of the large tiles.
      cases.push_back({{.dtype = dtype,
                        .batch = 1,
                        .seqlen_q = 257,
                        .seqlen_k = 1000,
                        .heads_q = 4,
                        .heads_kv = 1,
                        .head_dim = d,
                        .window_left = 100,
                        .window_right = 20,
                        .layout = Layout::kPadded},
                       0});
    }
    // Sq > Sk causal (fully masked rows: O = 0, LSE = -inf), softcap, BHSD, forced splits.
    cases.push_back({{.dtype = d % 64 == 0 ? DType::kFloat16 : DType::kBFloat16,
                      .batch = 1,
                      .seqlen_q = 130,
                      .seqlen_k = 77,
                      .heads_q = 2,
                      .heads_kv = 2,
                      .head_dim = d,
                      .causal = true,
                      .softcap = 20.f,
                      .layout = Layout::kBHSD},
                     3});
    // Decode with MQA over long keys: the heuristic splits the keys (partials and combine).
    cases.push_back({{.dtype = d % 64 == 0 ? DType::kBFloat16 : DType::kFloat16,
                      .batch = 2,
                      .seqlen_q = 1,
                      .seqlen_k = 4097,
                      .heads_q = 8,
                      .heads_kv = 1,
                      .head_dim = d,
                      .layout = Layout::kPadded},
                     0});
  }
  return cases;
}

std::string tile_name(TileShape tile) {
  switch (tile) {
    case TileShape::kLarge:
      return "large";
    case TileShape::kSmall:
      return "small";
    default:
      return "auto";
  }
}

// The tiles to force: both mma.sync tiles, and auto's choice. (The Hopper small-grid tiles of the
// same schedule belong to the sm90 backend, at head_dim 64 only: test_backends.cpp, SplitKvTest.)
std::vector<TileShape> tiles_for(const HeadDimCase&) {
  return {TileShape::kLarge, TileShape::kSmall, TileShape::kAuto};
}

class Sm80HeadDimTest : public ::testing::TestWithParam<HeadDimCase> {};

// Every tile of the sm80 backend on one case (tiles_for): each must be implemented (a GPU whose
// shared memory is too small for the small tile is the one allowed reason not to) and match the
// reference.
TEST_P(Sm80HeadDimTest, EveryTileMatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  const AttentionCase& c = GetParam().c;
  FLASHCORE_SKIP_IF_PRUNED(c.dtype, c.head_dim);
  CaseData data(c);
  data.compute_reference();
  SCOPED_TRACE("seed " + std::to_string(data.seed()));
  for (TileShape tile : tiles_for(GetParam())) {
    SCOPED_TRACE("tile " + tile_name(tile));
    AttentionParams params = data.params(Backend::kSm80);
    params.tile = tile;
    params.num_splits = GetParam().num_splits;
    const Status can = can_implement(params);
    if (!can.ok() && can.message.find("shared memory") != std::string::npos &&
        tile == TileShape::kSmall) {
      std::cout << "[  NOTE    ] sm80 small tile rejected here: " << can.message << "\n";
      continue;
    }
    ASSERT_TRUE(can.ok()) << "sm80 must run head_dim " << c.head_dim << ": " << can.message;
    data.poison_outputs();
    RunInfo info;
    const Status status = run(params, &info);
    ASSERT_TRUE(status.ok()) << status.message;
    EXPECT_EQ(info.backend, Backend::kSm80);
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    bool padding_untouched = false;
    const std::vector<double> o = data.read_o(&padding_untouched);
    const std::vector<float> lse = data.read_lse();
    const Errors e = compare(c, o, data.ref_o(), c.with_lse ? &lse : nullptr, data.ref_lse());
    EXPECT_EQ(e.nan_count, 0) << "NaN/inf or unwritten elements";
    EXPECT_EQ(e.masked_row_errors, 0) << "fully masked rows must give O = 0 and LSE = -inf";
    EXPECT_TRUE(padding_untouched) << "wrote outside O's elements";
    EXPECT_LE(e.rel_l2, tolerance(c.dtype));
    if (c.with_lse) EXPECT_LE(e.lse_max_abs, kLseTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, Sm80HeadDimTest, ::testing::ValuesIn(head_dim_cases()),
                         [](const auto& info) {
                           return info.param.c.name() + "_splits" +
                                  std::to_string(info.param.num_splits);
                         });

}  // namespace
}  // namespace flashcore::testing
