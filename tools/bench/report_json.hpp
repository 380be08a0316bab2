// results.json: the versioned record of one run, and its reader (so `check` can re-evaluate an
// earlier run against new expectations without a GPU).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "json.hpp"
#include "model.hpp"

namespace flashcore::bench {

// Bump when a field changes meaning or is removed; adding fields keeps the version, and the reader
// treats a field added later (copy_ceiling, pct_of_copy_ceiling) as not measured when absent.
inline constexpr int kResultsSchemaVersion = 1;
inline constexpr const char* kResultsSchema = "flashcore-bench/results";

struct RunRecord {
  std::string created_utc;  // ISO 8601
  std::string command_line;
  std::string profile;
  std::string git_commit;
  // device, compute capability, SM count, L2, driver, CUDA runtime, cuDNN, cuDNN frontend, ...
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<std::pair<std::string, std::string>> knobs;
  double gemm_tflops = 0;  // measured cuBLAS bf16 GEMM ceiling; 0 when not measured
  std::string gemm_problem;
  // Measured device-to-device copy ceiling; 0 when not measured or absent from an older file.
  double copy_gbps = 0;
  std::string copy_problem;
  std::vector<Result> results;
  bool expectations_checked = false;
  std::vector<std::string> expectations_files;
  std::vector<std::string> regressions;
};

Json to_json(const RunRecord& record);
// A case as results.json writes it (label, sizes, mask, dtype, flops, min_bytes), and back; the
// profile and robustness files use the same object.
Json case_to_json(const Case& c);
Case case_from_json(const Json& c);
// Reads what to_json wrote. Returns false, naming the field, on a schema mismatch.
bool from_json(const Json& json, RunRecord* record, std::string* error);

}  // namespace flashcore::bench
