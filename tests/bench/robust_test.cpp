// flashcore-bench robust: the grid, the input distributions' statistics, the error statistics,
// and the report (order, rejections, exit code) from a stored robust.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "fixtures.hpp"
#include "parity.hpp"
#include "robust_grid.hpp"
#include "robust_inputs.hpp"
#include "robust_report.hpp"

namespace flashcore::bench {
namespace {

Case small_case(const char* dtype, int64_t head_dim = 64) {
  Case c;
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seqlen_q = 33;
  c.seqlen_k = 65;
  c.head_dim = head_dim;
  c.dtype = dtype;
  return c;
}

struct Moments {
  double mean = 0, variance = 0, max_abs = 0;
};

Moments moments(const std::vector<double>& x) {
  Moments m;
  for (const double v : x) m.mean += v;
  m.mean /= static_cast<double>(x.size());
  for (const double v : x) {
    m.variance += (v - m.mean) * (v - m.mean);
    m.max_abs = std::max(m.max_abs, std::fabs(v));
  }
  m.variance /= static_cast<double>(x.size());
  return m;
}

TEST(RobustGrid, CoversTheShapesMasksAndDistributionsTheSuiteNeeds) {
  const std::vector<RobustCase> grid = robust_grid(/*quick=*/false);
  std::set<std::string> names, shapes, distributions, masks, dtypes;
  std::set<int64_t> head_dims;
  bool odd = false, sq_ne_sk = false, gqa = false, tiny = false, long_s = false, large_bh = false;
  bool fully_masked_rows = false;
  for (const RobustCase& rc : grid) {
    const Case& c = rc.c;
    names.insert(rc.name());
    shapes.insert(rc.shape);
    distributions.insert(distribution_name(rc.distribution));
    masks.insert(mask_mode_name(rc.mask));
    dtypes.insert(c.dtype);
    head_dims.insert(c.head_dim);
    // Every cell is a valid problem: head dims a multiple of 8 up to 256, GQA divisible.
    EXPECT_EQ(c.head_dim % 8, 0);
    EXPECT_LE(c.head_dim, 256);
    EXPECT_EQ(c.heads_q % c.heads_kv, 0);
    EXPECT_EQ(c.causal, rc.mask != MaskMode::kNone);
    EXPECT_EQ(c.window_left >= 0, rc.mask == MaskMode::kWindow);
    odd = odd || (c.seqlen_q % 2 == 1 && c.seqlen_k % 2 == 1 && c.seqlen_q > 1);
    sq_ne_sk = sq_ne_sk || c.seqlen_q != c.seqlen_k;
    gqa = gqa || c.heads_q != c.heads_kv;
    tiny = tiny || (c.seqlen_q == 1 && c.seqlen_k == 1);
    long_s = long_s || c.seqlen_k >= 16384;
    large_bh = large_bh || c.batch * c.heads_q >= 2048;
    // Bottom-right-aligned causal with Sq > Sk leaves the first Sq - Sk rows without keys.
    fully_masked_rows = fully_masked_rows || (c.causal && c.seqlen_q > c.seqlen_k);
    if (rc.distribution == Distribution::kMaskedRows) {
      EXPECT_TRUE(c.causal);
      EXPECT_EQ(c.seqlen_q, c.seqlen_k + kMaskedRowsExtra);
    }
  }
  EXPECT_EQ(names.size(), grid.size()) << "cell names must be unique";
  EXPECT_TRUE(odd && sq_ne_sk && gqa && tiny && long_s && large_bh && fully_masked_rows);
  EXPECT_EQ(distributions.size(), all_distributions().size());
  EXPECT_EQ(masks, (std::set<std::string>{"none", "causal", "window"}));
  EXPECT_EQ(dtypes, (std::set<std::string>{"fp16", "bf16"}));
  EXPECT_EQ(head_dims, (std::set<int64_t>{40, 64, 96, 128, 256}));
  EXPECT_EQ(shapes.size(), robust_shapes().size());

  const std::vector<RobustCase> quick = robust_grid(/*quick=*/true);
  EXPECT_LT(quick.size() * 4, grid.size());
  std::set<std::string> quick_distributions;
  for (const RobustCase& rc : quick) quick_distributions.insert(distribution_name(rc.distribution));
  EXPECT_EQ(quick_distributions.size(), all_distributions().size());
}

TEST(RobustInputs, SameSeedSameInputsOtherSeedOtherInputs) {
  const Case c = small_case("fp16");
  HostInputs a, b, d;
  generate_inputs(Distribution::kNormal, c, 7, &a);
  generate_inputs(Distribution::kNormal, c, 7, &b);
  generate_inputs(Distribution::kNormal, c, 8, &d);
  EXPECT_EQ(a.q_bits, b.q_bits);
  EXPECT_NE(a.q_bits, d.q_bits);
  EXPECT_EQ(a.q.size(), static_cast<size_t>(2 * 33 * 4 * 64));
  EXPECT_EQ(a.k.size(), static_cast<size_t>(2 * 65 * 2 * 64));
}

// Inputs are drawn in chunks of kRowsPerChunk rows, each from its own stream, so that any
// number of threads draws the same values for a seed.
TEST(RobustInputs, TheThreadCountDoesNotChangeTheInputs) {
  Case c = small_case("bf16", 16);
  c.batch = 1;
  c.seqlen_q = 700;   // Q: 2800 rows, three chunks, the last one partial
  c.seqlen_k = 1100;  // K, V: 2200 rows
  ASSERT_GT(static_cast<size_t>(c.seqlen_q * c.heads_q), 2 * kRowsPerChunk);
  for (const Distribution d : all_distributions()) {
    HostInputs one, three, many;
    generate_inputs(d, c, 21, &one, GenerateOptions{1, true});
    generate_inputs(d, c, 21, &three, GenerateOptions{3, true});
    generate_inputs(d, c, 21, &many, GenerateOptions{16, true});
    for (const HostInputs* other : {&three, &many}) {
      EXPECT_EQ(one.q_bits, other->q_bits) << distribution_name(d);
      EXPECT_EQ(one.k_bits, other->k_bits) << distribution_name(d);
      EXPECT_EQ(one.v_bits, other->v_bits) << distribution_name(d);
      EXPECT_EQ(one.q, other->q) << distribution_name(d);
    }
    // Without the exact values the bits are the same, and nothing else is kept.
    HostInputs bits_only;
    generate_inputs(d, c, 21, &bits_only, GenerateOptions{2, false});
    EXPECT_EQ(one.k_bits, bits_only.k_bits) << distribution_name(d);
    EXPECT_TRUE(bits_only.q.empty() && bits_only.k.empty() && bits_only.v.empty());
  }
}

// Each chunk has a stream of its own: chunk 1 does not repeat chunk 0 (as it would if its stream
// were chunk 0's shifted), and its values are not those of another seed's chunk 1.
TEST(RobustInputs, EveryChunkHasItsOwnStream) {
  Case c = small_case("fp16", 64);
  c.batch = 1;
  c.seqlen_q = 600;  // 2400 rows
  HostInputs a, b;
  generate_inputs(Distribution::kUniform, c, 5, &a);
  generate_inputs(Distribution::kUniform, c, 6, &b);
  const size_t row = static_cast<size_t>(c.head_dim), chunk = kRowsPerChunk * row;
  const std::vector<double> first(a.q.begin(), a.q.begin() + static_cast<std::ptrdiff_t>(row));
  for (size_t shift = 0; shift < 4; ++shift) {
    const auto start = a.q.begin() + static_cast<std::ptrdiff_t>(chunk + shift);
    EXPECT_NE(first, std::vector<double>(start, start + static_cast<std::ptrdiff_t>(row)));
  }
  EXPECT_NE(std::vector<uint16_t>(a.q_bits.begin() + static_cast<std::ptrdiff_t>(chunk),
                                  a.q_bits.begin() + static_cast<std::ptrdiff_t>(chunk + row)),
            std::vector<uint16_t>(b.q_bits.begin() + static_cast<std::ptrdiff_t>(chunk),
                                  b.q_bits.begin() + static_cast<std::ptrdiff_t>(chunk + row)));
}

TEST(RobustInputs, NormalAndUniformHaveTheirMoments) {
  Case c = small_case("bf16");
  c.seqlen_q = 512;
  HostInputs in;
  generate_inputs(Distribution::kNormal, c, 1, &in);
  const Moments normal = moments(in.q);  // 131072 samples
  EXPECT_NEAR(normal.mean, 0, 0.02);
  EXPECT_NEAR(normal.variance, 1, 0.03);
  generate_inputs(Distribution::kUniform, c, 1, &in);
  const Moments uniform = moments(in.q);
  EXPECT_NEAR(uniform.mean, 0, 0.01);
  EXPECT_NEAR(uniform.variance, 1.0 / 3, 0.01);
  EXPECT_LE(uniform.max_abs, 1.0);
}

TEST(RobustInputs, LargeMagnitudeScoresExceedTenThousand) {
  const Case c = small_case("fp16");
  HostInputs in;
  generate_inputs(Distribution::kLargeMagnitude, c, 3, &in);
  // The largest |q.k| / sqrt(D) of each query row (against its own KV head).
  const int64_t d = c.head_dim, group = c.heads_q / c.heads_kv;
  int rows_over = 0, rows = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t i = 0; i < c.seqlen_q; ++i) {
      for (int64_t h = 0; h < c.heads_q; ++h) {
        const double* q = &in.q[static_cast<size_t>(((b * c.seqlen_q + i) * c.heads_q + h) * d)];
        double top = 0;
        for (int64_t j = 0; j < c.seqlen_k; ++j) {
          const double* k =
              &in.k[static_cast<size_t>(((b * c.seqlen_k + j) * c.heads_kv + h / group) * d)];
          double s = 0;
          for (int64_t x = 0; x < d; ++x) s += q[x] * k[x];
          top = std::max(top, std::fabs(s) / std::sqrt(static_cast<double>(d)));
        }
        ++rows;
        rows_over += top > 1e4;
      }
    }
  }
  EXPECT_EQ(rows_over, rows);
  EXPECT_LE(moments(in.v).max_abs, 10.0);  // V stays ordinary
}

TEST(RobustInputs, OutliersAreReallyThereAndOnlyThere) {
  const Case c = small_case("fp16");
  HostInputs in;
  generate_inputs(Distribution::kOutliers, c, 5, &in);
  for (const std::vector<double>* t : {&in.q, &in.k, &in.v}) {
    for (size_t row = 0; row < t->size(); row += static_cast<size_t>(c.head_dim)) {
      int huge = 0;
      for (int64_t x = 0; x < c.head_dim; ++x) {
        const double v = std::fabs((*t)[row + static_cast<size_t>(x)]);
        if (v >= kOutlierMagnitude / 2) {
          ++huge;
          EXPECT_EQ(v, kOutlierMagnitude);
        }
      }
      ASSERT_EQ(huge, kOutliersPerRow) << "row " << row / static_cast<size_t>(c.head_dim);
    }
  }
}

TEST(RobustInputs, ConstantRowsTieEveryScoreOfARow) {
  const Case c = small_case("bf16");
  HostInputs in;
  generate_inputs(Distribution::kConstantRows, c, 9, &in);
  for (size_t row = 0; row < in.q.size(); row += static_cast<size_t>(c.head_dim)) {
    for (int64_t x = 1; x < c.head_dim; ++x) ASSERT_EQ(in.q[row + x], in.q[row]);
  }
  for (const double k : in.k) ASSERT_EQ(k, in.k[0]);
  EXPECT_NE(in.q[0], in.q[static_cast<size_t>(c.head_dim)]);  // rows differ from each other
  EXPECT_GT(moments(in.v).variance, 0.5);
}

TEST(RobustInputs, NearOverflowIsFiniteFp16CloseToItsMax) {
  const Case c = small_case("fp16");
  HostInputs in;
  generate_inputs(Distribution::kNearOverflow, c, 11, &in);
  for (const std::vector<double>* t : {&in.q, &in.v}) {
    const Moments m = moments(*t);
    EXPECT_LE(m.max_abs, 65504.0);
    EXPECT_GE(m.max_abs, 0.9 * kNearOverflow);
    for (const double v : *t) ASSERT_GE(std::fabs(v), 0.5 * kNearOverflow - 32);  // fp16 spacing
  }
  for (const uint16_t bits : in.q_bits) ASSERT_NE(bits & 0x7C00, 0x7C00) << "inf or NaN";
  // K among fp16's subnormals keeps q.k / sqrt(D) of order one.
  EXPECT_LT(moments(in.k).max_abs, 1e-3);
}

TEST(ErrorStats, CountsNonFiniteAndMeasuresTheRest) {
  const std::vector<double> ref = {1, -2, 0, 4};
  const std::vector<float> out = {1.5f, -2, NAN, INFINITY};
  const ErrorStats s = error_stats(out.data(), ref.data(), out.size());
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.inf_count, 1u);
  EXPECT_DOUBLE_EQ(s.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(s.max_ref, 4);
  EXPECT_NEAR(s.rel_l2, 0.5 / std::sqrt(5.0), 1e-12);
  EXPECT_FALSE(robust_passes(s, 1));
  const ErrorStats zeros =
      error_stats(std::vector<float>{0, 0}.data(), std::vector<double>{0, 0}.data(), 2);
  EXPECT_TRUE(robust_passes(zeros, 5e-3));  // fully masked rows: exactly zero
}

TEST(RobustReport, ReadsTheFixtureAndListsTheWorstFirst) {
  RobustRecord record;
  std::string error;
  ASSERT_TRUE(from_json(testing::fixture_json("robust.json"), &record, &error)) << error;
  ASSERT_EQ(record.results.size(), 7u);
  const RobustCounts c = count(record);
  EXPECT_EQ(c.cells, 4u);
  EXPECT_EQ(c.passed, 4u);
  EXPECT_EQ(c.failed, 2u);
  EXPECT_EQ(c.rejected, 1u);
  EXPECT_EQ(c.non_finite, 1u);
  EXPECT_EQ(robust_exit_code(record), 1);

  std::vector<RobustResult> sorted = record.results;
  sort_worst_first(&sorted);
  EXPECT_EQ(sorted[0].provider, "unfused");  // NaN first
  EXPECT_EQ(sorted[1].provider, "wmma");     // then the largest error over tolerance
  EXPECT_EQ(sorted[1].status, RobustStatus::kFailed);
  EXPECT_EQ(sorted[2].provider, "scalar");  // 3.9e-3 / 5e-3 is the worst pass
  EXPECT_EQ(sorted.back().status, RobustStatus::kRejected);

  const std::string md = render_robust_markdown(record);
  EXPECT_NE(md.find("**FAIL**"), std::string::npos);
  EXPECT_NE(md.find("rejected: wmma: head_dim 256 is not supported"), std::string::npos);
  EXPECT_LT(md.find("| unfused |"), md.find("| wmma | odd"));
  EXPECT_LT(md.find("| wmma | odd"), md.find("| scalar | odd"));
  EXPECT_LT(md.find("| scalar | odd"), md.find("| sm90 | sq_gt_sk"));

  // Round trip, and rejections alone do not fail the suite.
  RobustRecord back;
  ASSERT_TRUE(from_json(to_json(record), &back, &error)) << error;
  EXPECT_EQ(to_json(back), to_json(record));
  back.results.erase(
      std::remove_if(back.results.begin(), back.results.end(),
                     [](const RobustResult& r) { return r.status == RobustStatus::kFailed; }),
      back.results.end());
  EXPECT_EQ(robust_exit_code(back), 0);
  EXPECT_NE(render_robust_markdown(back).find("**PASS**"), std::string::npos);
  back.interrupted = true;
  EXPECT_EQ(robust_exit_code(back), 1);
}

// A run cut short by --time-budget has covered whole shapes first, says which cells did not run,
// and a later --resume keeps its results and seed and runs only those.
TEST(RobustReport, APartialRunListsWhatDidNotRunAndResumes) {
  const std::vector<RobustCase> grid = robust_grid(/*quick=*/false);
  EXPECT_EQ(grid.back().shape, "long");  // the costly shape last
  std::set<std::string> finished;        // shapes are contiguous in grid order
  for (size_t i = 1; i < grid.size(); ++i) {
    if (grid[i].shape != grid[i - 1].shape) {
      EXPECT_TRUE(finished.insert(grid[i - 1].shape).second) << grid[i - 1].shape;
    }
  }

  RobustRecord partial;
  partial.grid = "default";
  partial.seed = 77;
  partial.created_utc = "2026-11-24T19:00:00Z";
  for (const RobustCase& cell : grid) {
    if (cell.shape == "long" || cell.shape == "large_bh") continue;
    RobustResult r;
    r.cell = cell;
    r.provider = "sm90";
    r.ran = true;
    r.tolerance = 1e-2;
    partial.results.push_back(r);
  }
  partial.interrupted = true;
  partial.interruption = "the time budget of 300 s ran out";
  const std::vector<RobustCase> missing = missing_cells(partial);
  size_t expected = 0;
  for (const RobustCase& cell : grid) expected += cell.shape == "long" || cell.shape == "large_bh";
  EXPECT_EQ(missing.size(), expected);
  const std::string md = render_robust_markdown(partial);
  EXPECT_NE(md.find("**INCOMPLETE**"), std::string::npos);
  EXPECT_NE(md.find("Coverage: " + std::to_string(grid.size() - expected) +
                    " of the default "
                    "grid's " +
                    std::to_string(grid.size()) + " cells ran; these " + std::to_string(expected) +
                    " did not"),
            std::string::npos);
  EXPECT_NE(md.find("| long | 256 | bf16 | 7 |"), std::string::npos);  // 3 x normal, large, 1
  EXPECT_EQ(robust_exit_code(partial), 1);

  RobustRecord resumed;
  std::string error;
  EXPECT_FALSE(resume_from(partial, "quick", 0, &resumed, &error));
  EXPECT_NE(error.find("'default' grid"), std::string::npos);
  EXPECT_FALSE(resume_from(partial, "default", 78, &resumed, &error));
  EXPECT_NE(error.find("differs"), std::string::npos);
  ASSERT_TRUE(resume_from(partial, "default", 0, &resumed, &error)) << error;
  EXPECT_EQ(resumed.seed, 77u);
  EXPECT_EQ(resumed.results.size(), partial.results.size());
  EXPECT_EQ(missing_cells(resumed).size(), expected);
  for (const RobustCase& cell : missing) {
    RobustResult r;
    r.cell = cell;
    r.provider = "sm90";
    resumed.results.push_back(r);
  }
  EXPECT_TRUE(missing_cells(resumed).empty());
  EXPECT_NE(render_robust_markdown(resumed).find("cells ran (all)."), std::string::npos);
  EXPECT_NE(render_robust_markdown(resumed).find("**PASS**"), std::string::npos);
}

// A seed reproduces inputs only with the generator that drew them: robust.json names it, files
// from before the chunked generator read as the serial one, and a resumed run keeps the name of
// its cells' generator when it differs from this run's.
TEST(RobustReport, RecordsWhichGeneratorDrewTheInputs) {
  RobustRecord old;
  std::string error;
  ASSERT_TRUE(from_json(testing::fixture_json("robust.json"), &old, &error)) << error;
  EXPECT_EQ(old.inputs, kSerialInputGenerator);
  EXPECT_TRUE(old.resumed_inputs.empty());

  RobustRecord resumed;
  ASSERT_TRUE(resume_from(old, old.grid, 0, &resumed, &error)) << error;
  EXPECT_EQ(resumed.inputs, kInputGenerator);
  EXPECT_EQ(resumed.resumed_inputs, kSerialInputGenerator);
  const std::string md = render_robust_markdown(resumed);
  EXPECT_NE(md.find(std::string("- inputs: ") + kInputGenerator +
                    " (the cells kept from the resumed run: " + kSerialInputGenerator),
            std::string::npos);
  RobustRecord back;
  ASSERT_TRUE(from_json(to_json(resumed), &back, &error)) << error;
  EXPECT_EQ(back.inputs, kInputGenerator);
  EXPECT_EQ(back.resumed_inputs, kSerialInputGenerator);

  // Resuming the merged record again still names the older cells' generator; a record drawn
  // entirely by this generator names no other.
  RobustRecord again;
  ASSERT_TRUE(resume_from(back, back.grid, 0, &again, &error)) << error;
  EXPECT_EQ(again.resumed_inputs, kSerialInputGenerator);
  RobustRecord fresh, fresh_resumed;
  fresh.grid = "default";
  ASSERT_TRUE(resume_from(fresh, "default", 0, &fresh_resumed, &error)) << error;
  EXPECT_TRUE(fresh_resumed.resumed_inputs.empty());
  EXPECT_EQ(render_robust_markdown(fresh_resumed).find("resumed run:"), std::string::npos);
}

TEST(RobustReport, RejectsAFileOfAnotherSchema) {
  RobustRecord record;
  std::string error;
  EXPECT_FALSE(from_json(testing::fixture_json("profile.json"), &record, &error));
  EXPECT_NE(error.find("flashcore-bench/robust"), std::string::npos);
}

}  // namespace
}  // namespace flashcore::bench
