#include "targets.hpp"

#include <algorithm>
#include <sstream>

namespace flashcore::bench {
namespace {

Case make_case(int64_t batch, int64_t heads, int64_t seqlen, int64_t head_dim, bool causal,
               const char* dtype) {
  Case c;
  c.batch = batch;
  c.heads_q = c.heads_kv = heads;
  c.seqlen_q = c.seqlen_k = seqlen;
  c.head_dim = head_dim;
  c.causal = causal;
  c.dtype = dtype;
  return c;
}

// The FlashAttention-3 paper's forward grid: 16k tokens per batch, hidden 2048, so B = 16384 / S
// and H = 2048 / D; head dims 64/128/256, seqlen 512..16k, causal and not.
std::vector<Case> fa3_grid(const char* dtype) {
  std::vector<Case> grid;
  for (const int64_t d : {64, 128, 256}) {
    for (int64_t s = 512; s <= 16384; s *= 2) {
      for (const bool causal : {false, true}) {
        grid.push_back(make_case(16384 / s, 2048 / d, s, d, causal, dtype));
      }
    }
  }
  return grid;
}

// Minimal: the canonical small shape (launch-bound, graph-timed) and one FA3-grid shape that is
// compute-bound, both causal and not. Finishes in seconds.
std::vector<Case> flashattention_cases(Profile profile) {
  if (profile == Profile::kFull) return fa3_grid("bf16");
  std::vector<Case> cases;
  for (const bool causal : {false, true}) {
    cases.push_back(make_case(1, 8, 512, 64, causal, "bf16"));
    cases.push_back(make_case(4, 16, 4096, 128, causal, "bf16"));
  }
  return cases;
}

// The FlashCore journey: canonical B=1,H=8,S=512,D=64 fp16 first (the journey table reads it),
// then a seqlen sweep at the same heads. The scalar provider is slow, so the sweep stays at H=8.
// Both profiles end with one decode case (one query against a 4k KV cache, 64 sequences x 32
// heads): memory-bound, so the bar it is read against is % copy, not % GEMM.
std::vector<Case> flashcore_cases(Profile profile) {
  std::vector<Case> cases;
  const int64_t max_seqlen = profile == Profile::kMinimal ? 2048 : 16384;
  for (const int64_t d : {64, 128}) {
    if (profile == Profile::kMinimal && d != 64) continue;
    for (int64_t s = 512; s <= max_seqlen; s *= 2)
      cases.push_back(make_case(1, 8, s, d, false, "fp16"));
  }
  Case decode = make_case(64, 32, 4096, 128, false, "fp16");
  decode.seqlen_q = 1;
  cases.push_back(decode);
  return cases;
}

// The shapes of the FlexAttention anchors (h100-peers.md); the workload's mask is applied on top.
std::vector<Case> flexattention_cases(Profile profile) {
  std::vector<Case> cases = {make_case(1, 8, 512, 64, false, "bf16"),
                             make_case(4, 16, 4096, 128, false, "bf16")};
  if (profile == Profile::kFull) cases.push_back(make_case(2, 16, 8192, 128, false, "bf16"));
  return cases;
}

// The backward's training shapes (Case::backward), bf16: the FA3 grid's hidden 2048 at 16k tokens
// (hd128 B4 H16, hd64 B4 H32, S 4096), causal and not, after a small one (B1 H8 S1024 D64) whose
// whole output the float64 reference checks. Full: the same at S 1k..8k. 16k is left out: the
// float64 reference of one head costs minutes there (backward_data.hpp).
std::vector<Case> backward_cases(Profile profile) {
  std::vector<Case> cases = {make_case(1, 8, 1024, 64, false, "bf16")};
  const int64_t min_seqlen = profile == Profile::kFull ? 1024 : 4096;
  const int64_t max_seqlen = profile == Profile::kFull ? 8192 : 4096;
  for (const int64_t d : {128, 64}) {
    for (int64_t s = min_seqlen; s <= max_seqlen; s *= 2) {
      for (const bool causal : {false, true}) {
        cases.push_back(make_case(16384 / s, 2048 / d, s, d, causal, "bf16"));
      }
    }
  }
  for (Case& c : cases) c.backward = true;
  return cases;
}

const std::vector<Chapter>& table() {
  static const std::vector<Chapter> kChapters = {
      {"labs/flashattention",
       "naive unfused attention vs the best fused flashcore kernel",
       "flashattention",
       "bf16",
       "labs/flashattention/expectations_h100.json",
       {{"baseline_flashattention",
         "unfused cuBLAS QK^T, softmax kernel, cuBLAS PV (scores materialized in HBM)", "baseline",
         Engine::kLibrary, "unfused", MaskRule::kFromCase},
        {"optimized_flashattention",
         "best fused provider on this GPU (auto: sm90, else sm80, else scalar)", "optimized",
         Engine::kLibrary, "auto", MaskRule::kFromCase}},
       flashattention_cases},
      {"flashcore",
       "the FlashCore journey: scalar -> WMMA -> sm80 -> optimized, against cuDNN",
       "flashcore",
       "fp16",
       "labs/flashcore/expectations_h100.json",
       {{"scalar", "fused online softmax on CUDA cores, no tensor cores (journey start)",
         "baseline", Engine::kLibrary, "scalar", MaskRule::kFromCase},
        {"unfused", "unfused cuBLAS path, for scale", "step", Engine::kLibrary, "unfused",
         MaskRule::kFromCase},
        {"wmma", "fused, nvcuda::wmma 16x16x16 tensor cores", "step", Engine::kLibrary, "wmma",
         MaskRule::kFromCase},
        {"sm80", "FlashAttention-2 class: mma.sync, ldmatrix, cp.async pipeline", "step",
         Engine::kLibrary, "sm80", MaskRule::kFromCase},
        {"optimized", "best fused provider on this GPU (auto)", "optimized", Engine::kLibrary,
         "auto", MaskRule::kFromCase},
        {"backward",
         "the backward pass (dQ, dK, dV; auto: sm90's wgmma backward on H100, else sm80's) on "
         "training shapes, against cuDNN's backward",
         "step", Engine::kLibraryBackward, "auto", MaskRule::kFromCase, backward_cases,
         /*named_only=*/true},
        {"backward_sm80",
         "the sm80 backward (FlashAttention-2's schedule on mma.sync) on the backward's cases",
         "step", Engine::kLibraryBackward, "sm80", MaskRule::kFromCase, backward_cases,
         /*named_only=*/true}},
       flashcore_cases},
      {"labs/flexattention",
       "masked attention with the masks that exist: causal and sliding window",
       "flexattention",
       "bf16",
       "labs/flexattention/expectations_h100.json",
       {{"baseline_flex_causal", "unfused path, causal mask", "baseline", Engine::kLibrary,
         "unfused", MaskRule::kCausal},
        {"optimized_flex_causal", "best fused provider, causal mask (masked tiles skipped)",
         "optimized", Engine::kLibrary, "auto", MaskRule::kCausal},
        {"baseline_flex_sliding", "unfused path, causal sliding window of FLASHCORE_WINDOW keys",
         "baseline", Engine::kLibrary, "unfused", MaskRule::kSliding},
        {"optimized_flex_sliding", "best fused provider, causal sliding window", "optimized",
         Engine::kLibrary, "auto", MaskRule::kSliding}},
       flexattention_cases},
      {"peers/cudnn",
       "cuDNN fused SDPA in-process (frontend graph API): the speed bar",
       "cudnn",
       "bf16",
       "",
       {{"cudnn_sdpa", "cuDNN fused flash attention (sdpa node), same timer and inputs", "peer",
         Engine::kCudnn, "cudnn", MaskRule::kFromCase},
        {"cudnn_sdpa_backward",
         "cuDNN fused flash attention backward (sdpa_backward node) on the backward's cases, same "
         "timer, inputs, O and LSE",
         "peer", Engine::kCudnnBackward, "cudnn", MaskRule::kFromCase, backward_cases,
         /*named_only=*/true}},
       flashattention_cases},
      {"peers/cutlass",
       "CUTLASS's Hopper FMHA (examples/88_hopper_fmha, built from .deps), in-process",
       "cutlass",
       "bf16",
       "",
       {{"cutlass_fmha",
         "CUTLASS example 88 forward kernel, the faster of its cooperative and pingpong "
         "schedules, same timer and inputs",
         "peer", Engine::kCutlass, "cutlass", MaskRule::kFromCase}},
       flashattention_cases},
  };
  return kChapters;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

std::string workload_names(const Chapter& chapter) {
  std::string names;
  for (const Workload& w : chapter.workloads)
    names += (names.empty() ? "" : ", ") + std::string(w.name);
  return names;
}

}  // namespace

const std::vector<Chapter>& chapters() { return table(); }

const Chapter* find_chapter(const std::string& name) {
  for (const Chapter& chapter : table()) {
    if (name == chapter.name) return &chapter;
  }
  return nullptr;
}

std::string chapter_names() {
  std::string names;
  for (const Chapter& chapter : table())
    names += (names.empty() ? "" : ", ") + std::string(chapter.name);
  return names;
}

bool select_targets(const std::string& spec, std::vector<Target>* targets, std::string* error) {
  targets->clear();
  std::vector<Target> wanted;
  for (const std::string& item : split(spec, ',')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string chapter_name = item.substr(0, colon);
    const Chapter* chapter = find_chapter(chapter_name);
    if (chapter == nullptr) {
      *error = "unknown chapter '" + chapter_name + "'; valid chapters: " + chapter_names();
      return false;
    }
    if (colon == std::string::npos) {
      for (const Workload& w : chapter->workloads) {
        if (!w.named_only) wanted.push_back({chapter, &w});
      }
      continue;
    }
    const std::string workload = item.substr(colon + 1);
    const auto it = std::find_if(chapter->workloads.begin(), chapter->workloads.end(),
                                 [&](const Workload& w) { return workload == w.name; });
    if (it == chapter->workloads.end()) {
      *error = "unknown workload '" + workload + "' in chapter " + chapter_name +
               "; valid workloads: " + workload_names(*chapter);
      return false;
    }
    wanted.push_back({chapter, &*it});
  }
  if (wanted.empty()) {
    *error = "no targets given; use CHAPTER[:WORKLOAD][,...] with chapters: " + chapter_names();
    return false;
  }
  // Table order, so that a baseline always runs (and is reported) before what it is compared to.
  for (const Chapter& chapter : table()) {
    for (const Workload& w : chapter.workloads) {
      const bool selected = std::any_of(wanted.begin(), wanted.end(),
                                        [&](const Target& t) { return t.workload == &w; });
      if (selected) targets->push_back({&chapter, &w});
    }
  }
  return true;
}

bool list_targets(const std::string& chapter_filter, std::string* text, std::string* error) {
  if (!chapter_filter.empty() && find_chapter(chapter_filter) == nullptr) {
    *error = "unknown chapter '" + chapter_filter + "'; valid chapters: " + chapter_names();
    return false;
  }
  size_t width = 0;
  for (const Chapter& chapter : table()) {
    for (const Workload& w : chapter.workloads) {
      width = std::max(width, std::string(chapter.name).size() + 1 + std::string(w.name).size());
    }
  }
  std::ostringstream out;
  for (const Chapter& chapter : table()) {
    if (!chapter_filter.empty() && chapter_filter != chapter.name) continue;
    for (const Workload& w : chapter.workloads) {
      const std::string name = std::string(chapter.name) + ":" + w.name;
      out << name << std::string(width - name.size() + 2, ' ') << w.description << "\n";
    }
  }
  *text = out.str();
  return true;
}

const Target& cudnn_peer() {
  static const Target kPeer = [] {
    const Chapter* chapter = find_chapter("peers/cudnn");
    return Target{chapter, &chapter->workloads.front()};
  }();
  return kPeer;
}

const Target& cudnn_backward_peer() {
  static const Target kPeer = [] {
    const Chapter* chapter = find_chapter("peers/cudnn");
    return Target{chapter, &chapter->workloads.back()};
  }();
  return kPeer;
}

const Target& cudnn_peer_for(const Case& c) {
  return c.backward ? cudnn_backward_peer() : cudnn_peer();
}

}  // namespace flashcore::bench
