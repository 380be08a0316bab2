// The evolutionary search of `flashcore-bench tune` (the seed's EvoEngineer): a population of
// configs per generation, bred from the best measured so far by tournament selection, crossover
// and mutation, each candidate built, gated and timed through a CandidateBackend, until the time
// budget runs out. A candidate replaces the incumbent only when it is faster by min_gain in this
// run: the incumbent is re-timed next to every candidate, and a win is measured a second time
// before it counts. Every candidate goes to the leaderboard, saved after each one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tune_config.hpp"
#include "tune_gate.hpp"
#include "tune_leaderboard.hpp"

namespace flashcore::bench {

struct BuildOutcome {
  bool ok = false;
  std::string error;  // compile_error: the tail of the compiler's log
  long spill_bytes = -1;
  double seconds = 0;
};

class CandidateBackend {
 public:
  virtual ~CandidateBackend() = default;
  // Builds every config (in parallel where it can); one outcome per config, in order. A config
  // built before (a resumed run) may come back at once.
  virtual std::vector<BuildOutcome> build(const std::vector<TuneConfig>& configs) = 0;
  // Gates and times one built config (tune_gate.hpp, measure_candidate).
  virtual Measurement measure(const TuneConfig& config) = 0;
};

struct TuneSettings {
  int head_dim = 128;
  std::string dtype = "bf16";  // with head_dim, picks the incumbent (production_config)
  int element_bytes = 2;
  int population = 12;  // candidates per generation
  int max_generations = 100;
  double budget_s = 600;   // no generation starts that would not end within it
  double min_gain = 0.03;  // accepted when incumbent / candidate >= 1 + min_gain
  uint64_t seed = 1;
  std::string commit, device, run_id, command_line;
  TuneSpace space;
};

struct TuneSummary {
  int candidates = 0;  // entries this run added, the shipped config included
  int generations = 0;
  std::map<CandidateStatus, int> by_status;
  std::string winner;         // the run's final incumbent
  double winner_speedup = 1;  // over the shipped config, measured in this run
  double baseline_total_us = 0, winner_total_us = 0;
};

using TuneClock = std::function<double()>;  // seconds since some fixed start
using TunePersist = std::function<bool(const Leaderboard&, std::string* error)>;
using TuneLog = std::function<void(const std::string&)>;

// Runs the search, appending this run and its candidates to *board. Fails (false) only when the
// shipped config itself cannot be built or gated, or the leaderboard cannot be saved.
bool run_search(const TuneSettings& settings, CandidateBackend* backend, Leaderboard* board,
                const TunePersist& persist, const TuneLog& log, const TuneClock& clock,
                TuneSummary* summary, std::string* error);

}  // namespace flashcore::bench
