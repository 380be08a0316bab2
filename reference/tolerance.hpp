// The parity tolerance, one definition for the GPU tests and the lab's gate: relative L2 error of
// a backend's output against a reference, 5e-3 for fp16 and 1e-2 for bf16 (one fewer mantissa
// bits' worth of rounding of P and O). bench/peers.py states the same numbers for torch's peers.
#pragma once

#include "flashcore/attention.hpp"

namespace flashcore::reference {

constexpr double parity_tolerance(DType dtype) { return dtype == DType::kFloat16 ? 5e-3 : 1e-2; }

}  // namespace flashcore::reference
