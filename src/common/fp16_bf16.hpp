// float <-> fp16 / bf16, one set of conversions for the kernels (by element type), the GPU oracle,
// the lab and the tests (by DType, on raw 16-bit patterns). Round to nearest even, as the CUDA
// intrinsics do; every caller rounds the same way, so inputs the host rounds are the values the
// kernels see. (The sm80/sm90 kernels convert through CuTe's numeric types instead.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flashcore/attention.hpp"

namespace flashcore::detail {

__host__ __device__ inline float to_float(__half x) { return __half2float(x); }
__host__ __device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename Element>
__host__ __device__ Element from_float(float x);
template <>
__host__ __device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__host__ __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Host side, on the 16-bit patterns the lab and the tests fill device buffers with.
inline uint16_t float_to_bits(float value, DType dtype) {
  if (dtype == DType::kFloat16) return static_cast<__half_raw>(from_float<__half>(value)).x;
  return static_cast<__nv_bfloat16_raw>(from_float<__nv_bfloat16>(value)).x;
}

inline float bits_to_float(uint16_t bits, DType dtype) {
  if (dtype == DType::kFloat16) {
    __half_raw raw;
    raw.x = bits;
    return to_float(__half(raw));
  }
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return to_float(__nv_bfloat16(raw));
}

}  // namespace flashcore::detail
