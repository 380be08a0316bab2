// A small JSON value with a writer and a strict parser: enough for results.json and the
// expectations files, without a third-party dependency. Objects keep insertion order so that the
// files we write read in a stable, human-friendly order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flashcore::bench {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool value) : type_(Type::kBool), bool_(value) {}
  Json(double value) : type_(Type::kNumber), number_(value) {}
  Json(int value) : Json(static_cast<double>(value)) {}
  Json(int64_t value) : Json(static_cast<double>(value)) {}
  Json(const char* value) : type_(Type::kString), string_(value) {}
  Json(std::string value) : type_(Type::kString), string_(std::move(value)) {}

  static Json array() {
    Json j;
    j.type_ = Type::kArray;
    return j;
  }
  static Json object() {
    Json j;
    j.type_ = Type::kObject;
    return j;
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  const std::string& as_string() const { return string_; }
  const Array& items() const { return array_; }
  const Object& members() const { return object_; }

  // Appends to an array.
  Json& push(Json value);
  // Sets a member of an object (replacing an existing key in place).
  Json& set(const std::string& key, Json value);
  // Member lookup; null when absent or when this is not an object.
  const Json* find(const std::string& key) const;
  // Number member or fallback when absent / not a number.
  double number_or(const std::string& key, double fallback) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;

  // indent < 0 writes one line. Non-finite numbers are written as null (JSON has no NaN).
  std::string dump(int indent = 2) const;

  // Parses a whole document; on failure returns false and says where and why in *error.
  static bool parse(const std::string& text, Json* out, std::string* error);

 private:
  void dump_to(std::string* out, int indent, int depth) const;

  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0.0;
  std::string string_;
  Array array_;
  Object object_;
};

}  // namespace flashcore::bench
