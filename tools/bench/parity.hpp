// The parity gate: which reference a problem is checked against, and the verdict (relative L2
// error against it, and no NaN/Inf).
#pragma once

#include <cstddef>
#include <string>

#include "model.hpp"

namespace flashcore::bench {

// Problems up to this many FLOPs are checked against the float64 CPU reference (about a second on
// one core); larger ones against the fp32 GPU oracle.
inline constexpr double kCpuReferenceMaxFlops = 1.1e9;

// Tolerance on relative L2 error for a dtype name: reference/tolerance.hpp's.
double parity_tolerance(const std::string& dtype);

// How far n outputs are from the reference. Non-finite outputs are counted, and left out of the
// norms (they fail every verdict on their own).
struct ErrorStats {
  double rel_l2 = 0;    // ||out - ref|| / ||ref|| (||out - ref|| when the reference is all zero)
  double max_abs = 0;   // max |out - ref|
  double mean_abs = 0;  // mean |out - ref|
  double max_ref = 0;   // max |ref|, the scale max_abs is read against
  size_t nan_count = 0, inf_count = 0;
};
ErrorStats error_stats(const float* out, const double* ref, size_t n);

// Compares n outputs with the reference. rel_l2 = ||out - ref|| / ||ref||; any non-finite output
// fails (outputs are poisoned with NaN before the run, so unwritten elements are caught too).
Parity compare_outputs(const float* out, const double* ref, size_t n, const std::string& dtype,
                       const std::string& reference_kind);

}  // namespace flashcore::bench
