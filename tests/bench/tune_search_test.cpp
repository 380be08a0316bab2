// The tuner's search without a GPU: a fake backend whose times, parity and compile results are
// functions of the config, so that the acceptance rule, the statuses, the time budget and the
// leaderboard's persistence and resume can be checked exactly.
#include "tune_search.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

namespace flashcore::bench {
namespace {

namespace fs = std::filesystem;

// A space of eight configs: key tile 128 or 176, pingpong and overlap on or off.
TuneSpace small_space() {
  TuneSpace s;
  s.block_n = {128, 176};
  s.stages = {2};
  s.consumer_warpgroups = {2};
  s.register_offsets = {0};
  s.cluster_ctas = {2};
  return s;
}

class FakeBackend final : public CandidateBackend {
 public:
  std::vector<BuildOutcome> build(const std::vector<TuneConfig>& configs) override {
    std::vector<BuildOutcome> out;
    for (const TuneConfig& c : configs) {
      built.push_back(c.key());
      BuildOutcome b;
      b.ok = !(c.block_n == 176 && !c.pingpong);  // a candidate nvcc rejects
      if (!b.ok) b.error = "error: fake nvcc failure";
      b.spill_bytes = 0;
      out.push_back(b);
    }
    return out;
  }

  Measurement measure(const TuneConfig& c) override {
    Runner runner(c, &timed[c.key()]);
    return measure_candidate(cases, &runner);
  }

  std::vector<std::string> built;
  std::map<std::string, int> timed;  // time() calls per key
  std::vector<GateCase> cases = tune_gate_cases(default_tune_shapes(128, "bf16"));

 private:
  // Without overlap the stand-in computes a wrong output; n176 with both switches is 10% faster
  // than the shipped config, n128 without pingpong 1.5% faster (under the 3% bar).
  class Runner final : public CandidateRunner {
   public:
    Runner(const TuneConfig& c, int* timed) : c_(c), timed_(timed) {}
    bool check(size_t, Parity* parity, std::string*) override {
      parity->reference = "cpu-fp64";
      parity->tolerance = 1e-2;
      parity->rel_l2 = c_.intra_overlap ? 1e-3 : 0.5;
      parity->passed = c_.intra_overlap;
      return true;
    }
    bool time(size_t, double* p50_us, std::string*) override {
      ++*timed_;
      double total = 110;
      if (c_.block_n == 128 && c_.pingpong) total = 100;
      if (c_.block_n == 176 && c_.pingpong) total = 90;
      if (c_.block_n == 128 && !c_.pingpong) total = 98.5;
      *p50_us = total / 2;  // two timed shapes
      return true;
    }

   private:
    TuneConfig c_;
    int* timed_;
  };
};

TuneSettings settings() {
  TuneSettings s;
  s.population = 4;
  s.max_generations = 3;
  s.budget_s = 1e9;
  s.seed = 11;
  s.commit = "abc1234";
  s.device = "NVIDIA H100 80GB HBM3";
  s.run_id = "2026-11-24T12:00:00Z";
  s.space = small_space();
  return s;
}

const LeaderboardEntry* entry_of(const Leaderboard& board, const std::string& key) {
  const LeaderboardEntry* found = nullptr;
  for (const LeaderboardEntry& e : board.entries) {
    if (e.config.key() == key) found = &e;
  }
  return found;
}

struct SearchRun {
  bool ok;
  std::string error;
  TuneSummary summary;
};

SearchRun search(
    const TuneSettings& s, CandidateBackend* backend, Leaderboard* board, const std::string& path,
    const TuneClock& clock = [] { return 0.0; }) {
  SearchRun r;
  const TunePersist persist = [&](const Leaderboard& b, std::string* error) {
    return save_leaderboard(path, b, error);
  };
  r.ok = run_search(
      s, backend, board, persist, [](const std::string&) {}, clock, &r.summary, &r.error);
  return r;
}

class TuneSearch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("flashcore_tune_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "leaderboard.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_F(TuneSearch, StatusesFollowTheGateAndTheThreePercentBar) {
  FakeBackend backend;
  Leaderboard board;
  const SearchRun r = search(settings(), &backend, &board, path_);
  ASSERT_TRUE(r.ok) << r.error;
  const TuneConfig shipped = default_config(128);
  ASSERT_NE(entry_of(board, shipped.key()), nullptr);
  EXPECT_EQ(entry_of(board, shipped.key())->status, CandidateStatus::kIncumbent);

  const LeaderboardEntry* winner = entry_of(board, "n176_s2_wg2_r240_c2_pp1_ov1");
  ASSERT_NE(winner, nullptr) << "the search should reach every config of an eight-config space";
  EXPECT_EQ(winner->status, CandidateStatus::kAccepted);
  EXPECT_NEAR(winner->speedup, 100.0 / 90.0, 1e-9);
  EXPECT_EQ(winner->commit, "abc1234");
  EXPECT_EQ(r.summary.winner, winner->config.key());
  EXPECT_NEAR(r.summary.winner_speedup, 100.0 / 90.0, 1e-9);

  const LeaderboardEntry* small_gain = entry_of(board, "n128_s2_wg2_r240_c2_pp0_ov1");
  ASSERT_NE(small_gain, nullptr);
  EXPECT_EQ(small_gain->status, CandidateStatus::kSlower);
  EXPECT_NE(small_gain->reason.find("below"), std::string::npos) << small_gain->reason;

  const LeaderboardEntry* broken = entry_of(board, "n176_s2_wg2_r240_c2_pp0_ov1");
  ASSERT_NE(broken, nullptr);
  EXPECT_EQ(broken->status, CandidateStatus::kCompileError);
  EXPECT_EQ(backend.timed.count(broken->config.key()), 0u);

  int parity_failures = 0;
  for (const LeaderboardEntry& e : board.entries) {
    if (e.config.intra_overlap || e.status == CandidateStatus::kCompileError) continue;
    EXPECT_EQ(e.status, CandidateStatus::kParityFail) << e.config.key();
    EXPECT_EQ(backend.timed[e.config.key()], 0) << "a candidate failing the gate is never timed";
    ++parity_failures;
  }
  EXPECT_GE(parity_failures, 1);
}

TEST_F(TuneSearch, TheLeaderboardPersistsAndALaterRunResumesIt) {
  TuneSettings s = settings();
  s.max_generations = 0;  // the first generation only
  FakeBackend first;
  Leaderboard board;
  ASSERT_TRUE(search(s, &first, &board, path_).ok);

  Leaderboard loaded;
  std::string error;
  ASSERT_TRUE(load_leaderboard(path_, &loaded, &error)) << error;
  ASSERT_EQ(loaded.entries.size(), board.entries.size());
  ASSERT_EQ(loaded.runs.size(), 1u);
  EXPECT_EQ(loaded.runs[0].candidates, static_cast<int>(board.entries.size()));
  std::set<std::string> tried;
  for (const LeaderboardEntry& e : loaded.entries) tried.insert(e.config.key());

  s.max_generations = 3;
  s.run_id = "2026-11-24T13:00:00Z";
  FakeBackend second;
  const SearchRun resumed = search(s, &second, &loaded, path_);
  ASSERT_TRUE(resumed.ok) << resumed.error;
  EXPECT_EQ(loaded.runs.size(), 2u);
  EXPECT_EQ(loaded.entries.size(), board.entries.size() + resumed.summary.candidates);
  const std::string shipped = default_config(128).key();
  for (const std::string& key : second.built) {
    const LeaderboardEntry* before = entry_of(board, key);
    // Only the shipped config and earlier winners are built again (to be re-timed in this run).
    if (before != nullptr && key != shipped) {
      EXPECT_EQ(before->status, CandidateStatus::kAccepted) << key;
    }
  }
  Leaderboard reloaded;
  ASSERT_TRUE(load_leaderboard(path_, &reloaded, &error)) << error;
  EXPECT_EQ(reloaded.entries.size(), loaded.entries.size());
}

TEST_F(TuneSearch, NoGenerationStartsThatWouldOverrunTheBudget) {
  TuneSettings s = settings();
  s.budget_s = 150;
  double now = 0;
  FakeBackend backend;
  Leaderboard board;
  // Every reading of the clock is a minute later: the first generation took 60 s, and at 120 s
  // another would end past 150 s.
  const SearchRun r = search(s, &backend, &board, path_, [&] { return now += 60; });
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.summary.generations, 0);
}

TEST_F(TuneSearch, ALeaderboardOfAnotherKernelIsNotResumed) {
  Leaderboard other;
  other.head_dim = 64;
  std::string error;
  ASSERT_TRUE(save_leaderboard(path_, other, &error)) << error;
  Leaderboard board;  // hd128
  EXPECT_FALSE(load_leaderboard(path_, &board, &error));
  EXPECT_NE(error.find("hd64"), std::string::npos) << error;
  Leaderboard missing;
  EXPECT_TRUE(load_leaderboard((dir_ / "none.json").string(), &missing, &error));
  EXPECT_TRUE(missing.entries.empty());
}

TEST_F(TuneSearch, TheExportedTableHoldsTheBestAcceptedConfigUnreviewed) {
  FakeBackend backend;
  Leaderboard board;
  ASSERT_TRUE(search(settings(), &backend, &board, path_).ok);
  const Json table = export_table(board, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(table["rows"].size(), 1u);
  const Json& row = table["rows"][0];
  EXPECT_EQ(row["config"]["block_n"], 176);
  EXPECT_EQ(row["source"], "tuned");
  EXPECT_EQ(row["reviewed"], false);
  const Json elsewhere = export_table(board, "NVIDIA H200");
  EXPECT_EQ(elsewhere["rows"][0]["source"].get<std::string>().rfind("shipped", 0), 0u);
}

}  // namespace
}  // namespace flashcore::bench
