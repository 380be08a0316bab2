// flashcore-bench profile: the ncu raw-page parser, the per-kernel metrics, the thresholds, the
// ncu and run command lines, and a whole run against a stand-in ncu.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fixtures.hpp"
#include "ncu_csv.hpp"
#include "profile_command.hpp"
#include "profile_metrics.hpp"
#include "profile_report.hpp"

namespace fs = std::filesystem;

namespace flashcore::bench {
namespace {

using testing::read_fixture;

std::vector<KernelProfile> fixture_kernels() {
  std::vector<NcuRow> rows;
  std::string error;
  EXPECT_TRUE(parse_ncu_raw_csv(read_fixture("ncu_raw_h100_decode.csv"), &rows, &error)) << error;
  std::vector<KernelProfile> kernels;
  for (const NcuRow& row : rows) kernels.push_back(kernel_profile(row));
  return kernels;
}

double value(const KernelProfile& k, const std::string& key) {
  const auto it = k.metrics.find(key);
  EXPECT_NE(it, k.metrics.end()) << key;
  return it == k.metrics.end() ? -1 : it->second.value;
}

TEST(NcuCsv, SplitsQuotedFields) {
  EXPECT_EQ(split_csv_line(R"csv("a","(128, 1, 1)","say ""hi""",,x)csv"),
            (std::vector<std::string>{"a", "(128, 1, 1)", "say \"hi\"", "", "x"}));
}

TEST(NcuCsv, SkipsNcuMessagesAndReadsUnits) {
  std::vector<NcuRow> rows;
  std::string error;
  ASSERT_TRUE(parse_ncu_raw_csv(read_fixture("ncu_raw_h100_decode.csv"), &rows, &error)) << error;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].find("Grid Size")->text, "(132, 1, 1)");
  EXPECT_EQ(rows[0].find("gpu__time_duration.sum")->unit, "usecond");
  EXPECT_DOUBLE_EQ(*rows[0].number("gpu__time_duration.sum"), 1412.61);  // "1,412.61"
  EXPECT_FALSE(rows[0].number("Kernel Name").has_value());
  EXPECT_FALSE(rows[0].number("no such column").has_value());
}

TEST(NcuCsv, RejectsOutputWithoutHeaderOrWithRaggedRows) {
  std::vector<NcuRow> rows;
  std::string error;
  EXPECT_FALSE(parse_ncu_raw_csv("==ERROR== the application returned an error\n", &rows, &error));
  EXPECT_NE(error.find("header"), std::string::npos);
  EXPECT_FALSE(parse_ncu_raw_csv("\"ID\",\"a\"\n\"\",\"%\"\n\"0\"\n", &rows, &error));
  EXPECT_NE(error.find("fields"), std::string::npos);
}

TEST(ProfileMetrics, ReadsEveryReportedQuantityWithItsMetricName) {
  const std::vector<KernelProfile> kernels = fixture_kernels();
  ASSERT_EQ(kernels.size(), 2u);
  const KernelProfile& k = kernels[0];
  EXPECT_NE(k.name.find("sm80::fwd_kernel"), std::string::npos);
  EXPECT_DOUBLE_EQ(value(k, "duration_us"), 1412.61);
  EXPECT_DOUBLE_EQ(value(k, "sm_busy_pct"), 93.51);
  EXPECT_DOUBLE_EQ(value(k, "sm_throughput_pct"), 38.46);
  EXPECT_DOUBLE_EQ(value(k, "dram_throughput_pct"), 71.24);
  EXPECT_EQ(k.metrics.at("dram_throughput_pct").metric,
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed");
  EXPECT_DOUBLE_EQ(value(k, "achieved_occupancy_pct"), 11.74);
  EXPECT_DOUBLE_EQ(value(k, "issue_active_pct"), 9.87);
  EXPECT_DOUBLE_EQ(value(k, "xu_pipe_pct"), 2.87);
  EXPECT_DOUBLE_EQ(value(k, "l2_throughput_pct"), 74.02);
  EXPECT_DOUBLE_EQ(value(k, "registers_per_thread"), 168);
  EXPECT_DOUBLE_EQ(value(k, "smem_per_cta_bytes"), 227330);  // 227.33 Kbyte/block, decimal
  EXPECT_DOUBLE_EQ(value(k, "local_memory_bytes"), 0);
  EXPECT_DOUBLE_EQ(value(k, "smem_bank_conflicts"), 0);
  // mma.sync runs on the HMMA pipe; the GMMA pipe (wgmma) is idle in this kernel.
  EXPECT_DOUBLE_EQ(value(k, "tensor_pipe_pct"), 4.12);
  EXPECT_EQ(k.metrics.at("tensor_pipe_pct").metric,
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active");

  const KernelProfile& combine = kernels[1];
  EXPECT_DOUBLE_EQ(value(combine, "duration_us"), 6.02);
  EXPECT_DOUBLE_EQ(value(combine, "local_memory_bytes"), 1540);   // 0 byte + 1.54 Kbyte
  EXPECT_DOUBLE_EQ(value(combine, "smem_bank_conflicts"), 1040);  // "1,024" + 16
  EXPECT_DOUBLE_EQ(value(combine, "smem_per_cta_bytes"), 4096);
}

TEST(ProfileMetrics, TopStallsAreSortedAndLeaveOutSelected) {
  const KernelProfile k = fixture_kernels()[0];
  ASSERT_EQ(k.stalls.size(), kTopStalls);
  EXPECT_EQ(k.stalls[0].reason, "long_scoreboard");
  EXPECT_DOUBLE_EQ(k.stalls[0].cycles_per_issue, 2.41);
  EXPECT_EQ(k.stalls[0].metric,
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio");
  EXPECT_EQ(k.stalls[1].reason, "barrier");
  for (size_t i = 1; i < k.stalls.size(); ++i) {
    EXPECT_GE(k.stalls[i - 1].cycles_per_issue, k.stalls[i].cycles_per_issue);
    EXPECT_NE(k.stalls[i].reason, "selected");
  }
}

TEST(ProfileMetrics, GmmaPipeWinsOnAWgmmaKernelAndMissingMetricsStayAbsent) {
  const std::string csv =
      "\"ID\",\"Kernel Name\",\"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_"
      "active\",\"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active\","
      "\"gpu__time_duration.sum\"\n"
      "\"\",\"\",\"%\",\"%\",\"msecond\"\n"
      "\"0\",\"fwd\",\"61.5\",\"0.4\",\"1.5\"\n";
  std::vector<NcuRow> rows;
  std::string error;
  ASSERT_TRUE(parse_ncu_raw_csv(csv, &rows, &error)) << error;
  const KernelProfile k = kernel_profile(rows[0]);
  EXPECT_DOUBLE_EQ(value(k, "tensor_pipe_pct"), 61.5);
  EXPECT_NE(k.metrics.at("tensor_pipe_pct").metric.find("gmma"), std::string::npos);
  EXPECT_DOUBLE_EQ(value(k, "duration_us"), 1500);
  EXPECT_EQ(k.metrics.count("sm_busy_pct"), 0u);
  EXPECT_EQ(k.metrics.count("local_memory_bytes"), 0u);
}

TEST(ProfileMetrics, UnknownUnitIsNotCollectedRatherThanWrong) {
  const std::string csv = "\"ID\",\"gpu__time_duration.sum\"\n\"\",\"fortnight\"\n\"0\",\"3\"\n";
  std::vector<NcuRow> rows;
  std::string error;
  ASSERT_TRUE(parse_ncu_raw_csv(csv, &rows, &error)) << error;
  EXPECT_EQ(kernel_profile(rows[0]).metrics.count("duration_us"), 0u);
}

TEST(ProfileThresholds, CaseBoundsOverrideTargetBoundsAndMissesAreNamed) {
  Json profile;
  std::string error;
  ASSERT_TRUE(parse_json(R"({"min": {"sm_busy_pct": 50}, "max": {"local_memory_bytes": 0},
      "cases": {"B64_H32_S1_Sk4096_D128_fp16": {"min": {"sm_busy_pct": 70,
                                                        "dram_throughput_pct": 75}}}})",
                         &profile, &error));
  std::vector<ProfileBound> bounds;
  ASSERT_TRUE(read_profile_thresholds(profile, "B64_H32_S1_Sk4096_D128_fp16", "f", &bounds, &error))
      << error;
  ASSERT_EQ(bounds.size(), 3u);
  const KernelProfile* k = nullptr;
  const std::vector<KernelProfile> kernels = fixture_kernels();
  k = main_kernel(kernels);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k, &kernels[0]);  // the longest, not the combine kernel
  const std::vector<ThresholdVerdict> verdicts = check_thresholds(*k, bounds);
  ASSERT_EQ(verdicts.size(), 3u);
  for (const ThresholdVerdict& v : verdicts) {
    if (v.key == "sm_busy_pct") {
      EXPECT_EQ(v.bound, 70);
      EXPECT_TRUE(v.passed);
    } else if (v.key == "dram_throughput_pct") {
      EXPECT_FALSE(v.passed);  // 71.24 < 75
    } else {
      EXPECT_EQ(v.key, "local_memory_bytes");
      EXPECT_TRUE(v.passed);
    }
  }
  // Another case keeps the target's bounds only.
  ASSERT_TRUE(read_profile_thresholds(profile, "B1_H8_S512_D64_fp16", "f", &bounds, &error));
  EXPECT_EQ(bounds.size(), 2u);
  // A metric that was not collected cannot pass.
  const std::vector<ThresholdVerdict> none = check_thresholds(KernelProfile{}, bounds);
  EXPECT_FALSE(none[0].passed);
  EXPECT_FALSE(none[0].value.has_value());
}

TEST(ProfileThresholds, TheRepositorysExpectationsFilesAreWellFormed) {
  for (const Chapter& chapter : chapters()) {
    if (chapter.expectations[0] == '\0') continue;
    std::ifstream in(std::string(FLASHCORE_SOURCE_DIR) + "/" + chapter.expectations);
    std::ostringstream text;
    text << in.rdbuf();
    Json json;
    std::string error;
    ASSERT_TRUE(parse_json(text.str(), &json, &error)) << chapter.expectations << ": " << error;
    for (const auto& [target, spec] : find_member(json, "targets")->items()) {
      const Json* profile = find_member(spec, "profile");
      if (profile == nullptr) continue;
      std::vector<ProfileBound> bounds;
      EXPECT_TRUE(
          read_profile_thresholds(*profile, "B64_H32_S1_Sk4096_D128_fp16", target, &bounds, &error))
          << error;
      EXPECT_FALSE(bounds.empty()) << target;
    }
  }
}

TEST(ProfileThresholds, MalformedThresholdsAreErrors) {
  Json profile;
  std::string error;
  std::vector<ProfileBound> bounds;
  ASSERT_TRUE(parse_json(R"({"min": {"sm_bussy_pct": 70}})", &profile, &error));
  EXPECT_FALSE(read_profile_thresholds(profile, "x", "f", &bounds, &error));
  EXPECT_NE(error.find("sm_bussy_pct"), std::string::npos);
  EXPECT_NE(error.find("sm_busy_pct"), std::string::npos);  // lists what is valid
  ASSERT_TRUE(parse_json(R"({"max": {"local_memory_bytes": "none"}})", &profile, &error));
  EXPECT_FALSE(read_profile_thresholds(profile, "x", "f", &bounds, &error));
  EXPECT_NE(error.find("number"), std::string::npos);
}

TEST(ProfileCommand, NcuArgvFiltersTheProfiledRangeAndPicksTheMetricSet) {
  const std::vector<std::string> basic = ncu_argv("ncu", "basic", "out/x", {"bench", "run"});
  const auto has = [](const std::vector<std::string>& v, const std::string& a,
                      const std::string& b) {
    for (size_t i = 0; i + 1 < v.size(); ++i) {
      if (v[i] == a && v[i + 1] == b) return true;
    }
    return false;
  };
  EXPECT_EQ(basic.front(), "ncu");
  EXPECT_NE(std::find(basic.begin(), basic.end(), "--nvtx"), basic.end());
  EXPECT_TRUE(has(basic, "--nvtx-include", "profiled_launch/"));
  EXPECT_TRUE(has(basic, "--section", "WarpStateStats"));
  EXPECT_TRUE(has(basic, "-o", "out/x"));
  EXPECT_FALSE(has(basic, "--set", "full"));
  EXPECT_EQ(basic[basic.size() - 2], "bench");  // the program comes last
  const std::vector<std::string> full = ncu_argv("ncu", "full", "out/x", {"bench"});
  EXPECT_TRUE(has(full, "--set", "full"));
  EXPECT_FALSE(has(full, "--section", "WarpStateStats"));
}

TEST(ProfileCommand, RunArgvPinsTheCaseAndPassesTheTargetsFlags) {
  Options options;
  std::vector<Target> targets;
  std::string error;
  ASSERT_TRUE(select_targets("labs/flexattention:optimized_flex_sliding", &targets, &error));
  options.target_extra_specs = {"labs/flexattention:optimized_flex_sliding=--num-splits 1",
                                "flashcore:sm80=--tile small"};
  Case c;
  c.batch = 4;
  c.heads_q = 16;
  c.heads_kv = 4;
  c.seqlen_q = 1;
  c.seqlen_k = 4096;
  c.head_dim = 128;
  c.causal = true;
  c.window_left = 1024;
  c.dtype = "bf16";
  const std::vector<std::string> argv = profiled_run_argv("/bin/fb", targets[0], c, options, "o");
  const std::string joined = [&] {
    std::string s;
    for (const std::string& a : argv) s += a + " ";
    return s;
  }();
  EXPECT_EQ(argv[0], "/bin/fb");
  EXPECT_NE(joined.find("run --targets labs/flexattention:optimized_flex_sliding "
                        "--profiled-launch --out o "),
            std::string::npos);
  for (const char* knob :
       {"--batch 4 ", "--heads 16 ", "--heads-kv 4 ", "--seqlen 1 ", "--seqlen-k 4096 ",
        "--head-dim 128 ", "--causal 1 ", "--dtype bf16 ", "--window 1024 "}) {
    EXPECT_NE(joined.find(knob), std::string::npos) << knob;
  }
  EXPECT_NE(
      joined.find("--target-extra-arg labs/flexattention:optimized_flex_sliding=--num-splits 1"),
      std::string::npos);
  EXPECT_EQ(joined.find("--tile small"), std::string::npos);  // another target's flag
}

class ProfileRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("flashcore_profile_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stand-in for ncu: profiling writes the report and the run's results.json; --import prints
  // the stored raw page.
  std::string fake_ncu() {
    const fs::path path = dir_ / "fake-ncu";
    std::ofstream(path) << "#!/bin/sh\n"
                        << "if [ \"$1\" = --import ]; then cat '"
                        << testing::fixture_path("ncu_raw_h100_decode.csv") << "'; exit 0; fi\n"
                        << "while [ $# -gt 0 ]; do\n"
                        << "  case \"$1\" in -o) rep=\"$2\";; --out) out=\"$2\";; esac; shift\n"
                        << "done\n"
                        << "touch \"$rep.ncu-rep\"; mkdir -p \"$out\"\n"
                        << "cat > \"$out/results.json\" <<'EOF'\n"
                        << R"({"schema": "flashcore-bench/results", "schema_version": 1,
 "environment": {"device": "NVIDIA H100 80GB HBM3"},
 "results": [{"chapter": "flashcore", "workload": "optimized", "role": "optimized",
              "provider": "sm80", "status": "ok", "reason": "", "case": {"batch": 64}}]})"
                        << "\nEOF\n";
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }

  fs::path dir_;
};

TEST_F(ProfileRun, MissingNcuIsAClearError) {
  Options options;
  std::string error;
  ASSERT_TRUE(select_targets("flashcore:optimized", &options.targets, &error));
  options.ncu = (dir_ / "no-such-ncu").string();
  ProfileRecord record;
  bool missing = false;
  EXPECT_FALSE(run_profiles(options, "/bin/true", dir_.string(), &record, &missing, &error));
  EXPECT_TRUE(missing);
  EXPECT_NE(error.find("Nsight Compute"), std::string::npos);
  EXPECT_NE(error.find("--ncu"), std::string::npos);
}

TEST_F(ProfileRun, ProfilesEachCaseAndChecksThresholds) {
  Options options;
  std::string error;
  ASSERT_TRUE(select_targets("flashcore:optimized", &options.targets, &error));
  options.knobs.batch = 64;  // one case: the chapter's first with the overrides
  options.ncu = fake_ncu();
  ProfileRecord record;
  bool missing = true;
  ASSERT_TRUE(run_profiles(options, "/bin/true", dir_.string(), &record, &missing, &error))
      << error;
  EXPECT_FALSE(missing);
  ASSERT_EQ(record.entries.size(), 1u);
  const ProfileEntry& e = record.entries[0];
  EXPECT_EQ(e.status, "ok") << e.reason;
  EXPECT_EQ(e.provider, "sm80");
  EXPECT_EQ(record.device, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(e.kernels.size(), 2u);

  // Thresholds from an expectations file: one held, one missed.
  const fs::path expectations = dir_ / "expectations.json";
  std::ofstream(expectations) << R"({"schema": "flashcore-bench/expectations", "schema_version": 1,
      "targets": {"flashcore:optimized": {"profile": {"min": {"sm_busy_pct": 70,
                                                              "dram_throughput_pct": 75}}}}})";
  options.expectations = expectations.string();
  ASSERT_TRUE(check_profile_thresholds(options, "/nonexistent", &record, &error)) << error;
  const std::vector<std::string> misses = profile_misses(record);
  ASSERT_EQ(misses.size(), 1u);
  EXPECT_NE(misses[0].find("dram_throughput_pct 71.24 < min 75"), std::string::npos) << misses[0];

  // The record survives its own JSON, and the Markdown names each metric's ncu source.
  ProfileRecord back;
  ASSERT_TRUE(from_json(to_json(record), &back, &error)) << error;
  ASSERT_EQ(back.entries.size(), 1u);
  EXPECT_EQ(back.entries[0].kernels[0].metrics.at("smem_per_cta_bytes").value, 227330);
  EXPECT_EQ(profile_misses(back), misses);
  const std::string md = render_profile_markdown(back);
  EXPECT_NE(md.find("sm__cycles_active.avg.pct_of_peak_sustained_elapsed"), std::string::npos);
  EXPECT_NE(md.find("**MISS**"), std::string::npos);
  EXPECT_NE(md.find("long_scoreboard 2.41"), std::string::npos);
}

TEST_F(ProfileRun, NcuWithoutAReportIsAnErrorThatQuotesNcu) {
  const fs::path ncu = dir_ / "failing-ncu";
  std::ofstream(ncu) << "#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - no permission to access "
                        "NVIDIA GPU Performance Counters'\nexit 1\n";
  fs::permissions(ncu, fs::perms::owner_all);
  Options options;
  std::string error;
  ASSERT_TRUE(select_targets("flashcore:optimized", &options.targets, &error));
  options.knobs.batch = 64;
  options.ncu = ncu.string();
  ProfileRecord record;
  bool missing = true;
  ASSERT_TRUE(run_profiles(options, "/bin/true", dir_.string(), &record, &missing, &error));
  ASSERT_EQ(record.entries.size(), 1u);
  EXPECT_EQ(record.entries[0].status, "error");
  EXPECT_NE(record.entries[0].reason.find("ERR_NVGPUCTRPERM"), std::string::npos)
      << record.entries[0].reason;
  EXPECT_TRUE(record.entries[0].kernels.empty());
}

TEST_F(ProfileRun, AMissingExpectationsFileIsAnError) {
  ProfileRecord record;
  record.entries.push_back({"flashcore:optimized", Case{}, "sm80", "ok", "", "", {}, {}});
  Options options;
  std::string error;
  EXPECT_FALSE(check_profile_thresholds(options, dir_.string(), &record, &error));
  EXPECT_NE(error.find("expectations"), std::string::npos);
}

}  // namespace
}  // namespace flashcore::bench
