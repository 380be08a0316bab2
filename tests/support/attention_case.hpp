// Test support: one attention problem ("case") with fresh random inputs on host and device, the
// float64 reference, poisoned outputs, and the comparison the tolerances apply to.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "flashcore/attention.hpp"
#include "src/common/head_dim.hpp"
#include "src/common/pruning.hpp"

namespace flashcore::testing {

// Skips the test, loudly, when there is no usable CUDA device.
bool cuda_device_available(std::string* why);
#define FLASHCORE_REQUIRE_GPU()                                    \
  do {                                                             \
    std::string why_no_gpu;                                        \
    if (!::flashcore::testing::cuda_device_available(&why_no_gpu)) \
      GTEST_SKIP() << "GPU test skipped: " << why_no_gpu;          \
  } while (0)

// The current device is sm_90 (what the sm90 kernels need); false without a device.
bool on_sm90();

// cu_seqlens of sequences of these lengths: 0, then the running sums.
std::vector<int32_t> cu_seqlens_of(const std::vector<int32_t>& lengths);

// Skips the test, loudly, when this build has no kernel for (dtype, head_dim): a build pruned by
// FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES leaves some out, and a test of them would fail on a
// kernel that was never compiled rather than on a wrong one.
#define FLASHCORE_SKIP_IF_PRUNED(dtype, head_dim)                                         \
  do {                                                                                    \
    const char* pruned_why = ::flashcore::detail::pruned_reason(                          \
        (dtype), ::flashcore::detail::instantiated_head_dim(head_dim));                   \
    if (pruned_why[0] != '\0') GTEST_SKIP() << "test skipped: this build " << pruned_why; \
  } while (0)

#define CUDA_ASSERT_OK(expr)                                     \
  do {                                                           \
    const cudaError_t cuda_assert_err = (expr);                  \
    ASSERT_EQ(cuda_assert_err, cudaSuccess)                      \
        << #expr << ": " << cudaGetErrorString(cuda_assert_err); \
  } while (0)

// How a tensor is laid out in memory; every layout is passed to the API through strides.
enum class Layout {
  kBSHD,    // contiguous [B, S, H, D]
  kBHSD,    // contiguous [B, H, S, D]
  kPadded,  // BSHD with 8 extra elements after every head row and every sequence row
};

struct AttentionCase {
  DType dtype = DType::kFloat16;
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 64;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.f;
  float softmax_scale = 0.f;
  Layout layout = Layout::kBSHD;
  bool with_lse = true;

  std::string name() const;
};

// fp16/bf16 bits <-> float on the host.
uint16_t to_bits(float value, DType dtype);
float from_bits(uint16_t bits, DType dtype);

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  cudaError_t status() const { return status_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  cudaError_t status_ = cudaSuccess;
};

// One rank-4 tensor in a given layout: the (rounded) values in contiguous BSHD order for the
// reference, and a device copy laid out as asked.
struct CaseTensor {
  int64_t batch, seqlen, heads, head_dim;
  Strides strides;
  size_t elements;             // of the allocation, padding included
  std::vector<double> values;  // contiguous BSHD, exactly representable in the dtype
  DeviceBuffer device;
};

// A tensor of c's dtype and layout with `heads` heads of `seqlen` rows: filled with fresh normal
// values from rng (the padding poisoned), or, with fill false, allocated only (poison it before a
// kernel writes it). The backward's tests build their dO and gradients with it.
CaseTensor make_case_tensor(const AttentionCase& c, int64_t seqlen, int64_t heads,
                            std::mt19937_64* rng, bool fill);
// Reads t back in contiguous BSHD order and checks that its padding still holds the poison.
std::vector<double> read_case_tensor(const CaseTensor& t, DType dtype, bool* padding_untouched);
// Fills t's whole allocation (padding included) with NaN bits, so unwritten elements cannot pass.
void poison_case_tensor(const CaseTensor& t);

// Everything a test needs for one case: inputs, the reference, poisoned outputs.
class CaseData {
 public:
  // Draws fresh inputs from a seed that each run picks anew (printed on failure).
  explicit CaseData(const AttentionCase& c);

  AttentionParams params(Backend backend) const;
  // Fills O (padding included) and LSE with NaN so unwritten elements cannot pass.
  void poison_outputs();
  void compute_reference();  // float64 CPU reference

  const AttentionCase& spec() const { return c_; }
  uint64_t seed() const { return seed_; }
  const std::vector<double>& ref_o() const { return ref_o_; }
  const std::vector<double>& ref_lse() const { return ref_lse_; }
  const CaseTensor& q() const { return q_; }
  const CaseTensor& v() const { return v_; }
  const CaseTensor& o() const { return o_; }
  float* lse_device() const { return static_cast<float*>(lse_.get()); }

  // Reads O back in BSHD order (values) and checks the padding is still poison.
  std::vector<double> read_o(bool* padding_untouched) const;
  std::vector<float> read_lse() const;

 private:
  AttentionCase c_;
  uint64_t seed_;
  CaseTensor q_, k_, v_, o_;
  DeviceBuffer lse_;
  std::vector<double> ref_o_, ref_lse_;
};

struct Errors {
  double rel_l2 = 0;              // ||out - ref|| / ||ref|| over O
  double lse_max_abs = 0;         // over rows with finite reference LSE
  int64_t nan_count = 0;          // NaN or inf in O, or NaN in LSE
  int64_t masked_row_errors = 0;  // fully masked rows whose O != 0 or LSE != -inf
};
// lse may be null (not requested); ref_lse always marks the fully masked rows (-inf).
Errors compare(const AttentionCase& c, const std::vector<double>& o,
               const std::vector<double>& ref_o, const std::vector<float>* lse,
               const std::vector<double>& ref_lse);

// The fp32 GPU oracle's O and LSE for a case, for shapes too large for the CPU reference. Failures
// are reported as test failures (EXPECT).
struct OracleOutput {
  std::vector<double> o;
  std::vector<double> lse;
};
OracleOutput run_oracle(const CaseData& data);

double tolerance(DType dtype);  // relative L2: reference/tolerance.hpp
constexpr double kLseTolerance = 1e-2;

}  // namespace flashcore::testing
