#include "report_json.hpp"

namespace flashcore::bench {
namespace {

Json optional_number(const std::optional<double>& v) { return v ? Json(*v) : Json(); }

Json pairs_to_json(const std::vector<std::pair<std::string, std::string>>& pairs) {
  Json object = Json::object();
  for (const auto& [key, value] : pairs) object.set(key, value);
  return object;
}

Json case_to_json(const Case& c) {
  Json j = Json::object();
  j.set("label", c.label());
  j.set("batch", c.batch);
  j.set("heads_q", c.heads_q);
  j.set("heads_kv", c.heads_kv);
  j.set("seqlen_q", c.seqlen_q);
  j.set("seqlen_k", c.seqlen_k);
  j.set("head_dim", c.head_dim);
  j.set("causal", c.causal);
  j.set("window_left", c.window_left);
  j.set("dtype", c.dtype);
  j.set("flops", c.flops());
  j.set("min_bytes", c.min_bytes());
  return j;
}

Json result_to_json(const Result& r) {
  Json j = Json::object();
  j.set("target", r.target());
  j.set("chapter", r.chapter);
  j.set("workload", r.workload);
  j.set("role", r.role);
  j.set("requested_backend", r.requested_backend);
  j.set("provider", r.provider);
  j.set("status", outcome_name(r.outcome));
  j.set("reason", r.reason);
  j.set("case", case_to_json(r.c));
  if (r.parity) {
    Json p = Json::object();
    p.set("reference", r.parity->reference);
    p.set("rel_l2", r.parity->rel_l2);
    p.set("tolerance", r.parity->tolerance);
    p.set("has_nan", r.parity->has_nan);
    p.set("passed", r.parity->passed);
    j.set("parity", p);
  } else {
    j.set("parity", Json());
  }
  if (r.timing) {
    Json t = Json::object();
    t.set("method", r.timing->method);
    t.set("samples", r.timing->samples);
    t.set("launches_per_sample", r.timing->launches_per_sample);
    t.set("min_us", r.timing->min_us);
    t.set("p50_us", r.timing->p50_us);
    t.set("p90_us", r.timing->p90_us);
    t.set("mean_us", r.timing->mean_us);
    t.set("stdev_us", r.timing->stdev_us);
    j.set("timing", t);
  } else {
    j.set("timing", Json());
  }
  j.set("tflops", optional_number(r.tflops));
  j.set("gbps", optional_number(r.gbps));
  j.set("pct_of_gemm_ceiling", optional_number(r.pct_of_gemm_ceiling));
  j.set("pct_of_copy_ceiling", optional_number(r.pct_of_copy_ceiling));
  j.set("speedup_vs_baseline", optional_number(r.speedup_vs_baseline));
  j.set("ratio_vs_cudnn", optional_number(r.ratio_vs_cudnn));
  return j;
}

std::optional<double> read_optional(const Json& j, const char* key) {
  const Json* v = j.find(key);
  return v != nullptr && v->is_number() ? std::optional<double>(v->as_number()) : std::nullopt;
}

bool read_pairs(const Json* j, std::vector<std::pair<std::string, std::string>>* out) {
  if (j == nullptr || !j->is_object()) return false;
  for (const auto& [key, value] : j->members()) {
    out->emplace_back(key, value.is_string() ? value.as_string() : value.dump(-1));
  }
  return true;
}

bool result_from_json(const Json& j, Result* r, std::string* error) {
  const Json* c = j.find("case");
  if (!j.is_object() || c == nullptr || !c->is_object()) {
    *error = "a result has no 'case' object";
    return false;
  }
  r->chapter = j.string_or("chapter", "");
  r->workload = j.string_or("workload", "");
  r->role = j.string_or("role", "");
  r->requested_backend = j.string_or("requested_backend", "");
  r->provider = j.string_or("provider", "");
  const std::string status = j.string_or("status", "");
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
  r->reason = j.string_or("reason", "");
  r->c.batch = static_cast<int64_t>(c->number_or("batch", 0));
  r->c.heads_q = static_cast<int64_t>(c->number_or("heads_q", 0));
  r->c.heads_kv = static_cast<int64_t>(c->number_or("heads_kv", 0));
  r->c.seqlen_q = static_cast<int64_t>(c->number_or("seqlen_q", 0));
  r->c.seqlen_k = static_cast<int64_t>(c->number_or("seqlen_k", 0));
  r->c.head_dim = static_cast<int64_t>(c->number_or("head_dim", 0));
  const Json* causal = c->find("causal");
  r->c.causal = causal != nullptr && causal->is_bool() && causal->as_bool();
  r->c.window_left = static_cast<int64_t>(c->number_or("window_left", -1));
  r->c.dtype = c->string_or("dtype", "fp16");
  if (const Json* p = j.find("parity"); p != nullptr && p->is_object()) {
    Parity parity;
    parity.reference = p->string_or("reference", "");
    parity.rel_l2 = p->number_or("rel_l2", 0);
    parity.tolerance = p->number_or("tolerance", 0);
    const Json* nan = p->find("has_nan");
    parity.has_nan = nan != nullptr && nan->is_bool() && nan->as_bool();
    const Json* passed = p->find("passed");
    parity.passed = passed != nullptr && passed->is_bool() && passed->as_bool();
    r->parity = parity;
  }
  if (const Json* t = j.find("timing"); t != nullptr && t->is_object()) {
    Summary s;
    s.method = t->string_or("method", "");
    s.samples = static_cast<int>(t->number_or("samples", 0));
    s.launches_per_sample = static_cast<int>(t->number_or("launches_per_sample", 0));
    s.min_us = t->number_or("min_us", 0);
    s.p50_us = t->number_or("p50_us", 0);
    s.p90_us = t->number_or("p90_us", 0);
    s.mean_us = t->number_or("mean_us", 0);
    s.stdev_us = t->number_or("stdev_us", 0);
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

Json to_json(const RunRecord& record) {
  Json j = Json::object();
  j.set("schema", kResultsSchema);
  j.set("schema_version", kResultsSchemaVersion);
  j.set("created_utc", record.created_utc);
  j.set("command_line", record.command_line);
  j.set("profile", record.profile);
  j.set("git_commit", record.git_commit);
  j.set("environment", pairs_to_json(record.environment));
  j.set("knobs", pairs_to_json(record.knobs));
  Json gemm = Json::object();
  gemm.set("problem", record.gemm_problem);
  gemm.set("tflops", record.gemm_tflops > 0 ? Json(record.gemm_tflops) : Json());
  j.set("gemm_ceiling", gemm);
  Json copy = Json::object();
  copy.set("problem", record.copy_problem);
  copy.set("gbps", record.copy_gbps > 0 ? Json(record.copy_gbps) : Json());
  j.set("copy_ceiling", copy);
  Json results = Json::array();
  for (const Result& r : record.results) results.push(result_to_json(r));
  j.set("results", results);
  Json expectations = Json::object();
  expectations.set("checked", record.expectations_checked);
  Json files = Json::array();
  for (const std::string& f : record.expectations_files) files.push(f);
  expectations.set("files", files);
  Json regressions = Json::array();
  for (const std::string& r : record.regressions) regressions.push(r);
  expectations.set("regressions", regressions);
  expectations.set("passed", record.regressions.empty());
  j.set("expectations", expectations);
  return j;
}

bool from_json(const Json& j, RunRecord* record, std::string* error) {
  *record = RunRecord{};
  if (j.string_or("schema", "") != kResultsSchema) {
    *error =
        std::string("not a flashcore-bench results file (schema is not '") + kResultsSchema + "')";
    return false;
  }
  const int version = static_cast<int>(j.number_or("schema_version", 0));
  if (version != kResultsSchemaVersion) {
    *error = "results schema_version " + std::to_string(version) +
             " is not supported; this tool reads " + std::to_string(kResultsSchemaVersion);
    return false;
  }
  record->created_utc = j.string_or("created_utc", "");
  record->command_line = j.string_or("command_line", "");
  record->profile = j.string_or("profile", "");
  record->git_commit = j.string_or("git_commit", "");
  read_pairs(j.find("environment"), &record->environment);
  read_pairs(j.find("knobs"), &record->knobs);
  if (const Json* gemm = j.find("gemm_ceiling"); gemm != nullptr) {
    record->gemm_tflops = gemm->number_or("tflops", 0);
    record->gemm_problem = gemm->string_or("problem", "");
  }
  // Files written before the copy ceiling existed have none: read as not measured.
  if (const Json* copy = j.find("copy_ceiling"); copy != nullptr) {
    record->copy_gbps = copy->number_or("gbps", 0);
    record->copy_problem = copy->string_or("problem", "");
  }
  const Json* results = j.find("results");
  if (results == nullptr || !results->is_array()) {
    *error = "results file has no 'results' array";
    return false;
  }
  for (const Json& item : results->items()) {
    Result r;
    if (!result_from_json(item, &r, error)) return false;
    record->results.push_back(std::move(r));
  }
  return true;
}

}  // namespace flashcore::bench
