#include "json.hpp"

#include <cmath>

namespace flashcore::bench {

bool parse_json(const std::string& text, Json* out, std::string* error) {
  try {
    *out = Json::parse(text);
    return true;
  } catch (const Json::parse_error& e) {
    // e.what() names the byte offset and the offending token, e.g. "parse error at line 2,
    // column 6: syntax error while parsing object separator - unexpected number literal".
    *error = e.what();
    return false;
  }
}

std::string dump_json(const Json& json, int indent) {
  return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

const Json* find_member(const Json& json, const std::string& key) {
  if (!json.is_object()) return nullptr;
  const auto it = json.find(key);
  return it != json.end() ? &*it : nullptr;
}

double number_or(const Json& json, const std::string& key, double fallback) {
  const Json* v = find_member(json, key);
  return v != nullptr && v->is_number() ? v->get<double>() : fallback;
}

int64_t integer_or(const Json& json, const std::string& key, int64_t fallback) {
  const Json* v = find_member(json, key);
  if (v == nullptr || !v->is_number()) return fallback;
  if (v->is_number_integer()) return v->get<int64_t>();
  const double d = v->get<double>();
  return std::trunc(d) == d && std::fabs(d) < 9.2e18 ? static_cast<int64_t>(d) : fallback;
}

std::string string_or(const Json& json, const std::string& key, const std::string& fallback) {
  const Json* v = find_member(json, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : fallback;
}

bool bool_or(const Json& json, const std::string& key, bool fallback) {
  const Json* v = find_member(json, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

}  // namespace flashcore::bench
