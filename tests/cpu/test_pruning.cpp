// The reasons a pruned build gives (common/pruning.hpp). This suite is compiled as a build that
// left out head dim 96 and bf16 (FLASHCORE_DISABLE_HDIM96, FLASHCORE_DISABLE_BF16; see
// tests/CMakeLists.txt), in a binary of its own so no other code sees those definitions.
#include <gtest/gtest.h>

#include <string>

#include "common/head_dim.hpp"
#include "common/pruning.hpp"

namespace flashcore::detail {
namespace {

static_assert(!head_dim_built(96) && head_dim_built(64) && head_dim_built(128));
static_assert(dtype_built(DType::kFloat16) && !dtype_built(DType::kBFloat16));
static_assert(kernel_built(DType::kFloat16, 64) && !kernel_built(DType::kBFloat16, 64));
// The rounding rule the tensor-core backends share (common/head_dim.hpp).
static_assert(instantiated_head_dim(8) == 32 && instantiated_head_dim(32) == 32 &&
              instantiated_head_dim(80) == 96 && instantiated_head_dim(248) == 256);
static_assert(instantiated_head_dim(0) == 0 && instantiated_head_dim(100) == 0 &&
              instantiated_head_dim(264) == 0);

TEST(Pruning, BuiltKernelsHaveNoReason) {
  EXPECT_STREQ(pruned_reason(DType::kFloat16, 64), "");
  EXPECT_STREQ(pruned_reason(DType::kFloat16, 256), "");
}

TEST(Pruning, LeftOutKernelsSaySoAndWhy) {
  const std::string head_dim = pruned_reason(DType::kFloat16, 96);
  EXPECT_NE(head_dim.find("head_dim 96"), std::string::npos) << head_dim;
  EXPECT_NE(head_dim.find("FLASHCORE_HEAD_DIMS"), std::string::npos) << head_dim;
  // Head dims that round up to a left-out instantiation give its reason.
  for (int64_t rounded : {72, 80, 88}) {
    const std::string why = pruned_reason(DType::kFloat16, instantiated_head_dim(rounded));
    EXPECT_NE(why.find("head_dim 96"), std::string::npos) << rounded << ": " << why;
  }
  const std::string dtype = pruned_reason(DType::kBFloat16, 64);
  EXPECT_NE(dtype.find("bf16"), std::string::npos) << dtype;
  EXPECT_NE(dtype.find("FLASHCORE_DTYPES"), std::string::npos) << dtype;
}

}  // namespace
}  // namespace flashcore::detail
