// The parity gate's verdict: relative L2 error against the reference, and no NaN/Inf.
#pragma once

#include <cstddef>
#include <string>

#include "model.hpp"

namespace flashcore::bench {

// Tolerance on relative L2 error: 5e-3 for fp16, 1e-2 for bf16 (one fewer mantissa bits' worth of
// rounding of P and O).
double parity_tolerance(const std::string& dtype);

// Compares n outputs with the reference. rel_l2 = ||out - ref|| / ||ref||; any non-finite output
// fails (outputs are poisoned with NaN before the run, so unwritten elements are caught too).
Parity compare_outputs(const float* out, const double* ref, size_t n, const std::string& dtype,
                       const std::string& reference_kind);

}  // namespace flashcore::bench
