// Regression thresholds: labs/<chapter>/expectations_<device>.json.
//
// {
//   "schema": "flashcore-bench/expectations", "schema_version": 1,
//   "device": "...", "placeholder": true, "how_chosen": "...",
//   "targets": {
//     "labs/flashattention:optimized_flashattention": {
//       "min_speedup_over_baseline": 1.0,   // at every case of the run
//       "min_ratio_vs_cudnn": 0.05,         // cuDNN p50 / ours
//       "max_p50_us": 1e6,                  // usually per case, below
//       "cases": {"B1_H8_S512_D64_bf16": {"max_p50_us": 40}}
//     }
//   }
// }
//
// A threshold that is absent or null is not checked. A case entry overrides the target's values.
#pragma once

#include <string>
#include <vector>

#include "json.hpp"
#include "model.hpp"

namespace flashcore::bench {

inline constexpr const char* kExpectationsSchema = "flashcore-bench/expectations";

// Appends one human-readable line per missed threshold (naming target, case, metric, measured
// value and threshold) to *regressions. A FAILED target with expectations is a regression; a
// SKIPPED one, or a metric that could not be computed in this run, is not. Returns false when the
// expectations document is malformed, saying why in *error; source names it in messages.
bool check_expectations(const std::vector<Result>& results, const Json& expectations,
                        const std::string& source, std::vector<std::string>* regressions,
                        std::string* error);

}  // namespace flashcore::bench
