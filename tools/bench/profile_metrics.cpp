#include "profile_metrics.hpp"

#include <algorithm>
#include <regex>

namespace flashcore::bench {
namespace {

// How a column's unit converts to the report's: durations to microseconds, sizes to bytes (ncu's
// prefixes are decimal: "Kbyte" is 1000 bytes).
enum class Scale { kNone, kToMicroseconds, kToBytes };

// One way of reading a quantity: the sum of these columns (all present), times factor.
struct Source {
  std::vector<const char*> columns;
  Scale scale;
  double factor;
};

struct MetricSources {
  const char* key;
  std::vector<Source> sources;  // the first one whose columns are all present wins
};

// L1 sectors are 32 bytes: the fallback when ncu gives local traffic in sectors only.
constexpr double kBytesPerSector = 32;

const std::vector<MetricSources>& metric_sources() {
  static const std::vector<MetricSources> kSources = {
      {"duration_us", {{{"gpu__time_duration.sum"}, Scale::kToMicroseconds, 1}}},
      {"sm_busy_pct", {{{"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"}, Scale::kNone, 1}}},
      {"sm_throughput_pct",
       {{{"sm__throughput.avg.pct_of_peak_sustained_elapsed"}, Scale::kNone, 1}}},
      // tensor_pipe_pct is the busiest tensor pipe; see kernel_profile().
      {"dram_throughput_pct",
       {{{"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"}, Scale::kNone, 1},
        {{"dram__throughput.avg.pct_of_peak_sustained_elapsed"}, Scale::kNone, 1}}},
      {"achieved_occupancy_pct",
       {{{"sm__warps_active.avg.pct_of_peak_sustained_active"}, Scale::kNone, 1}}},
      {"issue_active_pct",
       {{{"smsp__issue_active.avg.pct_of_peak_sustained_active"}, Scale::kNone, 1}}},
      {"xu_pipe_pct",
       {{{"sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"}, Scale::kNone, 1}}},
      {"l2_throughput_pct",
       {{{"lts__t_sectors.avg.pct_of_peak_sustained_elapsed"}, Scale::kNone, 1}}},
      {"registers_per_thread", {{{"launch__registers_per_thread"}, Scale::kNone, 1}}},
      {"smem_per_cta_bytes",
       {{{"launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"},
         Scale::kToBytes,
         1}}},
      {"local_memory_bytes",
       {{{"l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
          "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"},
         Scale::kToBytes,
         1},
        {{"l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
          "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"},
         Scale::kNone,
         kBytesPerSector}}},
      {"smem_bank_conflicts",
       {{{"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"},
         Scale::kNone,
         1},
        {{"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"}, Scale::kNone, 1}}},
  };
  return kSources;
}

// The factor that turns a value in `unit` into the report's unit, or nullopt for a unit this
// table does not know (the metric is then reported as not collected rather than wrong).
std::optional<double> unit_factor(std::string unit, Scale scale) {
  if (scale == Scale::kNone) return 1.0;
  if (const size_t slash = unit.find('/'); slash != std::string::npos) unit.resize(slash);
  if (scale == Scale::kToMicroseconds) {
    if (unit == "ns" || unit == "nsecond") return 1e-3;
    if (unit == "us" || unit == "usecond") return 1.0;
    if (unit == "ms" || unit == "msecond") return 1e3;
    if (unit == "s" || unit == "second") return 1e6;
    return std::nullopt;
  }
  if (unit == "byte" || unit.empty()) return 1.0;
  if (unit == "Kbyte") return 1e3;
  if (unit == "Mbyte") return 1e6;
  if (unit == "Gbyte") return 1e9;
  return std::nullopt;
}

std::optional<MetricValue> read_source(const NcuRow& row, const Source& source) {
  MetricValue v;
  for (const char* column : source.columns) {
    const std::optional<double> x = row.number(column);
    if (!x) return std::nullopt;
    const std::optional<double> factor = unit_factor(row.find(column)->unit, source.scale);
    if (!factor) return std::nullopt;
    v.value += *x * *factor * source.factor;
    v.metric += (v.metric.empty() ? "" : " + ") + std::string(column);
  }
  return v;
}

// Tensor pipes: HMMA (mma.sync) and, on Hopper, GMMA (wgmma); the names have changed between ncu
// versions, so every "sm__pipe_tensor*cycles_active" utilisation is read and the busiest is kept.
const std::regex kTensorPipe(
    R"(^sm__pipe_tensor\w*_cycles_active\.avg\.pct_of_peak_sustained_active$)");
// Warp stall reasons, cycles per issued instruction (ncu's Warp State Statistics).
const std::regex kStall(R"(^smsp__average_warps?_issue_stalled_(\w+)_per_issue_active\.ratio$)");
const std::string kNotIssuedSuffix = "_not_issued";

}  // namespace

const std::vector<ProfileMetric>& profile_metrics() {
  static const std::vector<ProfileMetric> kMetrics = {
      {"duration_us", "us", "kernel duration (one launch)"},
      {"sm_busy_pct", "SM busy %", "elapsed cycles in which the SM had at least one warp"},
      {"sm_throughput_pct", "SM thru %",
       "compute throughput: the busiest SM sub-unit, % of its peak (Speed of Light)"},
      {"tensor_pipe_pct", "tensor %",
       "busiest tensor pipe (GMMA on Hopper's wgmma, HMMA for mma.sync), % of active cycles"},
      {"dram_throughput_pct", "DRAM %", "DRAM throughput, % of peak"},
      {"achieved_occupancy_pct", "occupancy %", "achieved occupancy: active warps / max"},
      {"issue_active_pct", "issue %", "cycles in which a scheduler issued an instruction"},
      {"xu_pipe_pct", "XU %", "special-function pipe (MUFU: the softmax's exp2), % of peak"},
      {"l2_throughput_pct", "L2 %", "L2 throughput, % of peak"},
      {"registers_per_thread", "regs", "registers per thread"},
      {"smem_per_cta_bytes", "smem/CTA", "shared memory per CTA, static + dynamic, bytes"},
      {"local_memory_bytes", "local B", "local-memory (register spill) traffic, bytes"},
      {"smem_bank_conflicts", "bank confl.", "shared-memory bank conflicts, loads + stores"},
  };
  return kMetrics;
}

KernelProfile kernel_profile(const NcuRow& row) {
  KernelProfile k;
  if (const NcuCell* c = row.find("Kernel Name")) k.name = c->text;
  if (const NcuCell* c = row.find("Grid Size")) k.grid = c->text;
  if (const NcuCell* c = row.find("Block Size")) k.block = c->text;
  for (const MetricSources& m : metric_sources()) {
    for (const Source& source : m.sources) {
      if (const std::optional<MetricValue> v = read_source(row, source)) {
        k.metrics[m.key] = *v;
        break;
      }
    }
  }
  for (const std::string& column : row.columns) {
    std::smatch match;
    const std::optional<double> value = row.number(column);
    if (!value) continue;
    if (std::regex_match(column, kTensorPipe)) {
      const auto it = k.metrics.find("tensor_pipe_pct");
      if (it == k.metrics.end() || *value > it->second.value) {
        k.metrics["tensor_pipe_pct"] = {*value, column};
      }
    } else if (std::regex_match(column, match, kStall)) {
      const std::string reason = match[1];
      // "selected" is the cycle a warp issues, not a stall; the _not_issued variants restate
      // their reason for samples that did not issue.
      const bool restated = reason.size() > kNotIssuedSuffix.size() &&
                            reason.compare(reason.size() - kNotIssuedSuffix.size(),
                                           kNotIssuedSuffix.size(), kNotIssuedSuffix) == 0;
      if (reason != "selected" && !restated) k.stalls.push_back({reason, *value, column});
    }
  }
  std::stable_sort(k.stalls.begin(), k.stalls.end(),
                   [](const StallReason& a, const StallReason& b) {
                     return a.cycles_per_issue > b.cycles_per_issue;
                   });
  if (k.stalls.size() > kTopStalls) k.stalls.resize(kTopStalls);
  return k;
}

const KernelProfile* main_kernel(const std::vector<KernelProfile>& kernels) {
  const KernelProfile* best = nullptr;
  double best_us = -1;
  for (const KernelProfile& k : kernels) {
    const auto it = k.metrics.find("duration_us");
    const double us = it == k.metrics.end() ? -1 : it->second.value;
    if (best == nullptr || us > best_us) {
      best = &k;
      best_us = us;
    }
  }
  return best;
}

bool read_profile_thresholds(const Json& profile, const std::string& case_label,
                             const std::string& where, std::vector<ProfileBound>* bounds,
                             std::string* error) {
  bounds->clear();
  auto read_level = [&](const Json& level, const std::string& at) {
    if (!level.is_object()) {
      *error = at + " must be an object";
      return false;
    }
    for (const bool is_min : {true, false}) {
      const Json* side = find_member(level, is_min ? "min" : "max");
      if (side == nullptr || side->is_null()) continue;
      if (!side->is_object()) {
        *error = at + ": '" + (is_min ? "min" : "max") + "' must be an object of metric bounds";
        return false;
      }
      for (const auto& [key, bound] : side->items()) {
        const auto& metrics = profile_metrics();
        const bool known = std::any_of(metrics.begin(), metrics.end(),
                                       [&](const ProfileMetric& m) { return key == m.key; });
        if (!known) {
          std::string valid;
          for (const ProfileMetric& m : metrics)
            valid += (valid.empty() ? "" : ", ") + std::string(m.key);
          *error = at + ": unknown profile metric '" + key + "'; valid: " + valid;
          return false;
        }
        if (bound.is_null()) continue;
        if (!bound.is_number()) {
          *error = at + ": bound of '" + key + "' must be a number or null";
          return false;
        }
        auto same = std::find_if(bounds->begin(), bounds->end(), [&](const ProfileBound& b) {
          return b.key == key && b.is_min == is_min;
        });
        if (same != bounds->end()) {
          same->bound = bound.get<double>();
        } else {
          bounds->push_back({key, is_min, bound.get<double>()});
        }
      }
    }
    return true;
  };
  if (!read_level(profile, where + ": profile")) return false;
  const Json* cases = find_member(profile, "cases");
  if (cases == nullptr || cases->is_null()) return true;
  if (!cases->is_object()) {
    *error = where + ": profile.cases must be an object keyed by case label";
    return false;
  }
  const Json* entry = find_member(*cases, case_label);
  return entry == nullptr || read_level(*entry, where + ": profile.cases." + case_label);
}

std::vector<ThresholdVerdict> check_thresholds(const KernelProfile& kernel,
                                               const std::vector<ProfileBound>& bounds) {
  std::vector<ThresholdVerdict> verdicts;
  for (const ProfileBound& b : bounds) {
    ThresholdVerdict v;
    v.key = b.key;
    v.is_min = b.is_min;
    v.bound = b.bound;
    const auto it = kernel.metrics.find(b.key);
    if (it != kernel.metrics.end()) {
      v.value = it->second.value;
      v.metric = it->second.metric;
      v.passed = b.is_min ? *v.value >= b.bound : *v.value <= b.bound;
    }
    verdicts.push_back(v);
  }
  return verdicts;
}

}  // namespace flashcore::bench
