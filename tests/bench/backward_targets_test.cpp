// The lab's backward targets (flashcore:backward and its cuDNN peer): their cases, the peer each
// case gets, FLOPs and bytes, labels that keep forward and backward results apart, and JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli.hpp"
#include "model.hpp"
#include "report_json.hpp"
#include "targets.hpp"

namespace flashcore::bench {
namespace {

std::vector<Case> backward_cases_of(const std::string& spec, Profile profile,
                                    const Knobs& knobs = Knobs{}) {
  std::vector<Target> targets;
  std::string error;
  EXPECT_TRUE(select_targets(spec, &targets, &error)) << error;
  EXPECT_EQ(targets.size(), 1u);
  return targets.empty() ? std::vector<Case>{} : cases_for(targets[0], profile, knobs);
}

TEST(BackwardTargets, AreListedWithTheirPeer) {
  std::string text, error;
  ASSERT_TRUE(list_targets("", &text, &error));
  EXPECT_NE(text.find("flashcore:backward"), std::string::npos);
  EXPECT_NE(text.find("peers/cudnn:cudnn_sdpa_backward"), std::string::npos);
  std::vector<Target> targets;
  EXPECT_FALSE(select_targets("flashcore:backwards", &targets, &error));
  EXPECT_NE(error.find("backward"), std::string::npos) << "the valid workloads are listed";
}

// A chapter's name selects its forward workloads only: the journey and the tuner's scripts run
// `--targets flashcore` and do not ask for the backward's cases.
TEST(BackwardTargets, AreSelectedByNameOnly) {
  std::vector<Target> targets;
  std::string error;
  ASSERT_TRUE(select_targets("flashcore,peers/cudnn", &targets, &error)) << error;
  for (const Target& t : targets) {
    EXPECT_NE(t.name(), "flashcore:backward");
    EXPECT_NE(t.name(), "peers/cudnn:cudnn_sdpa_backward");
  }
  ASSERT_TRUE(select_targets("flashcore,flashcore:backward", &targets, &error)) << error;
  EXPECT_EQ(std::count_if(targets.begin(), targets.end(),
                          [](const Target& t) { return t.name() == "flashcore:backward"; }),
            1);
}

TEST(BackwardTargets, MinimalCasesAreTrainingShapesAfterASmallOne) {
  const std::vector<Case> cases = backward_cases_of("flashcore:backward", Profile::kMinimal);
  ASSERT_EQ(cases.size(), 5u);
  EXPECT_EQ(cases.front().label(), "B1_H8_S1024_D64_bf16_bwd");
  std::vector<std::string> labels;
  for (const Case& c : cases) {
    EXPECT_TRUE(c.backward) << c.label();
    labels.push_back(c.label());
  }
  for (const char* want : {"B4_H16_S4096_D128_bf16_bwd", "B4_H16_S4096_D128_bf16_causal_bwd",
                           "B4_H32_S4096_D64_bf16_bwd", "B4_H32_S4096_D64_bf16_causal_bwd"}) {
    EXPECT_NE(std::find(labels.begin(), labels.end(), want), labels.end()) << want;
  }
  // The peer runs the same cases.
  const std::vector<Case> peer =
      backward_cases_of("peers/cudnn:cudnn_sdpa_backward", Profile::kMinimal);
  ASSERT_EQ(peer.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(peer[i].label(), cases[i].label());
}

TEST(BackwardTargets, FullProfileIsTheFa3GridUpTo8k) {
  const std::vector<Case> cases = backward_cases_of("flashcore:backward", Profile::kFull);
  ASSERT_EQ(cases.size(), 1u + 2u * 4u * 2u);
  for (size_t i = 1; i < cases.size(); ++i) {
    const Case& c = cases[i];
    EXPECT_TRUE(c.backward);
    EXPECT_EQ(c.batch * c.seqlen_q, 16384) << c.label();
    EXPECT_EQ(c.heads_q * c.head_dim, 2048) << c.label();
    EXPECT_GE(c.seqlen_q, 1024);
    EXPECT_LE(c.seqlen_q, 8192);
  }
}

TEST(BackwardTargets, ShapeKnobsKeepTheDirection) {
  Knobs knobs;
  knobs.seqlen = 2048;
  knobs.causal = true;
  const std::vector<Case> cases = backward_cases_of("flashcore:backward", Profile::kMinimal, knobs);
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_TRUE(cases[0].backward);
  EXPECT_EQ(cases[0].label(), "B1_H8_S2048_D64_bf16_causal_bwd");
}

TEST(BackwardTargets, EachCaseGetsThePeerOfItsDirection) {
  Case c;
  EXPECT_EQ(cudnn_peer_for(c).name(), "peers/cudnn:cudnn_sdpa");
  c.backward = true;
  EXPECT_EQ(cudnn_peer_for(c).name(), "peers/cudnn:cudnn_sdpa_backward");
  EXPECT_EQ(cudnn_backward_peer().workload->engine, Engine::kCudnnBackward);
  std::vector<Target> targets;
  std::string error;
  ASSERT_TRUE(select_targets("flashcore:backward", &targets, &error));
  EXPECT_EQ(targets[0].workload->engine, Engine::kLibraryBackward);
}

TEST(BackwardModel, LabelFlopsAndBytes) {
  Case forward;  // B=1 H=8 S=512 D=64 fp16
  Case backward = forward;
  backward.backward = true;
  EXPECT_EQ(backward.label(), forward.label() + "_bwd");
  EXPECT_NE(backward.describe().find("backward"), std::string::npos);
  // Five GEMMs to the forward's two: 2.5x, halved again for causal like the forward.
  EXPECT_DOUBLE_EQ(backward.flops(), 2.5 * forward.flops());
  backward.causal = forward.causal = true;
  EXPECT_DOUBLE_EQ(backward.flops(), 2.5 * 2.0 * 8 * 512 * 512 * 64);
  backward.window_left = forward.window_left = 0;
  EXPECT_DOUBLE_EQ(backward.flops(), 2.5 * forward.flops());
  // Q, K, V, O, dO read and dQ, dK, dV written: twice the forward's four tensors.
  EXPECT_DOUBLE_EQ(backward.min_bytes(), 2 * forward.min_bytes());
}

TEST(BackwardModel, JsonRoundTripKeepsTheDirection) {
  Case c;
  c.backward = true;
  c.causal = true;
  const Case back = case_from_json(case_to_json(c));
  EXPECT_TRUE(back.backward);
  EXPECT_EQ(back.label(), c.label());
  Case forward;
  EXPECT_FALSE(case_from_json(case_to_json(forward)).backward);
}

// A forward and a backward result at the same shape are each compared with their own peer.
TEST(BackwardModel, RatioVsCudnnPairsTheSameDirection) {
  auto timed = [](const char* chapter, const char* role, bool backward, double p50) {
    Result r;
    r.chapter = chapter;
    r.workload = "w";
    r.role = role;
    r.c.backward = backward;
    Summary s;
    s.p50_us = p50;
    r.timing = s;
    return r;
  };
  std::vector<Result> results = {
      timed("flashcore", "step", false, 100), timed("flashcore", "step", true, 400),
      timed("peers/cudnn", "peer", false, 50), timed("peers/cudnn", "peer", true, 200)};
  derive_metrics(&results, 0, 0);
  ASSERT_TRUE(results[0].ratio_vs_cudnn && results[1].ratio_vs_cudnn);
  EXPECT_DOUBLE_EQ(*results[0].ratio_vs_cudnn, 0.5);
  EXPECT_DOUBLE_EQ(*results[1].ratio_vs_cudnn, 0.5);
  EXPECT_DOUBLE_EQ(*results[1].tflops, 2.5 * 4.0 * 8 * 512 * 512 * 64 / 400e-6 / 1e12);
}

}  // namespace
}  // namespace flashcore::bench
