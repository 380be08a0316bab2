#include "ncu_csv.hpp"

#include <charconv>
#include <sstream>

namespace flashcore::bench {

const NcuCell* NcuRow::find(const std::string& column) const {
  const auto it = cells.find(column);
  return it == cells.end() ? nullptr : &it->second;
}

std::optional<double> NcuRow::number(const std::string& column) const {
  const NcuCell* cell = find(column);
  if (cell == nullptr) return std::nullopt;
  std::string digits;
  for (const char ch : cell->text) {
    if (ch != ',' && ch != ' ') digits += ch;
  }
  double value = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (digits.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        fields.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.emplace_back();
    } else if (ch != '\r') {
      fields.back() += ch;
    }
  }
  return fields;
}

bool parse_ncu_raw_csv(const std::string& text, std::vector<NcuRow>* rows, std::string* error) {
  rows->clear();
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header, units;
  size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty() || line.rfind("==", 0) == 0) continue;  // ncu's own messages
    std::vector<std::string> fields = split_csv_line(line);
    if (header.empty()) {
      if (fields.front() != "ID") continue;  // anything else before the header
      header = std::move(fields);
      continue;
    }
    if (fields.size() != header.size()) {
      *error = "ncu CSV line " + std::to_string(line_number) + " has " +
               std::to_string(fields.size()) + " fields, the header " +
               std::to_string(header.size());
      return false;
    }
    if (units.empty()) {
      units = std::move(fields);
      continue;
    }
    NcuRow row;
    row.columns = header;
    for (size_t i = 0; i < header.size(); ++i) row.cells[header[i]] = {fields[i], units[i]};
    rows->push_back(std::move(row));
  }
  if (header.empty()) {
    *error = "no ncu raw-page header (a CSV line starting with \"ID\") in the output";
    return false;
  }
  return true;
}

}  // namespace flashcore::bench
