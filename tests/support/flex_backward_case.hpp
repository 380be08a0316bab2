// Test support for the flex backward: one flex case (flex_case.hpp) with fresh random inputs and
// dO, its forward run on the GPU (run(), as a training step gets O and LSE), then run_backward on
// NaN-poisoned gradients (and the sink logits' gradient with sinks), against the float64 flex
// backward reference evaluating the same functors (reference/cpu_flex_backward_reference.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "flashcore/backward.hpp"
#include "tests/support/flex_case.hpp"

namespace flashcore::testing {

struct FlexBackwardResult {
  double rel_l2_dq = 0, rel_l2_dk = 0, rel_l2_dv = 0;  // ||out - ref|| / ||ref||
  // The sink logits' gradient (BackwardParams::d_sinks), cases with sinks only; its NaN count in
  // nan_count.
  double rel_l2_d_sinks = 0;
  int64_t nan_count = 0;  // NaN or inf in any gradient
  // dQ rows of rows that see no key and dK / dV rows of keys no row sees (by the reference) that
  // are not exactly zero, and how many such rows there are.
  int64_t zero_errors = 0;
  int64_t zero_rows = 0;
  Backend backend = Backend::kAuto;  // the one kAuto resolved to
  // Gradient bytes (d_sinks' too) of a later run (FlexBackwardOptions::runs) that differ from the
  // first run's.
  int64_t run_to_run_differences = 0;
};

// How run_flex_backward_case runs the backward. sm80_smem_per_block: 0 runs run_backward on the
// backend the case names; otherwise the sm80 backward's launch for a GPU that gives a block that
// many bytes of shared memory (the tiles a smaller GPU, an A100, runs, on a bigger one).
// deterministic: BackwardParams::deterministic. runs: how many times the backward runs on the same
// inputs (into re-poisoned gradients); every run's bits must equal the first's.
struct FlexBackwardOptions {
  size_t sm80_smem_per_block = 0;
  bool deterministic = false;
  int runs = 1;
};

// Runs c's forward and backward (BackwardParams::backend = c.backend) on the GPU and the float64
// reference; failures to run are test failures (ADD_FAILURE) and leave *result empty.
void run_flex_backward_case(const FlexCase& c, FlexBackwardResult* result,
                            const FlexBackwardOptions& options = {});

// The BackwardParams of a flex forward's params: the same fields, o, lse, d_o and the gradients
// added (one spelling: the backward's varlen and flex fields are the forward's).
BackwardParams flex_backward_params(const AttentionParams& forward, const void* d_o, void* dq,
                                    void* dk, void* dv, Strides q_strides, Strides k_strides);

}  // namespace flashcore::testing
