// FastDivisor must equal integer division for every x in [0, 2^31) and divisor >= 1: the sm80
// kernel derives each CTA's tile, split and KV head with it, so one wrong quotient would compute
// or write the wrong rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "sm80/fwd_params.hpp"

namespace flashcore::sm80 {
namespace {

void expect_exact(int divisor, int x) {
  const FastDivisor d = FastDivisor::of(divisor);
  ASSERT_EQ(d.divide(x), x / divisor) << x << " / " << divisor;
}

TEST(FastDivisor, SmallDivisorsAndNumeratorsExhaustively) {
  for (int divisor = 1; divisor <= 300; ++divisor) {
    for (int x = 0; x <= 70000; ++x) expect_exact(divisor, x);
  }
}

TEST(FastDivisor, EdgesOfTheRange) {
  const int max = INT32_MAX;
  for (int divisor : {1, 2, 3, 7, 64, 65, 127, 128, 129, 1000, 65535, 65536, 65537, (1 << 29) + 1,
                      max - 1, max}) {
    for (int x : {0, 1, divisor - 1, divisor, max - divisor, max - 1, max})
      expect_exact(divisor, x);
  }
}

TEST(FastDivisor, RandomPairs) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> any(0, INT32_MAX);
  std::uniform_int_distribution<int> log2(0, 30);
  for (int i = 0; i < 2'000'000; ++i) {
    const int divisor = std::max(1, any(rng) >> log2(rng));
    expect_exact(divisor, any(rng));
  }
}

}  // namespace
}  // namespace flashcore::sm80
