#include "backward_data.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "case_data.hpp"
#include "common/fp16_bf16.hpp"
#include "parity.hpp"
#include "reference/cpu_backward_reference.hpp"
#include "reference_output.hpp"

namespace flashcore::bench {
namespace {

bool cuda_ok(cudaError_t err, const std::string& what, std::string* error) {
  if (err == cudaSuccess) return true;
  *error = what + ": " + cudaGetErrorString(err);
  cudaGetLastError();
  return false;
}

std::vector<double> exact_prefix(const std::vector<uint16_t>& bits, size_t n, DType dtype) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = detail::bits_to_float(bits[i], dtype);
  return out;
}

}  // namespace

BackwardData::~BackwardData() { release(); }

void BackwardData::release() {
  for (void* p : buffers_) cudaFree(p);
  buffers_.clear();
  sets_.clear();
}

BackwardParams BackwardData::params(int set) const {
  const Case& c = case_;
  const BackwardTensors& t = sets_[set];
  BackwardParams p;
  p.batch = c.batch;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = c.head_dim;
  const Strides q_strides = bshd_strides(c.seqlen_q, c.heads_q, c.head_dim);
  const Strides kv_strides = bshd_strides(c.seqlen_k, c.heads_kv, c.head_dim);
  p.q = {t.q, dtype_, q_strides};
  p.k = {t.k, dtype_, kv_strides};
  p.v = {t.v, dtype_, kv_strides};
  p.o = {t.o, dtype_, q_strides};
  p.d_o = {t.d_o, dtype_, q_strides};
  p.lse = t.lse;
  p.dq = {t.dq, dtype_, q_strides};
  p.dk = {t.dk, dtype_, kv_strides};
  p.dv = {t.dv, dtype_, kv_strides};
  p.causal = c.causal;
  p.window_left = c.window_left;
  return p;
}

bool BackwardData::prepare(const Case& c, size_t l2_bytes, cudaStream_t stream,
                           std::string* error) {
  release();
  case_ = c;
  dtype_ = c.dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  const size_t q_elems = static_cast<size_t>(c.batch * c.seqlen_q * c.heads_q * c.head_dim);
  const size_t kv_elems = static_cast<size_t>(c.batch * c.seqlen_k * c.heads_kv * c.head_dim);
  const size_t lse_elems = static_cast<size_t>(c.batch * c.heads_q * c.seqlen_q);
  // Q, O, dO, dQ and K, V, dK, dV in 16 bits, LSE in fp32.
  const size_t set_bytes = 2 * (4 * q_elems + 4 * kv_elems) + 4 * lse_elems;

  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  if (set_bytes > free_bytes) {
    *error = "needs " + std::to_string(set_bytes >> 20) + " MiB for one set, " +
             std::to_string(free_bytes >> 20) + " MiB free";
    return false;
  }
  const int sets = rotation_set_count(set_bytes, l2_bytes, free_bytes);

  const uint64_t seed = std::hash<std::string>{}(c.label());
  std::vector<uint16_t> q_bits, k_bits, v_bits, do_bits;
  fill_random(dtype_, seed ^ 0x51, q_elems, &q_bits, nullptr);
  fill_random(dtype_, seed ^ 0x4B, kv_elems, &k_bits, nullptr);
  fill_random(dtype_, seed ^ 0x56, kv_elems, &v_bits, nullptr);
  fill_random(dtype_, seed ^ 0x64, q_elems, &do_bits, nullptr);

  auto alloc = [&](size_t bytes, void** p, const char* what) {
    const bool ok = cuda_ok(cudaMalloc(p, bytes), std::string("cudaMalloc ") + what, error);
    if (ok) buffers_.push_back(*p);
    return ok;
  };
  auto upload = [&](void* dst, const std::vector<uint16_t>& bits, const char* what) {
    return cuda_ok(cudaMemcpy(dst, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice),
                   std::string("upload ") + what, error);
  };
  for (int s = 0; s < sets; ++s) {
    void *q, *k, *v, *o, *d_o, *lse, *dq, *dk, *dv;
    if (!alloc(2 * q_elems, &q, "q") || !alloc(2 * kv_elems, &k, "k") ||
        !alloc(2 * kv_elems, &v, "v") || !alloc(2 * q_elems, &o, "o") ||
        !alloc(2 * q_elems, &d_o, "dO") || !alloc(4 * lse_elems, &lse, "lse") ||
        !alloc(2 * q_elems, &dq, "dQ") || !alloc(2 * kv_elems, &dk, "dK") ||
        !alloc(2 * kv_elems, &dv, "dV")) {
      return false;
    }
    // Every set holds the same values: rotation is about where they live, not what they are.
    if (!upload(q, q_bits, "q") || !upload(k, k_bits, "k") || !upload(v, v_bits, "v") ||
        !upload(d_o, do_bits, "dO")) {
      return false;
    }
    // O and LSE are the forward's, as a training step hands them to the backward.
    AttentionParams f = case_params(c, q, k, v, o);
    f.lse = static_cast<float*>(lse);
    f.stream = stream;
    if (const Status status = run(f); !status.ok()) {
      *error = "the forward for O and LSE failed: " + status.message;
      return false;
    }
    sets_.push_back({q, k, v, o, d_o, static_cast<const float*>(lse), dq, dk, dv});
  }
  if (!cuda_ok(cudaStreamSynchronize(stream), "the forward for O and LSE", error)) return false;

  // Batch 0 is a contiguous prefix of every BSHD tensor.
  const size_t q0 = q_elems / static_cast<size_t>(c.batch);
  const size_t kv0 = kv_elems / static_cast<size_t>(c.batch);
  BackwardParams ref = params(0);
  ref.batch = 1;
  reference::cpu_attention_backward(
      ref, exact_prefix(q_bits, q0, dtype_), exact_prefix(k_bits, kv0, dtype_),
      exact_prefix(v_bits, kv0, dtype_), exact_prefix(do_bits, q0, dtype_), &dq_ref_, &dk_ref_,
      &dv_ref_);
  reference_kind_ = c.batch == 1 ? "cpu-fp64" : "cpu-fp64 (batch 0; NaN/Inf: all)";
  return true;
}

void BackwardData::poison_gradients(cudaStream_t stream) const {
  // 0xFFFF is a NaN in both fp16 and bf16.
  const BackwardTensors& t = sets_[0];
  const size_t q_bytes = 2 * static_cast<size_t>(case_.batch) * dq_ref_.size();
  const size_t kv_bytes = 2 * static_cast<size_t>(case_.batch) * dk_ref_.size();
  cudaMemsetAsync(t.dq, 0xFF, q_bytes, stream);
  cudaMemsetAsync(t.dk, 0xFF, kv_bytes, stream);
  cudaMemsetAsync(t.dv, 0xFF, kv_bytes, stream);
}

bool BackwardData::check_gradients(cudaStream_t stream, Parity* parity, std::string* error) const {
  const BackwardTensors& t = sets_[0];
  const size_t batch = static_cast<size_t>(case_.batch);
  Parity worst;
  worst.reference = reference_kind_;
  worst.tolerance = parity_tolerance(case_.dtype);
  const std::pair<void*, const std::vector<double>*> grads[] = {
      {t.dq, &dq_ref_}, {t.dk, &dk_ref_}, {t.dv, &dv_ref_}};
  for (const auto& [device, ref] : grads) {
    std::vector<uint16_t> bits(batch * ref->size());
    if (!cuda_ok(
            cudaMemcpyAsync(bits.data(), device, bits.size() * 2, cudaMemcpyDeviceToHost, stream),
            "download gradients", error) ||
        !cuda_ok(cudaStreamSynchronize(stream), "target run", error)) {
      return false;
    }
    std::vector<float> out(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) out[i] = detail::bits_to_float(bits[i], dtype_);
    for (size_t i = ref->size(); i < out.size(); ++i) {
      if (!std::isfinite(out[i])) worst.has_nan = true;
    }
    const Parity p =
        compare_outputs(out.data(), ref->data(), ref->size(), case_.dtype, reference_kind_);
    worst.has_nan = worst.has_nan || p.has_nan;
    worst.rel_l2 = std::max(worst.rel_l2, p.rel_l2);
  }
  worst.passed = !worst.has_nan && worst.rel_l2 <= worst.tolerance;
  *parity = worst;
  return true;
}

}  // namespace flashcore::bench
