#include "report_series.hpp"

#include <algorithm>

namespace flashcore::bench {
namespace {

struct PeerName {
  const char* key;  // a workload or provider of the peer
  const char* name;
  Family family;
};

// bench/peers.py's workloads and the in-process cuDNN peer; CUTLASS FMHA when its peer lands.
const std::vector<PeerName> kPeers = {
    {"cudnn_sdpa", "cuDNN", Family::kCudnn},
    {"sdpa_cudnn", "SDPA cuDNN", Family::kCudnn},
    {"sdpa_flash", "SDPA flash", Family::kSdpa},
    {"sdpa_efficient", "SDPA efficient", Family::kSdpa},
    {"sdpa_math", "SDPA math", Family::kSdpa},
    {"triton", "Triton", Family::kTriton},
    {"flex_attention", "FlexAttention", Family::kFlex},
    {"cutlass", "CUTLASS FMHA", Family::kCutlass},
    {"eager_unfused", "PyTorch eager", Family::kEager},
};

int order(const Timed& t) {
  if (t.family == Family::kFlashcore) {
    const auto& steps = journey_providers();
    const auto it = std::find(steps.begin(), steps.end(), t.provider);
    return it == steps.end() ? static_cast<int>(steps.size())
                             : static_cast<int>(it - steps.begin());
  }
  return 100 + static_cast<int>(t.family);
}

}  // namespace

const std::vector<std::string>& journey_providers() {
  static const std::vector<std::string> kSteps = {"scalar", "wmma", "sm80", "sm90"};
  return kSteps;
}

std::optional<Timed> timed_of(const Result& r) {
  if (r.outcome != Outcome::kOk || !r.timing || r.timing->p50_us <= 0) return std::nullopt;
  Timed t;
  t.c = r.c;
  t.p50_us = r.timing->p50_us;
  t.p90_us = r.timing->p90_us;
  t.tflops = r.c.flops() / (t.p50_us * 1e-6) / 1e12;
  t.source = r.target();
  t.provider = r.provider;
  for (const PeerName& p : kPeers) {
    if (r.workload.find(p.key) != std::string::npos || r.provider == p.key) {
      t.name = p.name;
      t.family = p.family;
      return t;
    }
  }
  if (r.role == "peer") {
    t.name = r.workload;
    return t;
  }
  // bench/peers.py repeats its fastest flashcore provider as workload "flashcore".
  if (r.workload == "flashcore") return std::nullopt;
  t.family = Family::kFlashcore;
  t.name = "flashcore " + r.provider;
  return t;
}

std::map<std::string, std::vector<Timed>> collect_timed(const std::vector<RunRecord>& runs) {
  std::map<std::string, std::vector<Timed>> by_label;
  for (const RunRecord& run : runs) {
    for (const Result& r : run.results) {
      const std::optional<Timed> t = timed_of(r);
      if (!t) continue;
      std::vector<Timed>& at = by_label[t->c.label()];
      auto same =
          std::find_if(at.begin(), at.end(), [&](const Timed& x) { return x.name == t->name; });
      if (same == at.end()) {
        at.push_back(*t);
      } else if (t->p50_us < same->p50_us) {
        *same = *t;
      }
    }
  }
  for (auto& [label, at] : by_label) {
    std::stable_sort(at.begin(), at.end(),
                     [](const Timed& a, const Timed& b) { return order(a) < order(b); });
  }
  return by_label;
}

const Timed* best_of(const std::vector<Timed>& at_label, Family family) {
  const Timed* best = nullptr;
  for (const Timed& t : at_label) {
    if (t.family == family && (best == nullptr || t.p50_us < best->p50_us)) best = &t;
  }
  return best;
}

}  // namespace flashcore::bench
