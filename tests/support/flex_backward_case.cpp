#include "tests/support/flex_backward_case.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "common/backward_problem.hpp"
#include "reference/cpu_flex_backward_reference.hpp"
#include "sm80/sm80_bwd.hpp"
#include "tests/support/backward_case.hpp"

namespace flashcore::testing {
namespace {

// Rows (of head_dim elements) that must be exactly zero: dQ rows of rows that see no key
// (sees[row] == 0), or, without sees, rows whose reference is zero: dK and dV rows of keys no row
// sees (a seen key's dV, a sum of P dO, is nonzero with probability 1 on random inputs).
void check_zero_rows(const std::vector<double>& out, const std::vector<double>& ref,
                     const std::vector<uint8_t>* sees, int64_t head_dim, FlexBackwardResult* r) {
  for (size_t row = 0; row * static_cast<size_t>(head_dim) < ref.size(); ++row) {
    const size_t at = row * static_cast<size_t>(head_dim);
    bool zero = true;
    if (sees != nullptr) {
      zero = (*sees)[row] == 0;
    } else {
      for (int64_t d = 0; d < head_dim && zero; ++d) zero = ref[at + static_cast<size_t>(d)] == 0.0;
    }
    if (!zero) continue;
    ++r->zero_rows;
    for (int64_t d = 0; d < head_dim; ++d) {
      if (out[at + static_cast<size_t>(d)] != 0.0) {
        ++r->zero_errors;
        break;
      }
    }
  }
}

std::vector<double> read_back(const DeviceBuffer& buffer, size_t elements, DType dtype) {
  std::vector<uint16_t> bits(elements);
  EXPECT_EQ(cudaMemcpy(bits.data(), buffer.get(), elements * 2, cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::vector<double> values(elements);
  for (size_t i = 0; i < elements; ++i) values[i] = from_bits(bits[i], dtype);
  return values;
}

std::vector<double> read_back_floats(const DeviceBuffer& buffer) {
  std::vector<float> values(buffer.bytes() / sizeof(float));
  EXPECT_EQ(cudaMemcpy(values.data(), buffer.get(), buffer.bytes(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return std::vector<double>(values.begin(), values.end());
}

// The sink logits' gradient of the forward the GPU ran, in double: -sum over head h's rows of
// exp(sink[h] - LSE) (dO . O), from that forward's O and LSE. That is the gradient of the stored O,
// which every backward differentiates (D = rowsum(dO * O)); against the float64 forward's O it
// would also carry O's rounding to the dtype, which a decode row (one row per head, D a dot product
// that cancels) magnifies past the dtype's tolerance: 2-3% at bf16 in session 29's first run.
void sink_grad_of_forward(const FlexCase& c, const FlexData& data, const std::vector<double>& o,
                          const std::vector<double>& lse, const std::vector<double>& d_o,
                          std::vector<double>* d_sinks) {
  const int64_t heads = c.heads_q, D = c.head_dim;
  d_sinks->assign(static_cast<size_t>(heads), 0.0);
  for (int64_t row = 0; row < data.rows_q; ++row) {
    for (int64_t h = 0; h < heads; ++h) {
      // LSE: [heads, total_q] for a varlen batch, else [batch, heads, seqlen_q].
      const int64_t at =
          data.varlen ? h * data.rows_q + row
                      : (row / data.seqlen_q * heads + h) * data.seqlen_q + row % data.seqlen_q;
      const double row_lse = lse[static_cast<size_t>(at)];
      if (row_lse == -std::numeric_limits<double>::infinity()) continue;  // no key and no sink
      double dot = 0.0;
      for (int64_t d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>((row * heads + h) * D + d);
        dot += d_o[i] * o[i];
      }
      (*d_sinks)[static_cast<size_t>(h)] -=
          std::exp(static_cast<double>(data.sinks[static_cast<size_t>(h)]) - row_lse) * dot;
    }
  }
}

}  // namespace

BackwardParams flex_backward_params(const AttentionParams& f, const void* d_o, void* dq, void* dk,
                                    void* dv, Strides q_strides, Strides k_strides) {
  BackwardParams p;
  p.batch = f.batch;
  p.seqlen_q = f.seqlen_q;
  p.seqlen_k = f.seqlen_k;
  p.heads_q = f.heads_q;
  p.heads_kv = f.heads_kv;
  p.head_dim = f.head_dim;
  const DType dtype = f.q.dtype;
  p.q = f.q;
  p.k = f.k;
  p.v = f.v;
  p.o = {f.o.data, dtype, f.o.strides};
  p.d_o = {d_o, dtype, q_strides};
  p.lse = f.lse;
  p.dq = {dq, dtype, q_strides};
  p.dk = {dk, dtype, k_strides};
  p.dv = {dv, dtype, k_strides};
  p.softmax_scale = f.softmax_scale;
  p.causal = f.causal;
  p.window_left = f.window_left;
  p.window_right = f.window_right;
  p.softcap = f.softcap;
  p.cu_seqlens_q = f.cu_seqlens_q;
  p.cu_seqlens_k = f.cu_seqlens_k;
  p.max_seqlen_q = f.max_seqlen_q;
  p.max_seqlen_k = f.max_seqlen_k;
  p.flex = f.flex;
  return p;
}

void run_flex_backward_case(const FlexCase& c, FlexBackwardResult* result,
                            const FlexBackwardOptions& options) {
  *result = FlexBackwardResult{};
  const uint64_t seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
  SCOPED_TRACE(c.name + ", seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  FlexData data;
  make_flex_data(c, &rng, &data);
  if (::testing::Test::HasFatalFailure()) return;
  const int64_t D = c.head_dim;
  const size_t q_elems = static_cast<size_t>(data.rows_q * c.heads_q * D);
  const size_t k_elems = static_cast<size_t>(data.rows_k * c.heads_kv * D);
  FlexTensor d_o = random_flex_tensor(data.rows_q, c.heads_q, D, c.dtype, &rng);
  DeviceBuffer o(q_elems * 2), dq(q_elems * 2), dk(k_elems * 2), dv(k_elems * 2);
  DeviceBuffer lse(static_cast<size_t>(data.rows_q * c.heads_q) * sizeof(float));
  DeviceBuffer d_sinks(c.sinks ? static_cast<size_t>(c.heads_q) * sizeof(float) : 0);
  // NaN everywhere the kernels write: an element they miss cannot pass.
  for (const DeviceBuffer* b : {&o, &dq, &dk, &dv, &lse, &d_sinks}) {
    if (b->bytes() == 0) continue;  // no sinks: no d_sinks
    ASSERT_EQ(cudaMemset(b->get(), 0xff, b->bytes()), cudaSuccess);
  }

  // The forward (sm80: the flex kernels), for O and LSE.
  AttentionParams forward = data.params;
  forward.backend = Backend::kAuto;
  forward.o = {o.get(), c.dtype, data.q_strides()};
  forward.lse = static_cast<float*>(lse.get());
  const Status fs = run(forward);
  ASSERT_TRUE(fs.ok()) << "forward: " << fs.message;

  BackwardParams p = flex_backward_params(forward, d_o.device.get(), dq.get(), dk.get(), dv.get(),
                                          data.q_strides(), data.k_strides());
  p.backend = c.backend;
  p.deterministic = options.deterministic;
  p.d_sinks = static_cast<float*>(d_sinks.get());
  result->backend = resolve_backward_backend(p);
  // The sm80 launch for a given shared-memory size takes the workspace run_backward would
  // allocate itself: one for every run.
  const bool sm80_tile = options.sm80_smem_per_block != 0;
  if (sm80_tile) {
    const Status checked = can_implement_backward(p);
    ASSERT_TRUE(checked.ok()) << "backward: " << checked.message;
  }
  std::optional<detail::BackwardProblem> problem;
  if (sm80_tile) problem = detail::make_backward_problem(p);
  DeviceBuffer workspace(sm80_tile ? detail::sm80_backward_workspace_bytes(*problem) : 0);
  std::vector<uint8_t> first_bits;
  for (int run_index = 0; run_index < options.runs; ++run_index) {
    for (const DeviceBuffer* b : {&dq, &dk, &dv, &d_sinks}) {
      if (b->bytes() == 0) continue;
      ASSERT_EQ(cudaMemset(b->get(), 0xff, b->bytes()), cudaSuccess);
    }
    if (!sm80_tile) {
      const Status bs = run_backward(p, /*workspace=*/nullptr, 0, /*stream=*/nullptr);
      ASSERT_TRUE(bs.ok()) << "backward: " << bs.message;
    } else {
      const Status bs = detail::launch_sm80_backward_tile(
          *problem, workspace.get(), options.sm80_smem_per_block, /*stream=*/nullptr);
      ASSERT_TRUE(bs.ok()) << "backward: " << bs.message;
      result->backend = Backend::kSm80;
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> bits;
    for (const DeviceBuffer* b : {&dq, &dk, &dv, &d_sinks}) {
      if (b->bytes() == 0) continue;
      const size_t at = bits.size();
      bits.resize(at + b->bytes());
      ASSERT_EQ(cudaMemcpy(bits.data() + at, b->get(), b->bytes(), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    if (run_index == 0) {
      first_bits = std::move(bits);
    } else {
      for (size_t i = 0; i < bits.size(); ++i) {
        result->run_to_run_differences += bits[i] != first_bits[i] ? 1 : 0;
      }
    }
  }
  const std::vector<double> out_dq = read_back(dq, q_elems, c.dtype);
  const std::vector<double> out_dk = read_back(dk, k_elems, c.dtype);
  const std::vector<double> out_dv = read_back(dv, k_elems, c.dtype);

  reference::FlexReferenceProblem rp = data.reference_problem();
  const flex::BlockMask host_view = data.host_blocks.view();
  if (c.block_mask != BlockMaskKind::kNone) rp.block_mask = &host_view;
  std::vector<double> ref_dq, ref_dk, ref_dv;
  std::vector<uint8_t> row_sees_keys;
  // The gradients of the O the GPU stored (D = dO . O from it, as the kernels take it): a decode
  // row's dQ otherwise carries O's rounding through dS's cancellation (the reference's comment).
  const std::vector<double> stored_o = read_back(o, q_elems, c.dtype);
  const Status rs = reference::cpu_flex_attention_backward(
      rp, data.q.values, data.k.values, data.v.values, d_o.values, data.host_mask, data.host_score,
      &ref_dq, &ref_dk, &ref_dv, &row_sees_keys, &stored_o);
  ASSERT_TRUE(rs.ok()) << rs.message;
  if (c.sinks) {
    std::vector<float> out_d_sinks(static_cast<size_t>(c.heads_q));
    ASSERT_EQ(
        cudaMemcpy(out_d_sinks.data(), d_sinks.get(), d_sinks.bytes(), cudaMemcpyDeviceToHost),
        cudaSuccess);
    std::vector<double> ref_d_sinks;
    sink_grad_of_forward(c, data, stored_o, read_back_floats(lse), d_o.values, &ref_d_sinks);
    result->rel_l2_d_sinks = rel_l2(std::vector<double>(out_d_sinks.begin(), out_d_sinks.end()),
                                    ref_d_sinks, &result->nan_count);
  }

  result->rel_l2_dq = rel_l2(out_dq, ref_dq, &result->nan_count);
  result->rel_l2_dk = rel_l2(out_dk, ref_dk, &result->nan_count);
  result->rel_l2_dv = rel_l2(out_dv, ref_dv, &result->nan_count);
  check_zero_rows(out_dq, ref_dq, &row_sees_keys, D, result);
  check_zero_rows(out_dk, ref_dv, nullptr, D, result);  // dK's zero rows are dV's
  check_zero_rows(out_dv, ref_dv, nullptr, D, result);
}

}  // namespace flashcore::testing
