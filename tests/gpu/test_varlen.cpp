// Varlen on a real device: the content check that copies cu_seqlens from device memory, and run()
// taking varlen to sm80 after validation accepted real device arrays, with every other backend's
// reason. Skips loudly without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flashcore/attention.hpp"
#include "flashcore/varlen.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore {
namespace {

using testing::DeviceBuffer;

struct VarlenArrays {
  DeviceBuffer cu_q, cu_k, q, k, v, o;
};

// Sequences of 0, 1, 7 and 40 queries (48 in all) over 3, 1, 7 and 60 keys (71), on the device.
AttentionParams varlen_params(VarlenArrays* a, const std::vector<int32_t>& cu_q,
                              const std::vector<int32_t>& cu_k) {
  constexpr int64_t kHeads = 2, kHeadDim = 64, kTotalQ = 48, kTotalK = 71;
  const size_t element = 2;  // fp16
  a->cu_q = DeviceBuffer(cu_q.size() * sizeof(int32_t));
  a->cu_k = DeviceBuffer(cu_k.size() * sizeof(int32_t));
  a->q = DeviceBuffer(kTotalQ * kHeads * kHeadDim * element);
  a->o = DeviceBuffer(kTotalQ * kHeads * kHeadDim * element);
  a->k = DeviceBuffer(kTotalK * kHeads * kHeadDim * element);
  a->v = DeviceBuffer(kTotalK * kHeads * kHeadDim * element);
  EXPECT_EQ(cudaMemcpy(a->cu_q.get(), cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(a->cu_k.get(), cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  AttentionParams p;
  p.batch = static_cast<int64_t>(cu_q.size()) - 1;
  p.seqlen_q = kTotalQ;
  p.seqlen_k = kTotalK;
  p.heads_q = p.heads_kv = kHeads;
  p.head_dim = kHeadDim;
  p.q = {a->q.get(), DType::kFloat16, bshd_strides(kTotalQ, kHeads, kHeadDim)};
  p.k = {a->k.get(), DType::kFloat16, bshd_strides(kTotalK, kHeads, kHeadDim)};
  p.v = {a->v.get(), DType::kFloat16, bshd_strides(kTotalK, kHeads, kHeadDim)};
  p.o = {a->o.get(), DType::kFloat16, bshd_strides(kTotalQ, kHeads, kHeadDim)};
  p.cu_seqlens_q = static_cast<const int32_t*>(a->cu_q.get());
  p.cu_seqlens_k = static_cast<const int32_t*>(a->cu_k.get());
  p.max_seqlen_q = 40;
  p.max_seqlen_k = 60;
  return p;
}

TEST(Varlen, DeviceArraysAreCheckedByCopy) {
  FLASHCORE_REQUIRE_GPU();
  VarlenArrays arrays;
  const AttentionParams good = varlen_params(&arrays, {0, 0, 1, 8, 48}, {0, 3, 4, 11, 71});
  const Status ok = check_varlen_on_device(good);
  EXPECT_TRUE(ok.ok()) << ok.message;
  VarlenArrays bad_arrays;
  const AttentionParams bad = varlen_params(&bad_arrays, {0, 0, 1, 8, 48}, {0, 3, 2, 11, 71});
  const Status unsorted = check_varlen_on_device(bad);
  EXPECT_EQ(unsorted.code, StatusCode::kInvalidArgument);
  EXPECT_NE(unsorted.message.find("cu_seqlens_k is not sorted"), std::string::npos)
      << unsorted.message;
}

// Dispatch only (the numbers are tests/gpu/test_flex_sm80.cpp's and test_flex_sm90.cpp's): auto
// runs varlen on sm90 on an sm_90 GPU and on sm80 elsewhere, and every other backend names where
// it runs.
TEST(Varlen, AutoRunsOnSm90OrSm80AndEveryOtherBackendSaysWhere) {
  FLASHCORE_REQUIRE_GPU();
  VarlenArrays arrays;
  const AttentionParams p = varlen_params(&arrays, {0, 0, 1, 8, 48}, {0, 3, 4, 11, 71});
  RunInfo info;
  const Status s = run(p, &info);
  ASSERT_TRUE(s.ok()) << s.message;
  cudaDeviceProp device{};
  ASSERT_EQ(cudaGetDeviceProperties(&device, 0), cudaSuccess);
  const bool sm90 = device.major == 9 && device.minor == 0;
  EXPECT_STREQ(info.provider, sm90 ? "sm90" : "sm80");
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (Backend b : backends()) {
    if (b == Backend::kSm80 || b == Backend::kSm90) continue;
    AttentionParams named = p;
    named.backend = b;
    const Status why = can_implement(named);
    EXPECT_EQ(why.code, StatusCode::kUnsupported) << backend_name(b) << ": " << why.message;
    EXPECT_NE(why.message.find("varlen and flex mods run on the sm90 and sm80 backends"),
              std::string::npos)
        << backend_name(b) << ": " << why.message;
  }
}

}  // namespace
}  // namespace flashcore
