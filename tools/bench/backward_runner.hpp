// The backward targets of a run (Engine::kLibraryBackward and kCudnnBackward, at backward cases):
// the parity gate on set 0's dQ, dK and dV (backward_data.hpp), then timing with the forward
// targets' timer, then, when profiled, one more launch in the range `flashcore-bench profile` has
// ncu profile.
#pragma once

#include <cuda_runtime_api.h>

#include "backward_data.hpp"
#include "model.hpp"
#include "targets.hpp"
#include "timer.hpp"

namespace flashcore::bench {

Result run_backward_target(const Target& t, const BackwardData& data, const TimingConfig& timing,
                           bool profiled, cudaStream_t stream);

}  // namespace flashcore::bench
