// Heads per group of the persistent forward (src/sm90/head_group.hpp): the heads one wave of CTAs
// covers where tiles are uniform, capped by half of L2; where they are not, the L2 bound, lowered
// to a size that splits the pairs into equal groups when one lies within half of it.
#include <gtest/gtest.h>

#include "sm90/head_group.hpp"

namespace flashcore {
namespace {

constexpr int64_t kL2Bytes = 50 << 20;  // an H100 / H200
constexpr int64_t kMiB = 1 << 20;

TEST(HeadGroup, UniformTilesGroupTheHeadsOfOneWave) {
  // B4 H16 S4096 hd128 in CTA pairs: 16 tile indices per head, 66 clusters in flight -> 5 heads
  // (the L2 bound alone allows 12).
  EXPECT_EQ(sm90::heads_per_group({64, 16, 66, 2 * kMiB, kL2Bytes, true}), 5);
  // A wave that is an exact multiple of a head's tiles: no extra head.
  EXPECT_EQ(sm90::heads_per_group({64, 33, 132, 2 * kMiB, kL2Bytes, true}), 4);
  // Fewer tiles per head than CTAs in flight: several heads, still under the L2 bound.
  EXPECT_EQ(sm90::heads_per_group({256, 4, 66, kMiB / 2, kL2Bytes, true}), 17);
}

TEST(HeadGroup, MaskedOrVarlenTilesKeepTheL2Bound) {
  // 60 pairs: the L2 bound (12, then 6) divides them.
  EXPECT_EQ(sm90::heads_per_group({60, 32, 132, 2 * kMiB, kL2Bytes, false}), 12);
  EXPECT_EQ(sm90::heads_per_group({60, 32, 132, 4 * kMiB, kL2Bytes, false}), 6);
  // 13 pairs: no divisor between half the bound and the bound, so the bound (6; groups 6, 6, 1).
  EXPECT_EQ(sm90::heads_per_group({13, 32, 132, 4 * kMiB, kL2Bytes, false}), 6);
}

TEST(HeadGroup, MaskedOrVarlenTilesRunInEqualGroups) {
  // B2 H8 S8192 hd256 causal: bound 3, 16 pairs -> 2 (not 3, 3, 3, 3, 3, 1).
  EXPECT_EQ(sm90::heads_per_group({16, 64, 132, 8 * kMiB, kL2Bytes, false}), 2);
  // B4 H8 S4096 hd256: bound 6, 32 pairs -> 4; B8 H8 S2048: bound 12, 64 pairs -> 8.
  EXPECT_EQ(sm90::heads_per_group({32, 32, 132, 4 * kMiB, kL2Bytes, false}), 4);
  EXPECT_EQ(sm90::heads_per_group({64, 16, 132, 2 * kMiB, kL2Bytes, false}), 8);
  // Uniform tiles keep the wave rule's group: its waves end together, whatever the last group.
  EXPECT_EQ(sm90::heads_per_group({16, 64, 132, 8 * kMiB, kL2Bytes, true}), 3);
}

TEST(HeadGroup, HalfOfL2CapsTheWaveRule) {
  // B1 H16 S16384 hd256: 16 MiB of K/V a head; a wave would cover 2 heads, L2 holds one.
  EXPECT_EQ(sm90::heads_per_group({16, 64, 66, 16 * kMiB, kL2Bytes, true}), 1);
  EXPECT_EQ(sm90::heads_per_group({16, 64, 66, 8 * kMiB, kL2Bytes, true}), 2);
}

TEST(HeadGroup, AtLeastOneHeadAndAtMostEveryHead) {
  EXPECT_EQ(sm90::heads_per_group({16, 64, 66, 64 * kMiB, kL2Bytes, true}), 1);
  EXPECT_EQ(sm90::heads_per_group({3, 1, 132, 1024, kL2Bytes, true}), 3);
  EXPECT_EQ(sm90::heads_per_group({3, 1, 132, 1024, kL2Bytes, false}), 3);
  // Degenerate inputs (no tiles, no bytes) still give a valid group.
  EXPECT_EQ(sm90::heads_per_group({8, 0, 0, 0, kL2Bytes, true}), 1);
}

}  // namespace
}  // namespace flashcore
