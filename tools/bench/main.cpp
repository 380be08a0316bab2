// flashcore-bench: list, run and check the lab's targets (see --help and docs/lab.md).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "build_commit.hpp"
#include "cli.hpp"
#include "expectations.hpp"
#include "flashcore/attention.hpp"
#include "lab_report.hpp"
#include "profile_command.hpp"
#include "report_json.hpp"
#include "report_markdown.hpp"
#include "robust_runner.hpp"
#include "runner.hpp"
#include "tune_runner.hpp"

namespace fs = std::filesystem;
using namespace flashcore::bench;

namespace {

enum ExitCode {
  kExitOk = 0,
  kExitFailed = 1,
  kExitUsage = 2,
  kExitRegressed = 3,
  kExitNoDevice = 4,
  kExitNoProfiler = 5
};

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "flashcore-bench: error: %s\n", message.c_str());
  return code;
}

bool read_file(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *text = s.str();
  return true;
}

bool write_file(const fs::path& path, const std::string& text, std::string* error) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) *error = "cannot write " + path.string();
  return static_cast<bool>(out);
}

std::string utc_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, &tm);
  return buf;
}

// The artifact folder: --out, else lab-out/<UTC timestamp>; created.
bool make_out_dir(const Options& options, fs::path* out, std::string* error) {
  *out = options.out_dir.empty() ? fs::path("lab-out") / utc_now("%Y%m%d-%H%M%S")
                                 : fs::path(options.out_dir);
  std::error_code ec;
  fs::create_directories(*out, ec);
  if (ec) *error = "cannot create " + out->string() + ": " + ec.message();
  return !ec;
}

std::string repository_root(const Options& options) {
  return options.labs_root.empty() ? FLASHCORE_BENCH_SOURCE_DIR : options.labs_root;
}

// Checks record->results against the chapters' expectations files (or one explicit file).
bool check_record(const Options& options, RunRecord* record, std::string* error) {
  const std::string root = repository_root(options);
  std::vector<std::string> files;
  if (!options.expectations.empty()) {
    files.push_back(options.expectations);
  } else {
    for (const Result& r : record->results) {
      const Chapter* chapter = find_chapter(r.chapter);
      if (chapter == nullptr || chapter->expectations[0] == '\0') continue;
      const std::string path = (fs::path(root) / chapter->expectations).string();
      if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
    }
  }
  record->expectations_files = files;
  record->regressions.clear();
  for (const std::string& path : files) {
    std::string text;
    if (!read_file(path, &text)) {
      *error = "no expectations file " + path + " (pass --expectations FILE or --labs-root DIR)";
      return false;
    }
    Json expectations;
    std::string parse_error;
    if (!parse_json(text, &expectations, &parse_error)) {
      *error = path + ": " + parse_error;
      return false;
    }
    if (!check_expectations(record->results, expectations, path, &record->regressions, error)) {
      return false;
    }
  }
  // Only now: a report must not say PASS for expectations it could not read.
  record->expectations_checked = true;
  return true;
}

void print_regressions(const RunRecord& record) {
  if (record.regressions.empty()) {
    std::printf("expectations: PASS\n");
    return;
  }
  std::printf("expectations: %zu regression(s)\n", record.regressions.size());
  for (const std::string& r : record.regressions) std::printf("  REGRESSION %s\n", r.c_str());
}

int run_check(const Options& options) {
  std::string text, error;
  if (!read_file(options.results, &text)) return fail(kExitUsage, "cannot read " + options.results);
  Json json;
  if (!parse_json(text, &json, &error)) return fail(kExitUsage, options.results + ": " + error);
  RunRecord record;
  if (!from_json(json, &record, &error)) return fail(kExitUsage, options.results + ": " + error);
  if (!check_record(options, &record, &error)) return fail(kExitUsage, error);
  print_regressions(record);
  return record.regressions.empty() ? kExitOk : kExitRegressed;
}

int run_targets(const Options& options, const Knobs& knobs, const std::string& command_line) {
  RunRecord record;
  record.created_utc = utc_now("%Y-%m-%dT%H:%M:%SZ");
  record.command_line = command_line;
  record.profile = profile_name(options.profile);
  record.git_commit = FLASHCORE_BUILD_COMMIT;  // the code measured, not the checkout beside it
  for (const auto& knob : knobs.describe()) record.knobs.push_back(knob);
  std::string error;
  if (!run_lab(options, knobs, &record, &error)) {
    return fail(error.rfind("no CUDA device", 0) == 0 ? kExitNoDevice : kExitFailed, error);
  }
  derive_metrics(&record.results, record.gemm_tflops, record.copy_gbps);
  // A missing or broken expectations file must not cost the measurements: the artifacts are
  // written first, then the run fails.
  std::string expectations_error;
  const bool expectations_read =
      !options.check_expectations || check_record(options, &record, &expectations_error);

  const fs::path out = options.out_dir.empty() ? fs::path("lab-out") / utc_now("%Y%m%d-%H%M%S")
                                               : fs::path(options.out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return fail(kExitFailed, "cannot create " + out.string() + ": " + ec.message());
  if (!write_file(out / "results.json", dump_json(to_json(record)), &error) ||
      !write_file(out / "report.md", render_markdown(record), &error)) {
    return fail(kExitFailed, error);
  }
  if (!expectations_read) {
    return fail(kExitUsage, expectations_error + "; artifacts were written to " + out.string());
  }
  size_t failed = 0, skipped = 0;
  for (const Result& r : record.results) {
    failed += r.outcome == Outcome::kFailed;
    skipped += r.outcome == Outcome::kSkipped;
  }
  std::printf(
      "%zu results: %zu FAILED, %zu SKIPPED\nartifacts: %s/{results.json,report.md} (plots: "
      "python3 bench/plot.py on results.json)\n",
      record.results.size(), failed, skipped, out.string().c_str());
  if (record.expectations_checked) print_regressions(record);
  if (!record.regressions.empty()) return kExitRegressed;
  return failed > 0 ? kExitFailed : kExitOk;
}

int run_profile_command(const Options& options, const std::string& command_line) {
  ProfileRecord record;
  record.created_utc = utc_now("%Y-%m-%dT%H:%M:%SZ");
  record.command_line = command_line;
  record.git_commit = FLASHCORE_BUILD_COMMIT;
  record.metrics_set = options.metrics_set;
  fs::path out;
  std::string error;
  bool ncu_missing = false;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return fail(kExitFailed, "cannot find this program's path: " + ec.message());
  if (!make_out_dir(options, &out, &error)) return fail(kExitFailed, error);
  if (!run_profiles(options, self.string(), out.string(), &record, &ncu_missing, &error)) {
    return fail(ncu_missing ? kExitNoProfiler : kExitFailed, error);
  }
  std::string check_error;
  const bool checked =
      !options.check_profile ||
      check_profile_thresholds(options, repository_root(options), &record, &check_error);
  if (!write_file(out / "profile.json", dump_json(to_json(record)), &error) ||
      !write_file(out / "profile.md", render_profile_markdown(record), &error)) {
    return fail(kExitFailed, error);
  }
  if (!checked)
    return fail(kExitUsage, check_error + "; artifacts were written to " + out.string());
  size_t failed = 0;
  for (const ProfileEntry& e : record.entries) failed += e.status != "ok" && e.status != "SKIPPED";
  std::printf(
      "%zu profiles, %zu without kernels; artifacts: %s/{profile.json,profile.md}, ncu "
      "reports in %s/ncu\n",
      record.entries.size(), failed, out.string().c_str(), out.string().c_str());
  const std::vector<std::string> misses = profile_misses(record);
  if (options.check_profile) {
    std::printf("thresholds: %s\n", misses.empty() ? "PASS" : "MISSED");
    for (const std::string& m : misses) std::printf("  MISS %s\n", m.c_str());
  }
  if (!misses.empty()) return kExitRegressed;
  return failed > 0 ? kExitFailed : kExitOk;
}

int run_robust_command(const Options& options, const std::string& command_line) {
  RobustRecord record;
  record.created_utc = utc_now("%Y-%m-%dT%H:%M:%SZ");
  record.command_line = command_line;
  record.git_commit = FLASHCORE_BUILD_COMMIT;
  record.grid = options.quick ? "quick" : "default";
  std::string error;
  if (!options.resume.empty()) {
    std::string text;
    Json json;
    RobustRecord earlier;
    if (!read_file(options.resume, &text)) return fail(kExitUsage, "cannot read " + options.resume);
    if (!parse_json(text, &json, &error) || !from_json(json, &earlier, &error) ||
        !resume_from(earlier, record.grid, options.seed, &record, &error)) {
      return fail(kExitUsage, options.resume + ": " + error);
    }
  }
  if (!run_robust(options, &record, &error)) {
    return fail(error.rfind("no CUDA device", 0) == 0 ? kExitNoDevice : kExitFailed, error);
  }
  fs::path out;
  if (!make_out_dir(options, &out, &error) ||
      !write_file(out / "robust.json", dump_json(to_json(record)), &error) ||
      !write_file(out / "robust.md", render_robust_markdown(record), &error)) {
    return fail(kExitFailed, error);
  }
  const RobustCounts c = count(record);
  std::printf(
      "%zu cells (%zu of the grid's not run), %zu results: %zu passed, %zu FAILED (%zu NaN/Inf), "
      "%zu rejected, %zu skipped%s\nartifacts: %s/{robust.json,robust.md}\n",
      c.cells, missing_cells(record).size(), record.results.size(), c.passed, c.failed,
      c.non_finite, c.rejected, c.skipped, record.interrupted ? " (interrupted)" : "",
      out.string().c_str());
  return robust_exit_code(record);
}

int run_report_command(const Options& options) {
  ReportInputs inputs;
  std::string error;
  if (!load_report_inputs(options.inputs, &inputs, &error)) return fail(kExitUsage, error);
  fs::path out;
  if (!make_out_dir(options, &out, &error)) return fail(kExitFailed, error);
  const std::string plot_script =
      (fs::path(repository_root(options)) / "bench" / "plot.py").string();
  const std::vector<PlotSet> plots = draw_plots(inputs, options.python, plot_script, out.string());
  const Document doc = build_report(inputs, plots);
  if (!write_file(out / "report.md", render_markdown(doc), &error) ||
      !write_file(out / "report.html", render_html(doc, "flashcore report", out.string()),
                  &error)) {
    return fail(kExitFailed, error);
  }
  for (const PlotSet& p : plots) {
    if (!p.unavailable.empty()) {
      std::fprintf(stderr, "flashcore-bench: no plots of %s: %s\n", p.source.c_str(),
                   p.unavailable.c_str());
    }
  }
  std::printf("report: %s/report.md, %s/report.html\n", out.string().c_str(), out.string().c_str());
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  const BackendCheck is_backend = [](const std::string& name) {
    flashcore::Backend backend;
    return flashcore::parse_backend(name, &backend);
  };
  Options options;
  std::string error;
  if (!parse_args(argc, argv, is_backend, &options, &error)) return fail(kExitUsage, error);
  switch (options.command) {
    case Command::kHelp:
      std::fputs(options.help.c_str(), stdout);
      return kExitOk;
    case Command::kListTargets: {
      std::string text;
      if (!list_targets(options.chapter, &text, &error)) return fail(kExitUsage, error);
      std::fputs(text.c_str(), stdout);
      return kExitOk;
    }
    case Command::kCheck:
      return run_check(options);
    case Command::kReport:
      return run_report_command(options);
    case Command::kTune: {
      std::string command_line;
      for (int i = 0; i < argc; ++i) command_line += (i > 0 ? " " : "") + std::string(argv[i]);
      return run_tune(options, repository_root(options), FLASHCORE_BUILD_COMMIT, command_line);
    }
    case Command::kRun:
    case Command::kProfile:
    case Command::kRobust:
      break;
  }
  if (!check_knobs_for_targets(options.knobs, options.targets, &error)) {
    return fail(kExitUsage, error);
  }
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i > 0 ? " " : "") + std::string(argv[i]);
  if (options.command == Command::kProfile) return run_profile_command(options, command_line);
  if (options.command == Command::kRobust) return run_robust_command(options, command_line);
  return run_targets(options, options.knobs, command_line);
}
