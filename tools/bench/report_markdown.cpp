#include "report_markdown.hpp"

#include <cstdio>
#include <optional>
#include <sstream>

#include "targets.hpp"

namespace flashcore::bench {
namespace {

std::string num(const std::optional<double>& v, const char* format) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, *v);
  return buf;
}

std::string status_cell(const Result& r) {
  if (r.outcome == Outcome::kOk) return "ok";
  return std::string("**") + outcome_name(r.outcome) + "**: " + r.reason;
}

std::string parity_cell(const Result& r) {
  if (!r.parity) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2e (%s)%s", r.parity->rel_l2, r.parity->reference.c_str(),
                r.parity->has_nan ? " NaN" : "");
  return buf;
}

std::optional<double> p50(const Result& r) {
  return r.timing ? std::optional<double>(r.timing->p50_us) : std::nullopt;
}

void comparison_table(const std::vector<Result>& results, const std::string& chapter,
                      std::ostringstream& out) {
  out << "| target | case | provider | status | parity rel L2 | min us | p50 us | p90 us | "
         "mean us | stdev us | TFLOP/s | GB/s | % GEMM | % copy | vs baseline | vs cuDNN |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Result& r : results) {
    if (r.chapter != chapter) continue;
    const std::optional<Summary>& t = r.timing;
    out << "| " << r.workload << " | " << r.c.describe() << " | " << r.provider << " | "
        << status_cell(r) << " | " << parity_cell(r) << " | "
        << num(t ? std::optional<double>(t->min_us) : std::nullopt, "%.2f") << " | "
        << num(p50(r), "%.2f") << " | "
        << num(t ? std::optional<double>(t->p90_us) : std::nullopt, "%.2f") << " | "
        << num(t ? std::optional<double>(t->mean_us) : std::nullopt, "%.2f") << " | "
        << num(t ? std::optional<double>(t->stdev_us) : std::nullopt, "%.2f") << " | "
        << num(r.tflops, "%.1f") << " | " << num(r.gbps, "%.0f") << " | "
        << num(r.pct_of_gemm_ceiling, "%.1f") << " | " << num(r.pct_of_copy_ceiling, "%.1f")
        << " | " << num(r.speedup_vs_baseline, "%.2fx") << " | " << num(r.ratio_vs_cudnn, "%.2f")
        << " |\n";
  }
}

// The journey reads one case (the chapter's first) across the chapter's workloads in table order,
// then the peers at that case.
void journey_table(const std::vector<Result>& results, const std::string& chapter,
                   std::ostringstream& out) {
  std::string label, describe;
  for (const Result& r : results) {
    if (r.chapter == chapter) {
      label = r.c.label();
      describe = r.c.describe();
      break;
    }
  }
  if (label.empty()) return;
  out << "\nJourney at " << describe << ":\n\n"
      << "| step | provider | status | p50 us | TFLOP/s | % GEMM | % copy | speedup over baseline "
         "| "
         "vs cuDNN |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
  auto row = [&](const Result& r, const std::string& step) {
    out << "| " << step << " | " << r.provider << " | " << status_cell(r) << " | "
        << num(p50(r), "%.2f") << " | " << num(r.tflops, "%.1f") << " | "
        << num(r.pct_of_gemm_ceiling, "%.1f") << " | " << num(r.pct_of_copy_ceiling, "%.1f")
        << " | " << num(r.speedup_vs_baseline, "%.2fx") << " | " << num(r.ratio_vs_cudnn, "%.2f")
        << " |\n";
  };
  for (const Result& r : results) {
    if (r.chapter == chapter && r.c.label() == label) row(r, r.workload);
  }
  if (chapter.rfind("peers/", 0) == 0) return;
  // Every peer measured at the case: cuDNN (always run), and CUTLASS FMHA when selected.
  for (const Result& r : results) {
    if (r.role == "peer" && r.chapter != chapter && r.c.label() == label) {
      // The peer has no baseline of this chapter; show its speedup against this chapter's.
      Result peer = r;
      for (const Result& b : results) {
        if (b.chapter == chapter && b.role == "baseline" && b.c.label() == label && b.timing &&
            r.timing && r.timing->p50_us > 0) {
          peer.speedup_vs_baseline = b.timing->p50_us / r.timing->p50_us;
        }
      }
      row(peer, r.chapter == cudnn_peer().chapter->name ? "cuDNN (peer)" : r.workload + " (peer)");
    }
  }
}

}  // namespace

std::string render_markdown(const RunRecord& record) {
  std::ostringstream out;
  out << "# flashcore-bench report\n\n"
      << "- created: " << record.created_utc << "\n"
      << "- profile: " << record.profile << "\n"
      << "- git commit: " << record.git_commit << "\n"
      << "- command: `" << record.command_line << "`\n";
  for (const auto& [key, value] : record.environment) out << "- " << key << ": " << value << "\n";
  if (record.gemm_tflops > 0) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%.1f TFLOP/s (%s)", record.gemm_tflops,
                  record.gemm_problem.c_str());
    out << "- GEMM ceiling (% GEMM below): " << buf << "\n";
  }
  if (record.copy_gbps > 0) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%.0f GB/s (%s)", record.copy_gbps,
                  record.copy_problem.c_str());
    out << "- copy ceiling (% copy below): " << buf << "\n";
  }
  if (!record.knobs.empty()) {
    out << "- knobs:";
    for (const auto& [key, value] : record.knobs) out << " `" << key << "=" << value << "`";
    out << "\n";
  }
  out << "\nTimes are per launch (CUDA events; small shapes by CUDA-graph replay). TFLOP/s and "
         "GB/s use p50; FLOPs = 4*B*Hq*Sq*Sk*D, halved for causal; bytes = Q, K, V read and O "
         "written once (backward cases: 2.5x those FLOPs, and Q, K, V, O, dO read and dQ, dK, dV "
         "written). % GEMM = TFLOP/s / GEMM ceiling, % copy = GB/s / copy ceiling. vs cuDNN = "
         "cuDNN p50 / p50 (> 1 is faster than cuDNN).\n";

  std::vector<std::string> chapters_seen;
  for (const Result& r : record.results) {
    bool seen = false;
    for (const std::string& c : chapters_seen) seen = seen || c == r.chapter;
    if (!seen) chapters_seen.push_back(r.chapter);
  }
  for (const std::string& chapter : chapters_seen) {
    out << "\n## " << chapter << "\n\n";
    comparison_table(record.results, chapter, out);
    journey_table(record.results, chapter, out);
  }

  out << "\n## Expectations\n\n";
  if (!record.expectations_checked) {
    out << "Not checked (run with --check-expectations).\n";
  } else {
    out << "Files:";
    for (const std::string& f : record.expectations_files) out << " `" << f << "`";
    out << "\n\n";
    if (record.regressions.empty()) {
      out << "**PASS**: no regressions.\n";
    } else {
      out << "**FAIL**: " << record.regressions.size() << " regression(s):\n\n";
      for (const std::string& r : record.regressions) out << "- " << r << "\n";
    }
  }
  return out.str();
}

}  // namespace flashcore::bench
