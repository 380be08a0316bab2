#include "cudnn_peer.hpp"

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <unordered_map>
#include <vector>

namespace flashcore::bench {
namespace fe = cudnn_frontend;

namespace {
enum Uid : int64_t { kQ = 1, kK, kV, kO };
}  // namespace

struct CudnnSdpa::State {
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<fe::graph::Graph> graph;
  void* workspace = nullptr;
  std::unordered_map<int64_t, void*> pack;
};

CudnnSdpa::CudnnSdpa() : state_(std::make_unique<State>()) {}

CudnnSdpa::~CudnnSdpa() {
  cudaFree(state_->workspace);
  if (state_->handle != nullptr) cudnnDestroy(state_->handle);
}

bool CudnnSdpa::build(const CaseData& data, cudaStream_t stream, std::string* error) {
  const Case& c = data.get_case();
  if (state_->handle == nullptr) {
    if (const cudnnStatus_t s = cudnnCreate(&state_->handle); s != CUDNN_STATUS_SUCCESS) {
      *error = std::string("cudnnCreate: ") + cudnnGetErrorString(s);
      return false;
    }
  }
  cudnnSetStream(state_->handle, stream);
  const fe::DataType_t io = c.dtype == "bf16" ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // cuDNN's dims are [B, H, S, D]; the strides describe our BSHD memory, so no copy is needed.
  auto tensor = [&](const char* name, int64_t uid, int64_t seqlen, int64_t heads) {
    return graph->tensor(
        fe::graph::Tensor_attributes()
            .set_name(name)
            .set_uid(uid)
            .set_dim({c.batch, heads, seqlen, c.head_dim})
            .set_stride({seqlen * heads * c.head_dim, c.head_dim, heads * c.head_dim, 1}));
  };
  auto q = tensor("Q", kQ, c.seqlen_q, c.heads_q);
  auto k = tensor("K", kK, c.seqlen_k, c.heads_kv);
  auto v = tensor("V", kV, c.seqlen_k, c.heads_kv);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("flash_attention")
                     .set_generate_stats(false)
                     .set_attn_scale(1.0f / std::sqrt(static_cast<float>(c.head_dim)));
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
  auto outputs = graph->sdpa(q, k, v, options);
  outputs[0]
      ->set_output(true)
      .set_uid(kO)
      .set_dim({c.batch, c.heads_q, c.seqlen_q, c.head_dim})
      .set_stride({c.seqlen_q * c.heads_q * c.head_dim, c.head_dim, c.heads_q * c.head_dim, 1});

  auto check = [&](fe::error_t status, const char* step) {
    if (status.is_bad()) *error = std::string("cuDNN ") + step + ": " + status.get_message();
    return !status.is_bad();
  };
  if (!check(graph->validate(), "validate") ||
      !check(graph->build_operation_graph(state_->handle), "build_operation_graph") ||
      !check(graph->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans") ||
      !check(graph->check_support(state_->handle), "check_support") ||
      !check(graph->build_plans(state_->handle), "build_plans")) {
    return false;
  }
  int64_t workspace_bytes = 0;
  if (!check(graph->get_workspace_size(workspace_bytes), "get_workspace_size")) return false;
  cudaFree(state_->workspace);
  state_->workspace = nullptr;
  if (workspace_bytes > 0 &&
      cudaMalloc(&state_->workspace, static_cast<size_t>(workspace_bytes)) != cudaSuccess) {
    cudaGetLastError();
    *error = "cannot allocate " + std::to_string(workspace_bytes) + " bytes of cuDNN workspace";
    return false;
  }
  state_->graph = graph;
  return true;
}

bool CudnnSdpa::run(const CaseData& data, int set, std::string* error) {
  State& s = *state_;
  s.pack[kQ] = const_cast<void*>(data.q(set));
  s.pack[kK] = const_cast<void*>(data.k(set));
  s.pack[kV] = const_cast<void*>(data.v(set));
  s.pack[kO] = data.o(set);
  fe::error_t status = s.graph->execute(s.handle, s.pack, s.workspace);
  if (status.is_bad()) {
    *error = "cuDNN execute: " + status.get_message();
    return false;
  }
  return true;
}

}  // namespace flashcore::bench
