// The CPU flex tests' shared problem (test_flex_params.cpp, test_flex_split.cpp): a flex problem
// with fake device pointers, a BlockMask of its shape, and an sm_90 GPU as the backends' rejects()
// see it. Nothing here touches a device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "api/backend_registry.hpp"
#include "common/problem.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/flex.hpp"

namespace flashcore::flex_fixture {

// Fake, aligned device addresses: validation never dereferences them.
inline char* fake(int slot) {
  return reinterpret_cast<char*>(uintptr_t{1} << 40) + (int64_t{slot} << 26);
}

inline AttentionParams flex_params() {
  AttentionParams p;
  p.batch = 2;
  p.seqlen_q = 300;
  p.seqlen_k = 200;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.head_dim = 128;
  p.q = {fake(0), DType::kBFloat16, bshd_strides(300, 4, 128)};
  p.k = {fake(1), DType::kBFloat16, bshd_strides(200, 2, 128)};
  p.v = {fake(2), DType::kBFloat16, bshd_strides(200, 2, 128)};
  p.o = {fake(3), DType::kBFloat16, bshd_strides(300, 4, 128)};
  p.flex.score_mod.alibi.slopes = reinterpret_cast<const float*>(fake(4));
  return p;
}

// A BlockMask of the problem's shape, 128 x 128 blocks, broadcast over heads.
inline flex::BlockMask block_mask_for(const AttentionParams& p) {
  flex::BlockMask m = flex::block_mask_shape(p.batch, 1, p.seqlen_q, p.seqlen_k, 128, 128);
  m.kv_num_blocks = reinterpret_cast<const int32_t*>(fake(5));
  m.kv_indices = reinterpret_cast<const int32_t*>(fake(6));
  return m;
}

inline cudaDeviceProp hopper() {
  cudaDeviceProp d{};
  d.major = 9;
  d.multiProcessorCount = 132;
  d.sharedMemPerBlockOptin = 227 * 1024;
  d.sharedMemPerMultiprocessor = 228 * 1024;
  return d;
}

// Whether this build has the sm90 kernels (its reason says so otherwise).
inline bool sm90_in_build() {
  const detail::BackendEntry* sm90 = detail::find_backend(Backend::kSm90);
  const std::string why = sm90->rejects(detail::make_problem(flex_params()), hopper());
  return why.find("not in this build") == std::string::npos;
}

}  // namespace flashcore::flex_fixture
