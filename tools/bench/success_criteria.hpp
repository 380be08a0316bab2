// The seed reports' success criteria (shared/seeds: the tensor-core prototype's "final artifacts"
// and profiling targets, the FlashCore summary's speedup target, the CUTLASS FMHA plan's
// validation), each computed from the report's inputs, never typed in: held, missed, or not
// evaluated because the inputs hold no data for it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "profile_report.hpp"
#include "report_series.hpp"
#include "robust_report.hpp"

namespace flashcore::bench {

enum class Verdict { kHeld, kMissed, kNotEvaluated };
const char* verdict_name(Verdict v);  // "HELD", "MISSED", "not evaluated"

struct Criterion {
  std::string claim;  // "flashcore >= 10% faster than PyTorch SDPA on 2+ shapes"
  std::string seed;   // where the seed states it
  Verdict verdict = Verdict::kNotEvaluated;
  std::string evidence;  // the numbers behind the verdict, or what data is missing
};

// The seed's canonical shape (B1 H8 S512 D64), its criteria's p50 / p90 bounds (L4 targets of the
// CUTLASS plan), the speedup over the scalar start (FlashCore summary), the SDPA margin and the
// decode profile bars (tensor-core prototype).
inline constexpr const char* kCanonicalShape = "B1_H8_S512_D64";
inline constexpr double kCanonicalMaxP50Us = 26;
inline constexpr double kCanonicalMaxP90Us = 30;
inline constexpr double kMinSpeedupOverScalar = 15;
inline constexpr double kMinMarginOverSdpa = 1.10;
inline constexpr int kMinShapesOverSdpa = 2;
inline constexpr double kDecodeMinSmBusyPct = 70;
inline constexpr double kDecodeMinDramPct = 65;

std::vector<Criterion> evaluate_criteria(const std::map<std::string, std::vector<Timed>>& timed,
                                         const std::vector<RunRecord>& runs,
                                         const std::vector<ProfileRecord>& profiles,
                                         const std::vector<RobustRecord>& robust);

}  // namespace flashcore::bench
