// The final report's view of timed results from any number of results.json files (flashcore-bench
// runs and bench/peers.py): per case label, one best time per implementation, named the same way
// whichever file it came from (flashcore's providers, cuDNN, SDPA's backends, Triton,
// FlexAttention, CUTLASS FMHA, eager PyTorch).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report_json.hpp"

namespace flashcore::bench {

// What an implementation is, for the journey and the success criteria.
enum class Family {
  kFlashcore,  // one of flashcore's providers (scalar, unfused, wmma, sm80, sm90)
  kCudnn,      // cuDNN fused SDPA (in-process peer, or SDPA's cuDNN backend)
  kSdpa,       // PyTorch SDPA's flash / efficient / math backends
  kTriton,
  kFlex,
  kCutlass,
  kEager,  // PyTorch eager unfused attention
  kOther,
};

struct Timed {
  std::string name;  // "flashcore sm90", "cuDNN", "SDPA flash", "Triton", ...
  Family family = Family::kOther;
  std::string provider;  // flashcore's provider name, else the peer's backend
  Case c;
  double p50_us = 0, p90_us = 0;
  double tflops = 0;
  std::string source;  // chapter:workload it came from
};

// Classifies a result; nullopt for results that are not an implementation's own time (the
// "flashcore" summary row of peers.py, which repeats its best provider).
std::optional<Timed> timed_of(const Result& r);

// Case label -> the best Timed per name, ordered: flashcore's journey (scalar, wmma, sm80, sm90,
// then other providers), then peers.
std::map<std::string, std::vector<Timed>> collect_timed(const std::vector<RunRecord>& runs);

// The fastest flashcore provider at a label, and the fastest of a family.
const Timed* best_of(const std::vector<Timed>& at_label, Family family);

// The journey's order of flashcore providers.
const std::vector<std::string>& journey_providers();  // scalar, wmma, sm80, sm90

}  // namespace flashcore::bench
