// Proves the CuTe headers from the pinned CUTLASS wheel compile and run here: a CTA stages a tile
// through a swizzled shared-memory layout with CuTe copies and writes it back transposed.
#include <gtest/gtest.h>

#include <cute/tensor.hpp>
#include <vector>

#include "tests/support/attention_case.hpp"

namespace flashcore::testing {
namespace {

constexpr int kTile = 32;

__global__ void transpose_tile_through_smem(const float* in, float* out) {
  using namespace cute;
  __shared__ float smem[kTile * kTile];
  // Row-major global tile in, column-major global tile out: a transpose.
  Tensor g_in = make_tensor(make_gmem_ptr(in),
                            make_layout(make_shape(Int<kTile>{}, Int<kTile>{}), LayoutRight{}));
  Tensor g_out = make_tensor(make_gmem_ptr(out),
                             make_layout(make_shape(Int<kTile>{}, Int<kTile>{}), LayoutLeft{}));
  // XOR-swizzled shared layout: the column reads below hit 32 distinct banks.
  auto swizzled = composition(Swizzle<5, 0, 5>{},
                              make_layout(make_shape(Int<kTile>{}, Int<kTile>{}), LayoutRight{}));
  Tensor s = make_tensor(make_smem_ptr(smem), swizzled);
  auto threads = make_layout(make_shape(Int<kTile>{}, Int<kTile / 4>{}), LayoutRight{});
  copy(local_partition(g_in, threads, threadIdx.x), local_partition(s, threads, threadIdx.x));
  __syncthreads();
  copy(local_partition(s, threads, threadIdx.x), local_partition(g_out, threads, threadIdx.x));
}

TEST(CuTe, SwizzledSharedMemoryTranspose) {
  FLASHCORE_REQUIRE_GPU();
  std::vector<float> host(kTile * kTile);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f - 3.f;
  DeviceBuffer in(host.size() * sizeof(float)), out(host.size() * sizeof(float));
  CUDA_ASSERT_OK(cudaMemcpy(in.get(), host.data(), in.bytes(), cudaMemcpyHostToDevice));
  CUDA_ASSERT_OK(cudaMemset(out.get(), 0xFF, out.bytes()));
  transpose_tile_through_smem<<<1, kTile * kTile / 4>>>(static_cast<float*>(in.get()),
                                                        static_cast<float*>(out.get()));
  CUDA_ASSERT_OK(cudaGetLastError());
  std::vector<float> result(host.size());
  CUDA_ASSERT_OK(cudaMemcpy(result.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
  for (int r = 0; r < kTile; ++r) {
    for (int c = 0; c < kTile; ++c) {
      ASSERT_EQ(result[c * kTile + r], host[r * kTile + c]) << "row " << r << " col " << c;
    }
  }
}

}  // namespace
}  // namespace flashcore::testing
