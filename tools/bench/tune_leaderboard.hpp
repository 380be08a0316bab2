// The tuner's leaderboard: every candidate it ever tried, with its config, status, times and the
// commit it was built from, kept in leaderboard.json (schema flashcore-bench/leaderboard v1) and
// rewritten after each candidate, so that a run that is stopped loses nothing and the next run
// resumes from it. Also the export of the winners as the reviewed table `auto` can read.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "json.hpp"
#include "tune_config.hpp"

namespace flashcore::bench {

enum class CandidateStatus {
  kIncumbent,     // the configuration a run starts from (the shipped one), or a re-timed winner
  kAccepted,      // passed the gate and beat the incumbent of its run by the required margin
  kSlower,        // passed the gate, not faster by the margin
  kParityFail,    // failed the parity gate: never timed
  kCompileError,  // nvcc failed (the log is in the run folder)
  kLaunchError,   // built, but the launch or the shared object failed
  kInvalid,       // rejected before compiling (invalid_reason)
};
const char* status_name(CandidateStatus status);  // "accepted", "parity_fail", ...
bool parse_status(const std::string& name, CandidateStatus* status);

struct LeaderboardEntry {
  TuneConfig config;
  CandidateStatus status = CandidateStatus::kInvalid;
  std::string reason;
  std::map<std::string, double> p50_us;  // per timed case label
  double total_us = 0;                   // sum of p50_us; 0 when not timed
  double incumbent_total_us = 0;         // the run's incumbent, timed next to it
  double speedup = 0;                    // incumbent_total_us / total_us
  long spill_bytes = -1;                 // ptxas; -1 when not compiled
  double compile_s = 0;
  int generation = 0;
  std::string run;     // the run's id (its start time)
  std::string commit;  // the code the candidate was built from
};

struct LeaderboardRun {
  std::string id;  // UTC start time
  std::string commit, device, command_line;
  double budget_s = 0;
  int candidates = 0;         // entries this run added
  std::string winner;         // key of the run's last incumbent
  double winner_speedup = 1;  // over the shipped config, in this run
};

struct Leaderboard {
  std::string kernel = "sm90";
  int head_dim = 128;
  std::string dtype = "bf16";
  std::vector<std::string> timed_cases;  // labels, as the first run chose them
  std::vector<LeaderboardRun> runs;
  std::vector<LeaderboardEntry> entries;

  // The entries of one config built from one commit (a resumed run skips their compile).
  std::vector<const LeaderboardEntry*> find(const std::string& key,
                                            const std::string& commit) const;
};

Json to_json(const Leaderboard& board);
bool from_json(const Json& json, Leaderboard* board, std::string* error);

// A missing file is an empty leaderboard; a file for another kernel, head dim or dtype is an error
// (one leaderboard per kernel instantiation).
bool load_leaderboard(const std::string& path, Leaderboard* board, std::string* error);
// Written to a temporary file and renamed, so a run killed mid-write leaves the old file whole.
bool save_leaderboard(const std::string& path, const Leaderboard& board, std::string* error);

// The reviewed table (schema flashcore/sm90-tuned v1): per (kernel, head dim, dtype, device) the
// best accepted config of the leaderboard with its measured speedup and provenance, or the
// shipped config when nothing was accepted. `reviewed` stays false until a person flips it in
// review; a reader must ignore an unreviewed row.
Json export_table(const Leaderboard& board, const std::string& device);

}  // namespace flashcore::bench
