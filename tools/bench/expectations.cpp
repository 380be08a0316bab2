#include "expectations.hpp"

#include <optional>

#include "number_format.hpp"

namespace flashcore::bench {
namespace {

struct Thresholds {
  std::optional<double> min_speedup, min_ratio_cudnn, max_p50_us;
};

bool read_threshold(const Json& object, const char* key, const std::string& where,
                    std::optional<double>* out, std::string* error) {
  const Json* v = find_member(object, key);
  if (v == nullptr || v->is_null()) return true;
  if (!v->is_number()) {
    *error = where + ": '" + key + "' must be a number or null";
    return false;
  }
  *out = v->get<double>();
  return true;
}

bool read_thresholds(const Json& object, const std::string& where, Thresholds* t,
                     std::string* error) {
  if (!object.is_object()) {
    *error = where + " must be an object";
    return false;
  }
  return read_threshold(object, "min_speedup_over_baseline", where, &t->min_speedup, error) &&
         read_threshold(object, "min_ratio_vs_cudnn", where, &t->min_ratio_cudnn, error) &&
         read_threshold(object, "max_p50_us", where, &t->max_p50_us, error);
}

}  // namespace

bool check_expectations(const std::vector<Result>& results, const Json& expectations,
                        const std::string& source, std::vector<std::string>* regressions,
                        std::string* error) {
  if (string_or(expectations, "schema", "") != kExpectationsSchema ||
      integer_or(expectations, "schema_version", 0) != 1) {
    *error = source + ": not an expectations file (want schema '" + kExpectationsSchema +
             "', schema_version 1)";
    return false;
  }
  const Json* targets = find_member(expectations, "targets");
  if (targets == nullptr || !targets->is_object()) {
    *error = source + ": no 'targets' object";
    return false;
  }
  for (const auto& [target, spec] : targets->items()) {
    const std::string where = source + ": " + target;
    Thresholds base;
    if (!read_thresholds(spec, where, &base, error)) return false;
    const Json* cases = find_member(spec, "cases");
    if (cases != nullptr && !cases->is_null() && !cases->is_object()) {
      *error = where + ": 'cases' must be an object keyed by case label";
      return false;
    }
    for (const Result& r : results) {
      if (r.target() != target) continue;
      const std::string label = r.c.label();
      Thresholds t = base;
      if (cases != nullptr && cases->is_object()) {
        if (const Json* override_spec = find_member(*cases, label)) {
          Thresholds o;
          if (!read_thresholds(*override_spec, where + " case " + label, &o, error)) return false;
          if (o.min_speedup) t.min_speedup = o.min_speedup;
          if (o.min_ratio_cudnn) t.min_ratio_cudnn = o.min_ratio_cudnn;
          if (o.max_p50_us) t.max_p50_us = o.max_p50_us;
        }
      }
      const std::string who = target + " [" + label + "]";
      if (r.outcome == Outcome::kFailed) {
        regressions->push_back(who + ": FAILED (" + r.reason + ")");
        continue;
      }
      if (r.outcome != Outcome::kOk) continue;
      if (t.min_speedup && r.speedup_vs_baseline && *r.speedup_vs_baseline < *t.min_speedup) {
        regressions->push_back(who + ": speedup over baseline " +
                               significant_digits(*r.speedup_vs_baseline, 3) + "x < min " +
                               significant_digits(*t.min_speedup, 3) + "x");
      }
      if (t.min_ratio_cudnn && r.ratio_vs_cudnn && *r.ratio_vs_cudnn < *t.min_ratio_cudnn) {
        regressions->push_back(who + ": ratio vs cuDNN " +
                               significant_digits(*r.ratio_vs_cudnn, 3) + " < min " +
                               significant_digits(*t.min_ratio_cudnn, 3));
      }
      if (t.max_p50_us && r.timing && r.timing->p50_us > *t.max_p50_us) {
        regressions->push_back(who + ": p50 " + significant_digits(r.timing->p50_us, 3) +
                               " us > max " + significant_digits(*t.max_p50_us, 3) + " us");
      }
    }
  }
  return true;
}

}  // namespace flashcore::bench
