// Nsight Compute's raw page as CSV (`ncu --import REPORT --csv --page raw`): a header row of
// column names (launch attributes such as "Kernel Name", then one column per metric), a row of
// units, then one row per profiled kernel launch. ncu may print "==PROF==" / "==WARNING==" lines
// before the header; they are skipped.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace flashcore::bench {

struct NcuCell {
  std::string text;  // as ncu printed it
  std::string unit;  // from the units row ("" for launch attributes, "%", "ns", "byte/block", ...)
};

// One profiled kernel launch: column name -> cell, in ncu's order of columns.
struct NcuRow {
  std::vector<std::string> columns;
  std::map<std::string, NcuCell> cells;

  const NcuCell* find(const std::string& column) const;
  // The cell as a number (thousands separators allowed), or nullopt when absent, empty or "n/a".
  std::optional<double> number(const std::string& column) const;
};

// Splits one CSV record (RFC 4180: quoted fields, "" inside quotes, commas in quotes).
std::vector<std::string> split_csv_line(const std::string& line);

// Parses the raw page. Returns false with a reason when there is no header with an "ID" column
// or a row's field count differs from the header's.
bool parse_ncu_raw_csv(const std::string& text, std::vector<NcuRow>* rows, std::string* error);

}  // namespace flashcore::bench
