// The persistent hd256 backward's tile order (src/sm90/bwd_tile_order.hpp): every tile once, key
// blocks nondecreasing within a section (last first in deterministic mode), sections sized to L2.
#include <gtest/gtest.h>

#include <vector>

#include "sm80/bwd_params.hpp"
#include "sm90/bwd_tile_order.hpp"

namespace flashcore {
namespace {

sm80::BwdParams problem(int batch, int heads_kv, int kv_group, int seqlen, int num_n_blocks) {
  sm80::BwdParams p{};
  p.batch = batch;
  p.heads_kv = heads_kv;
  p.kv_group = kv_group;
  p.heads_q = heads_kv * kv_group;
  p.seqlen_q_rounded = seqlen;
  p.num_n_blocks = num_n_blocks;
  return p;
}

// Walks every tile number and checks the order's promises.
void expect_order_covers(const sm90::BwdTileOrder& order) {
  SCOPED_TRACE("pairs " + std::to_string(order.pairs) + ", section " +
               std::to_string(order.section_pairs) + ", key blocks " +
               std::to_string(order.num_n_blocks) + (order.reversed ? ", reversed" : ""));
  std::vector<int> seen(static_cast<size_t>(order.num_tiles()), 0);
  int last_section = -1;
  int last_order = 0;
  for (int index = 0; index < order.num_tiles(); ++index) {
    const sm90::BwdTileOrder::Tile tile = order.tile(index);
    ASSERT_GE(tile.n_block, 0);
    ASSERT_LT(tile.n_block, order.num_n_blocks);
    ASSERT_GE(tile.kv_head, 0);
    ASSERT_LT(tile.kv_head, order.heads_kv);
    const int pair = tile.batch * order.heads_kv + tile.kv_head;
    ASSERT_LT(pair, order.pairs);
    ++seen[static_cast<size_t>(pair * order.num_n_blocks + tile.n_block)];
    // The key blocks in start order: first to last, or last to first in deterministic mode.
    const int start_order = order.reversed ? order.num_n_blocks - 1 - tile.n_block : tile.n_block;
    const int section = pair / order.section_pairs;
    if (section == last_section) {
      EXPECT_GE(start_order, last_order) << "tile " << index;
    } else {
      EXPECT_GT(section, last_section) << "tile " << index << ": sections run one after another";
    }
    last_section = section;
    last_order = start_order;
  }
  for (size_t slot = 0; slot < seen.size(); ++slot) EXPECT_EQ(seen[slot], 1) << "tile " << slot;
}

TEST(BwdTileOrder, CoversEveryTileOnceHeaviestFirstPerSection) {
  // B4 H16 S4096 hd256 bf16: a pair's Q, dO and dQ take 8 MiB, so 4 pairs a section of 40 MiB.
  sm80::BwdParams p = problem(4, 16, 1, 4096, 64);
  sm90::BwdTileOrder order = sm90::BwdTileOrder::of(p, 256, 2);
  EXPECT_EQ(order.section_pairs, 4);
  EXPECT_EQ(order.num_tiles(), 64 * 64);
  expect_order_covers(order);
  EXPECT_EQ(order.tile(0).n_block, 0);  // the heaviest causal key block starts first
  // A last section shorter than the others (7 pairs, sections of 4), and GQA's larger pairs.
  p = problem(1, 7, 1, 4096, 5);
  order = sm90::BwdTileOrder::of(p, 256, 2);
  EXPECT_EQ(order.section_pairs, 4);
  expect_order_covers(order);
  p = problem(3, 2, 4, 4096, 9);
  order = sm90::BwdTileOrder::of(p, 256, 2);
  EXPECT_EQ(order.section_pairs, 1);
  expect_order_covers(order);
  // Short sequences: sections wider than the problem.
  p = problem(2, 3, 2, 64, 3);
  order = sm90::BwdTileOrder::of(p, 256, 2);
  EXPECT_GT(order.section_pairs, order.pairs);
  expect_order_covers(order);
}

TEST(BwdTileOrder, DeterministicModeStartsWithTheLastKeyBlock) {
  int semaphores = 0;
  sm80::BwdParams p = problem(2, 5, 2, 2048, 7);
  p.dq_semaphore = &semaphores;
  const sm90::BwdTileOrder order = sm90::BwdTileOrder::of(p, 256, 2);
  EXPECT_TRUE(order.reversed);
  EXPECT_EQ(order.tile(0).n_block, 6);
  expect_order_covers(order);
}

}  // namespace
}  // namespace flashcore
