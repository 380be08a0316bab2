// The parity gate, then timing, of one target whose launch is ready: what the forward targets
// (runner.cpp) and the backward targets (backward_runner.cpp) both do with a launch.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "model.hpp"
#include "parity.hpp"
#include "targets.hpp"
#include "timer.hpp"

namespace flashcore::bench {

// How a target's outputs are checked before it is timed.
struct ParityGate {
  std::function<void()> poison;                      // poisons set 0's outputs
  std::function<bool(Parity*, std::string*)> check;  // set 0's outputs against the reference
  const char* error_name;                            // the error as reported: "rel L2", ...
  const char* outputs_name;                          // "output", "gradients"
};

// Fills r's parity and timing, or marks it FAILED with the reason. profiled: after timing, one more
// launch in the NVTX range that `flashcore-bench profile` has ncu profile (warm caches and clocks,
// like the timed launches; nothing else runs in it).
void gate_and_time(const Target& t, const Launch& launch, const ParityGate& gate, int sets,
                   const TimingConfig& timing, bool profiled, cudaStream_t stream, Result* r);

}  // namespace flashcore::bench
