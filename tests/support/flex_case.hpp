// Test support for the flex kernels: one FlexAttention problem ("flex case") with fresh random
// inputs and mod data on host and device, run through flashcore::run with poisoned outputs, and
// compared with the float64 flex reference evaluating the same functors on the host copies.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "flashcore/attention.hpp"
#include "flashcore/flex.hpp"
#include "reference/cpu_flex_reference.hpp"
#include "tests/support/attention_case.hpp"

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
  int64_t doc_span = 0;  // > 0: documents of random lengths 1 .. 2 * doc_span
  // > 0: document k has id k % doc_id_cycle, so an id recurs in documents apart (the mask compares
  // ids, not positions); 0: ids count up.
  int64_t doc_id_cycle = 0;
  int64_t prefix = -1;        // >= 0: prefix-LM, per-batch lengths drawn in [0, prefix]
  bool alibi = false;         // per-head slopes
  int64_t bias_distance = 0;  // > 0: relative bias table [Hq, 2 * bias_distance - 1]
  bool sinks = false;         // one random logit per head
  BlockMaskKind block_mask = BlockMaskKind::kNone;
  int64_t q_block = 128, kv_block = 128;
  bool block_mask_broadcast = false;  // one BlockMask row for every head (heads 1), as H=None
  // Varlen: the sequences' lengths (batch = their count); empty for a dense batch.
  std::vector<int32_t> lengths_q, lengths_k;
  // Varlen: max_seqlen_q passed as this where it is above the longest query sequence (a loose
  // bound, which FlashAttention's varlen API allows); else the longest.
  int32_t max_seqlen_q = 0;
  Backend backend = Backend::kSm80;
  int num_splits = 0;  // AttentionParams::num_splits: 0 lets the backend choose, 1 never splits
  bool gpu_oracle = false;  // run the fp32 GPU oracle (no flex mods) instead of run()
};

struct FlexResult {
  double rel_l2 = 0;
  double lse_max_abs = 0;
  int64_t nan_count = 0;
  // Rows that see no key (with sinks: the reference's O row is exactly 0), and those of them whose
  // O is not 0 or whose LSE is not the reference's (-inf, or the sink within kLseTolerance).
  int64_t masked_row_errors = 0;
  int64_t masked_rows = 0;
  std::string provider;
};

// A contiguous [rows, heads, D] tensor of normal values rounded to the dtype: values for the
// reference, bits for the device.
struct FlexTensor {
  std::vector<double> values;
  DeviceBuffer device;
};
FlexTensor random_flex_tensor(int64_t rows, int64_t heads, int64_t head_dim, DType dtype,
                              std::mt19937_64* rng);

// One flex case's inputs and mod data, host and device: params (q, k, v and the flex and varlen
// fields set; o and lse left to the caller) for the GPU, the host mods and BlockMask for the
// float64 references (forward and backward).
struct FlexData {
  FlexCase c;
  bool varlen = false;
  int64_t batch = 0, rows_q = 0, rows_k = 0, seqlen_q = 0, seqlen_k = 0;
  std::vector<int32_t> cu_q, cu_k, doc_q, doc_k, prefixes;
  std::vector<float> slopes, bias, sinks;
  FlexTensor q, k, v;
  DeviceBuffer d_doc_q, d_doc_k, d_prefixes, d_slopes, d_bias, d_sinks, d_cu_q, d_cu_k;
  DeviceBuffer d_counts, d_indices, d_full_counts, d_full_indices;
  flex::BuiltinMask host_mask;  // the window ANDed in, as the kernels run it
  flex::BuiltinScoreMod host_score;
  flex::HostBlockMask host_blocks;
  AttentionParams params;

  Strides q_strides() const;  // of q, o, dO and dq
  Strides k_strides() const;  // of k, v, dk and dv
  // The reference's problem (host arrays); its block_mask is left to the caller (a view of
  // host_blocks that must outlive it).
  reference::FlexReferenceProblem reference_problem() const;
};
// Draws c's inputs and mod data from rng; failures are test failures.
void make_flex_data(const FlexCase& c, std::mt19937_64* rng, FlexData* data);

// Runs c on the GPU and the reference on the CPU; failures to run are test failures (ADD_FAILURE)
// and leave *result empty.
void run_flex_case(const FlexCase& c, FlexResult* result);

// A default case named name, edited by edit.
FlexCase make_flex_case(std::string name, void (*edit)(FlexCase&));
// The shared case list (flex_cases.cpp), on the default backend (sm80).
std::vector<FlexCase> flex_cases();
// The shared list's decode cases: one query tile per (batch, head) over long keys, named
// decode_* or chunk_*, whose keys the sm80 kernel splits.
inline bool is_decode_case(const FlexCase& c) {
  return c.name.rfind("decode", 0) == 0 || c.name.rfind("chunk", 0) == 0;
}
// Cases that must have rows that see no key (so that part of the check can fail).
inline constexpr const char* kMaskedRowCases[] = {"documents_cross_masked_rows",
                                                  "block_mask_random_empty_rows"};

}  // namespace flashcore::testing
