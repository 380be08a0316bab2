// Test support for the backward: one case's fresh random Q, K, V and dO, the forward's O and LSE
// (run on the GPU through flashcore::run, as a training step gets them), poisoned gradients, the
// float64 reference and the comparison the tolerances apply to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/backward.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::testing {

struct BackwardCase {
  AttentionCase shape;  // sizes, dtype, masks, softcap, scale and layout of every tensor
  bool deterministic = false;
  Backend backend = Backend::kAuto;  // BackwardParams::backend

  std::string name() const;
};

struct Gradients {
  std::vector<double> dq, dk, dv;  // contiguous BSHD
  bool padding_untouched = true;   // every padding element of dq, dk and dv still poisoned
};

class BackwardData {
 public:
  // Draws fresh inputs (seed printed on failure) and runs the forward for O and LSE.
  explicit BackwardData(const BackwardCase& c);

  const Status& forward_status() const { return forward_status_; }
  BackwardParams params() const;
  // Fills dq, dk and dv (padding included) with NaN, so unwritten elements cannot pass.
  void poison_gradients();
  void compute_reference();  // float64 CPU reference
  Gradients read_gradients() const;
  // The raw 16-bit patterns of dq, dk and dv, for bitwise comparisons.
  std::vector<uint16_t> read_gradient_bits() const;

  const BackwardCase& spec() const { return c_; }
  uint64_t seed() const { return seed_; }
  const Gradients& reference() const { return ref_; }

 private:
  BackwardCase c_;
  uint64_t seed_;
  CaseTensor q_, k_, v_, o_, d_o_, dq_, dk_, dv_;
  DeviceBuffer lse_;
  Status forward_status_;
  Gradients ref_;
};

struct GradientErrors {
  double rel_l2_dq = 0, rel_l2_dk = 0, rel_l2_dv = 0;  // ||out - ref|| / ||ref||
  int64_t nan_count = 0;                               // NaN or inf in any gradient
  // Elements that must be exactly zero and are not: dQ rows that see no key, dK and dV rows of
  // keys no query sees.
  int64_t zero_errors = 0;
};
GradientErrors compare_gradients(const BackwardCase& c, const Gradients& out, const Gradients& ref);

// ||out - ref|| / ||ref|| over the finite elements of out (||out - ref|| when ref is all zero);
// every NaN or inf in out is counted in *nan_count.
double rel_l2(const std::vector<double>& out, const std::vector<double>& ref, int64_t* nan_count);

}  // namespace flashcore::testing
