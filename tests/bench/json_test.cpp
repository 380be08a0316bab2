#include "json.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "parity.hpp"
#include "report_json.hpp"
#include "report_markdown.hpp"

namespace flashcore::bench {
namespace {

TEST(Json, RoundTripsValuesAndKeepsKeyOrder) {
  Json j = Json::object();
  j["s"] = "a \"quoted\"\nline\\";
  j["n"] = 1.5;
  j["i"] = int64_t{1} << 40;
  j["b"] = true;
  j["z"] = nullptr;
  j["a"] = Json::array({1, "x"});
  Json parsed;
  std::string error;
  ASSERT_TRUE(parse_json(dump_json(j), &parsed, &error)) << error;
  EXPECT_EQ(string_or(parsed, "s", ""), "a \"quoted\"\nline\\");
  EXPECT_EQ(number_or(parsed, "n", 0), 1.5);
  EXPECT_EQ(integer_or(parsed, "i", 0), int64_t{1} << 40);
  EXPECT_TRUE(bool_or(parsed, "b", false));
  EXPECT_TRUE(find_member(parsed, "z")->is_null());
  EXPECT_EQ(find_member(parsed, "a")->size(), 2u);
  EXPECT_EQ(dump_json(parsed), dump_json(j));
  EXPECT_EQ(parsed.begin().key(), "s");
}

TEST(Json, NonFiniteNumbersAreWrittenAsNull) {
  EXPECT_EQ(dump_json(Json(std::numeric_limits<double>::quiet_NaN()), -1), "null");
  EXPECT_EQ(dump_json(Json(-std::numeric_limits<double>::infinity()), -1), "null");
}

TEST(Json, IntegersStayExact) {
  // A double holds integers exactly only up to 2^53; 2^53 + 1 must survive a round trip.
  Json parsed;
  std::string error;
  ASSERT_TRUE(parse_json("{\"n\": 9007199254740993}", &parsed, &error)) << error;
  EXPECT_EQ(integer_or(parsed, "n", 0), int64_t{9007199254740993});
  EXPECT_EQ(dump_json(parsed, -1), "{\"n\":9007199254740993}");
  // An integral float counts as an integer; a fractional one does not.
  ASSERT_TRUE(parse_json("{\"a\": 4.0, \"b\": 4.5}", &parsed, &error)) << error;
  EXPECT_EQ(integer_or(parsed, "a", -1), 4);
  EXPECT_EQ(integer_or(parsed, "b", -1), -1);
}

TEST(Json, UnicodeEscapesAndSurrogatePairsDecodeToUtf8) {
  Json parsed;
  std::string error;
  ASSERT_TRUE(parse_json(R"(["\u00e9", "\u20ac", "\ud83d\ude00", "\u0041"])", &parsed, &error))
      << error;
  EXPECT_EQ(parsed[0].get<std::string>(), "\xc3\xa9");          // U+00E9
  EXPECT_EQ(parsed[1].get<std::string>(), "\xe2\x82\xac");      // U+20AC
  EXPECT_EQ(parsed[2].get<std::string>(), "\xf0\x9f\x98\x80");  // U+1F600, one code point
  EXPECT_EQ(parsed[3].get<std::string>(), "A");
}

// Inputs the hand-written parser accepted or misread; RFC 8259 rejects every one.
TEST(Json, RejectsWhatJsonDoesNotAllow) {
  for (const char* text :
       {"-inf",        "inf",       "NaN",       "01",      "-01",  "1.",           ".5",
        "1.e3",        "0x1p3",     "0x10",      "+1",      "[1,]", "{\"a\":1,}",   "\"\\ud83d\"",
        "\"\\ude00\"", "\"\\u12\"", "\"\\x41\"", "// c\n1", "'a'",  "\"tab\there\""}) {
    Json j;
    std::string error;
    EXPECT_FALSE(parse_json(text, &j, &error)) << text << " parsed as " << dump_json(j, -1);
  }
}

TEST(Json, ParseErrorsSayWhere) {
  Json j;
  std::string error;
  EXPECT_FALSE(parse_json("{\"a\": 1,\n \"b\" 2}", &j, &error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_FALSE(parse_json("[1, 2", &j, &error));
  EXPECT_FALSE(parse_json("{} x", &j, &error));
  EXPECT_FALSE(parse_json("\"unterminated", &j, &error));
}

TEST(Json, LenientReadersFallBackOnAbsentOrMistypedMembers) {
  Json parsed;
  std::string error;
  ASSERT_TRUE(parse_json(R"({"n": "1", "s": 2, "b": 1})", &parsed, &error)) << error;
  EXPECT_EQ(number_or(parsed, "n", 7), 7);
  EXPECT_EQ(string_or(parsed, "s", "x"), "x");
  EXPECT_TRUE(bool_or(parsed, "b", true));
  EXPECT_EQ(find_member(parsed, "missing"), nullptr);
  EXPECT_EQ(find_member(Json::array({1}), "n"), nullptr);
}

Result sample_result(const std::string& chapter, const std::string& workload,
                     const std::string& role, double p50_us) {
  Result r;
  r.chapter = chapter;
  r.workload = workload;
  r.role = role;
  r.requested_backend = role == "peer" ? "cudnn" : "auto";
  r.provider = role == "peer" ? "cudnn" : "sm80";
  r.parity = Parity{"cpu-fp64", 1e-3, 1e-2, false, true};
  Summary s = summarize({p50_us, p50_us * 1.1, p50_us * 0.9});
  s.method = "graph";
  s.launches_per_sample = 100;
  r.timing = s;
  return r;
}

RunRecord sample_record() {
  RunRecord record;
  record.created_utc = "2026-01-01T00:00:00Z";
  record.profile = "minimal";
  record.git_commit = "abc";
  record.environment = {{"device", "NVIDIA H100 80GB HBM3"}, {"cudnn_version", "9.14.0"}};
  record.knobs = {{"FLASHCORE_WINDOW", "1024"}};
  record.gemm_tflops = 800;
  record.gemm_problem = "cublasGemmEx bf16 8192^3";
  record.copy_gbps = 3000;
  record.copy_problem = "cudaMemcpyAsync device to device, 1024 MiB";
  record.results = {
      sample_result("labs/flashattention", "baseline_flashattention", "baseline", 100),
      sample_result("labs/flashattention", "optimized_flashattention", "optimized", 20),
      sample_result("peers/cudnn", "cudnn_sdpa", "peer", 10)};
  Result skipped = sample_result("flashcore", "wmma", "step", 1);
  skipped.outcome = Outcome::kSkipped;
  skipped.reason = "backend 'wmma' is not built";
  skipped.timing.reset();
  record.results.push_back(skipped);
  derive_metrics(&record.results, record.gemm_tflops, record.copy_gbps);
  return record;
}

TEST(ResultsSchema, HasVersionEnvironmentAndEveryResultField) {
  const Json j = to_json(sample_record());
  EXPECT_EQ(string_or(j, "schema", ""), kResultsSchema);
  EXPECT_EQ(integer_or(j, "schema_version", 0), kResultsSchemaVersion);
  for (const char* key : {"created_utc", "profile", "git_commit", "environment", "knobs",
                          "gemm_ceiling", "copy_ceiling", "results", "expectations"}) {
    EXPECT_NE(find_member(j, key), nullptr) << key;
  }
  EXPECT_EQ(number_or(j["gemm_ceiling"], "tflops", 0), 800);
  EXPECT_EQ(number_or(j["copy_ceiling"], "gbps", 0), 3000);
  EXPECT_NE(string_or(j["copy_ceiling"], "problem", ""), "");
  const Json& first = j["results"][1];
  for (const char* key :
       {"target", "provider", "status", "case", "parity", "timing", "tflops", "gbps",
        "pct_of_gemm_ceiling", "pct_of_copy_ceiling", "speedup_vs_baseline", "ratio_vs_cudnn"}) {
    EXPECT_NE(find_member(first, key), nullptr) << key;
  }
  for (const char* key : {"min_us", "p50_us", "p90_us", "mean_us", "stdev_us", "samples"}) {
    EXPECT_NE(find_member(first["timing"], key), nullptr) << key;
  }
  EXPECT_NEAR(number_or(first, "speedup_vs_baseline", 0), 5.0, 1e-9);
  EXPECT_NEAR(number_or(first, "ratio_vs_cudnn", 0), 0.5, 1e-9);
  EXPECT_EQ(string_or(j["results"][3], "status", ""), "SKIPPED");
}

TEST(ResultsSchema, PercentagesAreOfTheCeilingsMeasuredInTheRun) {
  const RunRecord record = sample_record();
  const Result& r = record.results[1];
  ASSERT_TRUE(r.tflops && r.gbps && r.pct_of_gemm_ceiling && r.pct_of_copy_ceiling);
  EXPECT_NEAR(*r.pct_of_gemm_ceiling, 100.0 * *r.tflops / 800, 1e-9);
  // GB/s counts Q, K, V read and O written once, like the copy's bytes read plus written.
  EXPECT_NEAR(*r.gbps, r.c.min_bytes() / (r.timing->p50_us * 1e-6) / 1e9, 1e-9);
  EXPECT_NEAR(*r.pct_of_copy_ceiling, 100.0 * *r.gbps / 3000, 1e-9);
  // A ceiling that was not measured leaves its percentage out, not zero or infinite.
  std::vector<Result> results = record.results;
  for (Result& x : results) x.pct_of_gemm_ceiling = x.pct_of_copy_ceiling = std::nullopt;
  derive_metrics(&results, 800, 0);
  EXPECT_TRUE(results[1].pct_of_gemm_ceiling.has_value());
  EXPECT_FALSE(results[1].pct_of_copy_ceiling.has_value());
}

TEST(ResultsSchema, RoundTripsThroughFromJson) {
  const RunRecord record = sample_record();
  Json parsed;
  std::string error;
  ASSERT_TRUE(parse_json(dump_json(to_json(record)), &parsed, &error)) << error;
  RunRecord back;
  ASSERT_TRUE(from_json(parsed, &back, &error)) << error;
  ASSERT_EQ(back.results.size(), record.results.size());
  EXPECT_EQ(dump_json(to_json(back)), dump_json(to_json(record)));
}

// Version-1 files written before the copy ceiling existed have neither copy_ceiling nor
// pct_of_copy_ceiling; they still load, with the copy ceiling read as not measured.
TEST(ResultsSchema, ReadsVersion1FilesWithoutTheCopyCeiling) {
  const Json full = to_json(sample_record());
  Json old = Json::object();
  for (const auto& [key, value] : full.items()) {
    if (key == "copy_ceiling") continue;
    if (key != "results") {
      old[key] = value;
      continue;
    }
    Json results = Json::array();
    for (const Json& r : value) {
      Json stripped = Json::object();
      for (const auto& [k, v] : r.items()) {
        if (k != "pct_of_copy_ceiling") stripped[k] = v;
      }
      results.push_back(stripped);
    }
    old[key] = results;
  }
  ASSERT_EQ(dump_json(old).find("copy"), std::string::npos);
  RunRecord back;
  std::string error;
  ASSERT_TRUE(from_json(old, &back, &error)) << error;
  EXPECT_EQ(back.copy_gbps, 0);
  EXPECT_EQ(back.gemm_tflops, 800);
  ASSERT_EQ(back.results.size(), 4u);
  EXPECT_FALSE(back.results[1].pct_of_copy_ceiling.has_value());
  EXPECT_TRUE(back.results[1].pct_of_gemm_ceiling.has_value());
  const std::string md = render_markdown(back);
  EXPECT_EQ(md.find("- copy ceiling"), std::string::npos);
  EXPECT_NE(md.find("% copy"), std::string::npos);
}

TEST(ResultsSchema, RejectsOtherSchemasAndVersions) {
  RunRecord back;
  std::string error;
  Json j = to_json(sample_record());
  j["schema_version"] = kResultsSchemaVersion + 1;
  EXPECT_FALSE(from_json(j, &back, &error));
  EXPECT_NE(error.find("schema_version"), std::string::npos);
  EXPECT_FALSE(from_json(Json::object(), &back, &error));
}

TEST(Reports, MarkdownHasTablesJourneyAndVerdict) {
  RunRecord record = sample_record();
  record.expectations_checked = true;
  record.regressions = {"labs/flashattention:optimized_flashattention [B1]: p50 20 us > max 10 us"};
  const std::string md = render_markdown(record);
  EXPECT_NE(md.find("## labs/flashattention"), std::string::npos);
  EXPECT_NE(md.find("Journey at"), std::string::npos);
  EXPECT_NE(md.find("cuDNN (peer)"), std::string::npos);
  EXPECT_NE(md.find("5.00x"), std::string::npos);
  EXPECT_NE(md.find("**FAIL**"), std::string::npos);
  EXPECT_NE(md.find("**SKIPPED**"), std::string::npos);
  EXPECT_NE(md.find("- GEMM ceiling (% GEMM below): 800.0 TFLOP/s"), std::string::npos);
  EXPECT_NE(md.find("- copy ceiling (% copy below): 3000 GB/s"), std::string::npos);
}

// Every table row has as many cells as its header, and "% copy" sits right after "% GEMM".
TEST(Reports, MarkdownTablesHaveTheCopyColumnNextToGemm) {
  const std::string md = render_markdown(sample_record());
  std::istringstream lines(md);
  size_t header_cells = 0, tables = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("|", 0) != 0) {
      header_cells = 0;
      continue;
    }
    const size_t cells = static_cast<size_t>(std::count(line.begin(), line.end(), '|'));
    if (header_cells == 0) {
      header_cells = cells;
      ++tables;
      EXPECT_NE(line.find("| % GEMM | % copy |"), std::string::npos) << line;
    } else {
      EXPECT_EQ(cells, header_cells) << line;
    }
  }
  EXPECT_EQ(tables, 6u);  // a comparison and a journey table per chapter
  char cell[64];
  const Result& r = sample_record().results[1];
  std::snprintf(cell, sizeof(cell), "| %.1f | %.1f |", *r.pct_of_gemm_ceiling,
                *r.pct_of_copy_ceiling);
  EXPECT_NE(md.find(cell), std::string::npos) << cell;
}

TEST(Parity, ComparesRelativeL2AndCatchesNaN) {
  const double ref[] = {1.0, -2.0, 3.0};
  const float good[] = {1.001f, -2.001f, 3.001f};
  Parity p = compare_outputs(good, ref, 3, "fp16", "cpu-fp64");
  EXPECT_TRUE(p.passed);
  EXPECT_NEAR(p.rel_l2, std::sqrt(3e-6 / 14.0), 1e-6);
  const float bad[] = {1.1f, -2.0f, 3.0f};
  EXPECT_FALSE(compare_outputs(bad, ref, 3, "fp16", "cpu-fp64").passed);
  EXPECT_TRUE(compare_outputs(bad, ref, 3, "bf16", "cpu-fp64").rel_l2 > 1e-2);
  const float nan[] = {std::numeric_limits<float>::quiet_NaN(), -2.0f, 3.0f};
  p = compare_outputs(nan, ref, 3, "bf16", "cpu-fp64");
  EXPECT_TRUE(p.has_nan);
  EXPECT_FALSE(p.passed);
  EXPECT_DOUBLE_EQ(parity_tolerance("fp16"), 5e-3);
  EXPECT_DOUBLE_EQ(parity_tolerance("bf16"), 1e-2);
}

}  // namespace
}  // namespace flashcore::bench
