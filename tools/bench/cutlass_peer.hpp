// CUTLASS's own Hopper FMHA (examples/88_hopper_fmha of the pinned nvidia-cutlass wheel, compiled
// from .deps, never copied here), run in-process on the lab's inputs with the lab's parity gate
// and timer: a peer, not a provider. Instantiated for head dims 64 and 128 (as far as the build's
// FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES keep them) without a mask and causal, each with the
// example's two warp-specialized schedules; build() keeps the faster at the case.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "case_data.hpp"

namespace flashcore::bench {

class CutlassFmha {
 public:
  CutlassFmha();
  ~CutlassFmha();
  CutlassFmha(const CutlassFmha&) = delete;
  CutlassFmha& operator=(const CutlassFmha&) = delete;

  // Sets the kernel up for this case; false with the reason when the example's kernels cannot
  // run it (the peer is then SKIPPED).
  bool build(const CaseData& data, cudaStream_t stream, std::string* error);
  bool run(const CaseData& data, int set, std::string* error);
  // "cutlass-pingpong" or "cutlass-cooperative": the schedule build() chose.
  std::string provider() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace flashcore::bench
