// `flashcore-bench profile`: runs each selected target at each case of the grid under Nsight
// Compute, one process per target and case (`flashcore-bench run ... --profiled-launch`), so
// that ncu profiles only the one launch the run makes inside the NVTX range "profiled_launch"
// after its parity gate and timed launches; then reads the report's raw page.
#pragma once

#include <string>
#include <vector>

#include "cli.hpp"
#include "profile_report.hpp"

namespace flashcore::bench {

// The NVTX range of the profiled launch (runner.cpp) and ncu's filter for it.
inline constexpr const char* kProfiledLaunchRange = "profiled_launch";

// ncu's sections for --metrics-set basic: what profile.md reports and no more (a few replay
// passes); full is ncu's own --set full. Both add the few metrics these sections lack
// (sm__cycles_active, issue activity, the XU pipe, L2 throughput).
const std::vector<std::string>& basic_sections();

// The ncu command that profiles `program_argv` and writes report_base + ".ncu-rep".
std::vector<std::string> ncu_argv(const std::string& ncu, const std::string& metrics_set,
                                  const std::string& report_base,
                                  const std::vector<std::string>& program_argv);

// The `run` command for one target at one case: every shape knob given explicitly so the run has
// exactly this case, the target's --target-extra-arg passed on, and --profiled-launch.
std::vector<std::string> profiled_run_argv(const std::string& self, const Target& target,
                                           const Case& c, const Options& options,
                                           const std::string& out_dir);

// Runs every target x case (options.targets, options.profile's grid, options.knobs) under ncu,
// writing reports and logs under out_dir/ncu/. Fills record->entries. Returns false only when
// nothing can run (ncu missing: *error names it and *ncu_missing is set).
bool run_profiles(const Options& options, const std::string& self, const std::string& out_dir,
                  ProfileRecord* record, bool* ncu_missing, std::string* error);

// Applies each target's "profile" thresholds from its chapter's expectations file (under root,
// or options.expectations) to the record's entries. Returns false on an unreadable or malformed
// file.
bool check_profile_thresholds(const Options& options, const std::string& root,
                              ProfileRecord* record, std::string* error);

}  // namespace flashcore::bench
