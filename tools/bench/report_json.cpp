#include "report_json.hpp"

namespace flashcore::bench {
namespace {

Json optional_number(const std::optional<double>& v) { return v ? Json(*v) : Json(); }

Json pairs_to_json(const std::vector<std::pair<std::string, std::string>>& pairs) {
  Json object = Json::object();
  for (const auto& [key, value] : pairs) object[key] = value;
  return object;
}

Json result_to_json(const Result& r) {
  Json j = Json::object();
  j["target"] = r.target();
  j["chapter"] = r.chapter;
  j["workload"] = r.workload;
  j["role"] = r.role;
  j["requested_backend"] = r.requested_backend;
  j["provider"] = r.provider;
  j["status"] = outcome_name(r.outcome);
  j["reason"] = r.reason;
  j["case"] = case_to_json(r.c);
  if (r.parity) {
    Json p = Json::object();
    p["reference"] = r.parity->reference;
    p["rel_l2"] = r.parity->rel_l2;
    p["tolerance"] = r.parity->tolerance;
    p["has_nan"] = r.parity->has_nan;
    p["passed"] = r.parity->passed;
    j["parity"] = p;
  } else {
    j["parity"] = Json();
  }
  if (r.timing) {
    Json t = Json::object();
    t["method"] = r.timing->method;
    t["samples"] = r.timing->samples;
    t["launches_per_sample"] = r.timing->launches_per_sample;
    t["min_us"] = r.timing->min_us;
    t["p50_us"] = r.timing->p50_us;
    t["p90_us"] = r.timing->p90_us;
    t["mean_us"] = r.timing->mean_us;
    t["stdev_us"] = r.timing->stdev_us;
    j["timing"] = t;
  } else {
    j["timing"] = Json();
  }
  j["tflops"] = optional_number(r.tflops);
  j["gbps"] = optional_number(r.gbps);
  j["pct_of_gemm_ceiling"] = optional_number(r.pct_of_gemm_ceiling);
  j["pct_of_copy_ceiling"] = optional_number(r.pct_of_copy_ceiling);
  j["speedup_vs_baseline"] = optional_number(r.speedup_vs_baseline);
  j["ratio_vs_cudnn"] = optional_number(r.ratio_vs_cudnn);
  return j;
}

std::optional<double> read_optional(const Json& j, const char* key) {
  const Json* v = find_member(j, key);
  return v != nullptr && v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}

bool read_pairs(const Json* j, std::vector<std::pair<std::string, std::string>>* out) {
  if (j == nullptr || !j->is_object()) return false;
  for (const auto& [key, value] : j->items()) {
    out->emplace_back(key, value.is_string() ? value.get<std::string>() : dump_json(value, -1));
  }
  return true;
}

bool result_from_json(const Json& j, Result* r, std::string* error) {
  const Json* c = find_member(j, "case");
  if (!j.is_object() || c == nullptr || !c->is_object()) {
    *error = "a result has no 'case' object";
    return false;
  }
  r->chapter = string_or(j, "chapter", "");
  r->workload = string_or(j, "workload", "");
  r->role = string_or(j, "role", "");
  r->requested_backend = string_or(j, "requested_backend", "");
  r->provider = string_or(j, "provider", "");
  const std::string status = string_or(j, "status", "");
  if (status == "ok") {
    r->outcome = Outcome::kOk;
  } else if (status == "FAILED") {
    r->outcome = Outcome::kFailed;
  } else if (status == "SKIPPED") {
    r->outcome = Outcome::kSkipped;
  } else {
    *error = "result " + r->chapter + ":" + r->workload + " has status '" + status +
             "'; expected ok, FAILED or SKIPPED";
    return false;
  }
  r->reason = string_or(j, "reason", "");
  r->c = case_from_json(*c);
  if (const Json* p = find_member(j, "parity"); p != nullptr && p->is_object()) {
    Parity parity;
    parity.reference = string_or(*p, "reference", "");
    parity.rel_l2 = number_or(*p, "rel_l2", 0);
    parity.tolerance = number_or(*p, "tolerance", 0);
    parity.has_nan = bool_or(*p, "has_nan", false);
    parity.passed = bool_or(*p, "passed", false);
    r->parity = parity;
  }
  if (const Json* t = find_member(j, "timing"); t != nullptr && t->is_object()) {
    Summary s;
    s.method = string_or(*t, "method", "");
    s.samples = static_cast<int>(integer_or(*t, "samples", 0));
    s.launches_per_sample = static_cast<int>(integer_or(*t, "launches_per_sample", 0));
    s.min_us = number_or(*t, "min_us", 0);
    s.p50_us = number_or(*t, "p50_us", 0);
    s.p90_us = number_or(*t, "p90_us", 0);
    s.mean_us = number_or(*t, "mean_us", 0);
    s.stdev_us = number_or(*t, "stdev_us", 0);
    r->timing = s;
  }
  r->tflops = read_optional(j, "tflops");
  r->gbps = read_optional(j, "gbps");
  r->pct_of_gemm_ceiling = read_optional(j, "pct_of_gemm_ceiling");
  r->pct_of_copy_ceiling = read_optional(j, "pct_of_copy_ceiling");
  r->speedup_vs_baseline = read_optional(j, "speedup_vs_baseline");
  r->ratio_vs_cudnn = read_optional(j, "ratio_vs_cudnn");
  return true;
}

}  // namespace

Json case_to_json(const Case& c) {
  Json j = Json::object();
  j["label"] = c.label();
  j["batch"] = c.batch;
  j["heads_q"] = c.heads_q;
  j["heads_kv"] = c.heads_kv;
  j["seqlen_q"] = c.seqlen_q;
  j["seqlen_k"] = c.seqlen_k;
  j["head_dim"] = c.head_dim;
  j["causal"] = c.causal;
  j["window_left"] = c.window_left;
  j["dtype"] = c.dtype;
  j["backward"] = c.backward;
  j["flops"] = c.flops();
  j["min_bytes"] = c.min_bytes();
  return j;
}

Case case_from_json(const Json& c) {
  Case out;
  out.batch = integer_or(c, "batch", 0);
  out.heads_q = integer_or(c, "heads_q", 0);
  out.heads_kv = integer_or(c, "heads_kv", 0);
  out.seqlen_q = integer_or(c, "seqlen_q", 0);
  out.seqlen_k = integer_or(c, "seqlen_k", 0);
  out.head_dim = integer_or(c, "head_dim", 0);
  out.causal = bool_or(c, "causal", false);
  out.window_left = integer_or(c, "window_left", -1);
  out.dtype = string_or(c, "dtype", "fp16");
  out.backward = bool_or(c, "backward", false);
  return out;
}

Json to_json(const RunRecord& record) {
  Json j = Json::object();
  j["schema"] = kResultsSchema;
  j["schema_version"] = kResultsSchemaVersion;
  j["created_utc"] = record.created_utc;
  j["command_line"] = record.command_line;
  j["profile"] = record.profile;
  j["git_commit"] = record.git_commit;
  j["environment"] = pairs_to_json(record.environment);
  j["knobs"] = pairs_to_json(record.knobs);
  Json gemm = Json::object();
  gemm["problem"] = record.gemm_problem;
  gemm["tflops"] = record.gemm_tflops > 0 ? Json(record.gemm_tflops) : Json();
  j["gemm_ceiling"] = gemm;
  Json copy = Json::object();
  copy["problem"] = record.copy_problem;
  copy["gbps"] = record.copy_gbps > 0 ? Json(record.copy_gbps) : Json();
  j["copy_ceiling"] = copy;
  Json results = Json::array();
  for (const Result& r : record.results) results.push_back(result_to_json(r));
  j["results"] = results;
  Json expectations = Json::object();
  expectations["checked"] = record.expectations_checked;
  Json files = Json::array();
  for (const std::string& f : record.expectations_files) files.push_back(f);
  expectations["files"] = files;
  Json regressions = Json::array();
  for (const std::string& r : record.regressions) regressions.push_back(r);
  expectations["regressions"] = regressions;
  expectations["passed"] = record.regressions.empty();
  j["expectations"] = expectations;
  return j;
}

bool from_json(const Json& j, RunRecord* record, std::string* error) {
  *record = RunRecord{};
  if (string_or(j, "schema", "") != kResultsSchema) {
    *error =
        std::string("not a flashcore-bench results file (schema is not '") + kResultsSchema + "')";
    return false;
  }
  const int version = static_cast<int>(integer_or(j, "schema_version", 0));
  if (version != kResultsSchemaVersion) {
    *error = "results schema_version " + std::to_string(version) +
             " is not supported; this tool reads " + std::to_string(kResultsSchemaVersion);
    return false;
  }
  record->created_utc = string_or(j, "created_utc", "");
  record->command_line = string_or(j, "command_line", "");
  record->profile = string_or(j, "profile", "");
  record->git_commit = string_or(j, "git_commit", "");
  read_pairs(find_member(j, "environment"), &record->environment);
  read_pairs(find_member(j, "knobs"), &record->knobs);
  if (const Json* gemm = find_member(j, "gemm_ceiling"); gemm != nullptr) {
    record->gemm_tflops = number_or(*gemm, "tflops", 0);
    record->gemm_problem = string_or(*gemm, "problem", "");
  }
  // Files written before the copy ceiling existed have none: read as not measured.
  if (const Json* copy = find_member(j, "copy_ceiling"); copy != nullptr) {
    record->copy_gbps = number_or(*copy, "gbps", 0);
    record->copy_problem = string_or(*copy, "problem", "");
  }
  const Json* results = find_member(j, "results");
  if (results == nullptr || !results->is_array()) {
    *error = "results file has no 'results' array";
    return false;
  }
  for (const Json& item : *results) {
    Result r;
    if (!result_from_json(item, &r, error)) return false;
    record->results.push_back(std::move(r));
  }
  return true;
}

}  // namespace flashcore::bench
