// The one table of chapters and workloads. A target is "chapter:workload"; adding a kernel to a
// chapter is adding one Workload row, never copying a runner.
#pragma once

#include <string>
#include <vector>

#include "model.hpp"

namespace flashcore::bench {

// How a workload's mask relates to the chapter's cases.
enum class MaskRule {
  kFromCase,  // run the case as listed (the grid has causal and non-causal rows)
  kCausal,    // force causal
  kSliding,   // force causal + a left window of Knobs::window keys
};

// Who computes the attention.
enum class Engine {
  kLibrary,          // flashcore::run with the named backend
  kCudnn,            // cuDNN fused SDPA through the frontend graph API
  kCutlass,          // CUTLASS's example 88 Hopper FMHA (cutlass_peer.hpp)
  kLibraryBackward,  // flashcore::run_backward (backward_runner.hpp)
  kCudnnBackward,    // cuDNN fused SDPA backward through the frontend graph API
};

struct Workload {
  const char* name;
  const char* description;
  const char* role;  // "baseline", "step", "optimized" or "peer" (see Result::role)
  Engine engine;
  const char* backend;  // flashcore::parse_backend name; "auto" for the best fused provider
  MaskRule mask;
  // Cases of its own instead of the chapter's (the backward's training shapes); null: the
  // chapter's.
  std::vector<Case> (*cases)(Profile profile) = nullptr;
  // Selected only by its full name, not by its chapter's: the backward's cases cost their own
  // float64 reference and peers, which runs of a whole chapter (the journey, the tuner's
  // scripts) do not ask for.
  bool named_only = false;
};

struct Chapter {
  const char* name;
  const char* description;
  // NVTX range prefix: ranges are "<prefix>_<role>_<provider>", e.g.
  // flashattention_baseline_unfused.
  const char* range_prefix;
  const char* default_dtype;
  // Repository-relative expectations file; empty when the chapter has none (the cuDNN peer).
  const char* expectations;
  std::vector<Workload> workloads;
  std::vector<Case> (*cases)(Profile profile);
};

const std::vector<Chapter>& chapters();
const Chapter* find_chapter(const std::string& name);

struct Target {
  const Chapter* chapter;
  const Workload* workload;
  std::string name() const { return std::string(chapter->name) + ":" + workload->name; }
};

// Parses "CHAPTER[:WORKLOAD][,...]" into targets in table order without duplicates (a CHAPTER
// alone selects its workloads that are not named_only). On an unknown
// chapter or workload returns false and lists what is valid in *error.
bool select_targets(const std::string& spec, std::vector<Target>* targets, std::string* error);

// The list-targets text: one "chapter:workload  description" line per target. An unknown
// chapter filter returns false with the valid chapters in *error.
bool list_targets(const std::string& chapter_filter, std::string* text, std::string* error);

// The workload that every speed bar is measured against, run at each case of the selection:
// cuDNN's forward, or for a backward case (Case::backward) cuDNN's backward.
const Target& cudnn_peer();
const Target& cudnn_backward_peer();
const Target& cudnn_peer_for(const Case& c);

// A comma-separated list of the chapter names, for error messages.
std::string chapter_names();

}  // namespace flashcore::bench
