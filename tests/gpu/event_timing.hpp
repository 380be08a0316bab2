// What the backward timing tools (time_backward.cpp, time_backward_flex.cpp) share: a CUDA-check
// that returns false from the calling bool function, and the median of kIterations launches after
// kWarmup, each between two CUDA events. Not tests: they print numbers for docs/backward.md.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define FLASHCORE_TIMING_CHECK_CUDA(expr)                               \
  do {                                                                  \
    const cudaError_t err = (expr);                                     \
    if (err != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(err)); \
      return false;                                                     \
    }                                                                   \
  } while (0)

namespace flashcore::timing {

constexpr int kWarmup = 3;
constexpr int kIterations = 20;

// launch() returns false when its call failed; *ms gets the median in milliseconds.
template <typename Fn>
bool median_ms(Fn&& launch, float* ms) {
  cudaEvent_t start, stop;
  FLASHCORE_TIMING_CHECK_CUDA(cudaEventCreate(&start));
  FLASHCORE_TIMING_CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int i = 0; i < kWarmup + kIterations; ++i) {
    FLASHCORE_TIMING_CHECK_CUDA(cudaEventRecord(start));
    if (!launch()) return false;
    FLASHCORE_TIMING_CHECK_CUDA(cudaEventRecord(stop));
    FLASHCORE_TIMING_CHECK_CUDA(cudaEventSynchronize(stop));
    float t = 0;
    FLASHCORE_TIMING_CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
    if (i >= kWarmup) times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  *ms = times[times.size() / 2];
  FLASHCORE_TIMING_CHECK_CUDA(cudaEventDestroy(start));
  FLASHCORE_TIMING_CHECK_CUDA(cudaEventDestroy(stop));
  return true;
}

}  // namespace flashcore::timing
