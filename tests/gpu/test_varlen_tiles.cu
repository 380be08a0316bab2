// The tile list of a varlen batch on the sm90 kernel (src/sm90/varlen_tiles.hpp) against the host's
// list of the same tiles, tile for tile: every (sequence, query block, head) of a sequence's rows
// once and none other, sequence after sequence, each one's deepest block first, its heads next to
// each other, each as the grid index that the kernel's decode (tile_scheduler.hpp, re-implemented
// here) maps back to it, under head groups of several sizes; the count; the tile counter zeroed.
// Batches of empty and one-row sequences, more sequences than the build's threads, lengths past
// the grid's query blocks (clamped), a decreasing cu_seqlens (no entries for it), 192-row blocks,
// and a list too small for the batch (its first entries kept, nothing written past it). The
// workspace is poisoned first. The kernel's results on listed tiles are test_flex_sm90.cpp's
// varlen cases. Skips loudly without an sm_90 GPU (the build is compiled for sm_90a only).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sm90/fwd_params.hpp"
#include "sm90/varlen_tiles.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::sm90 {
namespace {

using testing::cu_seqlens_of;
using testing::DeviceBuffer;

constexpr unsigned char kPoison = 0x7b;

struct ListCase {
  std::string name;
  std::vector<int32_t> cu_seqlens;
  int block_m, levels;
  int heads = 3, head_group = 4;
  int64_t capacity = -1;  // entries; -1: varlen_tile_capacity's
};

struct HostTile {
  int m_block, head, batch;
  bool operator==(const HostTile& o) const {
    return m_block == o.m_block && head == o.head && batch == o.batch;
  }
};

// The kernel's decode of a grid index (TileScheduler<1>::decode, unsplit), written again here.
HostTile decode(const ListCase& c, int batch, int index) {
  const int pairs = batch * c.heads;
  const int group_tiles = c.head_group * c.levels;
  const int group = index / group_tiles;
  const int in_group = index - group * group_tiles;
  const int first_pair = group * c.head_group;
  const int heads_in_group = std::min(c.head_group, pairs - first_pair);
  const int reversed_m = in_group / heads_in_group;
  const int pair = first_pair + (in_group - reversed_m * heads_in_group);
  return {c.levels - 1 - reversed_m, pair % c.heads, pair / c.heads};
}

// The host's tiles, in the list's order.
std::vector<HostTile> expected_tiles(const ListCase& c) {
  std::vector<HostTile> tiles;
  for (size_t b = 0; b + 1 < c.cu_seqlens.size(); ++b) {
    const int64_t length = int64_t{c.cu_seqlens[b + 1]} - c.cu_seqlens[b];
    const int64_t blocks =
        length <= 0 ? 0 : std::min<int64_t>((length + c.block_m - 1) / c.block_m, c.levels);
    for (int64_t m = blocks - 1; m >= 0; --m) {
      for (int h = 0; h < c.heads; ++h) {
        tiles.push_back({static_cast<int>(m), h, static_cast<int>(b)});
      }
    }
  }
  return tiles;
}

void expect_list_matches(const ListCase& c) {
  const int batch = static_cast<int>(c.cu_seqlens.size()) - 1;
  const int64_t total = c.cu_seqlens.back();
  const int64_t capacity =
      c.capacity >= 0
          ? c.capacity
          : varlen_tile_capacity(batch, std::max<int64_t>(total, 0), c.levels, c.block_m);
  const size_t list_bytes = varlen_tile_list_bytes(capacity, c.heads);
  constexpr size_t kGuardBytes = 256;
  DeviceBuffer counter(sizeof(int)), region(list_bytes + kGuardBytes), cu(c.cu_seqlens.size() * 4);
  ASSERT_EQ(cudaMemset(counter.get(), kPoison, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(region.get(), kPoison, list_bytes + kGuardBytes), cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(cu.get(), c.cu_seqlens.data(), c.cu_seqlens.size() * 4, cudaMemcpyHostToDevice),
      cudaSuccess);
  const VarlenTileList list =
      varlen_tile_list(static_cast<int*>(counter.get()), region.get(), static_cast<int>(capacity));
  FwdArgs grid{};
  grid.batch = batch;
  grid.heads = c.heads;
  grid.num_m_blocks = c.levels;
  grid.head_group = c.head_group;
  grid.num_splits = 1;
  grid.cu_seqlens_q = static_cast<const int32_t*>(cu.get());
  ASSERT_EQ(build_varlen_tile_list(list, grid, c.block_m, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  int count = -1, tile_counter = -1;
  ASSERT_EQ(cudaMemcpy(&count, list.count, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&tile_counter, list.tile_counter, sizeof(int), cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::vector<unsigned char> bytes(list_bytes + kGuardBytes);
  ASSERT_EQ(cudaMemcpy(bytes.data(), region.get(), bytes.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(tile_counter, 0);

  const std::vector<HostTile> expected = expected_tiles(c);
  const int64_t kept = std::min<int64_t>(static_cast<int64_t>(expected.size()), capacity * c.heads);
  ASSERT_EQ(count, kept);
  const size_t tiles_offset =
      reinterpret_cast<const char*>(list.tiles) - static_cast<const char*>(region.get());
  std::vector<int> tiles(static_cast<size_t>(kept));
  std::memcpy(tiles.data(), bytes.data() + tiles_offset, tiles.size() * sizeof(int));
  const int grid_tiles = batch * c.heads * c.levels;
  for (int64_t i = 0; i < kept; ++i) {
    const int index = tiles[static_cast<size_t>(i)];
    ASSERT_GE(index, 0) << "tile " << i;
    ASSERT_LT(index, grid_tiles) << "tile " << i;
    const HostTile got = decode(c, batch, index);
    const HostTile& want = expected[static_cast<size_t>(i)];
    EXPECT_TRUE(got == want) << "tile " << i << ": grid index " << index << " is block "
                             << got.m_block << " head " << got.head << " sequence " << got.batch
                             << ", not block " << want.m_block << " head " << want.head
                             << " sequence " << want.batch;
  }
  // Nothing written past the tiles kept: neither unused capacity nor the guard bytes.
  for (size_t byte = tiles_offset + static_cast<size_t>(kept) * sizeof(int); byte < bytes.size();
       ++byte) {
    ASSERT_EQ(bytes[byte], kPoison) << "byte " << byte << " past the list was written";
  }
}

std::vector<ListCase> list_cases() {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<ListCase> cases;
  cases.push_back({"short_and_empty", cu_seqlens_of({0, 1, 7, 127, 128, 129, 0, 1000}), 128, 8});
  cases.push_back({"lengths_past_the_grid", cu_seqlens_of({300, 1000, 20}), 128, 2, 2, 1});
  cases.push_back({"decreasing_cu_seqlens", {0, 200, 150, 600}, 128, 4, 16, 5});
  cases.push_back({"list_too_small", cu_seqlens_of({500, 30, 260, 900}), 128, 8, 2, 64, 7});
  std::vector<int32_t> many;  // more sequences than the build's 512 threads
  std::uniform_int_distribution<int32_t> short_length(0, 300);
  for (int b = 0; b < 1500; ++b) many.push_back(short_length(rng));
  many[777] = 5000;
  cases.push_back({"many_sequences", cu_seqlens_of(many), 128, 40, 4, 6});
  std::vector<int32_t> deep;  // sequences of more blocks than the build's threads (block_m 4)
  std::uniform_int_distribution<int32_t> long_length(1, 3000);
  for (int b = 0; b < 9; ++b) deep.push_back(long_length(rng));
  deep[4] = 3000;
  cases.push_back({"long_sequences", cu_seqlens_of(deep), 4, 750, 2, 3});
  cases.push_back({"hd64_rows", cu_seqlens_of({191, 192, 193, 2000, 1}), 192, 11, 8, 8});
  return cases;
}

class VarlenTileListBuild : public ::testing::TestWithParam<ListCase> {};

TEST_P(VarlenTileListBuild, MatchesHostCount) {
  FLASHCORE_REQUIRE_GPU();
  cudaDeviceProp device{};
  ASSERT_EQ(cudaGetDeviceProperties(&device, 0), cudaSuccess);
  if (device.major != 9 || device.minor != 0) {
    GTEST_SKIP() << "varlen tile list test skipped: the build is sm_90a code and the GPU is sm_"
                 << device.major << device.minor;
  }
  expect_list_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, VarlenTileListBuild, ::testing::ValuesIn(list_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace flashcore::sm90
