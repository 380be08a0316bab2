// Command line and environment knobs of flashcore-bench, parsed by CLI11: subcommands, knobs that
// are options with an environment name, validators, generated help. Pure parsing: nothing here
// touches the GPU, so every error a user can make is caught (and tested) before a device is opened.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model.hpp"
#include "targets.hpp"

namespace flashcore::bench {

// Knobs of `run`: environment variables (the labs' convention: FLASHCORE_S=4096 flashcore-bench
// run ...) that are also options (--seqlen 4096); the option wins when both are given.
struct Knobs {
  std::optional<int64_t> batch, heads, heads_kv, seqlen, seqlen_k, head_dim;  // FLASHCORE_B, ...
  std::optional<bool> causal;                                                 // FLASHCORE_CAUSAL
  std::optional<std::string> dtype;                                           // FLASHCORE_DTYPE
  int64_t window = 1024;               // FLASHCORE_WINDOW: keys left of the diagonal
  std::optional<int64_t> block_size;   // BLOCK_SIZE (FlexAttention block-mask granularity)
  std::optional<int64_t> doc_span;     // DOC_SPAN (document mask span)
  std::optional<std::string> backend;  // FLASHCORE_BACKEND: provider of the optimized targets

  bool overrides_shape() const;
  // name=value pairs for the report, in a fixed order; unset knobs are left out.
  std::vector<std::pair<std::string, std::string>> describe() const;
};

// Per-target flags given as --target-extra-arg TARGET="--flag value ...".
struct TargetArgs {
  std::optional<std::string> backend;  // --backend NAME
  int num_splits = 0;                  // --num-splits N (0: the library's heuristic)
  std::string tile = "auto";           // --tile auto|large|small|medium|cta-pair (TileShape)
  bool enable_pdl = true;              // --pdl on|off (AttentionParams::enable_pdl)
};

enum class Command { kHelp, kListTargets, kRun, kCheck, kProfile, kRobust, kReport, kTune };

// `tune`: the evolutionary tuner of the sm90 kernel's compile-time knobs (tune_search.hpp).
struct TuneOptions {
  int head_dim = 128;
  std::string dtype = "bf16";
  double budget_s = 600;     // --budget SECONDS
  int population = 12;       // candidates per generation
  int generations = 100;     // at most
  int jobs = 0;              // parallel nvcc; 0: one per CPU core
  double min_gain = 0.03;    // accepted when >= 3% faster than the incumbent
  std::string leaderboard;   // default: <out>/leaderboard.json
  std::string export_table;  // --export FILE: the winners' table
  bool export_only = false;  // only --export from the leaderboard (no GPU)
  std::string nvcc = "nvcc";
  std::string source_root;      // repository with src/ and include/; default: the build's
  std::string cutlass_include;  // default: <source root>/.deps/cutlass/.../include
};

struct Options {
  Command command = Command::kHelp;
  std::string chapter;  // list-targets --chapter
  std::vector<Target> targets;
  Profile profile = Profile::kMinimal;
  std::map<std::string, TargetArgs> target_args;  // by "chapter:workload"
  std::vector<std::string> target_extra_specs;    // as given, for the runs `profile` starts
  std::string out_dir;                            // empty: lab-out/<timestamp>
  bool check_expectations = false;
  std::string expectations;  // explicit expectations file; empty: each chapter's own
  std::string results;       // check: the results.json to check
  std::string labs_root;     // where chapters' expectations files live (--labs-root)
  Knobs knobs;               // run, profile
  std::string help;          // kHelp: the help of the command asked about

  // run --profiled-launch: one more launch per selected target, after timing, in the NVTX range
  // that `profile` hands to ncu.
  bool profiled_launch = false;
  // profile
  std::string metrics_set = "basic";  // "basic" or "full"
  bool check_profile = false;         // --check
  std::string ncu = "ncu";
  // robust
  bool quick = false;
  int progress_every = 50;   // a progress line every this many cells
  uint64_t seed = 0;         // 0: fresh inputs (a seed drawn and recorded); else reproduce a run
  double time_budget_s = 0;  // > 0: start no cell after this many seconds (the rest is listed)
  std::string resume;        // an earlier robust.json: keep its results, run only its missing cells
  std::vector<std::string> shapes;  // non-empty: run only these shapes' cells, in this order
  // report
  std::vector<std::string> inputs;  // results.json, profile.json, robust.json files
  std::string python = "python3";   // runs bench/plot.py
  TuneOptions tune;
};

// True when the name is a flashcore backend (flashcore::parse_backend in the tool).
using BackendCheck = std::function<bool(const std::string&)>;

// Parses argv (argv[0] is the program) and the knobs' environment variables. Returns false with a
// message that says what is valid.
bool parse_args(int argc, const char* const* argv, const BackendCheck& is_backend, Options* options,
                std::string* error);

// Rejects knobs that would be silently meaningless for these targets (DOC_SPAN before the
// document mask exists).
bool check_knobs_for_targets(const Knobs& knobs, const std::vector<Target>& targets,
                             std::string* error);

// The cases one target runs: the chapter's grid for the profile, or a single case when a shape
// knob is set (the chapter's first case with the overrides applied), with the workload's mask.
std::vector<Case> cases_for(const Target& target, Profile profile, const Knobs& knobs);

// The backend a target asks flashcore for: --target-extra-arg --backend, else FLASHCORE_BACKEND for
// optimized targets, else the table's.
std::string backend_for(const Target& target, const Knobs& knobs, const TargetArgs* args);

// Every command's options and knobs, generated from the parser.
std::string help_text();

}  // namespace flashcore::bench
