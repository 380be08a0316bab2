// The lab's data model: what a target measures (a Case), and what it found (a Result). Pure data,
// shared by the runner, the reports and the expectations checker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flashcore::bench {

enum class Profile { kMinimal, kFull };
const char* profile_name(Profile profile);

// One attention problem. window_left < 0 is unbounded; causal sets the right edge to the diagonal.
struct Case {
  int64_t batch = 1;
  int64_t heads_q = 8;
  int64_t heads_kv = 8;
  int64_t seqlen_q = 512;
  int64_t seqlen_k = 512;
  int64_t head_dim = 64;
  bool causal = false;
  int64_t window_left = -1;
  std::string dtype = "fp16";  // "fp16" or "bf16"
  // The backward pass (dQ, dK, dV from Q, K, V, O, LSE and dO) rather than the forward.
  bool backward = false;

  // Stable key, e.g. "B1_H8_S512_D64_fp16_causal" ("..._bwd" for the backward): results at one
  // label are compared.
  std::string label() const;
  // Human form for progress lines and tables.
  std::string describe() const;
  // 4*B*Hq*Sq*Sk*D, halved for causal (the FlashAttention papers' convention). A sliding window
  // counts only the (query, key) pairs it lets through. The backward counts 2.5x its forward (five
  // GEMMs to the forward's two, as FlashAttention's benchmarks).
  double flops() const;
  // Bytes that must cross DRAM at least once: Q, K, V read and O written; the backward reads Q, K,
  // V, O and dO and writes dQ, dK and dV.
  double min_bytes() const;
};

// Summary of the timed samples of one target at one case. A sample is the per-launch time of one
// CUDA-graph replay (or one batch of launches) over several launches.
struct Summary {
  std::string method;  // "graph" or "events"
  int samples = 0;
  int launches_per_sample = 0;
  double min_us = 0, p50_us = 0, p90_us = 0, mean_us = 0, stdev_us = 0;
};
// min/p50/p90/mean/stdev of per-launch times in microseconds. p50 and p90 interpolate linearly.
Summary summarize(std::vector<double> samples_us);

struct Parity {
  std::string reference;  // "cpu-fp64" or "gpu-fp32"
  double rel_l2 = 0;
  double tolerance = 0;
  bool has_nan = false;
  bool passed = false;
};

enum class Outcome { kOk, kFailed, kSkipped };
const char* outcome_name(Outcome outcome);  // "ok", "FAILED", "SKIPPED"

struct Result {
  std::string chapter;            // "labs/flashattention"
  std::string workload;           // "optimized_flashattention"
  std::string role;               // "baseline", "step", "optimized" or "peer"
  std::string requested_backend;  // "unfused", "auto", "cudnn", ...
  std::string provider;           // what actually ran (RunInfo::provider, or "cudnn")
  Outcome outcome = Outcome::kOk;
  std::string reason;  // why FAILED or SKIPPED
  Case c;
  std::optional<Parity> parity;
  std::optional<Summary> timing;
  // Derived from timing.p50_us (see derive_metrics); absent when not timed, and the percentages
  // also when their ceiling was not measured (or the results file predates it).
  std::optional<double> tflops, gbps, pct_of_gemm_ceiling, pct_of_copy_ceiling;
  std::optional<double> speedup_vs_baseline;  // baseline p50 / this p50 at the same case
  std::optional<double> ratio_vs_cudnn;       // cuDNN p50 / this p50 (> 1: faster than cuDNN)

  std::string target() const { return chapter + ":" + workload; }
};

// How many input sets of set_bytes the timed launches rotate over: enough that the working set is
// twice L2 (each launch reads its inputs from DRAM), at most 64, within a quarter of the free
// memory (the rest is left for workspaces). The forward's and the backward's targets both use it.
int rotation_set_count(size_t set_bytes, size_t l2_bytes, size_t free_bytes);

// Fills tflops, gbps, pct_of_gemm_ceiling, pct_of_copy_ceiling, speedup_vs_baseline and
// ratio_vs_cudnn of every timed result. A chapter's baseline is its result with role "baseline" at
// the same case label; the cuDNN reference is the "peer" result at the same label. A ceiling <= 0
// (not measured) leaves its percentage out.
void derive_metrics(std::vector<Result>* results, double gemm_tflops, double copy_gbps);

}  // namespace flashcore::bench
