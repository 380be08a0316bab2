// Stored inputs of the lab's CPU tests (tests/bench/fixtures): an ncu raw page written by hand
// in the format and with the metric names of ncu 2025.x on an H100, and results, profile and
// robustness files in the lab's schemas.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "json.hpp"

namespace flashcore::bench::testing {

inline std::string fixture_path(const std::string& name) {
  return std::string(FLASHCORE_BENCH_FIXTURES) + "/" + name;
}

inline std::string read_fixture(const std::string& name) {
  std::ifstream in(fixture_path(name), std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline Json fixture_json(const std::string& name) {
  Json j;
  std::string error;
  parse_json(read_fixture(name), &j, &error);
  return j;
}

}  // namespace flashcore::bench::testing
