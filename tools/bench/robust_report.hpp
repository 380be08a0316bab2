// robust.json and robust.md: one row per (cell, provider), the worst first; and the suite's
// verdict (a provider's deliberate rejection is listed with its reason, never failed).
#pragma once

#include <string>
#include <vector>

#include "json.hpp"
#include "parity.hpp"
#include "robust_grid.hpp"

namespace flashcore::bench {

inline constexpr const char* kRobustSchema = "flashcore-bench/robust";
inline constexpr int kRobustSchemaVersion = 1;

enum class RobustStatus {
  kPass,
  kFailed,    // error above the tolerance, NaN/Inf in the output, or a launch/CUDA error
  kRejected,  // the provider does not implement the problem (its registry reason)
  kSkipped,   // the cell could not be prepared (e.g. device memory)
};
const char* robust_status_name(RobustStatus s);  // "pass", "FAILED", "rejected", "skipped"

struct RobustResult {
  RobustCase cell;
  std::string provider;  // the backend asked for
  RobustStatus status = RobustStatus::kPass;
  std::string reason;
  std::string reference;  // "cpu-fp64" or "gpu-fp32"
  double tolerance = 0;   // on rel_l2, reference/tolerance.hpp's for the dtype
  ErrorStats stats;       // meaningful for kPass and kFailed after a run
  bool ran = false;       // stats were measured
};

// The verdict of a measured result: fails on NaN/Inf or rel_l2 above the tolerance.
bool robust_passes(const ErrorStats& stats, double tolerance);

// Worst first: failed (NaN/Inf first, then by rel_l2 / tolerance), then passed by rel_l2 /
// tolerance, then skipped, then rejected.
void sort_worst_first(std::vector<RobustResult>* results);

struct RobustRecord {
  std::string created_utc, command_line, git_commit, device, grid;  // grid: "default" or "quick"
  uint64_t seed = 0;  // every cell's inputs derive from it and the cell's name (--seed)
  // The generator that drew this run's inputs (a seed reproduces them only with it) and, when
  // --resume kept cells drawn by another one, that one's name.
  std::string inputs = kInputGenerator;
  std::string resumed_inputs;
  std::vector<RobustResult> results;
  // The run stopped early: a CUDA error poisoned the context (a result then FAILED), or
  // --time-budget ran out (missing_cells() lists what did not run; --resume runs it).
  bool interrupted = false;
  std::string interruption;
};

struct RobustCounts {
  size_t cells = 0, passed = 0, failed = 0, rejected = 0, skipped = 0, non_finite = 0;
};
RobustCounts count(const RobustRecord& record);

// 0 when nothing failed and the run finished, else 1 (the lab's "a target FAILED").
int robust_exit_code(const RobustRecord& record);

// The cells of the record's grid ("default" or "quick") that have no result, in grid order.
std::vector<RobustCase> missing_cells(const RobustRecord& record);

// Merges an earlier run's results into a new record (--resume): its seed, its results (and the
// name of their input generator when it is not this one) and, since the output holds both runs,
// its grid, which must be the one asked for. False with *error when
// the earlier record cannot be resumed.
bool resume_from(const RobustRecord& earlier, const std::string& grid, uint64_t seed,
                 RobustRecord* record, std::string* error);

Json to_json(const RobustRecord& record);
bool from_json(const Json& json, RobustRecord* record, std::string* error);
std::string render_robust_markdown(const RobustRecord& record);

}  // namespace flashcore::bench
