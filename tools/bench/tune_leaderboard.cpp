#include "tune_leaderboard.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace flashcore::bench {
namespace {

constexpr const char* kSchema = "flashcore-bench/leaderboard";
constexpr int kSchemaVersion = 1;

struct StatusName {
  CandidateStatus status;
  const char* name;
};
constexpr StatusName kStatusNames[] = {
    {CandidateStatus::kIncumbent, "incumbent"},
    {CandidateStatus::kAccepted, "accepted"},
    {CandidateStatus::kSlower, "slower"},
    {CandidateStatus::kParityFail, "parity_fail"},
    {CandidateStatus::kCompileError, "compile_error"},
    {CandidateStatus::kLaunchError, "launch_error"},
    {CandidateStatus::kInvalid, "invalid"},
};

Json entry_json(const LeaderboardEntry& e) {
  Json times = Json::object();
  for (const auto& [label, us] : e.p50_us) times[label] = us;
  return Json{{"key", e.config.key()},
              {"config", to_json(e.config)},
              {"status", status_name(e.status)},
              {"reason", e.reason},
              {"p50_us", times},
              {"total_us", e.total_us},
              {"incumbent_total_us", e.incumbent_total_us},
              {"speedup", e.speedup},
              {"spill_bytes", e.spill_bytes},
              {"compile_s", e.compile_s},
              {"generation", e.generation},
              {"run", e.run},
              {"commit", e.commit}};
}

bool entry_from_json(const Json& j, LeaderboardEntry* e, std::string* error) {
  const Json* config = find_member(j, "config");
  if (config == nullptr || !from_json(*config, &e->config, error)) {
    if (config == nullptr) *error = "entry without a config";
    return false;
  }
  if (!parse_status(string_or(j, "status", ""), &e->status)) {
    *error =
        "entry " + e->config.key() + " has an unknown status '" + string_or(j, "status", "") + "'";
    return false;
  }
  e->reason = string_or(j, "reason", "");
  if (const Json* times = find_member(j, "p50_us"); times != nullptr && times->is_object()) {
    for (const auto& [label, us] : times->items()) {
      if (us.is_number()) e->p50_us[label] = us.get<double>();
    }
  }
  e->total_us = number_or(j, "total_us", 0);
  e->incumbent_total_us = number_or(j, "incumbent_total_us", 0);
  e->speedup = number_or(j, "speedup", 0);
  e->spill_bytes = static_cast<long>(integer_or(j, "spill_bytes", -1));
  e->compile_s = number_or(j, "compile_s", 0);
  e->generation = static_cast<int>(integer_or(j, "generation", 0));
  e->run = string_or(j, "run", "");
  e->commit = string_or(j, "commit", "");
  return true;
}

}  // namespace

const char* status_name(CandidateStatus status) {
  for (const StatusName& s : kStatusNames) {
    if (s.status == status) return s.name;
  }
  return "invalid";
}

bool parse_status(const std::string& name, CandidateStatus* status) {
  for (const StatusName& s : kStatusNames) {
    if (name == s.name) {
      *status = s.status;
      return true;
    }
  }
  return false;
}

std::vector<const LeaderboardEntry*> Leaderboard::find(const std::string& key,
                                                       const std::string& commit) const {
  std::vector<const LeaderboardEntry*> found;
  for (const LeaderboardEntry& e : entries) {
    if (e.commit == commit && e.config.key() == key) found.push_back(&e);
  }
  return found;
}

Json to_json(const Leaderboard& board) {
  Json runs = Json::array();
  for (const LeaderboardRun& r : board.runs) {
    runs.push_back(Json{{"id", r.id},
                        {"commit", r.commit},
                        {"device", r.device},
                        {"command_line", r.command_line},
                        {"budget_s", r.budget_s},
                        {"candidates", r.candidates},
                        {"winner", r.winner},
                        {"winner_speedup", r.winner_speedup}});
  }
  Json entries = Json::array();
  for (const LeaderboardEntry& e : board.entries) entries.push_back(entry_json(e));
  return Json{{"schema", kSchema},      {"schema_version", kSchemaVersion},
              {"kernel", board.kernel}, {"head_dim", board.head_dim},
              {"dtype", board.dtype},   {"timed_cases", board.timed_cases},
              {"runs", runs},           {"entries", entries}};
}

bool from_json(const Json& json, Leaderboard* board, std::string* error) {
  if (string_or(json, "schema", "") != kSchema) {
    *error = std::string("not a leaderboard (schema is not ") + kSchema + ")";
    return false;
  }
  if (integer_or(json, "schema_version", 0) != kSchemaVersion) {
    *error = "leaderboard schema_version " + std::to_string(integer_or(json, "schema_version", 0)) +
             " is not " + std::to_string(kSchemaVersion);
    return false;
  }
  *board = Leaderboard{};
  board->kernel = string_or(json, "kernel", "");
  board->head_dim = static_cast<int>(integer_or(json, "head_dim", 0));
  board->dtype = string_or(json, "dtype", "");
  if (const Json* cases = find_member(json, "timed_cases"); cases != nullptr && cases->is_array()) {
    for (const Json& c : *cases) {
      if (c.is_string()) board->timed_cases.push_back(c.get<std::string>());
    }
  }
  if (const Json* runs = find_member(json, "runs"); runs != nullptr && runs->is_array()) {
    for (const Json& r : *runs) {
      LeaderboardRun run;
      run.id = string_or(r, "id", "");
      run.commit = string_or(r, "commit", "");
      run.device = string_or(r, "device", "");
      run.command_line = string_or(r, "command_line", "");
      run.budget_s = number_or(r, "budget_s", 0);
      run.candidates = static_cast<int>(integer_or(r, "candidates", 0));
      run.winner = string_or(r, "winner", "");
      run.winner_speedup = number_or(r, "winner_speedup", 1);
      board->runs.push_back(run);
    }
  }
  const Json* entries = find_member(json, "entries");
  if (entries == nullptr || !entries->is_array()) {
    *error = "leaderboard has no entries array";
    return false;
  }
  for (const Json& j : *entries) {
    LeaderboardEntry e;
    if (!entry_from_json(j, &e, error)) return false;
    board->entries.push_back(std::move(e));
  }
  return true;
}

bool load_leaderboard(const std::string& path, Leaderboard* board, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return true;  // the first run starts an empty one
    *error = "cannot read " + path;
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  Json json;
  Leaderboard loaded;
  if (!parse_json(text.str(), &json, error) || !from_json(json, &loaded, error)) {
    *error = path + ": " + *error;
    return false;
  }
  if (loaded.kernel != board->kernel || loaded.head_dim != board->head_dim ||
      loaded.dtype != board->dtype) {
    *error = path + " is the leaderboard of " + loaded.kernel + " hd" +
             std::to_string(loaded.head_dim) + " " + loaded.dtype + ", not of " + board->kernel +
             " hd" + std::to_string(board->head_dim) + " " + board->dtype +
             "; pass another --leaderboard";
    return false;
  }
  *board = std::move(loaded);
  return true;
}

bool save_leaderboard(const std::string& path, const Leaderboard& board, std::string* error) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << dump_json(to_json(board)) << "\n";
    if (!out) {
      *error = "cannot write " + temporary;
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) *error = "cannot replace " + path + ": " + ec.message();
  return !ec;
}

Json export_table(const Leaderboard& board, const std::string& device) {
  std::map<std::string, const LeaderboardRun*> runs;
  for (const LeaderboardRun& r : board.runs) runs[r.id] = &r;
  const LeaderboardEntry* best = nullptr;
  for (const LeaderboardEntry& e : board.entries) {
    const auto run = runs.find(e.run);
    if (e.status != CandidateStatus::kAccepted || run == runs.end() ||
        run->second->device != device) {
      continue;
    }
    if (best == nullptr || e.speedup > best->speedup) best = &e;
  }
  Json row{{"kernel", board.kernel},
           {"head_dim", board.head_dim},
           {"dtype", board.dtype},
           {"device", device}};
  if (best == nullptr) {
    row["config"] = to_json(production_config(board.head_dim, board.dtype));
    row["source"] = "shipped: no candidate beat it by the acceptance margin";
  } else {
    row["config"] = to_json(best->config);
    row["source"] = "tuned";
    row["speedup_vs_incumbent"] = best->speedup;
    row["p50_us"] = entry_json(*best)["p50_us"];
    row["run"] = best->run;
    row["commit"] = best->commit;
  }
  row["reviewed"] = false;
  return Json{{"schema", "flashcore/sm90-tuned"},
              {"schema_version", 1},
              {"how_made",
               "flashcore-bench tune --export: the best accepted candidate of the leaderboard per "
               "kernel, head dim, dtype and device. A row is read only once reviewed is true."},
              {"timed_cases", board.timed_cases},
              {"rows", Json::array({row})}};
}

}  // namespace flashcore::bench
