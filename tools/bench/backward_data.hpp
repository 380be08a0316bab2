// Inputs and reference gradients of one backward case (Case::backward), shared by every backward
// target that runs it (flashcore's and cuDNN's): fresh random Q, K, V and dO (seeded by the case
// label, values in [-1, 1) as case_data.hpp's), O and LSE from flashcore's forward on them,
// replicated into enough sets that rotating through them exceeds L2, and dQ, dK, dV per set.
//
// The reference is the float64 CPU backward (reference/cpu_backward_reference.hpp) of batch 0,
// every head, recomputing the softmax from Q, K and V (never from the forward's O and LSE): the
// whole problem when B == 1. The other batches are checked for NaN and Inf only (the gradients are
// poisoned first, so unwritten elements fail too): a float64 reference of every batch would take
// minutes per case at B4 H16 S4096 D128, one head per core. The verdict is the largest of the rel
// L2 errors of dQ, dK and dV against the dtype's tolerance (reference/tolerance.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "flashcore/backward.hpp"
#include "model.hpp"

namespace flashcore::bench {

// The device tensors of one set, contiguous BSHD (lse [B, Hq, Sq], natural log).
struct BackwardTensors {
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* d_o;
  const float* lse;
  void* dq;
  void* dk;
  void* dv;
};

class BackwardData {
 public:
  BackwardData() = default;
  ~BackwardData();
  BackwardData(const BackwardData&) = delete;
  BackwardData& operator=(const BackwardData&) = delete;

  // Allocates and fills the sets, runs the forward and computes the reference. Returns false with
  // a reason when the case cannot be run at all (memory, a forward that fails).
  bool prepare(const Case& c, size_t l2_bytes, cudaStream_t stream, std::string* error);

  const Case& get_case() const { return case_; }
  int sets() const { return static_cast<int>(sets_.size()); }
  const BackwardTensors& tensors(int set) const { return sets_[set]; }
  // flashcore's params on set `set` (the forward's scale and mask; not deterministic).
  BackwardParams params(int set) const;

  // Fills set 0's gradients with NaN so that elements a kernel fails to write fail the gate.
  void poison_gradients(cudaStream_t stream) const;
  // Reads set 0's gradients back and compares them with the reference (synchronizes the stream).
  bool check_gradients(cudaStream_t stream, Parity* parity, std::string* error) const;

 private:
  void release();

  Case case_;
  DType dtype_ = DType::kFloat16;
  std::vector<BackwardTensors> sets_;
  std::vector<void*> buffers_;                    // every allocation, for release()
  std::vector<double> dq_ref_, dk_ref_, dv_ref_;  // batch 0
  std::string reference_kind_;
};

}  // namespace flashcore::bench
