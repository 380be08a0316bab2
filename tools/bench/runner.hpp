// Runs the selected targets on the GPU: per case, shared inputs and reference; per target, the
// parity gate then timing; the cuDNN peer at every case; the GEMM and copy ceilings once.
#pragma once

#include <string>

#include "cli.hpp"
#include "report_json.hpp"

namespace flashcore::bench {

// Fills record->environment, the ceilings and results (in target-table order; metrics not yet
// derived).
// Returns false only when the run cannot go on (no device, CUDA context failure); per-target
// failures are FAILED or SKIPPED results.
bool run_lab(const Options& options, const Knobs& knobs, RunRecord* record, std::string* error);

}  // namespace flashcore::bench
