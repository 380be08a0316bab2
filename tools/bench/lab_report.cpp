#include "lab_report.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "number_format.hpp"
#include "report_series.hpp"
#include "subprocess.hpp"
#include "success_criteria.hpp"

namespace fs = std::filesystem;

namespace flashcore::bench {
namespace {

// Worst robustness rows the summary lists.
constexpr size_t kWorstRows = 10;

bool read_text(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *text = s.str();
  return true;
}

std::string env_value(const RunRecord& run, const std::string& key) {
  for (const auto& [k, v] : run.environment) {
    if (k == key) return v;
  }
  return "";
}

void sources_section(const ReportInputs& in, Document* doc) {
  std::vector<std::string> items;
  for (size_t i = 0; i < in.runs.size(); ++i) {
    const RunRecord& r = in.runs[i];
    items.push_back("results `" + in.run_paths[i] + "`: " + env_value(r, "device") + ", " +
                    r.created_utc + ", commit " + r.git_commit + ", profile " + r.profile + ", " +
                    std::to_string(r.results.size()) + " results");
  }
  for (size_t i = 0; i < in.profiles.size(); ++i) {
    items.push_back("profile `" + in.profile_paths[i] + "`: " + in.profiles[i].device + ", " +
                    in.profiles[i].created_utc + ", metrics set " + in.profiles[i].metrics_set);
  }
  for (size_t i = 0; i < in.robust.size(); ++i) {
    items.push_back("robustness `" + in.robust_paths[i] + "`: " + in.robust[i].device + ", " +
                    in.robust[i].created_utc + ", grid " + in.robust[i].grid);
  }
  doc->heading(2, "Inputs");
  doc->list(items);
}

void comparison_section(const std::map<std::string, std::vector<Timed>>& timed, Document* doc) {
  doc->heading(2, "Comparison");
  doc->paragraph(
      "Per shape, each implementation's best p50 over the inputs (per-launch times, same timer "
      "rules in flashcore-bench and bench/peers.py). TFLOP/s from p50 (4·B·Hq·Sq·Sk·D, halved "
      "for causal). **vs flashcore** = this p50 / flashcore's best p50 at the shape (above 1: "
      "flashcore is faster).");
  Table t{{"case", "implementation", "source", "p50 us", "p90 us", "TFLOP/s", "vs flashcore"}, {}};
  for (const auto& [label, at] : timed) {
    const Timed* ours = best_of(at, Family::kFlashcore);
    for (const Timed& x : at) {
      t.rows.push_back({label, x.name, "`" + x.source + "`", format_number("%.2f", x.p50_us),
                        format_number("%.2f", x.p90_us), format_number("%.1f", x.tflops),
                        ours != nullptr ? format_number("%.2fx", x.p50_us / ours->p50_us) : "-"});
    }
  }
  if (t.rows.empty()) {
    doc->paragraph("No timed results in the inputs.");
  } else {
    doc->table(t);
  }
}

void journey_section(const std::map<std::string, std::vector<Timed>>& timed, Document* doc) {
  doc->heading(2, "The journey");
  doc->paragraph(
      "scalar -> WMMA -> sm80 -> sm90, then the peers measured at the same shape (cuDNN, PyTorch "
      "SDPA's fastest backend, Triton, FlexAttention, CUTLASS FMHA where present). Shown for "
      "every shape with at least two of flashcore's journey steps.");
  const std::vector<std::pair<Family, const char*>> peers = {{Family::kCudnn, "cuDNN"},
                                                             {Family::kSdpa, "PyTorch SDPA"},
                                                             {Family::kTriton, "Triton"},
                                                             {Family::kFlex, "FlexAttention"},
                                                             {Family::kCutlass, "CUTLASS FMHA"}};
  bool any = false;
  for (const auto& [label, at] : timed) {
    std::vector<const Timed*> steps;
    for (const std::string& provider : journey_providers()) {
      for (const Timed& x : at) {
        if (x.family == Family::kFlashcore && x.provider == provider) steps.push_back(&x);
      }
    }
    if (steps.size() < 2) continue;
    any = true;
    const double start_us = steps.front()->p50_us;
    Table t{{"step", "implementation", "p50 us", "TFLOP/s", "speedup over " + steps.front()->name},
            {}};
    for (const Timed* s : steps) {
      t.rows.push_back({s->provider, s->name, format_number("%.2f", s->p50_us),
                        format_number("%.1f", s->tflops),
                        format_number("%.2fx", start_us / s->p50_us)});
    }
    for (const auto& [family, step] : peers) {
      if (const Timed* p = best_of(at, family)) {
        t.rows.push_back({std::string(step) + " (peer)", p->name, format_number("%.2f", p->p50_us),
                          format_number("%.1f", p->tflops),
                          format_number("%.2fx", start_us / p->p50_us)});
      }
    }
    doc->paragraph("**" + label + "**");
    doc->table(t);
  }
  if (!any) doc->paragraph("No shape has two or more of flashcore's journey steps.");
}

void criteria_section(const ReportInputs& in,
                      const std::map<std::string, std::vector<Timed>>& timed, Document* doc) {
  doc->heading(2, "Success criteria of the seed reports");
  doc->paragraph(
      "Computed from the inputs above; \"not evaluated\" names the data that is missing.");
  Table t{{"criterion", "verdict", "evidence", "seed"}, {}};
  for (const Criterion& c : evaluate_criteria(timed, in.runs, in.profiles, in.robust)) {
    const std::string verdict = c.verdict == Verdict::kNotEvaluated
                                    ? verdict_name(c.verdict)
                                    : "**" + std::string(verdict_name(c.verdict)) + "**";
    t.rows.push_back({c.claim, verdict, c.evidence, c.seed});
  }
  doc->table(t);
}

std::string metric_cell(const KernelProfile& k, const char* key, const char* format) {
  const auto it = k.metrics.find(key);
  return it == k.metrics.end() ? "-" : format_number(format, it->second.value);
}

void profile_section(const ReportInputs& in, Document* doc) {
  doc->heading(2, "Profile summary");
  if (in.profiles.empty()) {
    doc->paragraph("No profile.json in the inputs (`flashcore-bench profile`).");
    return;
  }
  doc->paragraph(
      "The main (longest) kernel of each profiled launch; profile.md has every kernel "
      "and the ncu metric behind each column.");
  Table t{{"target", "case", "provider", "kernel", "us", "SM busy %", "tensor %", "DRAM %",
           "occupancy %", "regs", "smem/CTA", "local B", "bank confl.", "top stall"},
          {}};
  std::vector<std::string> misses;
  for (const ProfileRecord& p : in.profiles) {
    for (const ProfileEntry& e : p.entries) {
      const KernelProfile* k = main_kernel(e.kernels);
      if (k == nullptr) {
        t.rows.push_back({e.target, e.c.label(), e.provider, e.status + ": " + e.reason, "", "", "",
                          "", "", "", "", "", "", ""});
        continue;
      }
      t.rows.push_back(
          {e.target, e.c.label(), e.provider, "`" + k->name + "`",
           metric_cell(*k, "duration_us", "%.2f"), metric_cell(*k, "sm_busy_pct", "%.1f"),
           metric_cell(*k, "tensor_pipe_pct", "%.1f"),
           metric_cell(*k, "dram_throughput_pct", "%.1f"),
           metric_cell(*k, "achieved_occupancy_pct", "%.1f"),
           metric_cell(*k, "registers_per_thread", "%.0f"),
           metric_cell(*k, "smem_per_cta_bytes", "%.0f"),
           metric_cell(*k, "local_memory_bytes", "%.0f"),
           metric_cell(*k, "smem_bank_conflicts", "%.0f"),
           k->stalls.empty() ? "-"
                             : k->stalls.front().reason + " " +
                                   format_number("%.2f", k->stalls.front().cycles_per_issue)});
    }
    for (const std::string& m : profile_misses(p)) misses.push_back(m);
  }
  doc->table(t);
  if (!misses.empty()) {
    doc->paragraph("**Thresholds missed**:");
    doc->list(misses);
  }
}

void robust_section(const ReportInputs& in, Document* doc) {
  doc->heading(2, "Robustness summary");
  if (in.robust.empty()) {
    doc->paragraph("No robust.json in the inputs (`flashcore-bench robust`).");
    return;
  }
  for (const RobustRecord& r : in.robust) {
    const RobustCounts c = count(r);
    doc->paragraph("Grid " + r.grid + " on " + r.device + ": " + std::to_string(c.cells) +
                   " cells, " + std::to_string(r.results.size()) +
                   " results: " + std::to_string(c.passed) + " passed, **" +
                   std::to_string(c.failed) + " failed** (" + std::to_string(c.non_finite) +
                   " with NaN/Inf), " + std::to_string(c.rejected) +
                   " rejected by their provider, " + std::to_string(c.skipped) + " skipped" +
                   (r.interrupted ? "; interrupted: " + r.interruption : "") + ".");
    // Per provider: results, failures and the worst error relative to the tolerance.
    std::map<std::string, std::vector<const RobustResult*>> by_provider;
    for (const RobustResult& x : r.results) by_provider[x.provider].push_back(&x);
    Table per{{"provider", "passed", "failed", "rejected", "worst rel L2 / tolerance"}, {}};
    for (const auto& [provider, rows] : by_provider) {
      size_t passed = 0, failed = 0, rejected = 0;
      double worst = 0;
      for (const RobustResult* x : rows) {
        passed += x->status == RobustStatus::kPass;
        failed += x->status == RobustStatus::kFailed;
        rejected += x->status == RobustStatus::kRejected;
        if (x->ran && x->tolerance > 0) worst = std::max(worst, x->stats.rel_l2 / x->tolerance);
      }
      per.rows.push_back({provider, std::to_string(passed), std::to_string(failed),
                          std::to_string(rejected), format_number("%.2f", worst)});
    }
    doc->table(per);
    std::vector<RobustResult> sorted = r.results;
    sort_worst_first(&sorted);
    Table worst{{"provider", "cell", "status", "rel L2", "NaN", "Inf"}, {}};
    for (size_t i = 0; i < sorted.size() && worst.rows.size() < kWorstRows; ++i) {
      const RobustResult& x = sorted[i];
      if (x.status == RobustStatus::kRejected || x.status == RobustStatus::kSkipped) continue;
      worst.rows.push_back(
          {x.provider, x.cell.name(),
           std::string(robust_status_name(x.status)) + (x.reason.empty() ? "" : ": " + x.reason),
           format_number("%.2e", x.stats.rel_l2), std::to_string(x.stats.nan_count),
           std::to_string(x.stats.inf_count)});
    }
    doc->paragraph("Worst measured results:");
    doc->table(worst);
  }
}

void plots_section(const std::vector<PlotSet>& plots, Document* doc) {
  if (plots.empty()) return;
  doc->heading(2, "Plots");
  for (const PlotSet& p : plots) {
    if (!p.unavailable.empty()) {
      doc->paragraph("Plots of `" + p.source + "` unavailable: " + p.unavailable +
                     " (the tables above are complete without them).");
      continue;
    }
    for (const std::string& image : p.images) doc->image(image, "plot of " + p.source);
  }
}

}  // namespace

bool load_report_inputs(const std::vector<std::string>& paths, ReportInputs* inputs,
                        std::string* error) {
  *inputs = ReportInputs{};
  for (const std::string& path : paths) {
    std::string text, why;
    Json json;
    if (!read_text(path, &text)) {
      *error = "cannot read " + path;
      return false;
    }
    if (!parse_json(text, &json, &why)) {
      *error = path + ": " + why;
      return false;
    }
    const std::string schema = string_or(json, "schema", "");
    bool ok = false;
    if (schema == kResultsSchema) {
      inputs->runs.emplace_back();
      inputs->run_paths.push_back(path);
      ok = from_json(json, &inputs->runs.back(), &why);
    } else if (schema == kProfileSchema) {
      inputs->profiles.emplace_back();
      inputs->profile_paths.push_back(path);
      ok = from_json(json, &inputs->profiles.back(), &why);
    } else if (schema == kRobustSchema) {
      inputs->robust.emplace_back();
      inputs->robust_paths.push_back(path);
      ok = from_json(json, &inputs->robust.back(), &why);
    } else {
      why = "schema '" + schema + "' is none of " + kResultsSchema + ", " + kProfileSchema + ", " +
            kRobustSchema;
    }
    if (!ok) {
      *error = path + ": " + why;
      return false;
    }
  }
  return true;
}

std::vector<PlotSet> draw_plots(const ReportInputs& inputs, const std::string& python,
                                const std::string& plot_script, const std::string& out_dir) {
  std::vector<PlotSet> plots;
  for (size_t i = 0; i < inputs.run_paths.size(); ++i) {
    PlotSet set;
    set.source = inputs.run_paths[i];
    const std::string rel = "plots/" + std::to_string(i);
    const fs::path dir = fs::path(out_dir) / rel;
    std::error_code ec;
    fs::create_directories(dir, ec);
    const std::string log = (dir / "plot.log").string();
    const CommandResult r =
        run_command({python, plot_script, set.source, "--out", dir.string()}, log, log);
    if (!r.started) {
      set.unavailable = r.error;
    } else if (r.exit_code != 0) {
      std::string text;
      read_text(log, &text);
      while (!text.empty() && text.back() == '\n') text.pop_back();
      const size_t last = text.rfind('\n');
      set.unavailable = last == std::string::npos ? text : text.substr(last + 1);
      if (set.unavailable.empty())
        set.unavailable = "plot.py exited " + std::to_string(r.exit_code);
    } else {
      for (const char* name : {"tflops.png", "speedup.png"}) {
        if (fs::exists(dir / name)) set.images.push_back(rel + "/" + name);
      }
    }
    plots.push_back(set);
  }
  return plots;
}

Document build_report(const ReportInputs& inputs, const std::vector<PlotSet>& plots) {
  Document doc;
  doc.heading(1, "flashcore: the comparison report");
  const std::map<std::string, std::vector<Timed>> timed = collect_timed(inputs.runs);
  sources_section(inputs, &doc);
  criteria_section(inputs, timed, &doc);
  journey_section(timed, &doc);
  comparison_section(timed, &doc);
  profile_section(inputs, &doc);
  robust_section(inputs, &doc);
  plots_section(plots, &doc);
  return doc;
}

}  // namespace flashcore::bench
