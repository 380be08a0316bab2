// Per-launch timing with CUDA events. Launches rotate over several input sets so the working set
// exceeds L2; launches shorter than kGraphBelowUs are captured into a CUDA graph and replayed, so
// CPU launch overhead does not pollute the kernel time.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "model.hpp"

namespace flashcore::bench {

struct TimingConfig {
  double warmup_ms = 20;
  double budget_ms = 100;  // target time spent in timed samples
  int min_samples = 10;
  int max_samples = 500;
};

// Launches the work on `stream` reading input set `set` (0 <= set < sets). Returns false with a
// message on failure.
using Launch = std::function<bool(int set, std::string* error)>;

inline constexpr double kGraphBelowUs = 200;

bool time_launches(const Launch& launch, int sets, const TimingConfig& config, cudaStream_t stream,
                   Summary* summary, std::string* error);

}  // namespace flashcore::bench
