#include "cli.hpp"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace flashcore::bench {
namespace {

// The library's limits (src/api/validate.cpp): rows are 16-byte aligned, so D is a multiple of 8
// fp16/bf16 elements, and no kernel tiles more than 256.
constexpr int64_t kHeadDimAlign = 8;
constexpr int64_t kMaxHeadDim = 256;

bool parse_int(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *value = v;
  return true;
}

bool positive_knob(const EnvLookup& env, const char* name, std::optional<int64_t>* out,
                   std::string* error) {
  const char* text = env(name);
  if (text == nullptr || text[0] == '\0') return true;
  int64_t v = 0;
  if (!parse_int(text, &v) || v <= 0) {
    *error = std::string(name) + "='" + text + "' is not valid; use a positive integer";
    return false;
  }
  *out = v;
  return true;
}

bool parse_target_args(const std::string& target, const std::string& flags,
                       const BackendCheck& is_backend, TargetArgs* args, std::string* error) {
  std::istringstream in(flags);
  std::vector<std::string> tokens;
  for (std::string token; in >> token;) tokens.push_back(token);
  const std::string valid =
      "valid flags: --backend NAME, --num-splits N, --tile auto|large|small|warpgroup|"
      "warpgroup-pair, --pdl on|off";
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& flag = tokens[i];
    if (i + 1 >= tokens.size()) {
      *error = "--target-extra-arg " + target + ": " + flag + " needs a value; " + valid;
      return false;
    }
    const std::string& value = tokens[++i];
    if (flag == "--backend") {
      if (!is_backend(value)) {
        *error = "--target-extra-arg " + target + ": unknown backend '" + value +
                 "'; valid: auto, scalar, unfused, wmma, sm80 (and newer ones as they land)";
        return false;
      }
      args->backend = value;
    } else if (flag == "--num-splits") {
      int64_t n = 0;
      if (!parse_int(value, &n) || n < 0 || n > 1024) {
        *error = "--target-extra-arg " + target + ": --num-splits '" + value +
                 "' is not valid; use 0 (heuristic), 1 (no split) or a split count up to 1024";
        return false;
      }
      args->num_splits = static_cast<int>(n);
    } else if (flag == "--tile") {
      if (value != "auto" && value != "large" && value != "small" && value != "warpgroup" &&
          value != "warpgroup-pair") {
        *error = "--target-extra-arg " + target + ": --tile '" + value +
                 "' is not valid; use auto, large, small, warpgroup or warpgroup-pair";
        return false;
      }
      args->tile = value;
    } else if (flag == "--pdl") {
      if (value != "on" && value != "off") {
        *error =
            "--target-extra-arg " + target + ": --pdl '" + value + "' is not valid; use on or off";
        return false;
      }
      args->enable_pdl = value == "on";
    } else {
      *error = "--target-extra-arg " + target + ": unknown flag '" + flag + "'; " + valid;
      return false;
    }
  }
  return true;
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

bool read_knobs(const EnvLookup& env, const BackendCheck& is_backend, Knobs* knobs,
                std::string* error) {
  *knobs = Knobs{};
  if (!positive_knob(env, "FLASHCORE_B", &knobs->batch, error) ||
      !positive_knob(env, "FLASHCORE_H", &knobs->heads, error) ||
      !positive_knob(env, "FLASHCORE_HKV", &knobs->heads_kv, error) ||
      !positive_knob(env, "FLASHCORE_S", &knobs->seqlen, error) ||
      !positive_knob(env, "FLASHCORE_SK", &knobs->seqlen_k, error) ||
      !positive_knob(env, "FLASHCORE_D", &knobs->head_dim, error) ||
      !positive_knob(env, "BLOCK_SIZE", &knobs->block_size, error) ||
      !positive_knob(env, "DOC_SPAN", &knobs->doc_span, error)) {
    return false;
  }
  if (knobs->head_dim &&
      (*knobs->head_dim > kMaxHeadDim || *knobs->head_dim % kHeadDimAlign != 0)) {
    *error = "FLASHCORE_D=" + std::to_string(*knobs->head_dim) +
             " is not supported; use a multiple of 8 up to 256 (64, 128 and 256 are tuned)";
    return false;
  }
  if (knobs->heads_kv) {
    if (!knobs->heads) {
      *error = "FLASHCORE_HKV needs FLASHCORE_H too (query heads must be a multiple of KV heads)";
      return false;
    }
    if (*knobs->heads % *knobs->heads_kv != 0) {
      *error = "FLASHCORE_H=" + std::to_string(*knobs->heads) +
               " is not a multiple of FLASHCORE_HKV=" + std::to_string(*knobs->heads_kv) +
               "; GQA needs H % HKV == 0";
      return false;
    }
  }
  if (knobs->block_size && *knobs->block_size % 16 != 0) {
    *error = "BLOCK_SIZE=" + std::to_string(*knobs->block_size) +
             " is not valid; use a positive multiple of 16 (e.g. 64 or 128)";
    return false;
  }
  if (const char* causal = env("FLASHCORE_CAUSAL"); causal != nullptr && causal[0] != '\0') {
    const std::string v = causal;
    if (v != "0" && v != "1") {
      *error = "FLASHCORE_CAUSAL='" + v + "' is not valid; use 0 or 1";
      return false;
    }
    knobs->causal = v == "1";
  }
  if (const char* dtype = env("FLASHCORE_DTYPE"); dtype != nullptr && dtype[0] != '\0') {
    const std::string v = dtype;
    if (v != "fp16" && v != "bf16") {
      *error = "FLASHCORE_DTYPE='" + v + "' is not supported; use fp16 or bf16";
      return false;
    }
    knobs->dtype = v;
  }
  if (const char* window = env("FLASHCORE_WINDOW"); window != nullptr && window[0] != '\0') {
    int64_t v = 0;
    if (!parse_int(window, &v) || v < 0) {
      *error = std::string("FLASHCORE_WINDOW='") + window +
               "' is not valid; use the number of keys left of the diagonal (>= 0)";
      return false;
    }
    knobs->window = v;
  }
  if (const char* backend = env("FLASHCORE_BACKEND"); backend != nullptr && backend[0] != '\0') {
    if (!is_backend(backend)) {
      *error = std::string("FLASHCORE_BACKEND='") + backend +
               "' is not a backend; valid: auto, scalar, unfused, wmma, sm80 (and newer ones as "
               "they land)";
      return false;
    }
    knobs->backend = backend;
  }
  return true;
}

bool check_knobs_for_targets(const Knobs& knobs, const std::vector<Target>& targets,
                             std::string* error) {
  if (!knobs.doc_span) return true;
  for (const Target& t : targets) {
    if (std::string(t.chapter->name) == "labs/flexattention") {
      *error =
          "DOC_SPAN is set, but flashcore has no document mask yet (masks: causal, sliding "
          "window); unset DOC_SPAN";
      return false;
    }
  }
  return true;
}

std::vector<Case> cases_for(const Target& target, Profile profile, const Knobs& knobs) {
  std::vector<Case> cases = target.chapter->cases(profile);
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
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    options->command = Command::kHelp;
    return true;
  }
  const std::string& command = args[0];
  if (command == "list-targets") {
    options->command = Command::kListTargets;
  } else if (command == "run") {
    options->command = Command::kRun;
  } else if (command == "check") {
    options->command = Command::kCheck;
  } else {
    *error =
        "unknown command '" + command + "'; valid commands: list-targets, run, check (see --help)";
    return false;
  }
  // --flag value and --flag=value are both accepted.
  std::string targets_spec;
  std::vector<std::pair<std::string, std::string>> extra;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> value;
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (flag == "--help" || flag == "-h") {
      options->command = Command::kHelp;
      return true;
    }
    const bool is_switch = flag == "--check-expectations";
    if (!is_switch && !value) {
      if (i + 1 >= args.size()) {
        *error = flag + " needs a value (see --help)";
        return false;
      }
      value = args[++i];
    }
    auto allowed = [&](std::initializer_list<Command> commands) {
      for (const Command c : commands) {
        if (c == options->command) return true;
      }
      *error = "option " + flag + " does not apply to '" + command + "' (see --help)";
      return false;
    };
    if (flag == "--chapter") {
      if (!allowed({Command::kListTargets})) return false;
      options->chapter = *value;
    } else if (flag == "--targets") {
      if (!allowed({Command::kRun})) return false;
      targets_spec += (targets_spec.empty() ? "" : ",") + *value;
    } else if (flag == "--profile") {
      if (!allowed({Command::kRun})) return false;
      if (*value == "minimal") {
        options->profile = Profile::kMinimal;
      } else if (*value == "full") {
        options->profile = Profile::kFull;
      } else {
        *error = "--profile '" + *value + "' is not valid; use minimal or full";
        return false;
      }
    } else if (flag == "--target-extra-arg") {
      if (!allowed({Command::kRun})) return false;
      const size_t eq = value->find('=');
      if (eq == std::string::npos) {
        *error =
            "--target-extra-arg needs TARGET=\"--flag value\", e.g. "
            "labs/flashattention:optimized_flashattention=\"--backend sm80\"";
        return false;
      }
      extra.emplace_back(value->substr(0, eq), value->substr(eq + 1));
    } else if (flag == "--out") {
      if (!allowed({Command::kRun})) return false;
      options->out_dir = *value;
    } else if (flag == "--check-expectations") {
      if (!allowed({Command::kRun, Command::kCheck})) return false;
      options->check_expectations = true;
    } else if (flag == "--expectations") {
      if (!allowed({Command::kRun, Command::kCheck})) return false;
      options->expectations = *value;
    } else if (flag == "--labs-root") {
      if (!allowed({Command::kRun, Command::kCheck})) return false;
      options->labs_root = *value;
    } else if (flag == "--results") {
      if (!allowed({Command::kCheck})) return false;
      options->results = *value;
    } else {
      *error = "unknown option '" + flag + "' for '" + command + "' (see --help)";
      return false;
    }
  }
  if (options->command == Command::kListTargets) {
    if (!options->chapter.empty() && find_chapter(options->chapter) == nullptr) {
      *error = "unknown chapter '" + options->chapter + "'; valid chapters: " + chapter_names();
      return false;
    }
  }
  if (options->command == Command::kCheck) {
    options->check_expectations = true;
    if (options->results.empty()) {
      *error = "check needs --results DIR/results.json (written by a previous run)";
      return false;
    }
  }
  if (options->command != Command::kRun) return true;
  if (targets_spec.empty()) {
    *error = "run needs --targets CHAPTER[:WORKLOAD][,...]; chapters: " + chapter_names();
    return false;
  }
  if (!select_targets(targets_spec, &options->targets, error)) return false;
  for (const auto& [target, flags] : extra) {
    std::vector<Target> named;
    if (target.find(':') == std::string::npos || !select_targets(target, &named, error)) {
      if (target.find(':') == std::string::npos) {
        *error = "--target-extra-arg names '" + target + "'; name one target as chapter:workload";
      }
      return false;
    }
    if (!parse_target_args(target, flags, is_backend, &options->target_args[target], error)) {
      return false;
    }
  }
  return true;
}

std::string help_text() {
  return R"(flashcore-bench: the flashcore benchmark lab.

Usage:
  flashcore-bench list-targets [--chapter CHAPTER]
  flashcore-bench run --targets CHAPTER[:WORKLOAD][,...] [--profile minimal|full]
                      [--target-extra-arg TARGET="--flag value"]... [--out DIR]
                      [--check-expectations] [--expectations FILE] [--labs-root DIR]
  flashcore-bench check --results DIR/results.json [--expectations FILE] [--labs-root DIR]
  flashcore-bench --help

Commands:
  list-targets   print every target as chapter:workload with a one-line description
  run            run targets: parity gate (each target checked against the float64 CPU reference
                 for small shapes or the fp32 GPU oracle for large ones; a failing target is
                 FAILED and not timed), then CUDA-event timing; every case also runs the cuDNN
                 peer (peers/cudnn), and the run measures a bf16 cuBLAS GEMM ceiling (% GEMM)
                 and a device-to-device copy ceiling (% copy) once, on random data
  check          check an earlier run's results.json against expectations (no GPU needed)

Options:
  --targets SPEC          comma-separated chapters or chapter:workload targets
  --profile minimal|full  minimal (default): a few shapes, under a minute on an H100;
                          full: the FlashAttention-3 paper's grid (16k tokens, hidden 2048,
                          head dim 64/128/256, seqlen 512..16k, causal and not)
  --target-extra-arg T="--flag value ..."
                          per-target flags; T is chapter:workload. Flags:
                            --backend NAME   provider to run (auto, scalar, unfused, wmma, sm80)
                            --num-splits N   split-KV count (0 heuristic, 1 off)
                            --tile auto|large|small|warpgroup|warpgroup-pair
                                             CTA tile of the sm80 kernel (auto: when the large
                                             tile's grid leaves SMs idle, small, or on Hopper
                                             at hd64 warpgroup, then warpgroup-pair, as the
                                             grid grows)
                            --pdl on|off     programmatic dependent launch where it applies
                                             (default on; AttentionParams::enable_pdl)
  --out DIR               artifact folder (default lab-out/<UTC timestamp>)
  --check-expectations    compare with each chapter's expectations file; exit 3 and name each
                          regression when a threshold is missed
  --expectations FILE     use FILE instead of each chapter's labs/<chapter>/expectations_h100.json
  --labs-root DIR         repository root holding labs/ (default: the source tree it was built from)

Environment knobs (read at run time):
  FLASHCORE_BACKEND   provider of the optimized targets (default auto): auto, scalar, unfused,
                      wmma, sm80; a provider that rejects a case is reported SKIPPED with the reason
  FLASHCORE_B         batch                     Any shape knob replaces the profile's grid with
  FLASHCORE_H         query heads               one case: the chapter's first case with the
  FLASHCORE_HKV       KV heads (GQA; divides H) overrides applied.
  FLASHCORE_S         sequence length (q and k)
  FLASHCORE_SK        key/value sequence length (defaults to FLASHCORE_S)
  FLASHCORE_D         head dim: a multiple of 8 up to 256
  FLASHCORE_CAUSAL    0 or 1
  FLASHCORE_DTYPE     fp16 or bf16 (default per chapter: flashcore fp16, others bf16)
  FLASHCORE_WINDOW    sliding-window size of labs/flexattention, keys left of the diagonal
                      (default 1024)
  BLOCK_SIZE          FlexAttention block-mask granularity (a multiple of 16); recorded in the
                      artifacts. flashcore kernels choose their own tiles, so it does not change
                      timings until block-sparse masks land
  DOC_SPAN            document-mask span for labs/flexattention; rejected until the document mask
                      exists

Artifacts (in --out): results.json (schema flashcore-bench/results v1), report.md, tflops.svg.
NVTX ranges: <chapter>_<role>_<provider> per target (e.g. flashattention_baseline_unfused,
flashattention_optimized_sm80) with nested parity / warmup / timed ranges.

Exit codes: 0 ok; 1 a target FAILED parity or a CUDA error; 2 bad usage or knobs;
3 expectations regressed; 4 no CUDA device.
)";
}

}  // namespace flashcore::bench
