#include "expectations.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace flashcore::bench {
namespace {

Result timed(const std::string& workload, double p50_us, double speedup, double vs_cudnn) {
  Result r;
  r.chapter = "labs/flashattention";
  r.workload = workload;
  Summary s;
  s.p50_us = p50_us;
  r.timing = s;
  r.speedup_vs_baseline = speedup;
  r.ratio_vs_cudnn = vs_cudnn;
  return r;
}

Json parse(const std::string& text) {
  Json j;
  std::string error;
  EXPECT_TRUE(parse_json(text, &j, &error)) << error;
  return j;
}

const char* kExpectations = R"({
  "schema": "flashcore-bench/expectations", "schema_version": 1,
  "targets": {
    "labs/flashattention:optimized_flashattention": {
      "min_speedup_over_baseline": 2.0,
      "min_ratio_vs_cudnn": 0.5,
      "max_p50_us": null,
      "cases": {"B1_H8_S512_D64_fp16": {"max_p50_us": 30}}
    }
  }
})";

TEST(Expectations, PassesWhenEveryThresholdIsMet) {
  std::vector<std::string> regressions;
  std::string error;
  ASSERT_TRUE(check_expectations({timed("optimized_flashattention", 20, 3.0, 0.8)},
                                 parse(kExpectations), "e.json", &regressions, &error))
      << error;
  EXPECT_TRUE(regressions.empty());
}

TEST(Expectations, NamesEachRegression) {
  std::vector<std::string> regressions;
  std::string error;
  ASSERT_TRUE(check_expectations({timed("optimized_flashattention", 40, 1.5, 0.25)},
                                 parse(kExpectations), "e.json", &regressions, &error));
  ASSERT_EQ(regressions.size(), 3u);
  EXPECT_NE(
      regressions[0].find("labs/flashattention:optimized_flashattention [B1_H8_S512_D64_fp16]"),
      std::string::npos);
  EXPECT_NE(regressions[0].find("speedup over baseline 1.5x < min 2x"), std::string::npos);
  EXPECT_NE(regressions[1].find("ratio vs cuDNN"), std::string::npos);
  EXPECT_NE(regressions[2].find("p50 40 us > max 30 us"), std::string::npos);
}

TEST(Expectations, FailedIsARegressionSkippedAndOtherTargetsAreNot) {
  Result failed = timed("optimized_flashattention", 0, 0, 0);
  failed.outcome = Outcome::kFailed;
  failed.reason = "parity";
  Result skipped = failed;
  skipped.outcome = Outcome::kSkipped;
  Result other = timed("baseline_flashattention", 1e9, 0.1, 0.01);
  std::vector<std::string> regressions;
  std::string error;
  ASSERT_TRUE(check_expectations({failed, skipped, other}, parse(kExpectations), "e.json",
                                 &regressions, &error));
  ASSERT_EQ(regressions.size(), 1u);
  EXPECT_NE(regressions[0].find("FAILED"), std::string::npos);
}

TEST(Expectations, MissingMetricsAreNotChecked) {
  Result r = timed("optimized_flashattention", 20, 0, 0);
  r.speedup_vs_baseline.reset();  // the baseline was not selected
  r.ratio_vs_cudnn.reset();       // cuDNN skipped the case
  std::vector<std::string> regressions;
  std::string error;
  ASSERT_TRUE(check_expectations({r}, parse(kExpectations), "e.json", &regressions, &error));
  EXPECT_TRUE(regressions.empty());
}

TEST(Expectations, MalformedFilesAreErrors) {
  std::vector<std::string> regressions;
  std::string error;
  EXPECT_FALSE(check_expectations({}, parse("{}"), "e.json", &regressions, &error));
  EXPECT_NE(error.find("e.json"), std::string::npos);
  EXPECT_FALSE(
      check_expectations({timed("optimized_flashattention", 1, 1, 1)},
                         parse(R"({"schema": "flashcore-bench/expectations", "schema_version": 1,
                "targets": {"labs/flashattention:optimized_flashattention": {"max_p50_us": "fast"}}})"),
                         "e.json", &regressions, &error));
  EXPECT_NE(error.find("max_p50_us"), std::string::npos);
}

}  // namespace
}  // namespace flashcore::bench
