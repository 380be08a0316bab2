#include "gate.hpp"

#include <cstdio>
#include <nvtx3/nvtx3.hpp>

#include "profile_command.hpp"

namespace flashcore::bench {

void gate_and_time(const Target& t, const Launch& launch, const ParityGate& gate, int sets,
                   const TimingConfig& timing, bool profiled, cudaStream_t stream, Result* r) {
  // Named per target so that Nsight Systems shows flashattention_optimized_sm80 > parity / ...
  const std::string name =
      std::string(t.chapter->range_prefix) + "_" + t.workload->role + "_" + r->provider;
  nvtx3::scoped_range range(name);
  std::string error;
  {
    nvtx3::scoped_range phase("parity");
    gate.poison();
    Parity parity;
    if (!launch(0, &error) || !gate.check(&parity, &error)) {
      r->outcome = Outcome::kFailed;
      r->reason = error;
      return;
    }
    r->parity = parity;
    if (!parity.passed) {
      r->outcome = Outcome::kFailed;
      const std::string nan_note =
          parity.has_nan ? std::string(" (NaN/Inf in ") + gate.outputs_name + ")" : "";
      char buf[192];
      std::snprintf(buf, sizeof(buf), "parity: %s %.3e > %.0e%s vs %s", gate.error_name,
                    parity.rel_l2, parity.tolerance, nan_note.c_str(), parity.reference.c_str());
      r->reason = buf;
      return;
    }
  }
  Summary summary;
  if (!time_launches(launch, sets, timing, stream, &summary, &error)) {
    r->outcome = Outcome::kFailed;
    r->reason = error;
    return;
  }
  r->timing = summary;
  if (profiled) {
    nvtx3::scoped_range phase(kProfiledLaunchRange);
    if (!launch(0, &error)) {
      r->outcome = Outcome::kFailed;
      r->reason = "profiled launch: " + error;
      return;
    }
    if (const cudaError_t err = cudaStreamSynchronize(stream); err != cudaSuccess) {
      r->outcome = Outcome::kFailed;
      r->reason = std::string("profiled launch: ") + cudaGetErrorString(err);
    }
  }
}

}  // namespace flashcore::bench
