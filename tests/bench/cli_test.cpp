#include "cli.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

namespace flashcore::bench {
namespace {

const BackendCheck kBackends = [](const std::string& name) {
  return name == "auto" || name == "scalar" || name == "unfused" || name == "wmma" ||
         name == "sm80";
};

bool parse(std::vector<const char*> args, Options* options, std::string* error) {
  args.insert(args.begin(), "flashcore-bench");
  return parse_args(static_cast<int>(args.size()), args.data(), kBackends, options, error);
}

// The knobs are read from the process environment (CLI11's envname): set them for one parse.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {
    for (const auto& [name, value] : vars_) setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : vars_) unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::string> vars_;
};

bool read_knobs(const std::map<std::string, std::string>& vars, Knobs* knobs, std::string* error) {
  const ScopedEnv env(vars);
  Options o;
  const bool ok = parse({"run", "--targets", "flashcore"}, &o, error);
  *knobs = o.knobs;
  return ok;
}

TEST(Cli, NoArgumentsAndHelpPrintHelp) {
  Options o;
  std::string error;
  ASSERT_TRUE(parse({}, &o, &error));
  EXPECT_EQ(o.command, Command::kHelp);
  EXPECT_NE(o.help.find("list-targets"), std::string::npos);
  ASSERT_TRUE(parse({"run", "--help"}, &o, &error));
  EXPECT_EQ(o.command, Command::kHelp);
  EXPECT_NE(o.help.find("--targets"), std::string::npos);
  ASSERT_TRUE(parse({"--help"}, &o, &error));
  EXPECT_EQ(o.command, Command::kHelp);
}

TEST(Cli, KnobsAreAlsoOptionsAndTheOptionWins) {
  Options o;
  std::string error;
  const ScopedEnv env(std::map<std::string, std::string>{{"FLASHCORE_S", "1024"}});
  ASSERT_TRUE(
      parse({"run", "--targets", "flashcore", "--seqlen", "2048", "--dtype=bf16"}, &o, &error))
      << error;
  EXPECT_EQ(*o.knobs.seqlen, 2048);
  EXPECT_EQ(*o.knobs.dtype, "bf16");
  ASSERT_TRUE(parse({"run", "--targets", "flashcore"}, &o, &error)) << error;
  EXPECT_EQ(*o.knobs.seqlen, 1024);
}

TEST(Cli, HelpDocumentsEveryKnob) {
  const std::string help = help_text();
  for (const char* knob :
       {"FLASHCORE_BACKEND", "FLASHCORE_B", "FLASHCORE_H", "FLASHCORE_HKV", "FLASHCORE_S",
        "FLASHCORE_SK", "FLASHCORE_D", "FLASHCORE_CAUSAL", "FLASHCORE_DTYPE", "FLASHCORE_WINDOW",
        "BLOCK_SIZE", "DOC_SPAN", "--target-extra-arg", "--check-expectations", "--profile"}) {
    EXPECT_NE(help.find(knob), std::string::npos) << knob;
  }
}

TEST(Cli, RunParsesTargetsProfileOutAndExtraArgs) {
  Options o;
  std::string error;
  ASSERT_TRUE(parse(
      {"run", "--targets", "labs/flashattention", "--profile=full", "--out", "/tmp/x",
       "--target-extra-arg",
       "labs/flashattention:optimized_flashattention=--backend sm80 --num-splits 2 --tile small "
       "--pdl off",
       "--check-expectations"},
      &o, &error))
      << error;
  EXPECT_EQ(o.command, Command::kRun);
  EXPECT_EQ(o.profile, Profile::kFull);
  EXPECT_EQ(o.out_dir, "/tmp/x");
  EXPECT_TRUE(o.check_expectations);
  ASSERT_EQ(o.targets.size(), 2u);
  EXPECT_EQ(o.targets[0].name(), "labs/flashattention:baseline_flashattention");
  const TargetArgs& args = o.target_args.at("labs/flashattention:optimized_flashattention");
  EXPECT_EQ(args.backend.value(), "sm80");
  EXPECT_EQ(args.num_splits, 2);
  EXPECT_EQ(args.tile, "small");
  EXPECT_FALSE(args.enable_pdl);
  EXPECT_TRUE(TargetArgs{}.enable_pdl) << "PDL is on unless a target turns it off";
}

TEST(Cli, RepeatedOptionsTakeTheLastValueAndTargetsAccumulate) {
  Options o;
  std::string error;
  ASSERT_TRUE(parse({"run", "--targets", "flashcore:sm80", "--out", "a", "--profile", "full",
                     "--targets=flashcore:wmma", "--out", "b", "--profile", "minimal"},
                    &o, &error))
      << error;
  EXPECT_EQ(o.out_dir, "b");
  EXPECT_EQ(o.profile, Profile::kMinimal);
  ASSERT_EQ(o.targets.size(), 2u);  // in the target table's order
  EXPECT_EQ(o.targets[0].name(), "flashcore:wmma");
  EXPECT_EQ(o.targets[1].name(), "flashcore:sm80");
}

TEST(Cli, BadInputSaysWhatIsValid) {
  Options o;
  std::string error;
  EXPECT_FALSE(parse({"bench"}, &o, &error));
  EXPECT_NE(error.find("list-targets, run, check"), std::string::npos);
  EXPECT_FALSE(parse({"run"}, &o, &error));
  EXPECT_NE(error.find("--targets"), std::string::npos);
  EXPECT_FALSE(parse({"run", "--targets", "labs/nope"}, &o, &error));
  EXPECT_NE(error.find("labs/flashattention"), std::string::npos);
  EXPECT_FALSE(parse({"run", "--targets", "labs/flashattention:nope"}, &o, &error));
  EXPECT_NE(error.find("optimized_flashattention"), std::string::npos);
  EXPECT_FALSE(parse({"run", "--targets", "flashcore", "--profile", "huge"}, &o, &error));
  EXPECT_NE(error.find("minimal or full"), std::string::npos);
  EXPECT_FALSE(parse({"run", "--targets", "flashcore", "--bogus", "1"}, &o, &error));
  EXPECT_FALSE(parse({"run", "--targets"}, &o, &error));
  EXPECT_NE(error.find("--targets"), std::string::npos) << error;
  EXPECT_FALSE(parse({"list-targets", "--chapter", "labs/nope"}, &o, &error));
  EXPECT_NE(error.find("valid chapters"), std::string::npos);
  EXPECT_FALSE(parse({"list-targets", "--profile", "full"}, &o, &error));
  EXPECT_FALSE(parse({"check"}, &o, &error));
  EXPECT_NE(error.find("--results"), std::string::npos);
}

TEST(Cli, BadTargetExtraArgs) {
  Options o;
  std::string error;
  EXPECT_FALSE(
      parse({"run", "--targets", "flashcore", "--target-extra-arg", "flashcore:sm80"}, &o, &error));
  EXPECT_FALSE(
      parse({"run", "--targets", "flashcore", "--target-extra-arg", "flashcore:sm80=--backend tpu"},
            &o, &error));
  EXPECT_NE(error.find("valid"), std::string::npos);
  EXPECT_FALSE(
      parse({"run", "--targets", "flashcore", "--target-extra-arg", "flashcore:sm80=--stages 2"},
            &o, &error));
  EXPECT_NE(error.find("--backend NAME"), std::string::npos);
  EXPECT_FALSE(
      parse({"run", "--targets", "flashcore", "--target-extra-arg", "flashcore:sm80=--tile 64"}, &o,
            &error));
  EXPECT_NE(error.find("auto, large, small, medium or cta-pair"), std::string::npos);
  EXPECT_FALSE(
      parse({"run", "--targets", "flashcore", "--target-extra-arg", "flashcore:sm80=--pdl yes"}, &o,
            &error));
  EXPECT_NE(error.find("use on or off"), std::string::npos);
  EXPECT_FALSE(
      parse({"run", "--targets", "flashcore", "--target-extra-arg", "flashcore=--backend sm80"}, &o,
            &error));
}

TEST(Knobs, ReadsAndValidates) {
  Knobs k;
  std::string error;
  ASSERT_TRUE(read_knobs({}, &k, &error));
  EXPECT_FALSE(k.overrides_shape());
  ASSERT_TRUE(read_knobs({{"FLASHCORE_B", "2"},
                          {"FLASHCORE_H", "16"},
                          {"FLASHCORE_HKV", "4"},
                          {"FLASHCORE_S", "1024"},
                          {"FLASHCORE_D", "128"},
                          {"FLASHCORE_CAUSAL", "1"},
                          {"FLASHCORE_DTYPE", "bf16"},
                          {"FLASHCORE_BACKEND", "sm80"},
                          {"BLOCK_SIZE", "64"}},
                         &k, &error))
      << error;
  EXPECT_TRUE(k.overrides_shape());
  EXPECT_EQ(*k.heads_kv, 4);
  EXPECT_EQ(*k.backend, "sm80");

  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> bad = {
      {{{"FLASHCORE_B", "0"}}, "positive integer"},
      {{{"FLASHCORE_S", "12x"}}, "positive integer"},
      {{{"FLASHCORE_D", "100"}}, "multiple of 8 up to 256"},
      {{{"FLASHCORE_D", "512"}}, "multiple of 8 up to 256"},
      {{{"FLASHCORE_DTYPE", "fp8"}}, "fp16 or bf16"},
      {{{"FLASHCORE_CAUSAL", "yes"}}, "0 or 1"},
      {{{"FLASHCORE_BACKEND", "tpu"}}, "valid: auto"},
      {{{"FLASHCORE_HKV", "2"}}, "FLASHCORE_H"},
      {{{"FLASHCORE_H", "6"}, {"FLASHCORE_HKV", "4"}}, "H % HKV"},
      {{{"BLOCK_SIZE", "20"}}, "multiple of 16"},
  };
  for (const auto& [vars, message] : bad) {
    EXPECT_FALSE(read_knobs(vars, &k, &error)) << vars.begin()->first;
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
}

TEST(Knobs, DocSpanIsRejectedForFlexAttentionOnly) {
  Knobs k;
  std::string error;
  ASSERT_TRUE(read_knobs({{"DOC_SPAN", "128"}}, &k, &error));
  std::vector<Target> targets;
  ASSERT_TRUE(select_targets("labs/flashattention", &targets, &error));
  EXPECT_TRUE(check_knobs_for_targets(k, targets, &error));
  ASSERT_TRUE(select_targets("labs/flexattention", &targets, &error));
  EXPECT_FALSE(check_knobs_for_targets(k, targets, &error));
  EXPECT_NE(error.find("document mask"), std::string::npos);
}

TEST(Knobs, ShapeOverridesReplaceTheGridWithOneCase) {
  Knobs k;
  std::string error;
  ASSERT_TRUE(read_knobs({{"FLASHCORE_S", "2048"}, {"FLASHCORE_DTYPE", "fp16"}}, &k, &error));
  std::vector<Target> targets;
  ASSERT_TRUE(select_targets("labs/flashattention:optimized_flashattention", &targets, &error));
  const std::vector<Case> cases = cases_for(targets[0], Profile::kFull, k);
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].seqlen_q, 2048);
  EXPECT_EQ(cases[0].seqlen_k, 2048);
  EXPECT_EQ(cases[0].dtype, "fp16");
}

TEST(Knobs, BackendOverrideAppliesToOptimizedTargetsOnly) {
  Knobs k;
  k.backend = "sm80";
  std::vector<Target> targets;
  std::string error;
  ASSERT_TRUE(select_targets("labs/flashattention", &targets, &error));
  EXPECT_EQ(backend_for(targets[0], k, nullptr), "unfused");
  EXPECT_EQ(backend_for(targets[1], k, nullptr), "sm80");
  TargetArgs args;
  args.backend = "scalar";
  EXPECT_EQ(backend_for(targets[1], k, &args), "scalar");
}

TEST(Cli, ProfileTakesTargetsKnobsAndItsOwnOptions) {
  Options o;
  std::string error;
  const ScopedEnv env(std::map<std::string, std::string>{{"FLASHCORE_S", "1024"}});
  ASSERT_TRUE(parse(
      {"profile", "--targets", "flashcore:optimized", "--metrics-set", "full", "--check", "--ncu",
       "/opt/ncu", "--seqlen", "4096", "--target-extra-arg", "flashcore:optimized=--backend sm80"},
      &o, &error))
      << error;
  EXPECT_EQ(o.command, Command::kProfile);
  ASSERT_EQ(o.targets.size(), 1u);
  EXPECT_EQ(o.metrics_set, "full");
  EXPECT_TRUE(o.check_profile);
  EXPECT_EQ(o.ncu, "/opt/ncu");
  EXPECT_EQ(*o.knobs.seqlen, 4096);  // the option wins over FLASHCORE_S here too
  EXPECT_EQ(o.target_extra_specs, std::vector<std::string>{"flashcore:optimized=--backend sm80"});
  ASSERT_TRUE(parse({"profile", "--targets", "flashcore"}, &o, &error)) << error;
  EXPECT_EQ(o.metrics_set, "basic");
  EXPECT_EQ(*o.knobs.seqlen, 1024);
  EXPECT_FALSE(parse({"profile", "--targets", "flashcore", "--metrics-set", "most"}, &o, &error));
  EXPECT_NE(error.find("basic or full"), std::string::npos);
  EXPECT_FALSE(parse({"profile"}, &o, &error));  // --targets is required
  EXPECT_FALSE(parse({"profile", "--targets", "nope"}, &o, &error));
  EXPECT_NE(error.find("valid chapters"), std::string::npos);
}

TEST(Cli, RunTakesTheProfiledLaunchFlag) {
  Options o;
  std::string error;
  ASSERT_TRUE(parse({"run", "--targets", "flashcore", "--profiled-launch"}, &o, &error)) << error;
  EXPECT_TRUE(o.profiled_launch);
  ASSERT_TRUE(parse({"run", "--targets", "flashcore"}, &o, &error)) << error;
  EXPECT_FALSE(o.profiled_launch);
}

TEST(Cli, RobustAndReport) {
  Options o;
  std::string error;
  ASSERT_TRUE(parse({"robust", "--quick", "--progress-every", "10", "--out", "d", "--seed", "42"},
                    &o, &error))
      << error;
  EXPECT_EQ(o.seed, 42u);
  EXPECT_EQ(o.command, Command::kRobust);
  EXPECT_TRUE(o.quick);
  EXPECT_EQ(o.progress_every, 10);
  EXPECT_EQ(o.out_dir, "d");
  EXPECT_FALSE(parse({"robust", "--progress-every", "0"}, &o, &error));
  ASSERT_TRUE(parse({"robust", "--time-budget", "330", "--resume", "old/robust.json"}, &o, &error))
      << error;
  EXPECT_DOUBLE_EQ(o.time_budget_s, 330);
  EXPECT_EQ(o.resume, "old/robust.json");
  EXPECT_FALSE(parse({"robust", "--time-budget", "0"}, &o, &error));
  ASSERT_TRUE(parse({"robust", "--shapes", "long,large_bh"}, &o, &error)) << error;
  EXPECT_EQ(o.shapes, (std::vector<std::string>{"long", "large_bh"}));
  EXPECT_FALSE(parse({"robust", "--shapes", "long,huge"}, &o, &error));
  EXPECT_NE(error.find("huge"), std::string::npos) << error;
  ASSERT_TRUE(parse({"report", "--inputs", "a.json", "b.json", "--inputs", "c.json", "--out", "r"},
                    &o, &error))
      << error;
  EXPECT_EQ(o.command, Command::kReport);
  EXPECT_EQ(o.inputs, (std::vector<std::string>{"a.json", "b.json", "c.json"}));
  EXPECT_FALSE(parse({"report", "--out", "r"}, &o, &error));          // --inputs is required
  EXPECT_FALSE(parse({"report", "--inputs", "a.json"}, &o, &error));  // and --out
  EXPECT_FALSE(parse({"rport"}, &o, &error));
  EXPECT_NE(error.find("profile, robust, report"), std::string::npos);
}

TEST(Cli, HelpDocumentsTheLabCommands) {
  const std::string help = help_text();
  for (const char* text : {"profile", "--metrics-set", "robust", "--quick", "report", "--inputs",
                           "ncu", "5 Nsight Compute"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace flashcore::bench
