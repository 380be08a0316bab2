// Inputs and reference output of one case, shared by every target that runs it: fresh random
// Q/K/V (seeded by the case label), replicated into enough sets that rotating through them
// exceeds L2, and the reference O (float64 CPU for small problems, fp32 GPU oracle for large).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/attention.hpp"
#include "model.hpp"
#include "parity.hpp"

namespace flashcore::bench {

// Uniform values in [-1, 1) rounded to `dtype`, as 16-bit patterns, deterministic for a seed (the
// cases seed it with their label). `exact`, when not null, receives the rounded values so that a
// CPU reference sees exactly what the kernels read. The ceilings fill their inputs with it too:
// the lab never times on zeros.
void fill_random(DType dtype, uint64_t seed, size_t n, std::vector<uint16_t>* bits,
                 std::vector<double>* exact);

class CaseData {
 public:
  CaseData() = default;
  ~CaseData();
  CaseData(const CaseData&) = delete;
  CaseData& operator=(const CaseData&) = delete;

  // Allocates and fills the sets and computes the reference. Returns false with a reason (e.g.
  // not enough device memory) when the case cannot be run at all.
  bool prepare(const Case& c, size_t l2_bytes, cudaStream_t stream, std::string* error);

  const Case& get_case() const { return case_; }
  int sets() const { return static_cast<int>(q_.size()); }
  // Params for flashcore::run reading set `set` (backend and stream left for the caller).
  AttentionParams params(int set) const;
  const void* q(int set) const { return q_[set]; }
  const void* k(int set) const { return k_[set]; }
  const void* v(int set) const { return v_[set]; }
  void* o(int set) const { return o_[set]; }

  // Fills set 0's output with NaN so that elements a kernel fails to write fail the gate.
  void poison_output(cudaStream_t stream) const;
  // Reads set 0's output back and compares it with the reference (synchronizes the stream).
  bool check_output(cudaStream_t stream, Parity* parity, std::string* error) const;

 private:
  void release();

  Case case_;
  DType dtype_ = DType::kFloat16;
  std::vector<void*> q_, k_, v_, o_;
  std::vector<double> reference_;
  std::string reference_kind_;
};

}  // namespace flashcore::bench
