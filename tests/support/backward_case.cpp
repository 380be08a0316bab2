#include "tests/support/backward_case.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>

#include "common/backward_problem.hpp"
#include "common/key_block_rows.hpp"
#include "reference/cpu_backward_reference.hpp"

namespace flashcore::testing {

double rel_l2(const std::vector<double>& out, const std::vector<double>& ref, int64_t* nan_count) {
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++*nan_count;
      continue;
    }
    diff2 += (out[i] - ref[i]) * (out[i] - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  return ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
}

std::string BackwardCase::name() const {
  return shape.name() + (deterministic ? "_deterministic" : "") +
         (backend == Backend::kAuto ? "" : std::string("_") + backend_name(backend));
}

BackwardData::BackwardData(const BackwardCase& c) : c_(c), seed_(std::random_device{}()) {
  const AttentionCase& s = c.shape;
  std::mt19937_64 rng(seed_);
  q_ = make_case_tensor(s, s.seqlen_q, s.heads_q, &rng, true);
  k_ = make_case_tensor(s, s.seqlen_k, s.heads_kv, &rng, true);
  v_ = make_case_tensor(s, s.seqlen_k, s.heads_kv, &rng, true);
  d_o_ = make_case_tensor(s, s.seqlen_q, s.heads_q, &rng, true);
  o_ = make_case_tensor(s, s.seqlen_q, s.heads_q, &rng, false);
  dq_ = make_case_tensor(s, s.seqlen_q, s.heads_q, &rng, false);
  dk_ = make_case_tensor(s, s.seqlen_k, s.heads_kv, &rng, false);
  dv_ = make_case_tensor(s, s.seqlen_k, s.heads_kv, &rng, false);
  lse_ = DeviceBuffer(static_cast<size_t>(s.batch * s.heads_q * s.seqlen_q) * sizeof(float));

  AttentionParams forward = detail::forward_params(params());
  forward.lse = static_cast<float*>(lse_.get());
  forward_status_ = run(forward);
  if (forward_status_.ok()) {
    if (cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess) {
      forward_status_ = {StatusCode::kCudaError, cudaGetErrorString(err)};
    }
  }
}

BackwardParams BackwardData::params() const {
  const AttentionCase& s = c_.shape;
  BackwardParams p;
  p.batch = s.batch;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = s.head_dim;
  p.q = {q_.device.get(), s.dtype, q_.strides};
  p.k = {k_.device.get(), s.dtype, k_.strides};
  p.v = {v_.device.get(), s.dtype, v_.strides};
  p.o = {o_.device.get(), s.dtype, o_.strides};
  p.d_o = {d_o_.device.get(), s.dtype, d_o_.strides};
  p.lse = static_cast<const float*>(lse_.get());
  p.dq = {dq_.device.get(), s.dtype, dq_.strides};
  p.dk = {dk_.device.get(), s.dtype, dk_.strides};
  p.dv = {dv_.device.get(), s.dtype, dv_.strides};
  p.softmax_scale = s.softmax_scale;
  p.causal = s.causal;
  p.window_left = s.window_left;
  p.window_right = s.window_right;
  p.softcap = s.softcap;
  p.deterministic = c_.deterministic;
  p.backend = c_.backend;
  return p;
}

void BackwardData::poison_gradients() {
  poison_case_tensor(dq_);
  poison_case_tensor(dk_);
  poison_case_tensor(dv_);
}

void BackwardData::compute_reference() {
  reference::cpu_attention_backward(params(), q_.values, k_.values, v_.values, d_o_.values,
                                    &ref_.dq, &ref_.dk, &ref_.dv);
}

Gradients BackwardData::read_gradients() const {
  Gradients g;
  bool untouched[3] = {true, true, true};
  g.dq = read_case_tensor(dq_, c_.shape.dtype, &untouched[0]);
  g.dk = read_case_tensor(dk_, c_.shape.dtype, &untouched[1]);
  g.dv = read_case_tensor(dv_, c_.shape.dtype, &untouched[2]);
  g.padding_untouched = untouched[0] && untouched[1] && untouched[2];
  return g;
}

std::vector<uint16_t> BackwardData::read_gradient_bits() const {
  std::vector<uint16_t> bits;
  for (const CaseTensor* t : {&dq_, &dk_, &dv_}) {
    std::vector<uint16_t> part(t->elements);
    cudaMemcpy(part.data(), t->device.get(), part.size() * sizeof(uint16_t),
               cudaMemcpyDeviceToHost);
    bits.insert(bits.end(), part.begin(), part.end());
  }
  return bits;
}

GradientErrors compare_gradients(const BackwardCase& c, const Gradients& out,
                                 const Gradients& ref) {
  const AttentionCase& s = c.shape;
  GradientErrors e;
  e.rel_l2_dq = rel_l2(out.dq, ref.dq, &e.nan_count);
  e.rel_l2_dk = rel_l2(out.dk, ref.dk, &e.nan_count);
  e.rel_l2_dv = rel_l2(out.dv, ref.dv, &e.nan_count);
  const WindowMask<int64_t> mask{s.seqlen_q, s.seqlen_k, s.window_left,
                                 s.causal ? 0 : s.window_right};
  const int64_t D = s.head_dim;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.seqlen_q; ++i) {
      if (mask.first_key(i) < mask.end_key(i)) continue;  // the row sees a key
      for (int64_t h = 0; h < s.heads_q; ++h) {
        for (int64_t d = 0; d < D; ++d) {
          e.zero_errors +=
              out.dq[static_cast<size_t>(((b * s.seqlen_q + i) * s.heads_q + h) * D + d)] != 0.0;
        }
      }
    }
    for (int64_t j = 0; j < s.seqlen_k; ++j) {
      const RowRange<int64_t> rows = rows_seeing_keys(mask, j, j + 1);
      if (rows.begin < rows.end) continue;  // some query sees the key
      for (int64_t h = 0; h < s.heads_kv; ++h) {
        for (int64_t d = 0; d < D; ++d) {
          const size_t at = static_cast<size_t>(((b * s.seqlen_k + j) * s.heads_kv + h) * D + d);
          e.zero_errors += (out.dk[at] != 0.0) + (out.dv[at] != 0.0);
        }
      }
    }
  }
  return e;
}

}  // namespace flashcore::testing
