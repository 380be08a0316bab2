// rows_seeing_keys (common/key_block_rows.hpp) against every (row, key) of WindowMask::visible.
#include <gtest/gtest.h>

#include <cstdint>

#include "common/key_block_rows.hpp"

namespace flashcore {
namespace {

TEST(KeyBlockRows, MatchesEveryElementOfTheWindow) {
  const int64_t windows[][2] = {{-1, -1}, {-1, 0}, {0, 0}, {3, -1}, {2, 5}, {0, 2}, {7, 0}};
  for (int64_t sq : {1, 5, 13, 40}) {
    for (int64_t sk : {1, 6, 13, 37}) {
      for (const auto& w : windows) {
        const WindowMask<int64_t> mask{sq, sk, w[0], w[1]};
        for (int64_t block : {1, 4, 8}) {
          for (int64_t key_begin = 0; key_begin < sk; key_begin += block) {
            const int64_t key_end = std::min(key_begin + block, sk);
            const RowRange<int64_t> rows = rows_seeing_keys(mask, key_begin, key_end);
            SCOPED_TRACE(::testing::Message()
                         << "sq " << sq << " sk " << sk << " window " << w[0] << "," << w[1]
                         << " keys " << key_begin << ".." << key_end);
            for (int64_t i = 0; i < sq; ++i) {
              bool sees = false;
              for (int64_t j = key_begin; j < key_end; ++j) sees |= mask.visible(i, j);
              EXPECT_EQ(sees, i >= rows.begin && i < rows.end) << "row " << i;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace flashcore
