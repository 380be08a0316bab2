// Runs the robustness suite on the GPU: per cell of robust_grid(), the inputs of its
// distribution and the reference once, then every registered provider on them.
#pragma once

#include <string>

#include "cli.hpp"
#include "robust_report.hpp"

namespace flashcore::bench {

// Fills record->device, record->seed and record->results (grid order). Returns false only when the
// suite cannot start (no device: *error starts with "no CUDA device"). A CUDA error that leaves the
// context unusable stops the grid early with record->interrupted set.
bool run_robust(const Options& options, RobustRecord* record, std::string* error);

}  // namespace flashcore::bench
