// The key tile list of a varlen batch on the sm90 backward (src/sm90/bwd_key_tiles.hpp) against
// the host's selection of the same tiles: every tile of the tile order whose first key lies inside
// its sequence, once, in the order's own order (so deterministic mode's reversed key blocks and the
// sections' order survive), and none other. Sequences of no keys, of one key and of whole and
// partial blocks, lengths past max_seqlen_k (clamped), a decreasing cu_seqlens_k (no tiles),
// several sections, the reversed order, and a grid of over a hundred thousand tiles. The list's
// region is poisoned first, and nothing past the listed tiles may be written. The backward's
// results on listed tiles are the varlen cases of test_backward_flex.cpp. Skips loudly without an
// sm_90 GPU (the build is compiled for sm_90a only).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sm80/bwd_params.hpp"
#include "sm90/bwd_key_tiles.hpp"
#include "sm90/bwd_tile_order.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::sm90 {
namespace {

using testing::cu_seqlens_of;
using testing::DeviceBuffer;

constexpr unsigned char kPoison = 0x7b;
constexpr int kBlockN = 128;

struct KeyTileCase {
  std::string name;
  std::vector<int32_t> cu_seqlens_k;
  int max_seqlen_k;
  int heads_kv = 3;
  int section_pairs = 4;
  bool reversed = false;
};

BwdTileOrder order_of(const KeyTileCase& c) {
  const int batch = static_cast<int>(c.cu_seqlens_k.size()) - 1;
  const int num_n_blocks = (c.max_seqlen_k + kBlockN - 1) / kBlockN;
  return {c.heads_kv, c.heads_kv * batch, c.section_pairs, num_n_blocks, c.reversed};
}

// The host's selection: the order's tile numbers whose key block starts inside the sequence.
std::vector<int> expected_tiles(const KeyTileCase& c) {
  const BwdTileOrder order = order_of(c);
  std::vector<int> tiles;
  for (int t = 0; t < order.num_tiles(); ++t) {
    const BwdTileOrder::Tile tile = order.tile(t);
    const int64_t length = int64_t{c.cu_seqlens_k[static_cast<size_t>(tile.batch) + 1]} -
                           c.cu_seqlens_k[static_cast<size_t>(tile.batch)];
    const int64_t keys = std::min<int64_t>(length, c.max_seqlen_k);
    if (int64_t{tile.n_block} * kBlockN < keys) tiles.push_back(t);
  }
  return tiles;
}

void expect_list_matches(const KeyTileCase& c) {
  const BwdTileOrder order = order_of(c);
  const int num_tiles = order.num_tiles();
  const size_t list_bytes = bwd_key_tile_list_bytes(num_tiles);
  DeviceBuffer region(list_bytes), cu(c.cu_seqlens_k.size() * sizeof(int32_t));
  ASSERT_EQ(cudaMemset(region.get(), kPoison, list_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(cu.get(), c.cu_seqlens_k.data(), c.cu_seqlens_k.size() * sizeof(int32_t),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  const BwdKeyTileList list = bwd_key_tile_list(region.get(), num_tiles);
  ASSERT_TRUE(list.enabled());
  // The batch's view as the backward's walk binds a sequence (sm80::bwd_sequence): these keys,
  // queries of the same lengths.
  sm80::BwdParams p{};
  p.cu_seqlens_q = p.cu_seqlens_k = static_cast<const int32_t*>(cu.get());
  p.seqlen_q = p.seqlen_k = c.cu_seqlens_k.back();
  p.max_seqlen_q = p.max_seqlen_k = c.max_seqlen_k;
  ASSERT_EQ(build_bwd_key_tile_list(list, order, p, kBlockN, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  int count = -1;
  ASSERT_EQ(cudaMemcpy(&count, list.count, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<int> tiles(static_cast<size_t>(num_tiles));
  ASSERT_EQ(
      cudaMemcpy(tiles.data(), list.tiles, tiles.size() * sizeof(int), cudaMemcpyDeviceToHost),
      cudaSuccess);
  const std::vector<int> expected = expected_tiles(c);
  ASSERT_EQ(count, static_cast<int>(expected.size())) << "of " << num_tiles << " tiles";
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(tiles[i], expected[i]) << "list entry " << i;
  }
  // The entries past the count stay as they were.
  int poisoned = 0;
  std::memset(&poisoned, kPoison, sizeof(poisoned));
  for (size_t i = expected.size(); i < tiles.size(); ++i) {
    ASSERT_EQ(tiles[i], poisoned) << "list entry " << i << " past the count was written";
  }
}

std::vector<KeyTileCase> key_tile_cases() {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<KeyTileCase> cases;
  cases.push_back({"short_and_empty", cu_seqlens_of({0, 1, 7, 127, 128, 129, 0, 1000}), 1000});
  cases.push_back({"short_and_empty_reversed", cu_seqlens_of({0, 1, 7, 127, 128, 129, 0, 1000}),
                   1000, 2, 3, true});
  cases.push_back({"lengths_past_max_seqlen_k", cu_seqlens_of({300, 1000, 20}), 600, 2, 1});
  cases.push_back({"decreasing_cu_seqlens", {0, 200, 150, 600}, 450, 4, 2});
  cases.push_back({"one_section", cu_seqlens_of({5000, 3, 900}), 5000, 8, 64});
  std::vector<int32_t> many;  // one long sequence beside many short ones: a grid of 120k tiles
  std::uniform_int_distribution<int32_t> short_length(0, 300);
  for (int b = 0; b < 1500; ++b) many.push_back(short_length(rng));
  many[777] = 5000;
  cases.push_back({"many_sequences", cu_seqlens_of(many), 5000, 2, 16});
  cases.push_back({"many_sequences_reversed", cu_seqlens_of(many), 5000, 2, 16, true});
  return cases;
}

class BwdKeyTileListBuild : public ::testing::TestWithParam<KeyTileCase> {};

TEST_P(BwdKeyTileListBuild, MatchesHostSelection) {
  FLASHCORE_REQUIRE_GPU();
  if (!testing::on_sm90()) {
    GTEST_SKIP() << "backward key tile list test skipped: the build is sm_90a code and the GPU is "
                    "not sm_90";
  }
  expect_list_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, BwdKeyTileListBuild, ::testing::ValuesIn(key_tile_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace flashcore::sm90
