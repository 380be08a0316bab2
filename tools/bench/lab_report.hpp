// `flashcore-bench report`: the final comparison report from earlier artifacts. Reads any number
// of results.json (flashcore-bench run, bench/peers.py), profile.json and robust.json files and
// builds one document: the comparison table, the journey, the seed's success criteria, the
// profile and robustness summaries, and the plots of bench/plot.py.
#pragma once

#include <string>
#include <vector>

#include "profile_report.hpp"
#include "report_doc.hpp"
#include "report_json.hpp"
#include "robust_report.hpp"

namespace flashcore::bench {

struct ReportInputs {
  std::vector<std::string> run_paths, profile_paths, robust_paths;
  std::vector<RunRecord> runs;
  std::vector<ProfileRecord> profiles;
  std::vector<RobustRecord> robust;
};

// Reads each file and files it by its "schema". Fails, naming the file, on an unreadable file or
// an unknown schema.
bool load_report_inputs(const std::vector<std::string>& paths, ReportInputs* inputs,
                        std::string* error);

// The plots of one results.json: PNG paths relative to the output folder, or why there are none.
struct PlotSet {
  std::string source;  // the results.json
  std::vector<std::string> images;
  std::string unavailable;  // e.g. "matplotlib is not installed"; empty when images were drawn
};

// Runs `python bench/plot.py RESULTS --out OUT/plots/<n>` per results.json.
std::vector<PlotSet> draw_plots(const ReportInputs& inputs, const std::string& python,
                                const std::string& plot_script, const std::string& out_dir);

Document build_report(const ReportInputs& inputs, const std::vector<PlotSet>& plots);

}  // namespace flashcore::bench
