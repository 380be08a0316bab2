// The sm90 flex kernel's step records (src/sm90/flex_step.hpp) and the size of its merged walks
// (src/sm90/flex_merged_walk.hpp), on the host: every field of a record reads back what was packed,
// each warpgroup's masking apart from the other's, and the walks' workspace is the count of key
// units per walk the builder writes (none without a BlockMask).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "sm90/flex_merged_walk.hpp"
#include "sm90/flex_step.hpp"

namespace flashcore::sm90 {
namespace {

TEST(FlexStep, EveryFieldReadsBackWhatWasPacked) {
  std::mt19937 rng(std::random_device{}());
  // Tiles up to the largest a walk can name: 64-key blocks of an int32 key count.
  std::uniform_int_distribution<int> tiles(0, (1 << 25) - 1);
  for (int trial = 0; trial < 1000; ++trial) {
    const int tile = trial == 0 ? (1 << 25) - 1 : tiles(rng);
    for (int m0 = 0; m0 < 4; ++m0) {
      for (int m1 = 0; m1 < 4; ++m1) {
        for (const bool all : {false, true}) {
          for (const bool one_document : {false, true}) {
            const int packed = FlexStep::pack(tile, m0, m1, all);
            const int word = one_document ? FlexStep::with_one_document(packed) : packed;
            ASSERT_GE(word, 0);  // the largest tile still fits below the sign bit
            ASSERT_EQ(FlexStep::tile(word), tile);
            ASSERT_EQ(FlexStep::masking(word, 0), m0);
            ASSERT_EQ(FlexStep::masking(word, 1), m1);
            ASSERT_EQ(FlexStep::all_visible(word), all);
            ASSERT_EQ(FlexStep::one_document(word), one_document);
          }
        }
      }
    }
  }
}

TEST(FlexStep, OneMaskingIsBothWarpgroups) {
  for (int masking = 0; masking < 4; ++masking) {
    const int word = FlexStep::pack(77, masking, false);
    EXPECT_EQ(FlexStep::masking(word, 0), masking);
    EXPECT_EQ(FlexStep::masking(word, 1), masking);
  }
  // The zero word a chunk's lanes past the walk hold is a skip for both, with no visible element.
  EXPECT_EQ(FlexStep::masking(0, 0), FlexStep::kSkip);
  EXPECT_EQ(FlexStep::masking(0, 1), FlexStep::kSkip);
  EXPECT_FALSE(FlexStep::all_visible(0));
  EXPECT_FALSE(FlexStep::one_document(0));
}

TEST(FlexStep, PastKeyBlockIsTheFirstBlockWithNoKey) {
  EXPECT_EQ(past_key_block<64>(1), 1);
  EXPECT_EQ(past_key_block<64>(64), 1);
  EXPECT_EQ(past_key_block<64>(65), 2);
  EXPECT_EQ(past_key_block<128>(4096), 32);
}

flex::BlockMask block_mask(int64_t batch, int64_t heads, int64_t seqlen, int64_t q_block,
                           int64_t kv_block) {
  // Any non-null pointer: the sizes read only the shape and whether there is a mask.
  static const int32_t counts = 0;
  flex::BlockMask m;
  m.batch = batch, m.heads = heads, m.seqlen_q = m.seqlen_k = seqlen;
  m.q_block_size = q_block, m.kv_block_size = kv_block;
  m.kv_num_blocks = &counts;
  m.kv_indices = &counts;
  return m;
}

TEST(MergedWalkBytes, CountsAWordPerKeyUnitPerWalk) {
  constexpr int kTile128 = kFlexTileKeys, kTile64 = flex_tile_keys(256);
  // No BlockMask: no walks.
  EXPECT_FALSE(needs_merged_walks(flex::BlockMask{}));
  EXPECT_EQ(merged_walk_bytes(flex::BlockMask{}, 4096, 32, kTile128), 0u);
  // B4 H16 S4096 with 128-key blocks: 2,048 walks of 32 tiles, one word each, after the counts.
  const flex::BlockMask kv128 = block_mask(4, 16, 4096, 64, 128);
  ASSERT_TRUE(needs_merged_walks(kv128));
  EXPECT_EQ(merged_walk_unit_keys(kv128, kTile128), 128);
  EXPECT_EQ(merged_walk_capacity(kv128, 4096, kTile128), 32);
  EXPECT_EQ(merged_walk_count(kv128, 32), 2048);
  EXPECT_EQ(merged_walk_bytes(kv128, 4096, 32, kTile128), 2048u * 4 + 2048u * 32 * 4);
  // 64-key blocks: 64 units, paired two to a step, two words a step.
  const flex::BlockMask kv64 = block_mask(4, 16, 4096, 64, 64);
  EXPECT_EQ(merged_walk_unit_keys(kv64, kTile128), 64);
  EXPECT_EQ(merged_walk_capacity(kv64, 4096, kTile128), 32);
  EXPECT_EQ(merged_walk_bytes(kv64, 4096, 32, kTile128), 2048u * 4 + 2048u * 32 * 2 * 4);
  // An odd count of units: the last step's second half is the empty one.
  EXPECT_EQ(merged_walk_capacity(kv64, 4097, kTile128), 33);
  EXPECT_EQ(merged_walk_capacity(kv64, 4160, kTile128), 33);
  // The hd256 kernel's 64-key tiles: every BlockMask unpaired, a word per 64 keys (128-key
  // blocks are two units each).
  EXPECT_EQ(kTile64, 64);
  EXPECT_FALSE(needs_paired_walk(kv64, kTile64));
  EXPECT_FALSE(needs_paired_walk(block_mask(1, 1, 4096, 64, 192), kTile64));
  EXPECT_TRUE(needs_paired_walk(kv64, kTile128));
  EXPECT_EQ(merged_walk_unit_keys(kv64, kTile64), 64);
  EXPECT_EQ(merged_walk_capacity(kv64, 4097, kTile64), 65);
  EXPECT_EQ(merged_walk_bytes(kv64, 4096, 32, kTile64), 2048u * 4 + 2048u * 64 * 4);
  EXPECT_EQ(merged_walk_capacity(kv128, 4096, kTile64), 64);
  // Broadcast batch and heads: one walk per query tile; the records start 256-byte aligned.
  const flex::BlockMask shared = block_mask(1, 1, 300, 128, 256);
  EXPECT_EQ(merged_walk_count(shared, 3), 3);
  EXPECT_EQ(merged_walk_bytes(shared, 300, 3, kTile128), 256u + 3u * 3 * 4);
}

}  // namespace
}  // namespace flashcore::sm90
