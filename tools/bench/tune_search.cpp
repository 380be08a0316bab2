#include "tune_search.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace flashcore::bench {
namespace {

// Tournament size: the best of this many drawn parents breeds, which keeps some diversity where
// always breeding the best two would collapse the population onto one config.
constexpr int kTournament = 3;
// Resumed runs re-time at most this many earlier winners (their wins count only in this run).
constexpr size_t kRetimedWinners = 2;

std::string percent(double speedup) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", (speedup - 1) * 100);
  return buf;
}

class Search {
 public:
  Search(const TuneSettings& s, CandidateBackend* backend, Leaderboard* board,
         const TunePersist& persist, const TuneLog& log, TuneSummary* summary)
      : s_(s),
        backend_(backend),
        board_(board),
        persist_(persist),
        log_(log),
        summary_(summary),
        rng_(s.seed) {}

  bool start(std::string* error) {
    LeaderboardRun run;
    run.id = s_.run_id;
    run.commit = s_.commit;
    run.device = s_.device;
    run.command_line = s_.command_line;
    run.budget_s = s_.budget_s;
    board_->runs.push_back(run);
    // What earlier runs on this commit tried is not tried again; their ranking seeds the parents.
    std::vector<const LeaderboardEntry*> winners;
    for (const LeaderboardEntry& e : board_->entries) {
      if (e.commit != s_.commit) continue;
      seen_.insert(e.config.key());
      if (e.status == CandidateStatus::kAccepted || e.status == CandidateStatus::kSlower) {
        pool_.push_back({e.config, e.speedup});
      }
      if (e.status == CandidateStatus::kAccepted) winners.push_back(&e);
    }
    std::sort(winners.begin(), winners.end(),
              [](const auto* a, const auto* b) { return a->speedup > b->speedup; });
    const TuneConfig baseline = production_config(s_.head_dim, s_.dtype);
    incumbent_ = baseline;
    seen_.insert(baseline.key());
    std::vector<TuneConfig> first{baseline};
    for (const LeaderboardEntry* w : winners) {
      if (first.size() > kRetimedWinners) break;
      if (!(w->config == baseline)) first.push_back(w->config);
    }
    // The first generation is built together with the shipped config: one parallel build.
    std::vector<TuneConfig> children;
    if (!make_children(s_.population + 1 - static_cast<int>(first.size()), 0, &children, error)) {
      return false;
    }
    first.insert(first.end(), children.begin(), children.end());
    const std::vector<BuildOutcome> built = backend_->build(first);
    if (!built[0].ok) {
      *error = "the shipped config " + baseline.key() + " does not build: " + built[0].error;
      return false;
    }
    const Measurement m = backend_->measure(baseline);
    if (!m.ok) {
      *error = "the shipped config " + baseline.key() + " fails: " + m.reason;
      return false;
    }
    summary_->baseline_total_us = summary_->winner_total_us = m.total_us;
    LeaderboardEntry e = entry(baseline, built[0], 0);
    e.status = CandidateStatus::kIncumbent;
    e.reason = "the shipped config, the run's first incumbent";
    e.p50_us = m.p50_us;
    e.total_us = e.incumbent_total_us = m.total_us;
    e.speedup = 1;
    if (!record(std::move(e), error)) return false;
    for (size_t i = 1; i < first.size(); ++i) {
      if (!consider(first[i], built[i], 0, error)) return false;
    }
    return true;
  }

  bool generation(int index, std::string* error) {
    std::vector<TuneConfig> children;
    if (!make_children(s_.population, index, &children, error)) return false;
    if (children.empty()) {
      log_("generation " + std::to_string(index) + ": no untried valid config left to breed");
      return true;
    }
    log_("generation " + std::to_string(index) + ": building " + std::to_string(children.size()) +
         " candidates");
    const std::vector<BuildOutcome> built = backend_->build(children);
    for (size_t i = 0; i < children.size(); ++i) {
      if (!consider(children[i], built[i], index, error)) return false;
    }
    return true;
  }

  void finish() {
    LeaderboardRun& run = board_->runs.back();
    run.winner = incumbent_.key();
    run.winner_speedup = incumbent_score_;
    summary_->winner = incumbent_.key();
    summary_->winner_speedup = incumbent_score_;
  }

  bool save(std::string* error) { return persist_(*board_, error); }

 private:
  // Up to `count` untried valid children; the invalid ones drawn on the way are recorded.
  bool make_children(int count, int generation, std::vector<TuneConfig>* children,
                     std::string* error) {
    for (int attempt = 0; attempt < count * 50 && static_cast<int>(children->size()) < count;
         ++attempt) {
      const TuneConfig child = breed();
      if (!seen_.insert(child.key()).second) continue;
      const std::string why = invalid_reason(child, s_.head_dim, s_.element_bytes);
      if (why.empty()) {
        children->push_back(child);
        continue;
      }
      LeaderboardEntry e = entry(child, BuildOutcome{}, generation);
      e.status = CandidateStatus::kInvalid;
      e.reason = why;
      if (!record(std::move(e), error)) return false;
    }
    return true;
  }

  struct Scored {
    TuneConfig config;
    double score;  // speedup over the shipped config
  };

  LeaderboardEntry entry(const TuneConfig& c, const BuildOutcome& b, int generation) const {
    LeaderboardEntry e;
    e.config = c;
    e.spill_bytes = b.spill_bytes;
    e.compile_s = b.seconds;
    e.generation = generation;
    e.run = s_.run_id;
    e.commit = s_.commit;
    return e;
  }

  bool record(LeaderboardEntry e, std::string* error) {
    ++summary_->candidates;
    ++summary_->by_status[e.status];
    ++board_->runs.back().candidates;
    char total[48] = "";
    if (e.total_us > 0) std::snprintf(total, sizeof(total), "  total %.1f us", e.total_us);
    log_(std::string(status_name(e.status)) + "  " + e.config.key() + total +
         (e.reason.empty() ? "" : "  " + e.reason));
    board_->entries.push_back(std::move(e));
    return persist_(*board_, error);
  }

  // Gate and time one built candidate against the incumbent, re-timed beside it.
  bool consider(const TuneConfig& c, const BuildOutcome& b, int generation, std::string* error) {
    LeaderboardEntry e = entry(c, b, generation);
    if (!b.ok) {
      e.status = CandidateStatus::kCompileError;
      e.reason = b.error;
      return record(std::move(e), error);
    }
    Measurement m = backend_->measure(c);
    if (!m.ok) {
      e.status = m.failure;
      e.reason = m.reason;
      return record(std::move(e), error);
    }
    Measurement incumbent = backend_->measure(incumbent_);
    if (!incumbent.ok) {
      *error = "the incumbent " + incumbent_.key() + " failed when re-timed: " + incumbent.reason;
      return false;
    }
    double speedup = incumbent.total_us / m.total_us;
    e.status = CandidateStatus::kSlower;
    if (speedup >= 1 + s_.min_gain) {
      // A win must hold on a second measurement of both before it replaces the incumbent.
      const Measurement again = backend_->measure(c);
      const Measurement incumbent_again = backend_->measure(incumbent_);
      const double confirmed =
          again.ok && incumbent_again.ok ? incumbent_again.total_us / again.total_us : 0;
      if (confirmed >= 1 + s_.min_gain) {
        e.status = CandidateStatus::kAccepted;
        e.reason = percent(confirmed) + " over " + incumbent_.key() + " (first measurement " +
                   percent(speedup) + ")";
        m = again;
        incumbent = incumbent_again;
        speedup = confirmed;
      } else {
        e.reason =
            percent(speedup) + " did not hold on a second measurement (" + percent(confirmed) + ")";
      }
    } else {
      e.reason = percent(speedup) + " against " + incumbent_.key() + ", below the " +
                 percent(1 + s_.min_gain) + " bar";
    }
    e.p50_us = m.p50_us;
    e.total_us = m.total_us;
    e.incumbent_total_us = incumbent.total_us;
    e.speedup = speedup;
    const double score = incumbent_score_ * speedup;
    pool_.push_back({c, score});
    if (e.status == CandidateStatus::kAccepted) {
      incumbent_ = c;
      incumbent_score_ = score;
      summary_->winner_total_us = m.total_us;
    }
    return record(std::move(e), error);
  }

  const Scored& tournament() {
    std::uniform_int_distribution<size_t> index(0, pool_.size() - 1);
    const Scored* best = &pool_[index(rng_)];
    for (int i = 1; i < kTournament; ++i) {
      const Scored& other = pool_[index(rng_)];
      if (other.score > best->score) best = &other;
    }
    return *best;
  }

  TuneConfig breed() {
    if (pool_.size() < 2) {
      // Nothing measured to breed from yet: explore around the incumbent and at random.
      return std::bernoulli_distribution(0.5)(rng_) ? mutate(incumbent_, s_.space, &rng_)
                                                    : random_config(s_.space, &rng_);
    }
    const TuneConfig a = tournament().config;
    const TuneConfig b = tournament().config;
    const TuneConfig child = std::bernoulli_distribution(0.5)(rng_) ? crossover(a, b, &rng_) : a;
    return mutate(child, s_.space, &rng_);
  }

  const TuneSettings& s_;
  CandidateBackend* backend_;
  Leaderboard* board_;
  const TunePersist& persist_;
  const TuneLog& log_;
  TuneSummary* summary_;
  std::mt19937_64 rng_;
  std::set<std::string> seen_;
  std::vector<Scored> pool_;
  TuneConfig incumbent_;
  double incumbent_score_ = 1;
};

}  // namespace

bool run_search(const TuneSettings& settings, CandidateBackend* backend, Leaderboard* board,
                const TunePersist& persist, const TuneLog& log, const TuneClock& clock,
                TuneSummary* summary, std::string* error) {
  *summary = TuneSummary{};
  Search search(settings, backend, board, persist, log, summary);
  const double start = clock();
  if (!search.start(error)) {
    // The run's record stays on the leaderboard with what it found, so the failure is visible.
    std::string save_error;
    search.save(&save_error);
    return false;
  }
  double last_generation_s = clock() - start;  // the first one builds at least as much
  for (int g = 1; g <= settings.max_generations; ++g) {
    const double elapsed = clock() - start;
    if (elapsed + last_generation_s > settings.budget_s) {
      log("budget: " + std::to_string(static_cast<int>(elapsed)) +
          " s spent, a generation takes ~" + std::to_string(static_cast<int>(last_generation_s)) +
          " s; stopping");
      break;
    }
    const double generation_start = clock();
    if (!search.generation(g, error)) return false;
    summary->generations = g;
    last_generation_s = clock() - generation_start;
  }
  search.finish();
  return search.save(error);
}

}  // namespace flashcore::bench
