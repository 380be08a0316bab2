// What the in-process cuDNN peers (cudnn_peer.cpp, the forward; cudnn_backward_peer.cpp, the
// backward) share: a handle, the current case's graph with its workspace and variant pack, and the
// conventions that make cuDNN compute what flashcore computes (BSHD memory, bottom-right masks).
// Compiled only where the cuDNN frontend is found (CMakeLists.txt).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model.hpp"

namespace flashcore::bench::cudnn {
namespace fe = cudnn_frontend;

// The uids of the graphs' tensors, the keys of GraphState::pack: the forward's graph has Q, K, V
// and O; the backward's these four, dO, the softmax stats and the three gradients.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kDo, kStats, kDq, kDk, kDv };

struct GraphState {
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<fe::graph::Graph> graph;
  void* workspace = nullptr;
  std::unordered_map<int64_t, void*> pack;  // uid -> device pointer, filled before execute()

  GraphState() = default;
  GraphState(const GraphState&) = delete;
  GraphState& operator=(const GraphState&) = delete;
  ~GraphState();

  // An empty graph in the case's dtype (fp32 intermediates and compute), on the handle (created
  // once) bound to `stream`; nullptr with the reason in *error.
  std::shared_ptr<fe::graph::Graph> start(const Case& c, cudaStream_t stream, std::string* error);
  // Validates and plans `built`, allocates its workspace and makes it the graph execute() runs.
  bool finish(std::shared_ptr<fe::graph::Graph> built, std::string* error);
  bool execute(std::string* error);
};

// cuDNN's dims are [B, H, S, D]; these strides describe flashcore's BSHD memory, so no copy is
// needed.
std::vector<int64_t> bshd_dims(const Case& c, int64_t seqlen, int64_t heads);
std::vector<int64_t> bshd_strides(const Case& c, int64_t seqlen, int64_t heads);
std::shared_ptr<fe::graph::Tensor_attributes> bshd_tensor(fe::graph::Graph& graph, const char* name,
                                                          int64_t uid, const Case& c,
                                                          int64_t seqlen, int64_t heads);

// flashcore's causal mask and window on SDPA_attributes or SDPA_backward_attributes.
template <typename Options>
void set_mask(Options& options, const Case& c) {
  if (c.causal) {
    // Bottom-right aligned like flashcore (and FlashAttention >= 2.1).
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT)
        .set_diagonal_band_right_bound(0);
  }
  if (c.window_left >= 0) {
    // cuDNN's left bound counts the diagonal: key j is visible when i - j < bound, so flashcore's
    // window_left (i - j <= window_left) is bound window_left + 1. The parity gate checks this.
    options.set_diagonal_band_left_bound(static_cast<int>(c.window_left + 1));
  }
}

}  // namespace flashcore::bench::cudnn
