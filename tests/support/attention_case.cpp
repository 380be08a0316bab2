#include "tests/support/attention_case.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "common/fp16_bf16.hpp"
#include "reference/cpu_reference.hpp"
#include "reference/gpu_oracle.hpp"
#include "reference/tolerance.hpp"

namespace flashcore::testing {
namespace {

// 0xFFFF is a NaN in both fp16 and bf16, so a poisoned element that is never written fails.
constexpr uint16_t kPoisonBits = 0xFFFF;
constexpr int64_t kPadElements = 8;  // keeps padded rows 16-byte aligned

Strides layout_strides(Layout layout, int64_t seqlen, int64_t heads, int64_t head_dim) {
  switch (layout) {
    case Layout::kBSHD:
      return bshd_strides(seqlen, heads, head_dim);
    case Layout::kBHSD:
      return bhsd_strides(seqlen, heads, head_dim);
    case Layout::kPadded: {
      const int64_t head = head_dim + kPadElements;
      const int64_t seq = heads * head + kPadElements;
      return {seqlen * seq, seq, head, 1};
    }
  }
  return {};
}

size_t allocation_elements(const Strides& s, int64_t batch, int64_t seqlen, int64_t heads,
                           int64_t head_dim, Layout layout) {
  const int64_t last =
      (batch - 1) * s.batch + (seqlen - 1) * s.seq + (heads - 1) * s.head + head_dim;
  // Padded tensors also own the padding after their last row, so it can be checked for writes.
  return static_cast<size_t>(layout == Layout::kPadded ? batch * s.batch : last);
}

int64_t offset(const Strides& s, int64_t b, int64_t i, int64_t h) {
  return b * s.batch + i * s.seq + h * s.head;
}

}  // namespace

CaseTensor make_case_tensor(const AttentionCase& c, int64_t seqlen, int64_t heads,
                            std::mt19937_64* rng, bool fill) {
  CaseTensor t{
      c.batch, seqlen, heads, c.head_dim, layout_strides(c.layout, seqlen, heads, c.head_dim),
      0,       {},     {}};
  t.elements = allocation_elements(t.strides, c.batch, seqlen, heads, c.head_dim, c.layout);
  t.device = DeviceBuffer(t.elements * sizeof(uint16_t));
  if (!fill) return t;
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<uint16_t> bits(t.elements, kPoisonBits);
  t.values.resize(static_cast<size_t>(c.batch * seqlen * heads * c.head_dim));
  size_t index = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t i = 0; i < seqlen; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < c.head_dim; ++d) {
          const uint16_t value_bits = to_bits(normal(*rng), c.dtype);
          bits[static_cast<size_t>(offset(t.strides, b, i, h) + d)] = value_bits;
          t.values[index++] = from_bits(value_bits, c.dtype);
        }
      }
    }
  }
  if (t.device.get() != nullptr) {
    cudaMemcpy(t.device.get(), bits.data(), bits.size() * sizeof(uint16_t), cudaMemcpyHostToDevice);
  }
  return t;
}

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    *why = std::string("no CUDA device (") +
           (err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0") + ")";
    return false;
  }
  return true;
}

bool on_sm90() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
}

std::vector<int32_t> cu_seqlens_of(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> cu{0};
  for (int32_t n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

std::string AttentionCase::name() const {
  std::ostringstream out;
  out << (dtype == DType::kFloat16 ? "fp16" : "bf16") << "_b" << batch << "_sq" << seqlen_q << "_sk"
      << seqlen_k << "_hq" << heads_q << "_hkv" << heads_kv << "_d" << head_dim;
  if (causal) out << "_causal";
  // Test names allow only [A-Za-z0-9_]: an unbounded side is written "inf".
  auto side = [](int64_t w) { return w < 0 ? std::string("inf") : std::to_string(w); };
  if (window_left >= 0 || window_right >= 0)
    out << "_win" << side(window_left) << "x" << side(window_right);
  if (softcap > 0) out << "_softcap" << static_cast<int>(softcap);
  if (softmax_scale != 0) out << "_scaled";
  if (layout == Layout::kBHSD) out << "_bhsd";
  if (layout == Layout::kPadded) out << "_padded";
  if (!with_lse) out << "_nolse";
  return out.str();
}

uint16_t to_bits(float value, DType dtype) { return detail::float_to_bits(value, dtype); }

float from_bits(uint16_t bits, DType dtype) { return detail::bits_to_float(bits, dtype); }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  status_ = cudaMalloc(&ptr_, bytes);
  if (status_ != cudaSuccess) {
    cudaGetLastError();
    ptr_ = nullptr;
  }
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    status_ = other.status_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

CaseData::CaseData(const AttentionCase& c) : c_(c), seed_(std::random_device{}()) {
  std::mt19937_64 rng(seed_);
  q_ = make_case_tensor(c, c.seqlen_q, c.heads_q, &rng, true);
  k_ = make_case_tensor(c, c.seqlen_k, c.heads_kv, &rng, true);
  v_ = make_case_tensor(c, c.seqlen_k, c.heads_kv, &rng, true);
  o_ = make_case_tensor(c, c.seqlen_q, c.heads_q, &rng, false);
  lse_ = DeviceBuffer(static_cast<size_t>(c.batch * c.heads_q * c.seqlen_q) * sizeof(float));
}

AttentionParams CaseData::params(Backend backend) const {
  AttentionParams p;
  p.batch = c_.batch;
  p.seqlen_q = c_.seqlen_q;
  p.seqlen_k = c_.seqlen_k;
  p.heads_q = c_.heads_q;
  p.heads_kv = c_.heads_kv;
  p.head_dim = c_.head_dim;
  p.q = {q_.device.get(), c_.dtype, q_.strides};
  p.k = {k_.device.get(), c_.dtype, k_.strides};
  p.v = {v_.device.get(), c_.dtype, v_.strides};
  p.o = {o_.device.get(), c_.dtype, o_.strides};
  p.lse = c_.with_lse ? lse_device() : nullptr;
  p.softmax_scale = c_.softmax_scale;
  p.causal = c_.causal;
  p.window_left = c_.window_left;
  p.window_right = c_.window_right;
  p.softcap = c_.softcap;
  p.backend = backend;
  return p;
}

void poison_case_tensor(const CaseTensor& t) {
  cudaMemset(t.device.get(), 0xFF, t.elements * sizeof(uint16_t));
}

void CaseData::poison_outputs() {
  cudaMemset(o_.device.get(), 0xFF, o_.elements * sizeof(uint16_t));
  cudaMemset(lse_.get(), 0xFF, lse_.bytes());  // 0xFFFFFFFF is a float NaN
}

void CaseData::compute_reference() {
  reference::cpu_attention(params(Backend::kAuto), q_.values, k_.values, v_.values, &ref_o_,
                           &ref_lse_);
}

std::vector<double> read_case_tensor(const CaseTensor& t, DType dtype, bool* padding_untouched) {
  std::vector<uint16_t> bits(t.elements);
  cudaMemcpy(bits.data(), t.device.get(), bits.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost);
  std::vector<bool> is_element(bits.size(), false);
  std::vector<double> values(static_cast<size_t>(t.batch * t.seqlen * t.heads * t.head_dim));
  size_t index = 0;
  for (int64_t b = 0; b < t.batch; ++b) {
    for (int64_t i = 0; i < t.seqlen; ++i) {
      for (int64_t h = 0; h < t.heads; ++h) {
        for (int64_t d = 0; d < t.head_dim; ++d) {
          const size_t at = static_cast<size_t>(offset(t.strides, b, i, h) + d);
          is_element[at] = true;
          values[index++] = from_bits(bits[at], dtype);
        }
      }
    }
  }
  *padding_untouched = true;
  for (size_t at = 0; at < bits.size(); ++at) {
    if (!is_element[at] && bits[at] != kPoisonBits) *padding_untouched = false;
  }
  return values;
}

std::vector<double> CaseData::read_o(bool* padding_untouched) const {
  return read_case_tensor(o_, c_.dtype, padding_untouched);
}

std::vector<float> CaseData::read_lse() const {
  std::vector<float> lse(lse_.bytes() / sizeof(float));
  cudaMemcpy(lse.data(), lse_.get(), lse_.bytes(), cudaMemcpyDeviceToHost);
  return lse;
}

Errors compare(const AttentionCase& c, const std::vector<double>& o,
               const std::vector<double>& ref_o, const std::vector<float>* lse,
               const std::vector<double>& ref_lse) {
  Errors e;
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    if (!std::isfinite(o[i])) {
      ++e.nan_count;
      continue;
    }
    diff2 += (o[i] - ref_o[i]) * (o[i] - ref_o[i]);
    ref2 += ref_o[i] * ref_o[i];
  }
  e.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads_q; ++h) {
      for (int64_t i = 0; i < c.seqlen_q; ++i) {
        const size_t row = static_cast<size_t>((b * c.heads_q + h) * c.seqlen_q + i);
        const bool masked = std::isinf(ref_lse[row]);
        if (masked) {
          bool zero = true;
          for (int64_t d = 0; d < c.head_dim; ++d) {
            zero &=
                o[static_cast<size_t>(((b * c.seqlen_q + i) * c.heads_q + h) * c.head_dim + d)] ==
                0.0;
          }
          const bool lse_ok = lse == nullptr || (std::isinf((*lse)[row]) && (*lse)[row] < 0);
          if (!zero || !lse_ok) ++e.masked_row_errors;
          continue;
        }
        if (lse == nullptr) continue;
        const float value = (*lse)[row];
        if (std::isnan(value) || std::isinf(value)) {
          ++e.nan_count;
          continue;
        }
        e.lse_max_abs = std::max(e.lse_max_abs, std::abs(value - ref_lse[row]));
      }
    }
  }
  return e;
}

double tolerance(DType dtype) { return reference::parity_tolerance(dtype); }

OracleOutput run_oracle(const CaseData& data) {
  const AttentionCase& c = data.spec();
  const size_t o_elements = static_cast<size_t>(c.batch * c.seqlen_q * c.heads_q * c.head_dim);
  const size_t rows = static_cast<size_t>(c.batch * c.heads_q * c.seqlen_q);
  DeviceBuffer o(o_elements * sizeof(float)), lse(rows * sizeof(float));
  const Status s = reference::gpu_oracle(data.params(Backend::kAuto), static_cast<float*>(o.get()),
                                         static_cast<float*>(lse.get()), nullptr);
  EXPECT_TRUE(s.ok()) << s.message;
  std::vector<float> o_host(o_elements), lse_host(rows);
  EXPECT_EQ(cudaMemcpy(o_host.data(), o.get(), o.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(lse_host.data(), lse.get(), lse.bytes(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return {std::vector<double>(o_host.begin(), o_host.end()),
          std::vector<double>(lse_host.begin(), lse_host.end())};
}

}  // namespace flashcore::testing
