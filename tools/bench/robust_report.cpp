#include "robust_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "number_format.hpp"
#include "report_json.hpp"

namespace flashcore::bench {
namespace {

// Sort rank of a status: lower is worse.
int rank(const RobustResult& r) {
  switch (r.status) {
    case RobustStatus::kFailed:
      return r.stats.nan_count + r.stats.inf_count > 0 ? 0 : 1;
    case RobustStatus::kPass:
      return 2;
    case RobustStatus::kSkipped:
      return 3;
    case RobustStatus::kRejected:
      return 4;
  }
  return 5;
}

double badness(const RobustResult& r) {
  return r.tolerance > 0 ? r.stats.rel_l2 / r.tolerance : r.stats.rel_l2;
}

bool parse_status(const std::string& name, RobustStatus* s) {
  for (const RobustStatus x : {RobustStatus::kPass, RobustStatus::kFailed, RobustStatus::kRejected,
                               RobustStatus::kSkipped}) {
    if (name == robust_status_name(x)) {
      *s = x;
      return true;
    }
  }
  return false;
}

bool parse_mask(const std::string& name, MaskMode* m) {
  for (const MaskMode x : {MaskMode::kNone, MaskMode::kCausal, MaskMode::kWindow}) {
    if (name == mask_mode_name(x)) {
      *m = x;
      return true;
    }
  }
  return false;
}

std::string status_cell(const RobustResult& r) {
  switch (r.status) {
    case RobustStatus::kPass:
      return "pass";
    case RobustStatus::kFailed:
      return "**FAILED**" + (r.reason.empty() ? "" : ": " + r.reason);
    case RobustStatus::kRejected:
      return "rejected: " + r.reason;
    case RobustStatus::kSkipped:
      return "skipped: " + r.reason;
  }
  return "?";
}

// Which part of the grid ran: whole when nothing is missing, else the missing cells per shape,
// head dim and dtype.
void render_coverage(const RobustRecord& record, std::ostringstream& out) {
  const std::vector<RobustCase> missing = missing_cells(record);
  const size_t total = robust_grid(record.grid == "quick").size();
  out << "\nCoverage: " << total - missing.size() << " of the " << record.grid << " grid's "
      << total << " cells ran";
  if (missing.empty()) {
    out << " (all).\n";
    return;
  }
  out << "; these " << missing.size()
      << " did not:\n\n| shape | head dim | dtype | cells not run |\n"
      << "|---|---|---|---|\n";
  std::vector<std::pair<std::string, size_t>> groups;  // grid order
  for (const RobustCase& cell : missing) {
    const std::string key =
        cell.shape + " | " + std::to_string(cell.c.head_dim) + " | " + cell.c.dtype;
    if (groups.empty() || groups.back().first != key) groups.emplace_back(key, 0);
    ++groups.back().second;
  }
  for (const auto& [key, cells] : groups) out << "| " << key << " | " << cells << " |\n";
}

}  // namespace

const char* robust_status_name(RobustStatus s) {
  switch (s) {
    case RobustStatus::kPass:
      return "pass";
    case RobustStatus::kFailed:
      return "FAILED";
    case RobustStatus::kRejected:
      return "rejected";
    case RobustStatus::kSkipped:
      return "skipped";
  }
  return "?";
}

bool robust_passes(const ErrorStats& stats, double tolerance) {
  return stats.nan_count == 0 && stats.inf_count == 0 && stats.rel_l2 <= tolerance;
}

void sort_worst_first(std::vector<RobustResult>* results) {
  std::stable_sort(results->begin(), results->end(),
                   [](const RobustResult& a, const RobustResult& b) {
                     if (rank(a) != rank(b)) return rank(a) < rank(b);
                     return badness(a) > badness(b);
                   });
}

RobustCounts count(const RobustRecord& record) {
  RobustCounts c;
  std::map<std::string, bool> cells;
  for (const RobustResult& r : record.results) {
    cells[r.cell.name()] = true;
    c.passed += r.status == RobustStatus::kPass;
    c.failed += r.status == RobustStatus::kFailed;
    c.rejected += r.status == RobustStatus::kRejected;
    c.skipped += r.status == RobustStatus::kSkipped;
    c.non_finite += r.stats.nan_count + r.stats.inf_count > 0;
  }
  c.cells = cells.size();
  return c;
}

int robust_exit_code(const RobustRecord& record) {
  return count(record).failed > 0 || record.interrupted ? 1 : 0;
}

std::vector<RobustCase> missing_cells(const RobustRecord& record) {
  std::set<std::string> ran;
  for (const RobustResult& r : record.results) ran.insert(r.cell.name());
  std::vector<RobustCase> missing;
  for (const RobustCase& cell : robust_grid(record.grid == "quick")) {
    if (ran.count(cell.name()) == 0) missing.push_back(cell);
  }
  return missing;
}

bool resume_from(const RobustRecord& earlier, const std::string& grid, uint64_t seed,
                 RobustRecord* record, std::string* error) {
  if (earlier.grid != grid) {
    *error = "--resume: the earlier run is of the '" + earlier.grid + "' grid, this one of the '" +
             grid + "' grid";
    return false;
  }
  if (seed != 0 && seed != earlier.seed) {
    *error = "--resume: --seed " + std::to_string(seed) + " differs from the earlier run's " +
             std::to_string(earlier.seed) + " (its inputs would not be this run's)";
    return false;
  }
  record->seed = earlier.seed;
  record->results = earlier.results;
  record->resumed_inputs =
      earlier.inputs == record->inputs ? earlier.resumed_inputs : earlier.inputs;
  record->command_line += " (resumes the run of " + earlier.created_utc + ", commit " +
                          earlier.git_commit + ": " + earlier.command_line + ")";
  return true;
}

Json to_json(const RobustRecord& record) {
  Json j = Json::object();
  j["schema"] = kRobustSchema;
  j["schema_version"] = kRobustSchemaVersion;
  j["created_utc"] = record.created_utc;
  j["command_line"] = record.command_line;
  j["git_commit"] = record.git_commit;
  j["device"] = record.device;
  j["grid"] = record.grid;
  j["seed"] = record.seed;
  j["inputs"] = record.inputs;
  j["resumed_inputs"] = record.resumed_inputs;
  j["interrupted"] = record.interrupted;
  j["interruption"] = record.interruption;
  const RobustCounts c = count(record);
  Json summary = Json::object();
  summary["cells"] = c.cells;
  summary["results"] = record.results.size();
  summary["passed"] = c.passed;
  summary["failed"] = c.failed;
  summary["rejected"] = c.rejected;
  summary["skipped"] = c.skipped;
  summary["non_finite"] = c.non_finite;
  j["summary"] = summary;
  Json results = Json::array();
  for (const RobustResult& r : record.results) {
    Json x = Json::object();
    x["cell"] = r.cell.name();
    x["shape"] = r.cell.shape;
    x["distribution"] = distribution_name(r.cell.distribution);
    x["mask"] = mask_mode_name(r.cell.mask);
    x["case"] = case_to_json(r.cell.c);
    x["provider"] = r.provider;
    x["status"] = robust_status_name(r.status);
    x["reason"] = r.reason;
    x["reference"] = r.reference;
    x["tolerance"] = r.tolerance;
    if (r.ran) {
      Json s = Json::object();
      s["rel_l2"] = r.stats.rel_l2;
      s["max_abs"] = r.stats.max_abs;
      s["mean_abs"] = r.stats.mean_abs;
      s["max_ref"] = r.stats.max_ref;
      s["nan_count"] = r.stats.nan_count;
      s["inf_count"] = r.stats.inf_count;
      x["error"] = s;
    } else {
      x["error"] = Json();
    }
    results.push_back(x);
  }
  j["results"] = results;
  return j;
}

bool from_json(const Json& j, RobustRecord* record, std::string* error) {
  *record = RobustRecord{};
  if (string_or(j, "schema", "") != kRobustSchema ||
      integer_or(j, "schema_version", 0) != kRobustSchemaVersion) {
    *error = std::string("not a robustness file (want schema '") + kRobustSchema + "' v1)";
    return false;
  }
  record->created_utc = string_or(j, "created_utc", "");
  record->command_line = string_or(j, "command_line", "");
  record->git_commit = string_or(j, "git_commit", "");
  record->device = string_or(j, "device", "");
  record->grid = string_or(j, "grid", "");
  record->seed = static_cast<uint64_t>(integer_or(j, "seed", 0));
  // Files written before the chunked generator have no "inputs".
  record->inputs = string_or(j, "inputs", kSerialInputGenerator);
  record->resumed_inputs = string_or(j, "resumed_inputs", "");
  record->interrupted = bool_or(j, "interrupted", false);
  record->interruption = string_or(j, "interruption", "");
  const Json* results = find_member(j, "results");
  if (results == nullptr || !results->is_array()) {
    *error = "robustness file has no 'results' array";
    return false;
  }
  for (const Json& x : *results) {
    RobustResult r;
    r.cell.shape = string_or(x, "shape", "");
    const Json* c = find_member(x, "case");
    if (!parse_distribution(string_or(x, "distribution", ""), &r.cell.distribution) ||
        !parse_mask(string_or(x, "mask", ""), &r.cell.mask) ||
        !parse_status(string_or(x, "status", ""), &r.status) || c == nullptr || !c->is_object()) {
      *error = "robustness result '" + string_or(x, "cell", "?") +
               "' has an unknown distribution, mask or status, or no case";
      return false;
    }
    r.cell.c = case_from_json(*c);
    r.provider = string_or(x, "provider", "");
    r.reason = string_or(x, "reason", "");
    r.reference = string_or(x, "reference", "");
    r.tolerance = number_or(x, "tolerance", 0);
    if (const Json* s = find_member(x, "error"); s != nullptr && s->is_object()) {
      r.ran = true;
      r.stats.rel_l2 = number_or(*s, "rel_l2", 0);
      r.stats.max_abs = number_or(*s, "max_abs", 0);
      r.stats.mean_abs = number_or(*s, "mean_abs", 0);
      r.stats.max_ref = number_or(*s, "max_ref", 0);
      r.stats.nan_count = static_cast<size_t>(integer_or(*s, "nan_count", 0));
      r.stats.inf_count = static_cast<size_t>(integer_or(*s, "inf_count", 0));
    }
    record->results.push_back(std::move(r));
  }
  return true;
}

std::string render_robust_markdown(const RobustRecord& record) {
  std::vector<RobustResult> sorted = record.results;
  sort_worst_first(&sorted);
  const RobustCounts c = count(record);
  std::ostringstream out;
  out << "# flashcore-bench robustness suite\n\n"
      << "- created: " << record.created_utc << "\n- device: " << record.device
      << "\n- git commit: " << record.git_commit << "\n- grid: " << record.grid
      << "\n- seed: " << record.seed << " (`--seed " << record.seed << "` reproduces the inputs)"
      << "\n- inputs: " << record.inputs
      << (record.resumed_inputs.empty()
              ? std::string()
              : " (the cells kept from the resumed run: " + record.resumed_inputs +
                    "; a seed gives other inputs with each)")
      << "\n- command: `" << record.command_line << "`\n\n"
      << "**"
      << (c.failed > 0         ? "FAIL"
          : record.interrupted ? "INCOMPLETE"
                               : "PASS")
      << "**: " << c.cells << " cells x providers = " << record.results.size()
      << " results: " << c.passed << " passed, " << c.failed << " FAILED (" << c.non_finite
      << " with NaN/Inf), " << c.rejected << " rejected by their provider (reason given), "
      << c.skipped << " skipped.\n";
  if (record.interrupted) out << "\n**Interrupted**: " << record.interruption << "\n";
  render_coverage(record, out);
  out << "\nEach cell's output is compared with the float64 CPU reference (cpu-fp64) or the fp32 "
         "GPU oracle (gpu-fp32) on the same inputs; a result passes with no NaN/Inf and rel L2 "
         "<= the dtype's parity tolerance. Rows worst first (err/tol = rel L2 / tolerance).\n\n"
      << "| provider | shape | distribution | mask | case | status | reference | rel L2 | "
         "err/tol | max abs | max abs ref | NaN | Inf |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RobustResult& r : sorted) {
    out << "| " << r.provider << " | " << r.cell.shape << " | "
        << distribution_name(r.cell.distribution) << " | " << mask_mode_name(r.cell.mask) << " | "
        << r.cell.c.label() << " | " << status_cell(r) << " | "
        << (r.reference.empty() ? "-" : r.reference) << " | ";
    if (r.ran) {
      out << format_number("%.2e", r.stats.rel_l2) << " | "
          << format_number("%.2f", r.tolerance > 0 ? r.stats.rel_l2 / r.tolerance : 0) << " | "
          << format_number("%.3g", r.stats.max_abs) << " | "
          << format_number("%.3g", r.stats.max_ref) << " | " << r.stats.nan_count << " | "
          << r.stats.inf_count << " |\n";
    } else {
      out << "- | - | - | - | - | - |\n";
    }
  }
  return out.str();
}

}  // namespace flashcore::bench
