#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace flashcore::bench {

namespace {
// Rotate until the working set is twice L2, so each launch reads its inputs from DRAM.
constexpr double kWorkingSetOverL2 = 2.0;
constexpr int kMaxSets = 64;
// Leave this fraction of free memory for workspaces (the unfused path materializes the scores).
constexpr double kMaxFreeFractionForSets = 0.25;
}  // namespace

int rotation_set_count(size_t set_bytes, size_t l2_bytes, size_t free_bytes) {
  int sets = static_cast<int>(std::ceil(kWorkingSetOverL2 * static_cast<double>(l2_bytes) /
                                        static_cast<double>(set_bytes)));
  sets = std::clamp(sets, 1, kMaxSets);
  while (sets > 1 && static_cast<double>(sets * set_bytes) >
                         kMaxFreeFractionForSets * static_cast<double>(free_bytes)) {
    --sets;
  }
  return sets;
}

const char* profile_name(Profile profile) {
  return profile == Profile::kMinimal ? "minimal" : "full";
}

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kFailed:
      return "FAILED";
    case Outcome::kSkipped:
      return "SKIPPED";
  }
  return "?";
}

std::string Case::label() const {
  std::ostringstream s;
  s << "B" << batch << "_H" << heads_q;
  if (heads_kv != heads_q) s << "_Hkv" << heads_kv;
  s << "_S" << seqlen_q;
  if (seqlen_k != seqlen_q) s << "_Sk" << seqlen_k;
  s << "_D" << head_dim << "_" << dtype;
  if (causal) s << "_causal";
  if (window_left >= 0) s << "_win" << window_left;
  if (backward) s << "_bwd";
  return s.str();
}

std::string Case::describe() const {
  std::ostringstream s;
  s << "B=" << batch << " H=" << heads_q;
  if (heads_kv != heads_q) s << " Hkv=" << heads_kv;
  s << " S=" << seqlen_q;
  if (seqlen_k != seqlen_q) s << " Sk=" << seqlen_k;
  s << " D=" << head_dim << " " << dtype;
  if (causal) s << " causal";
  if (window_left >= 0) s << " window=" << window_left;
  if (backward) s << " backward";
  return s.str();
}

double Case::flops() const {
  const double passes = backward ? 2.5 : 1.0;
  const double dense = 4.0 * static_cast<double>(batch) * static_cast<double>(heads_q) *
                       static_cast<double>(seqlen_q) * static_cast<double>(seqlen_k) *
                       static_cast<double>(head_dim);
  if (window_left < 0) return passes * (causal ? dense / 2 : dense);
  // Count visible pairs row by row with the library's bottom-right-aligned window.
  double pairs = 0;
  const int64_t offset = seqlen_k - seqlen_q;
  for (int64_t i = 0; i < seqlen_q; ++i) {
    const int64_t first = std::max<int64_t>(0, i + offset - window_left);
    const int64_t end = causal ? std::min(seqlen_k, i + offset + 1) : seqlen_k;
    pairs += static_cast<double>(std::max<int64_t>(0, end - first));
  }
  return passes * dense * pairs / (static_cast<double>(seqlen_q) * static_cast<double>(seqlen_k));
}

double Case::min_bytes() const {
  const double element = 2.0;  // fp16 and bf16
  const double q_or_o = static_cast<double>(batch * seqlen_q * heads_q * head_dim) * element;
  const double k_or_v = static_cast<double>(batch * seqlen_k * heads_kv * head_dim) * element;
  return backward ? 4 * q_or_o + 4 * k_or_v : 2 * q_or_o + 2 * k_or_v;
}

namespace {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.size() == 1) return sorted[0];
  const double pos = p * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

Summary summarize(std::vector<double> samples_us) {
  Summary s;
  s.samples = static_cast<int>(samples_us.size());
  if (samples_us.empty()) return s;
  std::sort(samples_us.begin(), samples_us.end());
  s.min_us = samples_us.front();
  s.p50_us = percentile(samples_us, 0.5);
  s.p90_us = percentile(samples_us, 0.9);
  double sum = 0;
  for (const double v : samples_us) sum += v;
  s.mean_us = sum / static_cast<double>(samples_us.size());
  double var = 0;
  for (const double v : samples_us) var += (v - s.mean_us) * (v - s.mean_us);
  // Sample standard deviation (n - 1): the samples estimate a distribution.
  s.stdev_us =
      samples_us.size() > 1 ? std::sqrt(var / static_cast<double>(samples_us.size() - 1)) : 0;
  return s;
}

void derive_metrics(std::vector<Result>* results, double gemm_tflops, double copy_gbps) {
  auto find_p50 = [&](const std::string& chapter, const std::string& role,
                      const std::string& label) -> std::optional<double> {
    for (const Result& r : *results) {
      if (r.outcome != Outcome::kOk || !r.timing || r.role != role) continue;
      if (!chapter.empty() && r.chapter != chapter) continue;
      if (r.c.label() == label) return r.timing->p50_us;
    }
    return std::nullopt;
  };
  for (Result& r : *results) {
    if (r.outcome != Outcome::kOk || !r.timing || r.timing->p50_us <= 0) continue;
    const double seconds = r.timing->p50_us * 1e-6;
    r.tflops = r.c.flops() / seconds / 1e12;
    r.gbps = r.c.min_bytes() / seconds / 1e9;
    if (gemm_tflops > 0) r.pct_of_gemm_ceiling = 100.0 * *r.tflops / gemm_tflops;
    if (copy_gbps > 0) r.pct_of_copy_ceiling = 100.0 * *r.gbps / copy_gbps;
    const std::string label = r.c.label();
    if (const auto base = find_p50(r.chapter, "baseline", label)) {
      r.speedup_vs_baseline = *base / r.timing->p50_us;
    }
    if (const auto peer = find_p50("", "peer", label)) r.ratio_vs_cudnn = *peer / r.timing->p50_us;
  }
}

}  // namespace flashcore::bench
