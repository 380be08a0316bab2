// profile.json and profile.md: what `flashcore-bench profile` found, per target and case, per
// kernel; and the verdicts of the thresholds that --check enforces.
#pragma once

#include <string>
#include <vector>

#include "json.hpp"
#include "model.hpp"
#include "profile_metrics.hpp"

namespace flashcore::bench {

inline constexpr const char* kProfileSchema = "flashcore-bench/profile";
inline constexpr int kProfileSchemaVersion = 1;

struct ProfileEntry {
  std::string target;  // chapter:workload
  Case c;
  std::string provider;  // what ran (from the profiled run's results.json)
  std::string status;    // "ok", or the run's "FAILED" / "SKIPPED", or "error" (ncu failed)
  std::string reason;
  std::string report;                      // the .ncu-rep file, for the Nsight Compute GUI
  std::vector<KernelProfile> kernels;      // in launch order
  std::vector<ThresholdVerdict> verdicts;  // on main_kernel(kernels)
};

struct ProfileRecord {
  std::string created_utc, command_line, git_commit;
  std::string metrics_set;  // "basic" or "full"
  std::string device;
  bool checked = false;
  std::vector<std::string> threshold_files;
  std::vector<ProfileEntry> entries;
};

// One line per missed threshold (target, case, metric, value, bound) and per entry that has
// thresholds but produced no kernel.
std::vector<std::string> profile_misses(const ProfileRecord& record);

Json to_json(const ProfileRecord& record);
bool from_json(const Json& json, ProfileRecord* record, std::string* error);
std::string render_profile_markdown(const ProfileRecord& record);

}  // namespace flashcore::bench
