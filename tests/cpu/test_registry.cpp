// The registry's answers that need no GPU: a backend that is not in this program says so, by name,
// instead of failing later. This suite links only the core library, not flashcore_unfused.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "api/backend_registry.hpp"
#include "common/problem.hpp"

namespace flashcore::detail {
namespace {

TEST(Registry, UnfusedRejectsUntilItsTargetIsLinked) {
  const BackendEntry* entry = find_backend(Backend::kUnfused);
  ASSERT_NE(entry, nullptr);
  EXPECT_FALSE(entry->in_auto);
  AttentionParams params;
  params.batch = params.seqlen_q = params.seqlen_k = params.heads_q = params.heads_kv = 1;
  params.head_dim = 64;
  const cudaDeviceProp device{};
  const std::string why = entry->rejects(make_problem(params), device);
  EXPECT_NE(why.find("flashcore_unfused"), std::string::npos) << why;
  EXPECT_NE(why.find("cuBLAS"), std::string::npos) << why;
}

// sm80 runs every multiple of 8 up to 256 (the others on the next multiple of 32 up) and says what
// to use otherwise. An A100's limits, no GPU needed: rejects() asks no device for the mma.sync
// tiles.
TEST(Registry, Sm80TakesEveryMultipleOf8UpTo256) {
  const BackendEntry* entry = find_backend(Backend::kSm80);
  ASSERT_NE(entry, nullptr);
  cudaDeviceProp device{};
  device.major = 8;
  device.sharedMemPerBlockOptin = 163 * 1024;
  AttentionParams params;
  params.batch = params.seqlen_q = params.seqlen_k = params.heads_q = params.heads_kv = 1;
  for (int64_t head_dim = 8; head_dim <= 256; head_dim += 8) {
    for (TileShape tile : {TileShape::kLarge, TileShape::kSmall}) {
      params.head_dim = head_dim;
      params.tile = tile;
      // A build that prunes the instantiation (cmake/pruning.cmake) says so instead.
      const std::string why = entry->rejects(make_problem(params), device);
      EXPECT_TRUE(why.empty() || why.find("in this build") != std::string::npos)
          << "head_dim " << head_dim << ", tile " << static_cast<int>(tile) << ": " << why;
    }
  }
  for (int64_t head_dim : {4, 100, 264}) {
    params.head_dim = head_dim;
    params.tile = TileShape::kAuto;
    const std::string why = entry->rejects(make_problem(params), device);
    EXPECT_NE(why.find("multiple of 8 up to 256"), std::string::npos) << head_dim << ": " << why;
  }
}

}  // namespace
}  // namespace flashcore::detail
