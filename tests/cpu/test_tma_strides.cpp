// Which strides the sm90 kernels' TMA descriptors take (src/sm90/tma_strides.hpp): the loads of
// Q, K and V, and the forward's store of O, which falls back to the consumer threads' copy-out
// where a descriptor cannot describe O.
#include <gtest/gtest.h>

#include <cstdint>

#include "sm90/tma_strides.hpp"

namespace flashcore::sm90 {
namespace {

constexpr int64_t kSeq = 4096, kHeads = 16, kDim = 128;

TEST(TmaStrides, OStoreTakesPositiveStridesOf16ByteMultiples) {
  // BSHD and BHSD, contiguous.
  EXPECT_TRUE(o_fits_tma_store(kHeads * kDim, kDim, kSeq * kHeads * kDim));
  EXPECT_TRUE(o_fits_tma_store(kDim, kSeq * kDim, kHeads * kSeq * kDim));
  // GQA decode's packed rows: the row stride is the head stride.
  EXPECT_TRUE(o_fits_tma_store(kDim, 8 * kDim, kHeads * kDim));
  // A stride that is never stepped (an extent of one) is still written into the descriptor, so
  // zero, negative or unaligned values there send O to the copy-out too.
  EXPECT_FALSE(o_fits_tma_store(kHeads * kDim, kDim, 0));
  EXPECT_FALSE(o_fits_tma_store(kHeads * kDim, -kDim, kSeq * kHeads * kDim));
  EXPECT_FALSE(o_fits_tma_store(kHeads * kDim + 4, kDim, kSeq * kHeads * kDim));
  EXPECT_FALSE(o_fits_tma_store(kHeads * kDim, kDim, kSeq * kHeads * kDim + 1));
}

TEST(TmaStrides, OStoreStridesStayBelow2To40Bytes) {
  const int64_t limit_elements = kMaxTmaStrideBytes / kTmaElementBytes;
  EXPECT_TRUE(o_fits_tma_store(kDim, kSeq * kDim, limit_elements - 8));
  EXPECT_FALSE(o_fits_tma_store(kDim, kSeq * kDim, limit_elements));
}

}  // namespace
}  // namespace flashcore::sm90
