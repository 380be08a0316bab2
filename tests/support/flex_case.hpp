// Test support for the flex kernels: one FlexAttention problem ("flex case") with fresh random
// inputs and mod data on host and device, run through flashcore::run with poisoned outputs, and
// compared with the float64 flex reference evaluating the same functors on the host copies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/attention.hpp"

namespace flashcore::testing {

enum class BlockMaskKind {
  kNone,
  kFromMask,  // the host builder's BlockMask of the case's own mask (full blocks listed apart)
  kRandom,    // random partial / full / absent blocks, some query blocks with none at all
};

struct FlexCase {
  std::string name;
  DType dtype = DType::kBFloat16;
  int64_t batch = 1, seqlen_q = 128, seqlen_k = 128, heads_q = 2, heads_kv = 2, head_dim = 128;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.f;
  int64_t doc_span = 0;       // > 0: documents of random lengths 1 .. 2 * doc_span
  int64_t prefix = -1;        // >= 0: prefix-LM, per-batch lengths drawn in [0, prefix]
  bool alibi = false;         // per-head slopes
  int64_t bias_distance = 0;  // > 0: relative bias table [Hq, 2 * bias_distance - 1]
  bool sinks = false;         // one random logit per head
  BlockMaskKind block_mask = BlockMaskKind::kNone;
  int64_t q_block = 128, kv_block = 128;
  // Varlen: the sequences' lengths (batch = their count); empty for a dense batch.
  std::vector<int32_t> lengths_q, lengths_k;
  Backend backend = Backend::kSm80;
  bool gpu_oracle = false;  // run the fp32 GPU oracle (no flex mods) instead of run()
};

struct FlexResult {
  double rel_l2 = 0;
  double lse_max_abs = 0;
  int64_t nan_count = 0;
  int64_t masked_row_errors = 0;  // rows the reference sees nothing in: O != 0 or LSE != ref
  int64_t masked_rows = 0;
  std::string provider;
};

// Runs c on the GPU and the reference on the CPU; failures to run are test failures (ADD_FAILURE)
// and leave *result empty.
void run_flex_case(const FlexCase& c, FlexResult* result);

// A default case named name, edited by edit.
FlexCase make_flex_case(std::string name, void (*edit)(FlexCase&));
// The shared case list (flex_cases.cpp), on the default backend (sm80).
std::vector<FlexCase> flex_cases();
// Cases that must have rows that see no key (so that part of the check can fail).
inline constexpr const char* kMaskedRowCases[] = {"documents_cross_masked_rows",
                                                  "block_mask_random_empty_rows"};

}  // namespace flashcore::testing
