#include "success_criteria.hpp"

#include "number_format.hpp"

namespace flashcore::bench {
namespace {

bool is_canonical(const std::string& label) {
  return label.rfind(std::string(kCanonicalShape) + "_", 0) == 0 &&
         label.find("_causal") == std::string::npos && label.find("_win") == std::string::npos &&
         label.find("_bwd") == std::string::npos;
}

bool is_peer_target(const std::string& target) { return target.rfind("peers/", 0) == 0; }

Criterion over_sdpa(const std::map<std::string, std::vector<Timed>>& timed) {
  Criterion c{"flashcore >= 10% faster than PyTorch SDPA (its fastest backend) on 2+ shapes",
              "tensor-core prototype status, 10. Final Artifacts: success criteria validation",
              Verdict::kNotEvaluated, ""};
  int compared = 0, held = 0;
  std::string shapes;
  for (const auto& [label, at] : timed) {
    const Timed* ours = best_of(at, Family::kFlashcore);
    const Timed* sdpa = best_of(at, Family::kSdpa);
    if (ours == nullptr || sdpa == nullptr) continue;
    ++compared;
    const double margin = sdpa->p50_us / ours->p50_us;
    if (margin >= kMinMarginOverSdpa) {
      ++held;
      shapes += (shapes.empty() ? "" : ", ") + label + " " + format_number("%.2fx", margin) +
                " vs " + sdpa->name;
    }
  }
  if (compared == 0) {
    c.evidence =
        "no shape has both flashcore and PyTorch SDPA times (run bench/peers.py and pass "
        "its results.json)";
    return c;
  }
  c.verdict = held >= kMinShapesOverSdpa ? Verdict::kHeld : Verdict::kMissed;
  c.evidence = std::to_string(held) + " of " + std::to_string(compared) + " shapes" +
               (shapes.empty() ? "" : ": " + shapes);
  return c;
}

Criterion over_scalar(const std::map<std::string, std::vector<Timed>>& timed) {
  Criterion c{"flashcore >= 15x faster than the scalar start of the journey at B1 H8 S512 D64",
              "FlashCore summary, Success Metrics (speedup target 15x)", Verdict::kNotEvaluated,
              "no canonical-shape times of both the scalar provider and a faster one"};
  for (const auto& [label, at] : timed) {
    if (!is_canonical(label)) continue;
    const Timed* best = best_of(at, Family::kFlashcore);
    const Timed* scalar = nullptr;
    for (const Timed& t : at) {
      if (t.family == Family::kFlashcore && t.provider == "scalar") scalar = &t;
    }
    if (best == nullptr || scalar == nullptr) continue;
    const double speedup = scalar->p50_us / best->p50_us;
    c.verdict = speedup >= kMinSpeedupOverScalar ? Verdict::kHeld : Verdict::kMissed;
    c.evidence = label + ": " + best->name + " " + format_number("%.2f us", best->p50_us) +
                 " vs scalar " + format_number("%.2f us", scalar->p50_us) + " = " +
                 format_number("%.1fx", speedup);
    return c;
  }
  return c;
}

Criterion canonical_latency(const std::map<std::string, std::vector<Timed>>& timed) {
  Criterion c{"p50 < 26 us and p90 < 30 us at B1 H8 S512 D64 (the plan's L4 targets)",
              "CUTLASS FMHA plan, Phase 5 Success Criteria (performance, stability)",
              Verdict::kNotEvaluated, "no canonical-shape flashcore time in the inputs"};
  for (const auto& [label, at] : timed) {
    const Timed* best = best_of(at, Family::kFlashcore);
    if (!is_canonical(label) || best == nullptr) continue;
    const bool held = best->p50_us < kCanonicalMaxP50Us && best->p90_us < kCanonicalMaxP90Us;
    c.verdict = held ? Verdict::kHeld : Verdict::kMissed;
    c.evidence = label + ": " + best->name + " p50 " + format_number("%.2f", best->p50_us) +
                 " us, p90 " + format_number("%.2f", best->p90_us) + " us";
    return c;
  }
  return c;
}

Criterion parity(const std::vector<RunRecord>& runs) {
  Criterion c{"every measured result passed its parity gate (no NaN, error within tolerance)",
              "CUTLASS FMHA plan, Phase 5 Success Criteria (correctness)", Verdict::kNotEvaluated,
              "no results.json in the inputs"};
  size_t checked = 0, failed = 0;
  std::string which;
  for (const RunRecord& run : runs) {
    for (const Result& r : run.results) {
      if (!r.parity) continue;
      ++checked;
      if (r.outcome == Outcome::kFailed) {
        ++failed;
        if (failed <= 3) which += (which.empty() ? "" : "; ") + r.target() + " " + r.c.label();
      }
    }
  }
  if (checked == 0) return c;
  c.verdict = failed == 0 ? Verdict::kHeld : Verdict::kMissed;
  c.evidence = std::to_string(checked - failed) + " of " + std::to_string(checked) + " passed" +
               (which.empty() ? "" : "; failed: " + which);
  return c;
}

Criterion no_spills(const std::vector<ProfileRecord>& profiles) {
  Criterion c{"no register spills (local-memory traffic 0) in flashcore's kernels",
              "CUTLASS FMHA plan, Phase 5 Success Criteria (resources); prototype status, 9.",
              Verdict::kNotEvaluated, "no profile.json with local-memory metrics in the inputs"};
  size_t kernels = 0;
  std::string spilling;
  for (const ProfileRecord& p : profiles) {
    for (const ProfileEntry& e : p.entries) {
      if (is_peer_target(e.target)) continue;
      for (const KernelProfile& k : e.kernels) {
        const auto it = k.metrics.find("local_memory_bytes");
        if (it == k.metrics.end()) continue;
        ++kernels;
        if (it->second.value > 0) {
          spilling += (spilling.empty() ? "" : "; ") + e.provider + " " + e.c.label() + " " +
                      format_number("%.0f B", it->second.value);
        }
      }
    }
  }
  if (kernels == 0) return c;
  c.verdict = spilling.empty() ? Verdict::kHeld : Verdict::kMissed;
  c.evidence = std::to_string(kernels) + " kernels profiled" +
               (spilling.empty() ? ", none with local-memory traffic" : "; spilling: " + spilling);
  return c;
}

Criterion decode_profile(const std::vector<ProfileRecord>& profiles) {
  Criterion c{"memory-bound decode: SM busy >= 70% and DRAM throughput >= 65% of peak",
              "tensor-core prototype status, 9. Nsight Compute Profiling", Verdict::kNotEvaluated,
              "no profile of a decode case (Sq = 1) in the inputs"};
  bool any = false, all = true;
  std::string evidence;
  for (const ProfileRecord& p : profiles) {
    for (const ProfileEntry& e : p.entries) {
      const KernelProfile* k = main_kernel(e.kernels);
      if (is_peer_target(e.target) || e.c.seqlen_q != 1 || k == nullptr) continue;
      const auto busy = k->metrics.find("sm_busy_pct");
      const auto dram = k->metrics.find("dram_throughput_pct");
      if (busy == k->metrics.end() || dram == k->metrics.end()) continue;
      any = true;
      all = all && busy->second.value >= kDecodeMinSmBusyPct &&
            dram->second.value >= kDecodeMinDramPct;
      evidence += (evidence.empty() ? "" : "; ") + e.target + " (" + e.provider + ") " +
                  e.c.label() + ": SM busy " + format_number("%.1f%%", busy->second.value) +
                  ", DRAM " + format_number("%.1f%%", dram->second.value);
    }
  }
  if (!any) return c;
  c.verdict = all ? Verdict::kHeld : Verdict::kMissed;
  c.evidence = evidence;
  return c;
}

Criterion robustness(const std::vector<RobustRecord>& robust) {
  Criterion c{"no failing robustness cell (a provider's rejection is listed, not failed)",
              "tensor-core prototype status, 7. robust-kbench Integration", Verdict::kNotEvaluated,
              "no robust.json in the inputs"};
  if (robust.empty()) return c;
  RobustCounts total;
  bool interrupted = false;
  for (const RobustRecord& r : robust) {
    const RobustCounts k = count(r);
    total.cells += k.cells;
    total.passed += k.passed;
    total.failed += k.failed;
    total.rejected += k.rejected;
    total.skipped += k.skipped;
    total.non_finite += k.non_finite;
    interrupted = interrupted || r.interrupted;
  }
  c.verdict = total.failed == 0 && !interrupted ? Verdict::kHeld : Verdict::kMissed;
  c.evidence = std::to_string(total.cells) + " cells, " +
               std::to_string(total.passed + total.failed + total.rejected + total.skipped) +
               " results: " + std::to_string(total.passed) + " passed, " +
               std::to_string(total.failed) + " failed (" + std::to_string(total.non_finite) +
               " NaN/Inf), " + std::to_string(total.rejected) + " rejected" +
               (interrupted ? "; the run was interrupted" : "");
  return c;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kHeld:
      return "HELD";
    case Verdict::kMissed:
      return "MISSED";
    case Verdict::kNotEvaluated:
      return "not evaluated";
  }
  return "?";
}

std::vector<Criterion> evaluate_criteria(const std::map<std::string, std::vector<Timed>>& timed,
                                         const std::vector<RunRecord>& runs,
                                         const std::vector<ProfileRecord>& profiles,
                                         const std::vector<RobustRecord>& robust) {
  return {over_sdpa(timed),    over_scalar(timed),       canonical_latency(timed), parity(runs),
          no_spills(profiles), decode_profile(profiles), robustness(robust)};
}

}  // namespace flashcore::bench
