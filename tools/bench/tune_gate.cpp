#include "tune_gate.hpp"

#include <cstdio>

namespace flashcore::bench {

std::vector<Case> default_tune_shapes(int head_dim, const std::string& dtype) {
  std::vector<Case> shapes;
  for (const bool causal : {false, true}) {
    Case c;
    c.batch = 4;
    c.heads_q = c.heads_kv = 16;
    c.seqlen_q = c.seqlen_k = 4096;
    c.head_dim = head_dim;
    c.causal = causal;
    c.dtype = dtype;
    shapes.push_back(c);
  }
  return shapes;
}

std::vector<GateCase> tune_gate_cases(const std::vector<Case>& timed) {
  std::vector<GateCase> cases;
  for (const Case& c : timed) cases.push_back({c, true, "timed shape"});
  if (timed.empty()) return cases;
  // Odd lengths: 300 rows end mid-tile for every block_m (64..192) and 263 keys for every key
  // tile; causal with 37 more queries than keys leaves rows 0..36 without a visible key.
  Case masked = timed.front();
  masked.batch = 1;
  masked.heads_q = masked.heads_kv = 2;
  masked.seqlen_q = 300;
  masked.seqlen_k = 263;
  masked.causal = true;
  masked.window_left = -1;
  cases.push_back({masked, false, "fully masked rows and tail tiles (causal, Sq = Sk + 37)"});
  Case tail = masked;
  tail.causal = false;
  cases.push_back({tail, false, "tail tiles (Sq 300, Sk 263, unmasked)"});
  return cases;
}

Measurement measure_candidate(const std::vector<GateCase>& cases, CandidateRunner* runner) {
  Measurement m;
  for (size_t i = 0; i < cases.size(); ++i) {
    Parity parity;
    std::string error;
    if (!runner->check(i, &parity, &error)) {
      m.failure = CandidateStatus::kLaunchError;
      m.reason = cases[i].c.label() + ": " + error;
      return m;
    }
    if (!parity.passed) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "rel L2 %.3e > %.0e%s vs %s", parity.rel_l2, parity.tolerance,
                    parity.has_nan ? " (NaN/Inf in output)" : "", parity.reference.c_str());
      m.failure = CandidateStatus::kParityFail;
      m.reason = cases[i].c.label() + " (" + cases[i].why + "): " + buf;
      return m;
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].timed) continue;
    double p50 = 0;
    std::string error;
    if (!runner->time(i, &p50, &error)) {
      m.failure = CandidateStatus::kLaunchError;
      m.reason = cases[i].c.label() + ": timing: " + error;
      return m;
    }
    m.p50_us[cases[i].c.label()] = p50;
    m.total_us += p50;
  }
  m.ok = true;
  return m;
}

}  // namespace flashcore::bench
