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

}  // namespace
}  // namespace flashcore::detail
