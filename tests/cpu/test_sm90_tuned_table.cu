// The sm90 kernel's reviewed tile table as the kernel sees it (docs/lab.md, "The reviewed table"):
// compiled against the header cmake/sm90_tuned_table.cmake generated from
// tests/cpu/fixtures/sm90_tuned_reviewed.json, so each reviewed row must replace its
// instantiation's tile, in the host's plan and in KernelTraits alike, and every other
// instantiation must keep the tile table's. The configure step's refusals are tested by
// tests/cmake/sm90_tuned_table_test.cmake.
//
// Every check runs on the host (static_asserts and host test bodies); the file is CUDA only because
// the kernel headers are (threadIdx, __syncthreads in their inline functions), so plain C++ cannot
// parse them. nvcc's device pass, which has no kernel to compile here, would still spend a third of
// the compile parsing CuTe: it sees none of the file.
#ifndef __CUDA_ARCH__
#include <gtest/gtest.h>

#include <type_traits>

#include "sm90/kernel_traits.hpp"
#include "sm90/tuned_tiles.hpp"

namespace flashcore::sm90 {
namespace {

using Bf16 = cutlass::bfloat16_t;
using Fp16 = cutlass::half_t;

static_assert(std::is_same_v<ProductionConfig<Bf16, 128>, TileConfig<96, 4, 2, 232>>,
              "the fixture's reviewed hd128 bf16 row is the kernel's config");
static_assert(std::is_same_v<ProductionConfig<Bf16, 64>, TileConfig<64, 2, 3, 160>>,
              "the fixture's reviewed hd64 bf16 row is the kernel's config");
static_assert(std::is_same_v<ProductionConfig<Fp16, 128>, DefaultConfig<128>>,
              "no row for hd128 fp16: the tile table's");
static_assert(std::is_same_v<ProductionConfig<Fp16, 64>, DefaultConfig<64>>,
              "an unreviewed row is never read");
static_assert(
    std::is_same_v<KernelTraits<Bf16, 128>, KernelTraits<Bf16, 128, 1, TileConfig<96, 4, 2, 232>>>,
    "KernelTraits' default config is the production one");

TEST(Sm90TunedTable, AReviewedRowReplacesItsInstantiationsTile) {
  using Traits = KernelTraits<Bf16, 128>;
  EXPECT_EQ(Traits::kBlockN, 96);
  EXPECT_EQ(Traits::kStages, 4);
  EXPECT_EQ(Traits::kBlockM, 128);
  EXPECT_EQ(Traits::kConsumerRegisters, 232);
  // Four stages of 96-key K and V tiles leave room for one Q stage only.
  EXPECT_EQ(Traits::kQStages, 1);
  // The host's plan (sm90_fwd.cu) sizes the grid and the clusters from the same row.
  EXPECT_EQ(kernel_block_n(true, 128), 96);
  EXPECT_EQ(kernel_block_m(true, 128), 128);
  EXPECT_EQ(kernel_cluster_ctas(true, 128), 2);
  EXPECT_EQ(kernel_block_m(true, 64), 192);
  EXPECT_EQ(kernel_block_n(true, 64), 64);
  EXPECT_EQ(kernel_cluster_ctas(true, 64), 1);
}

TEST(Sm90TunedTable, OtherInstantiationsKeepTheTileTable) {
  EXPECT_FALSE(has_reviewed_tile(false, 128));
  EXPECT_FALSE(has_reviewed_tile(false, 64));  // unreviewed in the fixture
  EXPECT_FALSE(has_reviewed_tile(true, 256));
  EXPECT_EQ(kernel_block_n(false, 128), block_n_for(128));
  EXPECT_EQ(kernel_block_m(false, 64), block_m_for(64));
  EXPECT_EQ(kernel_cluster_ctas(false, 128), kKVClusterCtas);
  EXPECT_EQ((KernelTraits<Fp16, 64>::kBlockM), 192);
  EXPECT_EQ((KernelTraits<Fp16, 64>::kBlockN), 128);
}

// The configure step refuses rows whose shared memory exceeds one CTA's from its own arithmetic;
// it must be the kernel's sizeof(SharedStorage), or a row could pass it and break the build.
TEST(Sm90TunedTable, TheConfigureStepsSharedMemoryIsTheKernels) {
  EXPECT_EQ(reviewed_tile(true, 128).smem_bytes, (KernelTraits<Bf16, 128, 2>::kSmemBytes));
  EXPECT_EQ(reviewed_tile(true, 64).smem_bytes, (KernelTraits<Bf16, 64>::kSmemBytes));
}

}  // namespace
}  // namespace flashcore::sm90
#endif  // __CUDA_ARCH__
