#include "profile_report.hpp"

#include <sstream>

#include "number_format.hpp"
#include "report_json.hpp"

namespace flashcore::bench {
namespace {

std::string verdict_line(const ProfileEntry& e, const ThresholdVerdict& v) {
  const std::string where = e.target + " [" + e.c.label() + "]: " + v.key + " ";
  if (!v.value)
    return where + "not collected (bound " + (v.is_min ? ">= " : "<= ") +
           significant_digits(v.bound, 4) + ")";
  return where + significant_digits(*v.value, 4) + (v.is_min ? " < min " : " > max ") +
         significant_digits(v.bound, 4) + " (" + v.metric + ")";
}

Json kernel_to_json(const KernelProfile& k) {
  Json j = Json::object();
  j["name"] = k.name;
  j["grid"] = k.grid;
  j["block"] = k.block;
  Json metrics = Json::object();
  for (const ProfileMetric& m : profile_metrics()) {
    const auto it = k.metrics.find(m.key);
    if (it == k.metrics.end()) {
      metrics[m.key] = Json();
      continue;
    }
    Json v = Json::object();
    v["value"] = it->second.value;
    v["metric"] = it->second.metric;
    metrics[m.key] = v;
  }
  j["metrics"] = metrics;
  Json stalls = Json::array();
  for (const StallReason& s : k.stalls) {
    Json x = Json::object();
    x["reason"] = s.reason;
    x["cycles_per_issue"] = s.cycles_per_issue;
    x["metric"] = s.metric;
    stalls.push_back(x);
  }
  j["top_stalls"] = stalls;
  return j;
}

KernelProfile kernel_from_json(const Json& j) {
  KernelProfile k;
  k.name = string_or(j, "name", "");
  k.grid = string_or(j, "grid", "");
  k.block = string_or(j, "block", "");
  if (const Json* metrics = find_member(j, "metrics"); metrics != nullptr && metrics->is_object()) {
    for (const auto& [key, v] : metrics->items()) {
      if (v.is_object() && find_member(v, "value") != nullptr) {
        k.metrics[key] = {number_or(v, "value", 0), string_or(v, "metric", "")};
      }
    }
  }
  if (const Json* stalls = find_member(j, "top_stalls"); stalls != nullptr && stalls->is_array()) {
    for (const Json& s : *stalls) {
      k.stalls.push_back({string_or(s, "reason", ""), number_or(s, "cycles_per_issue", 0),
                          string_or(s, "metric", "")});
    }
  }
  return k;
}

std::string cell(const KernelProfile& k, const char* key) {
  const auto it = k.metrics.find(key);
  if (it == k.metrics.end()) return "-";
  return format_number(it->second.value >= 1000 ? "%.0f" : "%.3g", it->second.value);
}

}  // namespace

std::vector<std::string> profile_misses(const ProfileRecord& record) {
  std::vector<std::string> misses;
  for (const ProfileEntry& e : record.entries) {
    for (const ThresholdVerdict& v : e.verdicts) {
      if (!v.passed) misses.push_back(verdict_line(e, v));
    }
  }
  return misses;
}

Json to_json(const ProfileRecord& record) {
  Json j = Json::object();
  j["schema"] = kProfileSchema;
  j["schema_version"] = kProfileSchemaVersion;
  j["created_utc"] = record.created_utc;
  j["command_line"] = record.command_line;
  j["git_commit"] = record.git_commit;
  j["metrics_set"] = record.metrics_set;
  j["device"] = record.device;
  Json entries = Json::array();
  for (const ProfileEntry& e : record.entries) {
    Json x = Json::object();
    x["target"] = e.target;
    x["case"] = case_to_json(e.c);
    x["provider"] = e.provider;
    x["status"] = e.status;
    x["reason"] = e.reason;
    x["report"] = e.report;
    Json kernels = Json::array();
    for (const KernelProfile& k : e.kernels) kernels.push_back(kernel_to_json(k));
    x["kernels"] = kernels;
    Json verdicts = Json::array();
    for (const ThresholdVerdict& v : e.verdicts) {
      Json t = Json::object();
      t["metric_key"] = v.key;
      t["op"] = v.is_min ? ">=" : "<=";
      t["bound"] = v.bound;
      t["value"] = v.value ? Json(*v.value) : Json();
      t["metric"] = v.metric;
      t["passed"] = v.passed;
      verdicts.push_back(t);
    }
    x["thresholds"] = verdicts;
    entries.push_back(x);
  }
  j["entries"] = entries;
  Json check = Json::object();
  check["checked"] = record.checked;
  check["files"] = record.threshold_files;
  check["misses"] = profile_misses(record);
  j["check"] = check;
  return j;
}

bool from_json(const Json& j, ProfileRecord* record, std::string* error) {
  *record = ProfileRecord{};
  if (string_or(j, "schema", "") != kProfileSchema ||
      integer_or(j, "schema_version", 0) != kProfileSchemaVersion) {
    *error = std::string("not a profile file (want schema '") + kProfileSchema + "' v1)";
    return false;
  }
  record->created_utc = string_or(j, "created_utc", "");
  record->command_line = string_or(j, "command_line", "");
  record->git_commit = string_or(j, "git_commit", "");
  record->metrics_set = string_or(j, "metrics_set", "");
  record->device = string_or(j, "device", "");
  if (const Json* check = find_member(j, "check")) {
    record->checked = bool_or(*check, "checked", false);
    if (const Json* files = find_member(*check, "files"); files != nullptr && files->is_array()) {
      for (const Json& f : *files)
        record->threshold_files.push_back(f.is_string() ? f.get<std::string>() : "");
    }
  }
  const Json* entries = find_member(j, "entries");
  if (entries == nullptr || !entries->is_array()) {
    *error = "profile file has no 'entries' array";
    return false;
  }
  for (const Json& x : *entries) {
    ProfileEntry e;
    e.target = string_or(x, "target", "");
    if (const Json* c = find_member(x, "case"); c != nullptr && c->is_object())
      e.c = case_from_json(*c);
    e.provider = string_or(x, "provider", "");
    e.status = string_or(x, "status", "");
    e.reason = string_or(x, "reason", "");
    e.report = string_or(x, "report", "");
    if (const Json* kernels = find_member(x, "kernels");
        kernels != nullptr && kernels->is_array()) {
      for (const Json& k : *kernels) e.kernels.push_back(kernel_from_json(k));
    }
    if (const Json* ts = find_member(x, "thresholds"); ts != nullptr && ts->is_array()) {
      for (const Json& t : *ts) {
        ThresholdVerdict v;
        v.key = string_or(t, "metric_key", "");
        v.is_min = string_or(t, "op", ">=") == ">=";
        v.bound = number_or(t, "bound", 0);
        if (const Json* value = find_member(t, "value"); value != nullptr && value->is_number()) {
          v.value = value->get<double>();
        }
        v.metric = string_or(t, "metric", "");
        v.passed = bool_or(t, "passed", false);
        e.verdicts.push_back(v);
      }
    }
    record->entries.push_back(std::move(e));
  }
  return true;
}

std::string render_profile_markdown(const ProfileRecord& record) {
  std::ostringstream out;
  out << "# flashcore-bench profile\n\n"
      << "- created: " << record.created_utc << "\n- device: " << record.device
      << "\n- git commit: " << record.git_commit << "\n- metrics set: " << record.metrics_set
      << "\n- command: `" << record.command_line << "`\n\n"
      << "One launch per target and case, after the parity gate and the timed launches, in the "
         "NVTX range `profiled_launch` (ncu --nvtx --nvtx-include profiled_launch/, clocks left "
         "to the GPU as in the lab's timings).\n\n";
  out << "| target | case | provider | kernel | grid | block |";
  for (const ProfileMetric& m : profile_metrics()) out << " " << m.label << " |";
  out << " top stalls (cycles per issue) |\n|---|---|---|---|---|---|";
  for (size_t i = 0; i < profile_metrics().size(); ++i) out << "---|";
  out << "---|\n";
  for (const ProfileEntry& e : record.entries) {
    if (e.kernels.empty()) {
      out << "| " << e.target << " | " << e.c.describe() << " | " << e.provider << " | **"
          << e.status << "**: " << e.reason << " |||";
      for (size_t i = 0; i < profile_metrics().size(); ++i) out << "|";
      out << "|\n";
      continue;
    }
    for (const KernelProfile& k : e.kernels) {
      out << "| " << e.target << " | " << e.c.describe() << " | " << e.provider << " | `" << k.name
          << "` | " << k.grid << " | " << k.block << " |";
      for (const ProfileMetric& m : profile_metrics()) out << " " << cell(k, m.key) << " |";
      std::string stalls;
      for (const StallReason& s : k.stalls) {
        stalls += (stalls.empty() ? "" : ", ") + s.reason + " " +
                  significant_digits(s.cycles_per_issue, 4);
      }
      out << " " << (stalls.empty() ? "-" : stalls) << " |\n";
    }
  }
  out << "\n## Metrics\n\n| column | what | ncu metric (as found in this run) |\n|---|---|---|\n";
  for (const ProfileMetric& m : profile_metrics()) {
    std::string names;
    for (const ProfileEntry& e : record.entries) {
      for (const KernelProfile& k : e.kernels) {
        const auto it = k.metrics.find(m.key);
        if (it != k.metrics.end() && names.find(it->second.metric) == std::string::npos) {
          names += (names.empty() ? "`" : ", `") + it->second.metric + "`";
        }
      }
    }
    out << "| " << m.label << " | " << m.what << " | " << (names.empty() ? "not collected" : names)
        << " |\n";
  }
  out << "| top stalls | warp stall reasons, cycles per issued instruction | "
         "`smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio` |\n";

  out << "\n## Thresholds\n\n";
  if (!record.checked) {
    out << "Not checked (run with --check).\n";
    return out.str();
  }
  out << "Files:";
  for (const std::string& f : record.threshold_files) out << " `" << f << "`";
  out << "\n\n| target | case | metric | bound | value | verdict |\n|---|---|---|---|---|---|\n";
  for (const ProfileEntry& e : record.entries) {
    for (const ThresholdVerdict& v : e.verdicts) {
      out << "| " << e.target << " | " << e.c.label() << " | " << v.key << " | "
          << (v.is_min ? ">= " : "<= ") << significant_digits(v.bound, 4) << " | "
          << (v.value ? significant_digits(*v.value, 4) : "not collected") << " | "
          << (v.passed ? "PASS" : "**MISS**") << " |\n";
    }
  }
  const std::vector<std::string> misses = profile_misses(record);
  out << "\n" << (misses.empty() ? "**PASS**: every threshold held.\n" : "**FAIL**: ");
  if (!misses.empty()) out << misses.size() << " miss(es).\n";
  return out.str();
}

}  // namespace flashcore::bench
