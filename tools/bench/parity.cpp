#include "parity.hpp"

#include <algorithm>
#include <cmath>

#include "reference/tolerance.hpp"

namespace flashcore::bench {

double parity_tolerance(const std::string& dtype) {
  return reference::parity_tolerance(dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16);
}

ErrorStats error_stats(const float* out, const double* ref, size_t n) {
  ErrorStats s;
  double diff = 0, norm = 0, sum_abs = 0;
  size_t finite = 0;
  for (size_t i = 0; i < n; ++i) {
    s.max_ref = std::max(s.max_ref, std::fabs(ref[i]));
    if (std::isnan(out[i])) {
      ++s.nan_count;
      continue;
    }
    if (std::isinf(out[i])) {
      ++s.inf_count;
      continue;
    }
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
    sum_abs += std::fabs(d);
    s.max_abs = std::max(s.max_abs, std::fabs(d));
    ++finite;
  }
  // An all-zero reference (every row masked) must be matched exactly.
  s.rel_l2 = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  s.mean_abs = finite > 0 ? sum_abs / static_cast<double>(finite) : 0;
  return s;
}

Parity compare_outputs(const float* out, const double* ref, size_t n, const std::string& dtype,
                       const std::string& reference_kind) {
  const ErrorStats s = error_stats(out, ref, n);
  Parity p;
  p.reference = reference_kind;
  p.tolerance = parity_tolerance(dtype);
  p.has_nan = s.nan_count + s.inf_count > 0;
  p.rel_l2 = s.rel_l2;
  p.passed = !p.has_nan && p.rel_l2 <= p.tolerance;
  return p;
}

}  // namespace flashcore::bench
