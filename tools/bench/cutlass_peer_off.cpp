// The CUTLASS FMHA peer of a flashcore-bench configured without it (FLASHCORE_BENCH_CUTLASS_PEER
// off, as outside the lab preset, or CUTLASS's example 88 missing from .deps): every case reports
// the peer SKIPPED with this reason.
#include "cutlass_peer.hpp"

namespace flashcore::bench {

struct CutlassFmha::State {};

CutlassFmha::CutlassFmha() : state_(std::make_unique<State>()) {}
CutlassFmha::~CutlassFmha() = default;

bool CutlassFmha::build(const CaseData&, cudaStream_t, std::string* error) {
  *error =
      "this flashcore-bench was configured without the CUTLASS FMHA peer; configure with "
      "-DFLASHCORE_BENCH_CUTLASS_PEER=ON (preset lab does), sm_90a and CUTLASS's "
      "examples/88_hopper_fmha under .deps (scripts/install_deps.sh)";
  return false;
}

bool CutlassFmha::run(const CaseData&, int, std::string* error) {
  *error = "built without the CUTLASS FMHA peer";
  return false;
}

std::string CutlassFmha::provider() const { return "cutlass"; }

}  // namespace flashcore::bench
