#include "parity.hpp"

#include <cmath>

#include "reference/tolerance.hpp"

namespace flashcore::bench {

double parity_tolerance(const std::string& dtype) {
  return reference::parity_tolerance(dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16);
}

Parity compare_outputs(const float* out, const double* ref, size_t n, const std::string& dtype,
                       const std::string& reference_kind) {
  Parity p;
  p.reference = reference_kind;
  p.tolerance = parity_tolerance(dtype);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(out[i])) {
      p.has_nan = true;
      continue;
    }
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  // An all-zero reference (every row masked) must be matched exactly.
  p.rel_l2 = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  p.passed = !p.has_nan && p.rel_l2 <= p.tolerance;
  return p;
}

}  // namespace flashcore::bench
