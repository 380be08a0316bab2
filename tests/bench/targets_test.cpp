#include "targets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "cli.hpp"
#include "parity.hpp"

namespace flashcore::bench {
namespace {

TEST(Targets, ListPrintsEveryTargetAsChapterColonWorkload) {
  std::string text, error;
  ASSERT_TRUE(list_targets("", &text, &error));
  for (const char* name :
       {"labs/flashattention:baseline_flashattention",
        "labs/flashattention:optimized_flashattention", "flashcore:scalar", "flashcore:wmma",
        "flashcore:sm80", "flashcore:optimized", "labs/flexattention:optimized_flex_causal",
        "labs/flexattention:optimized_flex_sliding", "peers/cudnn:cudnn_sdpa",
        "peers/cutlass:cutlass_fmha"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
  std::istringstream lines(text);
  size_t count = 0;
  for (std::string line; std::getline(lines, line);) {
    ++count;
    EXPECT_GT(line.find("  "), line.find(':')) << "a description follows each name: " << line;
  }
  size_t workloads = 0;
  for (const Chapter& c : chapters()) workloads += c.workloads.size();
  EXPECT_EQ(count, workloads);
}

TEST(Targets, ListFiltersByChapter) {
  std::string text, error;
  ASSERT_TRUE(list_targets("labs/flashattention", &text, &error));
  EXPECT_NE(text.find("baseline_flashattention"), std::string::npos);
  EXPECT_EQ(text.find("flashcore:"), std::string::npos);
  EXPECT_FALSE(list_targets("labs/none", &text, &error));
}

TEST(Targets, SelectionIsInTableOrderWithoutDuplicates) {
  std::vector<Target> targets;
  std::string error;
  ASSERT_TRUE(
      select_targets("labs/flashattention:optimized_flashattention,labs/flashattention,peers/cudnn",
                     &targets, &error));
  ASSERT_EQ(targets.size(), 3u);
  EXPECT_EQ(targets[0].name(), "labs/flashattention:baseline_flashattention");
  EXPECT_EQ(targets[1].name(), "labs/flashattention:optimized_flashattention");
  EXPECT_EQ(targets[2].name(), "peers/cudnn:cudnn_sdpa");
}

TEST(Targets, TheTableIsConsistent) {
  std::set<std::string> names;
  for (const Chapter& c : chapters()) {
    int baselines = 0;
    for (const Workload& w : c.workloads) {
      EXPECT_TRUE(names.insert(std::string(c.name) + ":" + w.name).second) << w.name;
      const std::string role = w.role;
      EXPECT_TRUE(role == "baseline" || role == "step" || role == "optimized" || role == "peer");
      baselines += role == "baseline";
    }
    if (std::string(c.name).rfind("peers/", 0) != 0) {  // a peer chapter has no baseline
      EXPECT_GE(baselines, 1) << c.name;
    }
    EXPECT_FALSE(c.cases(Profile::kMinimal).empty()) << c.name;
  }
  EXPECT_EQ(cudnn_peer().name(), "peers/cudnn:cudnn_sdpa");
}

TEST(Targets, FullProfileIsTheFa3Grid) {
  const std::vector<Case> grid = find_chapter("labs/flashattention")->cases(Profile::kFull);
  EXPECT_EQ(grid.size(), 3u * 6u * 2u);
  for (const Case& c : grid) {
    EXPECT_EQ(c.batch * c.seqlen_q, 16384);
    EXPECT_EQ(c.heads_q * c.head_dim, 2048);
  }
}

TEST(Targets, FlashcoreJourneyStartsAtTheCanonicalShape) {
  const Case c = find_chapter("flashcore")->cases(Profile::kMinimal).front();
  EXPECT_EQ(c.label(), "B1_H8_S512_D64_fp16");
}

// Decode is measured in every flashcore run so that its % copy (the decode bar) is always there.
TEST(Targets, FlashcoreMeasuresDecodeInBothProfiles) {
  for (const Profile profile : {Profile::kMinimal, Profile::kFull}) {
    const std::vector<Case> cases = find_chapter("flashcore")->cases(profile);
    const auto decode =
        std::find_if(cases.begin(), cases.end(), [](const Case& c) { return c.seqlen_q == 1; });
    ASSERT_NE(decode, cases.end()) << profile_name(profile);
    EXPECT_EQ(decode->label(), "B64_H32_S1_Sk4096_D128_fp16");
    EXPECT_EQ(
        std::count_if(cases.begin(), cases.end(), [](const Case& c) { return c.seqlen_q == 1; }),
        1);
    // 4.3 GFLOP: above the CPU reference's limit, so the parity gate uses the GPU oracle.
    EXPECT_GT(decode->flops(), kCpuReferenceMaxFlops);
    const double q_or_o = 2.0 * 64 * 1 * 32 * 128, k_or_v = 2.0 * 64 * 4096 * 32 * 128;
    EXPECT_DOUBLE_EQ(decode->min_bytes(), 2 * q_or_o + 2 * k_or_v);
  }
}

TEST(Targets, FlexWorkloadsForceTheirMask) {
  std::vector<Target> targets;
  std::string error;
  ASSERT_TRUE(select_targets("labs/flexattention:optimized_flex_sliding", &targets, &error));
  Knobs knobs;
  knobs.window = 256;
  for (const Case& c : cases_for(targets[0], Profile::kMinimal, knobs)) {
    EXPECT_TRUE(c.causal);
    EXPECT_EQ(c.window_left, 256);
  }
}

TEST(Model, FlopsFollowThePaperConvention) {
  Case c;  // B=1 H=8 S=512 D=64
  EXPECT_DOUBLE_EQ(c.flops(), 4.0 * 8 * 512 * 512 * 64);
  c.causal = true;
  EXPECT_DOUBLE_EQ(c.flops(), 2.0 * 8 * 512 * 512 * 64);
  c.window_left = 0;  // each query sees only itself
  EXPECT_DOUBLE_EQ(c.flops(), 4.0 * 8 * 512 * 1 * 64);
  EXPECT_DOUBLE_EQ(c.min_bytes(), 4.0 * 512 * 8 * 64 * 2);
}

TEST(Model, SummaryStatistics) {
  const Summary s = summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(s.samples, 5);
  EXPECT_DOUBLE_EQ(s.min_us, 1);
  EXPECT_DOUBLE_EQ(s.p50_us, 3);
  EXPECT_DOUBLE_EQ(s.p90_us, 4.6);
  EXPECT_DOUBLE_EQ(s.mean_us, 3);
  EXPECT_NEAR(s.stdev_us, 1.5811388, 1e-6);
}

// The input-set rule of both the forward's and the backward's targets: twice L2, 1 to 64 sets,
// within a quarter of the free memory.
TEST(RotationSets, TwiceL2WithinAQuarterOfFreeMemory) {
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t l2 = 50 * kMiB, plenty = 80000 * kMiB;
  EXPECT_EQ(rotation_set_count(10 * kMiB, l2, plenty), 10);     // 100 MiB of sets
  EXPECT_EQ(rotation_set_count(30 * kMiB, l2, plenty), 4);      // rounded up
  EXPECT_EQ(rotation_set_count(kMiB / 4, l2, plenty), 64);      // at most 64
  EXPECT_EQ(rotation_set_count(500 * kMiB, l2, plenty), 1);     // at least one
  EXPECT_EQ(rotation_set_count(10 * kMiB, l2, 200 * kMiB), 5);  // 50 MiB of 200 free
  EXPECT_EQ(rotation_set_count(10 * kMiB, l2, 20 * kMiB), 1);   // never below one
}

}  // namespace
}  // namespace flashcore::bench
