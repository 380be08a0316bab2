// JSON for results.json and the expectations files: nlohmann::ordered_json, so that the files we
// write keep their keys in a stable, human-friendly order and integers stay integers. The helpers
// read a member leniently (a missing or mistyped member gives the fallback), which is how the
// schema treats fields that older files lack.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace flashcore::bench {

using Json = nlohmann::ordered_json;

// Parses a whole document (RFC 8259: no NaN, no comments, no trailing text). On failure returns
// false and says where and why in *error.
bool parse_json(const std::string& text, Json* out, std::string* error);

// Writes with indent (< 0: one line). NaN and infinities become null (JSON has none); invalid
// UTF-8 in a string is replaced rather than thrown on.
std::string dump_json(const Json& json, int indent = 2);

// The member `key` of an object, or null when absent or when json is not an object.
const Json* find_member(const Json& json, const std::string& key);
double number_or(const Json& json, const std::string& key, double fallback);
// Integers are read as integers (exact past 2^53); a float member counts only if it is integral.
int64_t integer_or(const Json& json, const std::string& key, int64_t fallback);
std::string string_or(const Json& json, const std::string& key, const std::string& fallback);
bool bool_or(const Json& json, const std::string& key, bool fallback);

}  // namespace flashcore::bench
