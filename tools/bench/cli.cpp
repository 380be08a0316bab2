#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <iterator>
#include <memory>

#include "flashcore/attention.hpp"
#include "robust_grid.hpp"

namespace flashcore::bench {
namespace {

const char* const kBackendNames = "auto, scalar, unfused, wmma, sm80, sm90";
const char* const kTargetFlags =
    "valid flags: --backend NAME, --num-splits N, --tile auto|large|small|medium|cta-pair, "
    "--pdl on|off";

bool parse_int(const std::string& text, int64_t* value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return !text.empty() && ec == std::errc() && ptr == end;
}

int64_t to_int(const std::string& text) {
  int64_t value = 0;
  parse_int(text, &value);  // validated before the callback runs
  return value;
}

// Validators. CLI11 prefixes their message with the option's name; the knob's environment name is
// part of the message because that is how the labs set knobs.
CLI::Validator integer_at_least(int64_t min, const std::string& knob, const std::string& valid) {
  return CLI::Validator(
      [=](std::string& v) {
        int64_t n = 0;
        return parse_int(v, &n) && n >= min ? std::string()
                                            : knob + "='" + v + "' is not valid; use " + valid;
      },
      "INT");
}

CLI::Validator one_of(const std::vector<std::string>& values, const std::string& what,
                      const std::string& valid) {
  return CLI::Validator(
      [=](std::string& v) {
        for (const std::string& value : values) {
          if (v == value) return std::string();
        }
        return what + "'" + v + "' is not valid; use " + valid;
      },
      CLI::detail::join(values, "|"));
}

CLI::Validator backend_name(const BackendCheck& is_backend, const std::string& what) {
  return CLI::Validator(
      [=](std::string& v) {
        return is_backend(v) ? std::string()
                             : what + "'" + v + "' is not a backend; valid: " + kBackendNames;
      },
      "NAME");
}

// A knob: an option of `run` with an environment name.
CLI::Option* positive_knob(CLI::App* run, const std::string& flag, const std::string& env,
                           std::optional<int64_t>* out, const std::string& description) {
  return run
      ->add_option_function<std::string>(
          flag, [out](const std::string& v) { *out = to_int(v); }, description)
      ->envname(env)
      ->check(integer_at_least(1, env, "a positive integer"));
}

void add_knobs(CLI::App* run, const BackendCheck& is_backend, Knobs* k) {
  const char* group =
      "Knobs (environment variable or option; any shape knob replaces the "
      "profile's grid with one case: the chapter's first, with the overrides)";
  run->add_option_function<std::string>(
         "--backend", [k](const std::string& v) { k->backend = v; },
         "provider of the optimized targets (default auto); a provider that rejects a case is "
         "reported SKIPPED with the reason")
      ->envname("FLASHCORE_BACKEND")
      ->check(backend_name(is_backend, "FLASHCORE_BACKEND="))
      ->group(group);
  positive_knob(run, "--batch", "FLASHCORE_B", &k->batch, "batch")->group(group);
  positive_knob(run, "--heads", "FLASHCORE_H", &k->heads, "query heads")->group(group);
  positive_knob(run, "--heads-kv", "FLASHCORE_HKV", &k->heads_kv, "KV heads (GQA; divides H)")
      ->group(group);
  positive_knob(run, "--seqlen", "FLASHCORE_S", &k->seqlen, "sequence length (q and k)")
      ->group(group);
  positive_knob(run, "--seqlen-k", "FLASHCORE_SK", &k->seqlen_k,
                "key/value sequence length (defaults to FLASHCORE_S)")
      ->group(group);
  run->add_option_function<std::string>(
         "--head-dim", [k](const std::string& v) { k->head_dim = to_int(v); },
         "head dim: a multiple of 8 up to 256")
      ->envname("FLASHCORE_D")
      ->check(integer_at_least(1, "FLASHCORE_D", "a positive integer"))
      ->check(CLI::Validator(
          [](std::string& v) {
            const int64_t d = to_int(v);
            return d <= kMaxHeadDim && d % kHeadDimMultiple == 0
                       ? std::string()
                       : "FLASHCORE_D=" + v +
                             " is not supported; use a multiple of 8 up to 256 (64, 128 and 256 "
                             "are tuned)";
          },
          ""))
      ->group(group);
  run->add_option_function<std::string>(
         "--causal", [k](const std::string& v) { k->causal = v == "1"; }, "0 or 1")
      ->envname("FLASHCORE_CAUSAL")
      ->check(one_of({"0", "1"}, "FLASHCORE_CAUSAL=", "0 or 1"))
      ->group(group);
  run->add_option_function<std::string>(
         "--dtype", [k](const std::string& v) { k->dtype = v; },
         "fp16 or bf16 (default per chapter: flashcore fp16, others bf16)")
      ->envname("FLASHCORE_DTYPE")
      ->check(one_of({"fp16", "bf16"}, "FLASHCORE_DTYPE=", "fp16 or bf16"))
      ->group(group);
  run->add_option_function<std::string>(
         "--window", [k](const std::string& v) { k->window = to_int(v); },
         "sliding-window size of labs/flexattention, keys left of the diagonal (default 1024)")
      ->envname("FLASHCORE_WINDOW")
      ->check(
          integer_at_least(0, "FLASHCORE_WINDOW", "the number of keys left of the diagonal (>= 0)"))
      ->group(group);
  positive_knob(run, "--block-size", "BLOCK_SIZE", &k->block_size,
                "FlexAttention block-mask granularity (a multiple of 16); recorded in the "
                "artifacts. flashcore kernels choose their own tiles, so it does not change "
                "timings until block-sparse masks land")
      ->check(CLI::Validator(
          [](std::string& v) {
            return to_int(v) % 16 == 0 ? std::string()
                                       : "BLOCK_SIZE=" + v +
                                             " is not valid; use a positive multiple of 16 (e.g. "
                                             "64 or 128)";
          },
          ""))
      ->group(group);
  positive_knob(run, "--doc-span", "DOC_SPAN", &k->doc_span,
                "document-mask span: read by bench/flex_lab.py; rejected here")
      ->group(group);
}

// What CLI11 cannot say per option: GQA needs both head counts, one a multiple of the other.
bool check_heads(const Knobs& k, std::string* error) {
  if (!k.heads_kv) return true;
  if (!k.heads) {
    *error = "FLASHCORE_HKV needs FLASHCORE_H too (query heads must be a multiple of KV heads)";
    return false;
  }
  if (*k.heads % *k.heads_kv != 0) {
    *error = "FLASHCORE_H=" + std::to_string(*k.heads) +
             " is not a multiple of FLASHCORE_HKV=" + std::to_string(*k.heads_kv) +
             "; GQA needs H % HKV == 0";
    return false;
  }
  return true;
}

// --target-extra-arg TARGET="--flag value ...": the flags are parsed by a CLI11 parser of their
// own, so they follow the same rules (--flag value, --flag=value, quoting) as the command line.
bool parse_target_args(const std::string& target, const std::string& flags,
                       const BackendCheck& is_backend, TargetArgs* args, std::string* error) {
  CLI::App parser("per-target flags", "--target-extra-arg");
  parser
      .add_option_function<std::string>(
          "--backend", [args](const std::string& v) { args->backend = v; }, "provider to run")
      ->check(backend_name(is_backend, "unknown backend: "));
  parser
      .add_option_function<std::string>(
          "--num-splits", [args](const std::string& v) { args->num_splits = to_int(v); },
          "split-KV count (0 heuristic, 1 off)")
      ->check(CLI::Validator(
          [](std::string& v) {
            int64_t n = 0;
            return parse_int(v, &n) && n >= 0 && n <= 1024
                       ? std::string()
                       : "--num-splits '" + v +
                             "' is not valid; use 0 (heuristic), 1 (no split) or a split count "
                             "up to 1024";
          },
          "N"));
  // The deprecated names (warpgroup, warpgroup-pair) are still accepted, as by the library.
  std::vector<std::string> tile_names(std::begin(kTileShapeNames), std::end(kTileShapeNames));
  for (const TileShapeAlias& alias : kDeprecatedTileShapeNames) tile_names.push_back(alias.name);
  parser.add_option("--tile", args->tile, "CTA tile of the tensor-core backends")
      ->check(one_of(tile_names, "--tile ", "auto, large, small, medium or cta-pair"));
  parser
      .add_option_function<std::string>(
          "--pdl", [args](const std::string& v) { args->enable_pdl = v == "on"; },
          "programmatic dependent launch")
      ->check(one_of({"on", "off"}, "--pdl ", "on or off"));
  try {
    parser.parse(flags, false);
  } catch (const CLI::ParseError& e) {
    *error = "--target-extra-arg " + target + ": " + e.what() + "; " + kTargetFlags;
    return false;
  }
  return true;
}

struct Parser {
  CLI::App app{"flashcore-bench: the flashcore benchmark lab (docs/lab.md).", "flashcore-bench"};
  CLI::App* list = nullptr;
  CLI::App* run = nullptr;
  CLI::App* check = nullptr;
  CLI::App* profile_cmd = nullptr;
  CLI::App* robust = nullptr;
  CLI::App* report = nullptr;
  CLI::App* tune = nullptr;
  std::vector<std::string> targets;
  std::string profile = "minimal";
  std::vector<std::string> extra;
  // profile's knobs: CLI11 reads an option's environment variable even when its subcommand is
  // not the one given, so run and profile must not share one Knobs.
  Knobs profile_knobs;
};

// --targets, --profile and --target-extra-arg, shared by run and profile.
void add_target_options(Parser* p, CLI::App* command) {
  command
      ->add_option("--targets", p->targets,
                   "comma-separated chapters or chapter:workload targets (repeatable)")
      ->delimiter(',')
      ->required();
  command
      ->add_option("--profile", p->profile,
                   "minimal (default): a few shapes, under a minute on an H100; full: the "
                   "FlashAttention-3 paper's grid (16k tokens, hidden 2048, head dim 64/128/256, "
                   "seqlen 512..16k, causal and not)")
      ->check(one_of({"minimal", "full"}, "--profile ", "minimal or full"));
  command->add_option(
      "--target-extra-arg", p->extra,
      "T=\"--flag value ...\": per-target flags, T is chapter:workload. Flags: --backend NAME "
      "(provider to run), --num-splits N (split-KV count, 0 heuristic, 1 off), --tile "
      "auto|large|small|medium|cta-pair (CTA tile of the sm80 and sm90 backends; auto: large, "
      "or small when the large tile's grid leaves SMs idle, or on Hopper at hd64 medium, then "
      "cta-pair, as the grid grows; warpgroup and warpgroup-pair are deprecated names of medium "
      "and cta-pair), --pdl on|off (programmatic dependent launch of the sm90 small-grid tiles; "
      "default on)");
}

// profile, robust and report.
void add_lab_commands(Parser* p, const BackendCheck& is_backend, Options* o) {
  p->profile_cmd = p->app.add_subcommand(
      "profile",
      "Nsight Compute profile of the targets: one process per target and case runs the target "
      "(parity, timing) and one more launch in the NVTX range 'profiled_launch', which alone ncu "
      "profiles; writes profile.json and profile.md (SM busy, tensor pipes, DRAM %, occupancy, "
      "registers, shared memory, spills, bank conflicts, top stalls, each with its ncu metric)");
  add_target_options(p, p->profile_cmd);
  p->profile_cmd
      ->add_option("--metrics-set", o->metrics_set,
                   "basic (default): the sections the report reads, a few replay passes; full: "
                   "ncu --set full (every section, slower; the .ncu-rep is kept for the GUI)")
      ->check(one_of({"basic", "full"}, "--metrics-set ", "basic or full"));
  p->profile_cmd->add_flag(
      "--check", o->check_profile,
      "check the 'profile' thresholds of each target's expectations file; exit 3 "
      "and name each miss");
  p->profile_cmd->add_option("--ncu", o->ncu, "the ncu binary (default: ncu on PATH)");
  p->profile_cmd->add_option("--out", o->out_dir,
                             "artifact folder (default lab-out/<UTC timestamp>)");
  add_knobs(p->profile_cmd, is_backend, &p->profile_knobs);

  p->robust = p->app.add_subcommand(
      "robust",
      "robustness suite: every provider and mask mode over head dims x dtypes x shapes (odd, "
      "Sq != Sk, GQA, tiny, long, large B*H) x input distributions (normal, uniform, large "
      "magnitude, constant rows, outliers, fp16 near overflow, fully masked rows), each checked "
      "against the float64 CPU reference (small) or the fp32 GPU oracle; writes robust.json and "
      "robust.md, worst cell first; a provider's rejection is listed with its reason, not failed");
  p->robust->add_flag("--quick", o->quick, "a smaller grid (head dims 64 and 128, five shapes)");
  p->robust->add_option("--progress-every", o->progress_every, "a progress line every N cells")
      ->check(CLI::PositiveNumber);
  p->robust->add_option("--seed", o->seed,
                        "reproduce the inputs of an earlier run (robust.json's seed); default: "
                        "fresh inputs every run");
  p->robust
      ->add_option("--time-budget", o->time_budget_s,
                   "start no cell after this many seconds; robust.md lists the cells that did "
                   "not run, and --resume runs them later")
      ->check(CLI::PositiveNumber);
  p->robust->add_option("--resume", o->resume,
                        "an earlier robust.json of the same grid: its results are kept, its seed "
                        "reused, and only the cells it lacks run; the output holds both");
  std::vector<std::string> shape_names;
  for (const RobustShape& s : robust_shapes()) shape_names.push_back(s.name);
  p->robust
      ->add_option("--shapes", o->shapes,
                   "run only these shapes' cells (comma separated), in this order; robust.md lists "
                   "the rest of the grid as not run")
      ->delimiter(',')
      ->check(CLI::IsMember(shape_names));
  p->robust->add_option("--out", o->out_dir, "artifact folder (default lab-out/<UTC timestamp>)");

  p->report = p->app.add_subcommand(
      "report",
      "the final comparison report from earlier artifacts (no GPU needed): report.md and "
      "report.html with the plots of bench/plot.py embedded; the comparison table, the journey, "
      "the seed report's success criteria computed from the data, the profile and robustness "
      "summaries");
  p->report
      ->add_option("--inputs", o->inputs,
                   "results.json (flashcore-bench run or bench/peers.py), profile.json and "
                   "robust.json files, any number, any order (the schema says which is which)")
      ->required();
  p->report->add_option("--out", o->out_dir, "output folder")->required();
  p->report->add_option("--python", o->python, "python for bench/plot.py (default python3)");
  for (CLI::App* command : {p->profile_cmd, p->report}) {
    command->add_option("--expectations", o->expectations,
                        "use FILE instead of each chapter's labs/<chapter>/expectations_h100.json");
    command->add_option(
        "--labs-root", o->labs_root,
        "repository root holding labs/ and bench/ (default: the source tree it was built from)");
  }
}

void add_tune_command(Parser* p, Options* o) {
  TuneOptions& t = o->tune;
  p->tune = p->app.add_subcommand(
      "tune",
      "evolutionary tuner of the sm90 kernel's compile-time knobs (key tile, stages, consumer "
      "warpgroups, register budget, cluster size, pingpong, overlap): each generation's candidates "
      "are generated translation units built by nvcc in parallel, gated for parity (the timed "
      "shapes, a fully masked row, tail tiles) and timed; one is accepted only if >= --min-gain "
      "faster than the incumbent in the same run; every candidate goes to leaderboard.json, "
      "which a later run resumes");
  p->tune->add_option("--head-dim", t.head_dim, "head dim of the kernel tuned")
      ->check(CLI::IsMember({32, 64, 96, 128, 160, 192, 224, 256}));
  p->tune->add_option("--dtype", t.dtype, "bf16 (default) or fp16")
      ->check(one_of({"bf16", "fp16"}, "--dtype ", "bf16 or fp16"));
  p->tune->add_option("--budget", t.budget_s, "seconds; no generation starts that would overrun it")
      ->check(CLI::PositiveNumber);
  p->tune->add_option("--population", t.population, "candidates per generation")
      ->check(CLI::Range(1, 256));
  p->tune->add_option("--generations", t.generations, "at most this many generations")
      ->check(CLI::Range(0, 10000));
  p->tune->add_option("--jobs", t.jobs, "parallel nvcc processes (default: one per CPU core)")
      ->check(CLI::Range(0, 1024));
  p->tune
      ->add_option("--min-gain", t.min_gain,
                   "accept only candidates this much faster than the incumbent (0.03: 3%)")
      ->check(CLI::Range(0.0, 1.0));
  p->tune->add_option("--seed", o->seed, "seed of the search (default: drawn and printed)");
  p->tune->add_option("--out", o->out_dir,
                      "work folder: candidates/ (sources, objects, compile logs), leaderboard.json "
                      "(default lab-out/tune)");
  p->tune->add_option("--leaderboard", t.leaderboard,
                      "leaderboard to resume and extend (default <out>/leaderboard.json)");
  p->tune->add_option("--export", t.export_table,
                      "write the best accepted config per device as the reviewed table auto reads "
                      "(schema flashcore/sm90-tuned)");
  p->tune->add_flag("--export-only", t.export_only,
                    "only write --export from --leaderboard, without a GPU");
  p->tune->add_option("--nvcc", t.nvcc, "nvcc to build candidates with (default nvcc on PATH)");
  p->tune->add_option("--source-root", t.source_root,
                      "repository whose src/ and include/ candidates include (default: the one "
                      "this binary was built from)");
  p->tune->add_option("--cutlass-include", t.cutlass_include,
                      "CUTLASS/CuTe headers (default <source root>/.deps/cutlass/cutlass_library/"
                      "source/include)");
}

std::unique_ptr<Parser> make_parser(const BackendCheck& is_backend, Options* o) {
  auto p = std::make_unique<Parser>();
  CLI::App& app = p->app;
  app.require_subcommand(0, 1);
  // A repeated option takes its last value: scripts/lab.sh passes --out and --profile, and the
  // caller's own arguments after them win.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.footer(R"(Artifacts (in --out): results.json (schema flashcore-bench/results v1), report.md;
plots: python3 bench/plot.py DIR/results.json.
NVTX ranges: <chapter>_<role>_<provider> per target (e.g. flashattention_baseline_unfused,
flashattention_optimized_sm80) with nested parity / warmup / timed ranges (and profiled_launch
under run --profiled-launch, which is what profile hands to ncu).

Exit codes: 0 ok; 1 a target FAILED parity or a CUDA error (robust: a cell failed; tune: the
shipped config failed to build or pass the gate, or the leaderboard could not be written); 2 bad usage
or knobs; 3 expectations regressed (profile --check: a threshold missed); 4 no CUDA device;
5 Nsight Compute (ncu) not found.)");

  p->list = app.add_subcommand(
      "list-targets", "print every target as chapter:workload with a one-line description");
  p->list->add_option("--chapter", o->chapter, "only this chapter's targets");

  p->run = app.add_subcommand(
      "run",
      "run targets: parity gate (each target checked against the float64 CPU reference for small "
      "shapes or the fp32 GPU oracle for large ones; a failing target is FAILED and not timed), "
      "then CUDA-event timing; every case also runs the cuDNN peer (peers/cudnn), and the run "
      "measures a bf16 cuBLAS GEMM ceiling (% GEMM) and a device-to-device copy ceiling (% copy) "
      "once, on random data");
  add_target_options(p.get(), p->run);
  p->run->add_option("--out", o->out_dir, "artifact folder (default lab-out/<UTC timestamp>)");
  add_knobs(p->run, is_backend, &o->knobs);
  p->run->add_flag("--profiled-launch", o->profiled_launch,
                   "after each selected target's timed launches, one more launch in the NVTX range "
                   "'profiled_launch' (what `profile` has ncu profile)");
  add_lab_commands(p.get(), is_backend, o);
  add_tune_command(p.get(), o);

  p->check = app.add_subcommand(
      "check", "check an earlier run's results.json against expectations (no GPU needed)");
  p->check->add_option("--results", o->results, "DIR/results.json written by a previous run")
      ->required();

  for (CLI::App* command : {p->run, p->check}) {
    command->add_flag("--check-expectations", o->check_expectations,
                      "compare with each chapter's expectations file; exit 3 and name each "
                      "regression when a threshold is missed");
    command->add_option("--expectations", o->expectations,
                        "use FILE instead of each chapter's labs/<chapter>/expectations_h100.json");
    command->add_option(
        "--labs-root", o->labs_root,
        "repository root holding labs/ (default: the source tree it was built from)");
  }
  return p;
}

}  // namespace

bool Knobs::overrides_shape() const {
  return batch || heads || heads_kv || seqlen || seqlen_k || head_dim || causal;
}

std::vector<std::pair<std::string, std::string>> Knobs::describe() const {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const char* name, const std::optional<int64_t>& v) {
    if (v) out.emplace_back(name, std::to_string(*v));
  };
  add("FLASHCORE_B", batch);
  add("FLASHCORE_H", heads);
  add("FLASHCORE_HKV", heads_kv);
  add("FLASHCORE_S", seqlen);
  add("FLASHCORE_SK", seqlen_k);
  add("FLASHCORE_D", head_dim);
  if (causal) out.emplace_back("FLASHCORE_CAUSAL", *causal ? "1" : "0");
  if (dtype) out.emplace_back("FLASHCORE_DTYPE", *dtype);
  out.emplace_back("FLASHCORE_WINDOW", std::to_string(window));
  add("BLOCK_SIZE", block_size);
  add("DOC_SPAN", doc_span);
  if (backend) out.emplace_back("FLASHCORE_BACKEND", *backend);
  return out;
}

bool check_knobs_for_targets(const Knobs& knobs, const std::vector<Target>& targets,
                             std::string* error) {
  if (!knobs.doc_span) return true;
  for (const Target& t : targets) {
    if (std::string(t.chapter->name) == "labs/flexattention") {
      *error =
          "DOC_SPAN is set, but these targets run the dense kernels (causal, sliding window); "
          "the document mask cases, against torch.compile(flex_attention), run in "
          "bench/flex_lab.py (DOC_SPAN=N python bench/flex_lab.py); unset DOC_SPAN here";
      return false;
    }
  }
  return true;
}

std::vector<Case> cases_for(const Target& target, Profile profile, const Knobs& knobs) {
  std::vector<Case> cases = target.workload->cases != nullptr ? target.workload->cases(profile)
                                                              : target.chapter->cases(profile);
  if (knobs.overrides_shape()) {
    Case c = cases.front();
    if (knobs.batch) c.batch = *knobs.batch;
    if (knobs.heads) c.heads_q = c.heads_kv = *knobs.heads;
    if (knobs.heads_kv) c.heads_kv = *knobs.heads_kv;
    if (knobs.seqlen) c.seqlen_q = c.seqlen_k = *knobs.seqlen;
    if (knobs.seqlen_k) c.seqlen_k = *knobs.seqlen_k;
    if (knobs.head_dim) c.head_dim = *knobs.head_dim;
    if (knobs.causal) c.causal = *knobs.causal;
    cases = {c};
  }
  for (Case& c : cases) {
    if (knobs.dtype) c.dtype = *knobs.dtype;
    switch (target.workload->mask) {
      case MaskRule::kFromCase:
        break;
      case MaskRule::kCausal:
        c.causal = true;
        break;
      case MaskRule::kSliding:
        c.causal = true;
        c.window_left = knobs.window;
        break;
    }
  }
  return cases;
}

std::string backend_for(const Target& target, const Knobs& knobs, const TargetArgs* args) {
  if (args != nullptr && args->backend) return *args->backend;
  if (knobs.backend && std::string(target.workload->role) == "optimized") return *knobs.backend;
  return target.workload->backend;
}

bool parse_args(int argc, const char* const* argv, const BackendCheck& is_backend, Options* options,
                std::string* error) {
  *options = Options{};
  std::unique_ptr<Parser> p = make_parser(is_backend, options);
  const std::string first = argc > 1 ? argv[1] : "";
  if (argc <= 1 || first == "help") {
    options->help = p->app.help("", CLI::AppFormatMode::All);
    return true;
  }
  if (first[0] != '-' && first != "list-targets" && first != "run" && first != "check" &&
      first != "profile" && first != "robust" && first != "report" && first != "tune") {
    *error = "unknown command '" + first +
             "'; valid commands: list-targets, run, check, profile, robust, report, tune (see "
             "--help)";
    return false;
  }
  try {
    p->app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    for (CLI::App* command :
         {p->list, p->run, p->check, p->profile_cmd, p->robust, p->report, p->tune}) {
      if (command->parsed()) options->help = command->help();
    }
    if (options->help.empty()) options->help = p->app.help("", CLI::AppFormatMode::All);
    options->command = Command::kHelp;
    return true;
  } catch (const CLI::ParseError& e) {
    *error = std::string(e.what()) + " (see --help)";
    return false;
  }
  if (p->list->parsed()) {
    options->command = Command::kListTargets;
    if (!options->chapter.empty() && find_chapter(options->chapter) == nullptr) {
      *error = "unknown chapter '" + options->chapter + "'; valid chapters: " + chapter_names();
      return false;
    }
    return true;
  }
  if (p->check->parsed()) {
    options->command = Command::kCheck;
    options->check_expectations = true;
    return true;
  }
  if (p->robust->parsed()) {
    options->command = Command::kRobust;
    return true;
  }
  if (p->report->parsed()) {
    options->command = Command::kReport;
    return true;
  }
  if (p->tune->parsed()) {
    options->command = Command::kTune;
    if (options->tune.export_only &&
        (options->tune.export_table.empty() || options->tune.leaderboard.empty())) {
      *error = "tune --export-only needs --leaderboard FILE and --export FILE";
      return false;
    }
    return true;
  }
  if (!p->run->parsed() && !p->profile_cmd->parsed()) {
    options->help = p->app.help("", CLI::AppFormatMode::All);
    return true;
  }
  options->command = p->run->parsed() ? Command::kRun : Command::kProfile;
  if (options->command == Command::kProfile) options->knobs = p->profile_knobs;
  options->target_extra_specs = p->extra;
  options->profile = p->profile == "full" ? Profile::kFull : Profile::kMinimal;
  if (!check_heads(options->knobs, error)) return false;
  if (!select_targets(CLI::detail::join(p->targets, ","), &options->targets, error)) return false;
  for (const std::string& spec : p->extra) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) {
      *error =
          "--target-extra-arg needs TARGET=\"--flag value\", e.g. "
          "labs/flashattention:optimized_flashattention=\"--backend sm80\"";
      return false;
    }
    const std::string target = spec.substr(0, eq);
    if (target.find(':') == std::string::npos) {
      *error = "--target-extra-arg names '" + target + "'; name one target as chapter:workload";
      return false;
    }
    std::vector<Target> named;
    if (!select_targets(target, &named, error) ||
        !parse_target_args(target, spec.substr(eq + 1), is_backend, &options->target_args[target],
                           error)) {
      return false;
    }
  }
  return true;
}

std::string help_text() {
  Options options;
  return make_parser([](const std::string&) { return true; }, &options)
      ->app.help("", CLI::AppFormatMode::All);
}

}  // namespace flashcore::bench
