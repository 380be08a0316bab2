#include "case_data.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

#include "common/fp16_bf16.hpp"
#include "parity.hpp"
#include "reference_output.hpp"

namespace flashcore::bench {
namespace {

// splitmix64: fast, well-mixed, and deterministic for a given seed.
uint64_t next_random(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool cuda_ok(cudaError_t err, const std::string& what, std::string* error) {
  if (err == cudaSuccess) return true;
  *error = what + ": " + cudaGetErrorString(err);
  cudaGetLastError();
  return false;
}

}  // namespace

void fill_random(DType dtype, uint64_t seed, size_t n, std::vector<uint16_t>* bits,
                 std::vector<double>* exact) {
  bits->resize(n);
  if (exact != nullptr) exact->resize(n);
  uint64_t state = seed;
  for (size_t i = 0; i < n; ++i) {
    const float x =
        static_cast<float>(static_cast<double>(next_random(&state) >> 11) * 0x1.0p-52 - 1.0);
    (*bits)[i] = detail::float_to_bits(x, dtype);
    if (exact != nullptr) (*exact)[i] = detail::bits_to_float((*bits)[i], dtype);
  }
}

CaseData::~CaseData() { release(); }

void CaseData::release() {
  for (auto* list : {&q_, &k_, &v_}) {
    for (void* p : *list) cudaFree(p);
    list->clear();
  }
  for (void* p : o_) cudaFree(p);
  o_.clear();
}

AttentionParams CaseData::params(int set) const {
  auto at = [&](const std::vector<void*>& buffers) {
    return buffers.empty() ? nullptr : buffers[set];
  };
  return case_params(case_, at(q_), at(k_), at(v_), at(o_));
}

bool CaseData::prepare(const Case& c, size_t l2_bytes, cudaStream_t stream, std::string* error) {
  release();
  case_ = c;
  dtype_ = c.dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  const size_t q_elems = static_cast<size_t>(c.batch * c.seqlen_q * c.heads_q * c.head_dim);
  const size_t kv_elems = static_cast<size_t>(c.batch * c.seqlen_k * c.heads_kv * c.head_dim);
  const size_t set_bytes = 2 * (2 * q_elems + 2 * kv_elems);

  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  const int sets = rotation_set_count(set_bytes, l2_bytes, free_bytes);
  // The oracle's fp32 output and LSE live next to one set during the reference.
  const size_t oracle_bytes =
      4 * q_elems + 4 * static_cast<size_t>(c.batch * c.heads_q * c.seqlen_q);
  if (set_bytes + oracle_bytes > free_bytes) {
    *error = "needs " + std::to_string((set_bytes + oracle_bytes) >> 20) + " MiB for inputs, " +
             std::to_string(free_bytes >> 20) + " MiB free";
    return false;
  }

  const uint64_t seed = std::hash<std::string>{}(c.label());
  std::vector<uint16_t> q_bits, k_bits, v_bits;
  std::vector<double> q_exact, k_exact, v_exact;
  const bool on_cpu = c.flops() <= kCpuReferenceMaxFlops;
  fill_random(dtype_, seed ^ 0x51, q_elems, &q_bits, on_cpu ? &q_exact : nullptr);
  fill_random(dtype_, seed ^ 0x4B, kv_elems, &k_bits, on_cpu ? &k_exact : nullptr);
  fill_random(dtype_, seed ^ 0x56, kv_elems, &v_bits, on_cpu ? &v_exact : nullptr);

  for (int s = 0; s < sets; ++s) {
    void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
    const bool ok = cuda_ok(cudaMalloc(&q, 2 * q_elems), "cudaMalloc q", error) &&
                    cuda_ok(cudaMalloc(&k, 2 * kv_elems), "cudaMalloc k", error) &&
                    cuda_ok(cudaMalloc(&v, 2 * kv_elems), "cudaMalloc v", error) &&
                    cuda_ok(cudaMalloc(&o, 2 * q_elems), "cudaMalloc o", error);
    q_.push_back(q);
    k_.push_back(k);
    v_.push_back(v);
    o_.push_back(o);
    if (!ok) return false;
    // Every set holds the same values: rotation is about where they live, not what they are.
    if (!cuda_ok(cudaMemcpy(q, q_bits.data(), 2 * q_elems, cudaMemcpyHostToDevice), "upload q",
                 error) ||
        !cuda_ok(cudaMemcpy(k, k_bits.data(), 2 * kv_elems, cudaMemcpyHostToDevice), "upload k",
                 error) ||
        !cuda_ok(cudaMemcpy(v, v_bits.data(), 2 * kv_elems, cudaMemcpyHostToDevice), "upload v",
                 error)) {
      return false;
    }
  }

  const HostValues host{&q_exact, &k_exact, &v_exact};
  return reference_output(params(0), on_cpu ? &host : nullptr, stream, &reference_,
                          &reference_kind_, error);
}

void CaseData::poison_output(cudaStream_t stream) const {
  // 0xFFFF is a NaN in both fp16 and bf16.
  cudaMemsetAsync(o_[0], 0xFF, reference_.size() * 2, stream);
}

bool CaseData::check_output(cudaStream_t stream, Parity* parity, std::string* error) const {
  std::vector<uint16_t> bits(reference_.size());
  if (!cuda_ok(cudaMemcpyAsync(bits.data(), o_[0], bits.size() * 2, cudaMemcpyDeviceToHost, stream),
               "download output", error) ||
      !cuda_ok(cudaStreamSynchronize(stream), "target run", error)) {
    return false;
  }
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = detail::bits_to_float(bits[i], dtype_);
  *parity =
      compare_outputs(out.data(), reference_.data(), out.size(), case_.dtype, reference_kind_);
  return true;
}

}  // namespace flashcore::bench
