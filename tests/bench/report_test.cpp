// flashcore-bench report: inputs filed by schema, one name per implementation across files, the
// seed's criteria computed (and flipped by the data), Markdown and HTML, and the plots.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fixtures.hpp"
#include "lab_report.hpp"
#include "report_series.hpp"
#include "success_criteria.hpp"

namespace fs = std::filesystem;

namespace flashcore::bench {
namespace {

using testing::fixture_path;

ReportInputs all_fixtures() {
  ReportInputs inputs;
  std::string error;
  EXPECT_TRUE(load_report_inputs(
      {fixture_path("results_flashcore.json"), fixture_path("results_peers.json"),
       fixture_path("profile.json"), fixture_path("robust.json")},
      &inputs, &error))
      << error;
  return inputs;
}

const Criterion& criterion(const std::vector<Criterion>& all, const std::string& word) {
  for (const Criterion& c : all) {
    if (c.claim.find(word) != std::string::npos) return c;
  }
  ADD_FAILURE() << "no criterion about " << word;
  return all.front();
}

TEST(ReportInputs, FilesEachInputByItsSchema) {
  const ReportInputs in = all_fixtures();
  EXPECT_EQ(in.runs.size(), 2u);
  EXPECT_EQ(in.profiles.size(), 1u);
  EXPECT_EQ(in.robust.size(), 1u);
  ReportInputs bad;
  std::string error;
  EXPECT_FALSE(load_report_inputs({fixture_path("ncu_raw_h100_decode.csv")}, &bad, &error));
  EXPECT_NE(error.find("ncu_raw_h100_decode.csv"), std::string::npos);
  EXPECT_FALSE(load_report_inputs({"/nonexistent/results.json"}, &bad, &error));
  EXPECT_NE(error.find("cannot read"), std::string::npos);
}

TEST(ReportSeries, NamesImplementationsAlikeAcrossFilesAndKeepsTheBest) {
  const auto timed = collect_timed(all_fixtures().runs);
  const std::vector<Timed>& s512 = timed.at("B1_H8_S512_D64_fp16");
  std::vector<std::string> names;
  for (const Timed& t : s512) names.push_back(t.name);
  // The journey's order first, then peers; peers.py's "flashcore" summary row is not a series.
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names[0], "flashcore scalar");
  EXPECT_EQ(names[1], "flashcore wmma");
  EXPECT_EQ(names[2], "flashcore sm80");
  EXPECT_EQ(names[3], "flashcore sm90");
  EXPECT_EQ(std::count(names.begin(), names.end(), "flashcore sm90"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "cuDNN"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "SDPA flash"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "Triton"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "FlexAttention"), 1);
  // The best of flashcore's sm90 times: peers.py's 5.9 us beats the lab's 6.1 us.
  const Timed* best = best_of(s512, Family::kFlashcore);
  ASSERT_NE(best, nullptr);
  EXPECT_DOUBLE_EQ(best->p50_us, 5.9);
  EXPECT_DOUBLE_EQ(best_of(s512, Family::kSdpa)->p50_us, 8.0);
}

TEST(SuccessCriteria, ComputedFromTheFixtures) {
  const ReportInputs in = all_fixtures();
  const auto criteria = evaluate_criteria(collect_timed(in.runs), in.runs, in.profiles, in.robust);
  // SDPA: 8.0 / 5.9 at S512 and 702 / 600 at S4096, both >= 1.10.
  const Criterion& sdpa = criterion(criteria, "SDPA");
  EXPECT_EQ(sdpa.verdict, Verdict::kHeld) << sdpa.evidence;
  EXPECT_NE(sdpa.evidence.find("2 of 2 shapes"), std::string::npos) << sdpa.evidence;
  EXPECT_EQ(criterion(criteria, "scalar").verdict, Verdict::kHeld);  // 110.4 / 5.9 = 18.7x
  EXPECT_EQ(criterion(criteria, "p50 < 26").verdict, Verdict::kHeld);
  EXPECT_EQ(criterion(criteria, "parity").verdict, Verdict::kHeld);
  // The fixture's combine kernel moves 1540 bytes of local memory.
  const Criterion& spills = criterion(criteria, "spills");
  EXPECT_EQ(spills.verdict, Verdict::kMissed);
  EXPECT_NE(spills.evidence.find("1540 B"), std::string::npos) << spills.evidence;
  // sm80's decode kernel reaches 61.3% of DRAM peak, under 65%.
  const Criterion& decode = criterion(criteria, "decode");
  EXPECT_EQ(decode.verdict, Verdict::kMissed);
  EXPECT_NE(decode.evidence.find("DRAM 61.3%"), std::string::npos) << decode.evidence;
  EXPECT_EQ(criterion(criteria, "robustness").verdict, Verdict::kMissed);
}

TEST(SuccessCriteria, FollowTheData) {
  ReportInputs in = all_fixtures();
  // SDPA 8% slower at S4096 is under the 10% margin: one shape left, the criterion is missed.
  for (Result& r : in.runs[1].results) {
    if (r.workload == "sdpa_flash" && r.c.seqlen_q == 4096) r.timing->p50_us = 650;
  }
  auto criteria = evaluate_criteria(collect_timed(in.runs), in.runs, in.profiles, in.robust);
  EXPECT_EQ(criterion(criteria, "SDPA").verdict, Verdict::kMissed);
  EXPECT_NE(criterion(criteria, "SDPA").evidence.find("1 of 2 shapes"), std::string::npos);
  // Without peers.py's file there is no SDPA, and the canonical best is the lab's 6.1 us.
  in.runs.erase(in.runs.begin() + 1);
  criteria = evaluate_criteria(collect_timed(in.runs), in.runs, {}, {});
  EXPECT_EQ(criterion(criteria, "SDPA").verdict, Verdict::kNotEvaluated);
  EXPECT_NE(criterion(criteria, "SDPA").evidence.find("peers.py"), std::string::npos);
  EXPECT_NE(criterion(criteria, "p50 < 26").evidence.find("6.10"), std::string::npos);
  EXPECT_EQ(criterion(criteria, "spills").verdict, Verdict::kNotEvaluated);
  EXPECT_EQ(criterion(criteria, "robustness").verdict, Verdict::kNotEvaluated);
  // A FAILED parity gate misses the correctness criterion.
  in.runs[0].results[0].outcome = Outcome::kFailed;
  criteria = evaluate_criteria(collect_timed(in.runs), in.runs, {}, {});
  EXPECT_EQ(criterion(criteria, "parity").verdict, Verdict::kMissed);
}

TEST(ReportDocument, MarkdownHasEverySection) {
  const ReportInputs in = all_fixtures();
  const std::string md = render_markdown(build_report(in, {}));
  for (const char* section :
       {"# flashcore: the comparison report", "## Inputs", "## Success criteria", "## The journey",
        "## Comparison", "## Profile summary", "## Robustness summary"}) {
    EXPECT_NE(md.find(section), std::string::npos) << section;
  }
  // The journey at S512: scalar first, sm90 after sm80, then the peers.
  const size_t journey = md.find("## The journey");
  const size_t scalar = md.find("| scalar | flashcore scalar |", journey);
  const size_t sm90 = md.find("| sm90 | flashcore sm90 |", journey);
  const size_t sdpa = md.find("| PyTorch SDPA (peer) | SDPA flash |", journey);
  ASSERT_NE(scalar, std::string::npos);
  EXPECT_LT(scalar, sm90);
  EXPECT_LT(sm90, sdpa);
  EXPECT_NE(md.find("18.71x"), std::string::npos);  // 110.4 / 5.9 against the scalar start
  EXPECT_NE(md.find("**MISSED**"), std::string::npos);
  EXPECT_NE(md.find("dram_throughput_pct 61.3 < min 65"), std::string::npos);
}

// The flashcore chapter's journey reads scalar -> WMMA -> sm80 -> sm90 against cuDNN, PyTorch
// SDPA, Triton, FlexAttention and CUTLASS FMHA (issue 19): with a peers/cutlass result at the
// canonical shape, as `flashcore-bench run --targets flashcore,peers/cutlass` records it, every
// one of them has its row, in that order.
TEST(ReportDocument, TheJourneyHasEveryPeerWithCutlassLast) {
  ReportInputs in = all_fixtures();
  Result cutlass;
  for (const Result& r : in.runs[0].results) {
    if (r.provider == "sm90" && r.c.seqlen_q == 512) cutlass = r;
  }
  ASSERT_EQ(cutlass.provider, "sm90");
  cutlass.chapter = "peers/cutlass";
  cutlass.workload = "cutlass_fmha";
  cutlass.role = "peer";
  cutlass.provider = "cutlass-pingpong";
  in.runs[0].results.push_back(cutlass);
  const std::string md = render_markdown(build_report(in, {}));
  size_t at = md.find("**B1_H8_S512_D64_fp16**", md.find("## The journey"));
  ASSERT_NE(at, std::string::npos);
  for (const char* row : {"| scalar | flashcore scalar |", "| wmma | flashcore wmma |",
                          "| sm80 | flashcore sm80 |", "| sm90 | flashcore sm90 |",
                          "| cuDNN (peer) |", "| PyTorch SDPA (peer) |", "| Triton (peer) |",
                          "| FlexAttention (peer) |", "| CUTLASS FMHA (peer) | CUTLASS FMHA |"}) {
    const size_t next = md.find(row, at);
    ASSERT_NE(next, std::string::npos) << row << " missing or out of order";
    at = next;
  }
}

TEST(ReportDocument, HtmlEscapesAndEmbedsImages) {
  Document doc;
  doc.heading(1, "a <b> & `c`");
  doc.table({{"x|y"}, {{"**bold**"}}});
  const fs::path dir = fs::temp_directory_path() / ("flashcore_report_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "p.png", std::ios::binary) << "PNG!";
  doc.image("p.png", "plot");
  doc.image("missing.png", "plot");
  const std::string html = render_html(doc, "t", dir.string());
  EXPECT_NE(html.find("<h1>a &lt;b&gt; &amp; <code>c</code></h1>"), std::string::npos);
  EXPECT_NE(html.find("<td><strong>bold</strong></td>"), std::string::npos);
  EXPECT_NE(html.find("data:image/png;base64,UE5HIQ=="), std::string::npos);
  EXPECT_NE(html.find("missing.png is missing"), std::string::npos);
  EXPECT_NE(render_markdown(doc).find("| x\\|y |"), std::string::npos);
  fs::remove_all(dir);
}

TEST(ReportDocument, Base64) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64(std::string("\xff\x00\x10", 3)), "/wAQ");
}

class ReportPlots : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("flashcore_plots_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A stand-in for python: argv is plot.py, results.json, --out, DIR.
  std::string fake_python(const std::string& body) {
    const fs::path path = dir_ / "python";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }
  fs::path dir_;
};

TEST_F(ReportPlots, DrawnPlotsAreEmbedded) {
  ReportInputs in = all_fixtures();
  const std::string python = fake_python("printf 'PNG' > \"$4/tflops.png\"");
  const std::vector<PlotSet> plots = draw_plots(in, python, "plot.py", dir_.string());
  ASSERT_EQ(plots.size(), 2u);
  EXPECT_TRUE(plots[0].unavailable.empty()) << plots[0].unavailable;
  ASSERT_EQ(plots[0].images, std::vector<std::string>{"plots/0/tflops.png"});
  const std::string html = render_html(build_report(in, plots), "r", dir_.string());
  EXPECT_NE(html.find("data:image/png;base64,UE5H"), std::string::npos);
}

TEST_F(ReportPlots, WithoutMatplotlibTheReportSaysSoAndKeepsItsTables) {
  ReportInputs in = all_fixtures();
  const std::string python = fake_python(
      "echo 'plot.py: matplotlib is not installed (pip install -c constraints.txt matplotlib)' "
      ">&2; "
      "exit 1");
  const std::vector<PlotSet> plots = draw_plots(in, python, "plot.py", dir_.string());
  ASSERT_EQ(plots.size(), 2u);
  EXPECT_NE(plots[0].unavailable.find("matplotlib is not installed"), std::string::npos);
  const std::string html = render_html(build_report(in, plots), "r", dir_.string());
  EXPECT_NE(html.find("unavailable: plot.py: matplotlib is not installed"), std::string::npos);
  EXPECT_NE(html.find("<table>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
}

TEST_F(ReportPlots, TheRealPlotterEitherDrawsOrSaysWhyNot) {
  ReportInputs in;
  std::string error;
  ASSERT_TRUE(load_report_inputs({fixture_path("results_flashcore.json")}, &in, &error)) << error;
  const std::vector<PlotSet> plots = draw_plots(
      in, "python3", std::string(FLASHCORE_SOURCE_DIR) + "/bench/plot.py", dir_.string());
  ASSERT_EQ(plots.size(), 1u);
  if (plots[0].unavailable.empty()) {
    EXPECT_FALSE(plots[0].images.empty());
  } else {
    EXPECT_NE(plots[0].unavailable.find("matplotlib"), std::string::npos) << plots[0].unavailable;
  }
}

}  // namespace
}  // namespace flashcore::bench
