// What `flashcore-bench profile` reports per kernel, read from Nsight Compute's raw page, each
// value with the ncu metric(s) it came from; and the per-target thresholds of --check.
//
// Metric names are those ncu 2025.x collects on sm_90 (the ones scripts/ncu_summary.py read on
// the H100 first); where ncu versions or architectures name a quantity differently, the table lists
// the alternatives in order and the report names the one found.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "json.hpp"
#include "ncu_csv.hpp"

namespace flashcore::bench {

struct MetricValue {
  double value = 0;
  std::string metric;  // the ncu metric name(s), e.g. "a + b" for a sum
};

struct StallReason {
  std::string reason;  // "long_scoreboard", "wait", ...
  double cycles_per_issue = 0;
  std::string metric;
};

struct KernelProfile {
  std::string name;
  std::string grid, block;
  std::map<std::string, MetricValue> metrics;  // by ProfileMetric::key; absent: not collected
  std::vector<StallReason> stalls;             // the top kTopStalls, most cycles first
};

struct ProfileMetric {
  const char* key;    // "sm_busy_pct"
  const char* label;  // column title in profile.md
  const char* what;   // one line for the legend
};
// In report order: duration_us, sm_busy_pct, sm_throughput_pct, tensor_pipe_pct,
// dram_throughput_pct, achieved_occupancy_pct, issue_active_pct, xu_pipe_pct, l2_throughput_pct,
// registers_per_thread, smem_per_cta_bytes, local_memory_bytes, smem_bank_conflicts.
const std::vector<ProfileMetric>& profile_metrics();

inline constexpr size_t kTopStalls = 5;

// Reads one raw-page row.
KernelProfile kernel_profile(const NcuRow& row);

// The kernel that thresholds are checked on: the longest one of a launch (the attention kernel,
// not a split-KV combine), or the first when no duration was collected. Null for none.
const KernelProfile* main_kernel(const std::vector<KernelProfile>& kernels);

struct ProfileBound {
  std::string key;     // a ProfileMetric key
  bool is_min = true;  // min: value >= bound; max: value <= bound
  double bound = 0;
};

struct ThresholdVerdict {
  std::string key;
  bool is_min = true;  // min: value >= bound; max: value <= bound
  double bound = 0;
  std::optional<double> value;  // absent: the metric was not collected, which is a miss
  std::string metric;
  bool passed = false;
};

// Thresholds of one target at one case from its expectations entry's "profile" object:
//   "profile": {"min": {"sm_busy_pct": 70}, "max": {"local_memory_bytes": 0},
//               "cases": {"<case label>": {"min": {...}, "max": {...}}}}
// A case entry's bounds replace the target's for the same key. Returns false when the object is
// malformed (an unknown metric key, a bound that is not a number), saying why.
bool read_profile_thresholds(const Json& profile, const std::string& case_label,
                             const std::string& where, std::vector<ProfileBound>* bounds,
                             std::string* error);

std::vector<ThresholdVerdict> check_thresholds(const KernelProfile& kernel,
                                               const std::vector<ProfileBound>& bounds);

}  // namespace flashcore::bench
