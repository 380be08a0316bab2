#include "profile_command.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ncu_csv.hpp"
#include "report_json.hpp"
#include "subprocess.hpp"

namespace fs = std::filesystem;

namespace flashcore::bench {
namespace {

bool read_text(const fs::path& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *text = s.str();
  return true;
}

// A file-name-safe form of "chapter:workload" + case label.
std::string slug(const std::string& target, const Case& c) {
  std::string s = target + "__" + c.label();
  for (char& ch : s) {
    if (ch == '/' || ch == ':') ch = '_';
  }
  return s;
}

// The last lines of a log, for an error message.
std::string tail(const fs::path& path, size_t lines) {
  std::string text;
  if (!read_text(path, &text)) return "";
  std::vector<std::string> all;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += (out.empty() ? "" : " | ") + all[i];
  }
  return out;
}

// What the profiled run says about the target: provider, status and reason.
void read_run_result(const fs::path& results, const Target& t, ProfileEntry* e,
                     std::string* device) {
  std::string text, error;
  Json json;
  RunRecord run;
  if (!read_text(results, &text) || !parse_json(text, &json, &error) ||
      !from_json(json, &run, &error)) {
    return;
  }
  for (const auto& [key, value] : run.environment) {
    if (key == "device") *device = value;
  }
  for (const Result& r : run.results) {
    if (r.target() != t.name()) continue;
    e->provider = r.provider;
    e->status = outcome_name(r.outcome);
    e->reason = r.reason;
  }
}

// Metrics outside basic_sections() that the report reads, by the names ncu printed on the H100
// (scripts/ncu_summary.py's, before this command replaced it).
const char* const kExtraMetrics =
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed,"
    "smsp__issue_active.avg.pct_of_peak_sustained_active,"
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,"
    "lts__t_sectors.avg.pct_of_peak_sustained_elapsed";

}  // namespace

const std::vector<std::string>& basic_sections() {
  static const std::vector<std::string> kSections = {
      "SpeedOfLight",   "LaunchStats",
      "Occupancy",      "ComputeWorkloadAnalysis",
      "WarpStateStats", "MemoryWorkloadAnalysis_Tables"};
  return kSections;
}

std::vector<std::string> ncu_argv(const std::string& ncu, const std::string& metrics_set,
                                  const std::string& report_base,
                                  const std::vector<std::string>& program_argv) {
  std::vector<std::string> argv = {ncu, "--nvtx", "--nvtx-include",
                                   std::string(kProfiledLaunchRange) + "/",
                                   // The lab times at the GPU's own clocks; ncu's default locks
                                   // them at base, which would make durations incomparable.
                                   "--clock-control", "none", "--import-source", "no"};
  if (metrics_set == "full") {
    argv.insert(argv.end(), {"--set", "full"});
  } else {
    for (const std::string& s : basic_sections()) argv.insert(argv.end(), {"--section", s});
  }
  argv.insert(argv.end(), {"--metrics", kExtraMetrics, "-f", "-o", report_base});
  argv.insert(argv.end(), program_argv.begin(), program_argv.end());
  return argv;
}

std::vector<std::string> profiled_run_argv(const std::string& self, const Target& target,
                                           const Case& c, const Options& options,
                                           const std::string& out_dir) {
  std::vector<std::string> argv = {self,
                                   "run",
                                   "--targets",
                                   target.name(),
                                   "--profiled-launch",
                                   "--out",
                                   out_dir,
                                   "--batch",
                                   std::to_string(c.batch),
                                   "--heads",
                                   std::to_string(c.heads_q),
                                   "--heads-kv",
                                   std::to_string(c.heads_kv),
                                   "--seqlen",
                                   std::to_string(c.seqlen_q),
                                   "--seqlen-k",
                                   std::to_string(c.seqlen_k),
                                   "--head-dim",
                                   std::to_string(c.head_dim),
                                   "--causal",
                                   c.causal ? "1" : "0",
                                   "--dtype",
                                   c.dtype};
  if (c.window_left >= 0) argv.insert(argv.end(), {"--window", std::to_string(c.window_left)});
  if (options.knobs.backend) argv.insert(argv.end(), {"--backend", *options.knobs.backend});
  for (const std::string& spec : options.target_extra_specs) {
    if (spec.rfind(target.name() + "=", 0) == 0) {
      argv.insert(argv.end(), {"--target-extra-arg", spec});
    }
  }
  return argv;
}

bool run_profiles(const Options& options, const std::string& self, const std::string& out_dir,
                  ProfileRecord* record, bool* ncu_missing, std::string* error) {
  *ncu_missing = false;
  const std::string ncu = find_program(options.ncu);
  if (ncu.empty()) {
    *ncu_missing = true;
    *error = "Nsight Compute (" + options.ncu +
             ") not found; install it (the CUDA toolkit's nsight-compute package) and put ncu on "
             "PATH, or pass --ncu /path/to/ncu";
    return false;
  }
  const fs::path dir = fs::path(out_dir) / "ncu";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create " + dir.string() + ": " + ec.message();
    return false;
  }
  size_t total = 0;
  for (const Target& t : options.targets)
    total += cases_for(t, options.profile, options.knobs).size();
  size_t done = 0;
  for (const Target& t : options.targets) {
    for (const Case& c : cases_for(t, options.profile, options.knobs)) {
      const std::string name = slug(t.name(), c);
      ProfileEntry e;
      e.target = t.name();
      e.c = c;
      e.status = "error";
      const fs::path base = dir / name;
      e.report = base.string() + ".ncu-rep";
      std::printf("[%3zu/%zu] ncu %s  %s\n", ++done, total, t.name().c_str(), c.describe().c_str());
      std::fflush(stdout);
      const std::vector<std::string> argv =
          ncu_argv(ncu, options.metrics_set, base.string(),
                   profiled_run_argv(self, t, c, options, (dir / (name + ".run")).string()));
      const fs::path log = dir / (name + ".log");
      const CommandResult profiled = run_command(argv, log.string(), log.string() + ".err");
      read_run_result(dir / (name + ".run") / "results.json", t, &e, &record->device);
      if (!profiled.started) {
        e.reason = profiled.error;
      } else if (!fs::exists(e.report)) {
        // A SKIPPED or FAILED run launches nothing to profile; it keeps its own status.
        if (e.status == "ok") e.status = "error";
        if (e.reason.empty()) {
          // ncu prints its own errors (==ERROR== ...) on stdout, the run's on stderr.
          std::string why = tail(log.string() + ".err", 3);
          if (why.empty()) why = tail(log, 3);
          e.reason =
              "ncu exited " + std::to_string(profiled.exit_code) + " without a report: " + why;
        }
      } else {
        const fs::path csv = dir / (name + ".csv");
        const CommandResult imported =
            run_command({ncu, "--import", e.report, "--csv", "--page", "raw"}, csv.string(),
                        csv.string() + ".err");
        std::string text, parse_error;
        std::vector<NcuRow> rows;
        if (imported.exit_code != 0 || !read_text(csv, &text) ||
            !parse_ncu_raw_csv(text, &rows, &parse_error)) {
          e.status = "error";
          e.reason = "ncu --import failed: " +
                     (parse_error.empty() ? tail(csv.string() + ".err", 3) : parse_error);
        } else {
          for (const NcuRow& row : rows) e.kernels.push_back(kernel_profile(row));
          if (e.kernels.empty() && e.status == "ok") {
            e.status = "error";
            e.reason = "no kernel ran in the NVTX range " + std::string(kProfiledLaunchRange);
          }
        }
      }
      std::printf("          %s%s%s: %zu kernel(s)\n", e.status.c_str(),
                  e.reason.empty() ? "" : " ", e.reason.c_str(), e.kernels.size());
      record->entries.push_back(std::move(e));
    }
  }
  return true;
}

bool check_profile_thresholds(const Options& options, const std::string& root,
                              ProfileRecord* record, std::string* error) {
  record->checked = true;
  record->threshold_files.clear();
  for (ProfileEntry& e : record->entries) {
    std::vector<Target> targets;
    if (!select_targets(e.target, &targets, error)) return false;
    const Chapter& chapter = *targets.front().chapter;
    if (options.expectations.empty() && chapter.expectations[0] == '\0') continue;
    const std::string path = options.expectations.empty()
                                 ? (fs::path(root) / chapter.expectations).string()
                                 : options.expectations;
    std::string text, parse_error;
    Json json;
    if (!read_text(path, &text)) {
      *error = "no expectations file " + path + " (pass --expectations FILE or --labs-root DIR)";
      return false;
    }
    if (!parse_json(text, &json, &parse_error)) {
      *error = path + ": " + parse_error;
      return false;
    }
    if (std::find(record->threshold_files.begin(), record->threshold_files.end(), path) ==
        record->threshold_files.end()) {
      record->threshold_files.push_back(path);
    }
    const Json* targets_json = find_member(json, "targets");
    const Json* spec = targets_json == nullptr ? nullptr : find_member(*targets_json, e.target);
    const Json* profile = spec == nullptr ? nullptr : find_member(*spec, "profile");
    // A provider that rejects the case has nothing to hold to a bound.
    if (profile == nullptr || profile->is_null() || e.status == "SKIPPED") continue;
    std::vector<ProfileBound> bounds;
    if (!read_profile_thresholds(*profile, e.c.label(), path + ": " + e.target, &bounds, error)) {
      return false;
    }
    const KernelProfile* k = main_kernel(e.kernels);
    e.verdicts = check_thresholds(k != nullptr ? *k : KernelProfile{}, bounds);
  }
  return true;
}

}  // namespace flashcore::bench
