// CuTe's layout algebra on the host: CI (no GPU) proves the pinned CUTLASS headers compile and
// behave; tests/gpu/test_cute.cu runs a CuTe kernel on the GPU.
#include <gtest/gtest.h>

#include <cute/tensor.hpp>
#include <vector>

namespace {

// Host-side layout algebra: runs without a GPU, so CI checks CuTe too.
TEST(CuTe, LayoutAlgebraOnHost) {
  using namespace cute;
  auto row_major = make_layout(make_shape(4, 8), LayoutRight{});
  EXPECT_EQ(row_major(1, 2), 10);
  auto swizzled =
      composition(Swizzle<2, 0, 3>{}, make_layout(make_shape(Int<8>{}, Int<8>{}), LayoutRight{}));
  std::vector<bool> seen(64, false);
  for (int i = 0; i < 64; ++i) seen[swizzled(i)] = true;
  for (bool s : seen) EXPECT_TRUE(s) << "a swizzle is a permutation";
}

}  // namespace
