// WindowMask's block-level answers (key range, fully visible tiles) must agree with its element
// mask, or kernels that skip tiles would drop or add keys.
#include <gtest/gtest.h>

#include <random>

#include "flashcore/mask.hpp"

namespace flashcore {
namespace {

TEST(WindowMask, CausalIsBottomRightAligned) {
  const WindowMask<int64_t> causal{/*seqlen_q=*/2, /*seqlen_k=*/5, /*left=*/-1, /*right=*/0};
  // Row 0 is query 3 of 5 from the end: it sees keys 0..3.
  EXPECT_TRUE(causal.visible(0, 3));
  EXPECT_FALSE(causal.visible(0, 4));
  EXPECT_TRUE(causal.visible(1, 4));
  const WindowMask<int64_t> more_queries{5, 2, -1, 0};
  EXPECT_EQ(more_queries.end_key(2), 0) << "rows 0..2 see no key when Sq > Sk";
  EXPECT_TRUE(more_queries.visible(3, 0));
  EXPECT_FALSE(more_queries.visible(3, 1));
}

TEST(WindowMask, SlidingWindowBounds) {
  const WindowMask<int64_t> window{10, 10, /*left=*/2, /*right=*/1};
  EXPECT_EQ(window.first_key(5), 3);
  EXPECT_EQ(window.end_key(5), 7);
  EXPECT_EQ(window.first_key(0), 0);
  EXPECT_EQ(window.end_key(9), 10);
}

TEST(WindowMask, BlockAnswersAgreeWithElementMask) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> size(1, 300), side(-1, 80), tile(1, 64);
  for (int trial = 0; trial < 300; ++trial) {
    const WindowMask<int64_t> m{size(rng), size(rng), side(rng), side(rng)};
    const int64_t rows = tile(rng), keys = tile(rng);
    for (int64_t r0 = 0; r0 < m.seqlen_q; r0 += rows) {
      const int64_t r1 = std::min(r0 + rows, m.seqlen_q);
      const int64_t first = m.block_first_key(r0), end = m.block_end_key(r1);
      for (int64_t k0 = 0; k0 < m.seqlen_k; k0 += keys) {
        const int64_t k1 = std::min(k0 + keys, m.seqlen_k);
        bool all = true;
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t k = k0; k < k1; ++k) {
            all &= m.visible(r, k);
            if (m.visible(r, k)) {
              EXPECT_GE(k, first);
              EXPECT_LT(k, end);
            }
          }
        }
        EXPECT_EQ(m.tile_fully_visible(r0, r1, k0, k1), all)
            << "rows [" << r0 << ", " << r1 << ") keys [" << k0 << ", " << k1 << ")";
      }
    }
  }
}

TEST(Softcap, BoundsScoresAndIsOffAtZero) {
  EXPECT_FLOAT_EQ(Softcap{0.f}(123.f), 123.f);
  EXPECT_NEAR(Softcap{30.f}(1e6f), 30.f, 1e-4);
  EXPECT_NEAR(Softcap{30.f}(0.3), 30.0 * std::tanh(0.01), 1e-12);
}

}  // namespace
}  // namespace flashcore
