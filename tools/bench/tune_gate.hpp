// The tuner's gate and measurement of one built candidate, independent of how it runs: the cases
// it must pass (the timed shapes, as in the lab, plus a fully masked row and tail tiles, where a
// wrong tile shape shows first) and the order (every case gated before any is timed; a candidate
// that fails one is never timed). The GPU side implements CandidateRunner (tune_runner.cpp); the
// CPU tests run a stand-in through it.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "model.hpp"
#include "tune_leaderboard.hpp"

namespace flashcore::bench {

struct GateCase {
  Case c;
  bool timed;       // also timed; the others are only gated
  std::string why;  // what the case checks, for the failure message
};

// The default timed shapes: B4 H16 S4096 at the head dim and dtype, unmasked and causal.
std::vector<Case> default_tune_shapes(int head_dim, const std::string& dtype);

// The timed shapes, then: causal with Sq = Sk + 37 (the first 37 rows see no key and must be 0)
// and odd lengths (tails in both the query and the key tile), and the same lengths unmasked.
std::vector<GateCase> tune_gate_cases(const std::vector<Case>& timed);

class CandidateRunner {
 public:
  virtual ~CandidateRunner() = default;
  // Runs the candidate once on case i (output poisoned first) and compares with the reference.
  // False with *error when it could not run at all.
  virtual bool check(size_t i, Parity* parity, std::string* error) = 0;
  // The candidate's p50 per launch on case i, us.
  virtual bool time(size_t i, double* p50_us, std::string* error) = 0;
};

struct Measurement {
  bool ok = false;
  CandidateStatus failure = CandidateStatus::kParityFail;  // when !ok
  std::string reason;
  std::map<std::string, double> p50_us;  // per timed case label
  double total_us = 0;
};

Measurement measure_candidate(const std::vector<GateCase>& cases, CandidateRunner* runner);

}  // namespace flashcore::bench
