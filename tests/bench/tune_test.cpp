// `flashcore-bench tune` without a GPU: config validation, the generated source and nvcc command,
// the leaderboard's persistence and resume, the acceptance rule, and the parity gate rejecting
// deliberately wrong stand-in candidates.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "cli.hpp"
#include "parity.hpp"
#include "tune_config.hpp"
#include "tune_gate.hpp"
#include "tune_leaderboard.hpp"
#include "tune_search.hpp"
#include "tune_source.hpp"

namespace flashcore::bench {
namespace {

namespace fs = std::filesystem;

TEST(TuneConfig, TheShippedConfigIsValidAndMatchesTheKernelsSharedMemory) {
  const TuneConfig c = default_config(128);
  EXPECT_EQ(c.key(), "n128_s2_wg2_r240_c2_pp1_ov1");
  EXPECT_EQ(invalid_reason(c, 128, 2), "");
  // Two Q stages of 128 x 128, two K and two V stages of 128 x 128, bf16, plus the barriers'
  // kilobyte: KernelTraits<bfloat16_t, 128>::kSmemBytes.
  EXPECT_EQ(smem_bytes(c, 128, 2), 193 * 1024);
  EXPECT_EQ(default_config(64).consumer_warpgroups, 3);
  EXPECT_EQ(default_config(64).consumer_registers, 160);
  EXPECT_EQ(default_config(256).block_n, 80);
  EXPECT_EQ(invalid_reason(default_config(256), 256, 2), "");
}

TEST(TuneConfig, RejectsWhatTheKernelCannotHonourBeforeCompiling) {
  TuneConfig c = default_config(128);
  c.block_n = 192;
  c.stages = 4;
  c.consumer_warpgroups = 3;
  c.consumer_registers = 160;
  EXPECT_NE(invalid_reason(c, 128, 2).find("over one CTA's 227 KiB"), std::string::npos);
  c = default_config(128);
  c.consumer_registers = 248;  // 24 + 2 x 248 > 512
  EXPECT_NE(invalid_reason(c, 128, 2).find("setmaxnreg"), std::string::npos);
  c.consumer_registers = 160;  // below the 168 the CTA is launched with
  EXPECT_NE(invalid_reason(c, 128, 2).find("setmaxnreg"), std::string::npos);
  c = default_config(128);
  c.block_n = 72;
  EXPECT_NE(invalid_reason(c, 128, 2).find("multiple of 16"), std::string::npos);
  c.block_n = 80;
  c.cluster_ctas = 4;  // 20 rows per CTA
  EXPECT_NE(invalid_reason(c, 128, 2).find("multicast"), std::string::npos);
  c = default_config(128);
  c.consumer_warpgroups = 1;
  c.consumer_registers = 256;
  EXPECT_NE(invalid_reason(c, 128, 2).find("pingpong"), std::string::npos);
  c.pingpong = false;
  EXPECT_EQ(invalid_reason(c, 128, 2), "");
}

TEST(TuneConfig, KeysRoundTripAndGarbageIsRefused) {
  TuneConfig c = default_config(128);
  c.block_n = 176;
  c.pingpong = false;
  TuneConfig parsed;
  ASSERT_TRUE(parse_key(c.key(), &parsed));
  EXPECT_EQ(parsed.key(), c.key());
  EXPECT_FALSE(parse_key("n128_s2_wg2_r240_c2_pp1", &parsed));
  EXPECT_FALSE(parse_key(c.key() + "x", &parsed));
  EXPECT_FALSE(parse_key("n128_s2_wg2_r240_c2_pp2_ov1", &parsed));
}

TEST(TuneConfig, MutationChangesOneKnobAndCrossoverMixesParents) {
  std::mt19937_64 rng(7);
  const TuneSpace space;
  const TuneConfig parent = default_config(128);
  for (int i = 0; i < 200; ++i) {
    const TuneConfig child = mutate(parent, space, &rng);
    const int changed = (child.block_n != parent.block_n) + (child.stages != parent.stages) +
                        (child.consumer_warpgroups != parent.consumer_warpgroups) +
                        (child.cluster_ctas != parent.cluster_ctas) +
                        (child.pingpong != parent.pingpong) +
                        (child.intra_overlap != parent.intra_overlap);
    const bool registers_only =
        changed == 0 && child.consumer_registers != parent.consumer_registers;
    EXPECT_TRUE(changed == 1 || registers_only) << child.key();
  }
  TuneConfig other = parent;
  other.block_n = 96;
  other.stages = 3;
  other.consumer_warpgroups = 3;
  other.consumer_registers = 152;
  other.pingpong = false;
  std::set<int> block_ns;
  for (int i = 0; i < 100; ++i) {
    const TuneConfig child = crossover(parent, other, &rng);
    block_ns.insert(child.block_n);
    // The register budget travels with its consumer count.
    EXPECT_EQ(child.consumer_registers, child.consumer_warpgroups == 3 ? 152 : 240);
  }
  EXPECT_EQ(block_ns, (std::set<int>{96, 128}));
}

TEST(TuneSource, TheGeneratedUnitInstantiatesTheConfigFromOurHeaders) {
  TuneConfig c = default_config(128);
  c.block_n = 112;
  c.stages = 3;
  c.intra_overlap = false;
  const std::string source = candidate_source(c, 128, "bf16");
  EXPECT_NE(source.find("#include \"sm90/launch.cuh\""), std::string::npos);
  EXPECT_NE(source.find("TileConfig<112, 3, 2, 240>"), std::string::npos);
  EXPECT_NE(source.find("KernelTraits<cutlass::bfloat16_t, 128, 2, Config>"), std::string::npos);
  EXPECT_NE(source.find("/*intra_overlap=*/false"), std::string::npos);
  for (const char* symbol : {kTuneAbiSymbol, kTuneSmemSymbol, kTuneLaunchSymbol}) {
    const size_t at = source.find(std::string(symbol) + "(");
    ASSERT_NE(at, std::string::npos) << symbol;
    const size_t line = source.rfind('\n', at) + 1;
    EXPECT_EQ(source.compare(line, 20, "FLASHCORE_TUNE_ENTRY"), 0) << symbol;
  }
  // Everything else is hidden: candidates with kernels of the same type must not share the
  // statics that record a kernel's shared-memory attribute (seen on the H100 as launch errors).
  EXPECT_NE(source.find("visibility(\"default\")"), std::string::npos);
  CompileSetup setup;
  setup.source_root = "/repo";
  setup.cutlass_include = "/cutlass/include";
  const std::vector<std::string> argv = compile_command(setup, "c.cu", "c.so");
  const auto has = [&](const std::string& a) {
    return std::find(argv.begin(), argv.end(), a) != argv.end();
  };
  EXPECT_TRUE(has("-gencode=arch=compute_90a,code=sm_90a"));
  EXPECT_TRUE(has("-shared"));
  EXPECT_TRUE(has("-Xcompiler=-fvisibility=hidden"));
  EXPECT_TRUE(has("-I/repo/src"));
  EXPECT_TRUE(has("/cutlass/include"));
  EXPECT_EQ(spill_bytes("ptxas info    : Used 168 registers\n    0 bytes stack frame, 24 bytes "
                        "spill stores, 16 bytes spill loads\n"),
            40);
  EXPECT_EQ(spill_bytes("no spills here"), 0);
}

TEST(TuneCli, ArgumentsAreCheckedBeforeAnyGpuWork) {
  const BackendCheck any = [](const std::string&) { return true; };
  Options o;
  std::string error;
  const char* good[] = {"flashcore-bench", "tune", "--budget", "60", "--population", "4",
                        "--min-gain",      "0.05", "--out",    "dir"};
  ASSERT_TRUE(parse_args(10, good, any, &o, &error)) << error;
  EXPECT_EQ(o.command, Command::kTune);
  EXPECT_EQ(o.tune.budget_s, 60);
  EXPECT_EQ(o.tune.population, 4);
  EXPECT_DOUBLE_EQ(o.tune.min_gain, 0.05);
  EXPECT_EQ(o.out_dir, "dir");
  const char* zero_budget[] = {"flashcore-bench", "tune", "--budget", "0"};
  EXPECT_FALSE(parse_args(4, zero_budget, any, &o, &error));
  const char* bad_dtype[] = {"flashcore-bench", "tune", "--dtype", "fp8"};
  EXPECT_FALSE(parse_args(4, bad_dtype, any, &o, &error));
  const char* bad_dim[] = {"flashcore-bench", "tune", "--head-dim", "100"};
  EXPECT_FALSE(parse_args(4, bad_dim, any, &o, &error));
  const char* export_alone[] = {"flashcore-bench", "tune", "--export-only"};
  EXPECT_FALSE(parse_args(3, export_alone, any, &o, &error));
  EXPECT_NE(error.find("--leaderboard"), std::string::npos);
}

// --- The parity gate against stand-in candidates computed on the CPU. ---

// Float64 attention over BSHD inputs, causal aligned bottom-right (as flashcore and the lab).
// `drop_tail`: keys of the last partial 64-key tile are ignored; `fill_masked_rows`: a row that
// sees no key gets the mean of V instead of 0. Both are the bugs a wrong tile shape produces.
std::vector<double> attention(const Case& c, const std::vector<double>& q,
                              const std::vector<double>& k, const std::vector<double>& v,
                              bool drop_tail, bool fill_masked_rows) {
  const int64_t d = c.head_dim, h = c.heads_q, sq = c.seqlen_q, sk = c.seqlen_k;
  std::vector<double> o(c.batch * sq * h * d, 0.0);
  const int64_t keys = drop_tail ? sk / 64 * 64 : sk;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t hh = 0; hh < h; ++hh) {
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t end = c.causal ? std::min(keys, i + sk - sq + 1) : keys;
        double* out = &o[((b * sq + i) * h + hh) * d];
        if (end <= 0) {
          for (int64_t j = 0; fill_masked_rows && j < sk; ++j) {
            for (int64_t x = 0; x < d; ++x) out[x] += v[((b * sk + j) * h + hh) * d + x] / sk;
          }
          continue;
        }
        std::vector<double> s(end);
        double max = -INFINITY, sum = 0;
        for (int64_t j = 0; j < end; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < d; ++x) {
            dot += q[((b * sq + i) * h + hh) * d + x] * k[((b * sk + j) * h + hh) * d + x];
          }
          s[j] = dot / std::sqrt(static_cast<double>(d));
          max = std::max(max, s[j]);
        }
        for (int64_t j = 0; j < end; ++j) sum += s[j] = std::exp(s[j] - max);
        for (int64_t j = 0; j < end; ++j) {
          for (int64_t x = 0; x < d; ++x) out[x] += s[j] / sum * v[((b * sk + j) * h + hh) * d + x];
        }
      }
    }
  }
  return o;
}

class StandIn final : public CandidateRunner {
 public:
  StandIn(const std::vector<GateCase>& cases, bool drop_tail, bool fill_masked_rows)
      : cases_(cases), drop_tail_(drop_tail), fill_masked_rows_(fill_masked_rows) {}

  bool check(size_t i, Parity* parity, std::string*) override {
    const Case& c = cases_[i].c;
    std::mt19937_64 rng(i + 1);
    std::normal_distribution<double> normal;
    auto fill = [&](int64_t n) {
      std::vector<double> x(n);
      for (double& e : x) e = normal(rng);
      return x;
    };
    const auto q = fill(c.batch * c.seqlen_q * c.heads_q * c.head_dim);
    const auto k = fill(c.batch * c.seqlen_k * c.heads_kv * c.head_dim);
    const auto v = fill(c.batch * c.seqlen_k * c.heads_kv * c.head_dim);
    const auto ref = attention(c, q, k, v, false, false);
    const auto got = attention(c, q, k, v, drop_tail_, fill_masked_rows_);
    const std::vector<float> out(got.begin(), got.end());
    *parity = compare_outputs(out.data(), ref.data(), ref.size(), c.dtype, "cpu-fp64");
    return true;
  }
  bool time(size_t, double* p50_us, std::string*) override {
    ++timed;
    *p50_us = 10;
    return true;
  }
  int timed = 0;

 private:
  std::vector<GateCase> cases_;
  bool drop_tail_, fill_masked_rows_;
};

std::vector<GateCase> small_gate_cases() {
  Case timed;
  timed.batch = 1;
  timed.heads_q = timed.heads_kv = 2;
  timed.seqlen_q = timed.seqlen_k = 256;
  timed.head_dim = 64;
  timed.dtype = "bf16";
  std::vector<GateCase> cases = tune_gate_cases({timed});
  for (GateCase& g : cases) g.c.head_dim = 64;  // small enough for a naive CPU loop
  return cases;
}

TEST(TuneGate, CasesCoverAFullyMaskedRowAndTailTiles) {
  const std::vector<GateCase> cases = tune_gate_cases(default_tune_shapes(128, "bf16"));
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_TRUE(cases[0].timed && cases[1].timed && !cases[2].timed && !cases[3].timed);
  const Case& masked = cases[2].c;
  EXPECT_TRUE(masked.causal);
  EXPECT_GT(masked.seqlen_q, masked.seqlen_k);  // bottom-right causal: the first rows see no key
  for (const int tile : {64, 80, 96, 128, 192}) {
    EXPECT_NE(masked.seqlen_q % tile, 0) << tile;
    EXPECT_NE(masked.seqlen_k % tile, 0) << tile;
  }
  EXPECT_FALSE(cases[3].c.causal);
}

TEST(TuneGate, RejectsWrongStandInsBeforeTimingThem) {
  const std::vector<GateCase> cases = small_gate_cases();
  StandIn right(cases, false, false);
  const Measurement ok = measure_candidate(cases, &right);
  EXPECT_TRUE(ok.ok) << ok.reason;
  EXPECT_EQ(right.timed, 1);

  StandIn masked_rows_wrong(cases, false, true);
  const Measurement m = measure_candidate(cases, &masked_rows_wrong);
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.failure, CandidateStatus::kParityFail);
  EXPECT_NE(m.reason.find("fully masked rows"), std::string::npos) << m.reason;
  EXPECT_EQ(masked_rows_wrong.timed, 0);

  StandIn tail_wrong(cases, true, false);
  const Measurement t = measure_candidate(cases, &tail_wrong);
  EXPECT_FALSE(t.ok);
  EXPECT_EQ(t.failure, CandidateStatus::kParityFail);
  EXPECT_EQ(tail_wrong.timed, 0);
}

}  // namespace
}  // namespace flashcore::bench
