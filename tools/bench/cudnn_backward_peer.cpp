#include "cudnn_backward_peer.hpp"

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <unordered_map>

namespace flashcore::bench {
namespace fe = cudnn_frontend;

namespace {
enum Uid : int64_t { kQ = 1, kK, kV, kO, kDo, kStats, kDq, kDk, kDv };
}  // namespace

struct CudnnSdpaBackward::State {
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<fe::graph::Graph> graph;
  void* workspace = nullptr;
  std::unordered_map<int64_t, void*> pack;
};

CudnnSdpaBackward::CudnnSdpaBackward() : state_(std::make_unique<State>()) {}

CudnnSdpaBackward::~CudnnSdpaBackward() {
  cudaFree(state_->workspace);
  if (state_->handle != nullptr) cudnnDestroy(state_->handle);
}

bool CudnnSdpaBackward::build(const BackwardData& data, cudaStream_t stream, std::string* error) {
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
  auto dims = [&](int64_t seqlen, int64_t heads) {
    return std::vector<int64_t>{c.batch, heads, seqlen, c.head_dim};
  };
  auto strides = [&](int64_t seqlen, int64_t heads) {
    return std::vector<int64_t>{seqlen * heads * c.head_dim, c.head_dim, heads * c.head_dim, 1};
  };
  auto tensor = [&](const char* name, int64_t uid, int64_t seqlen, int64_t heads) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim(dims(seqlen, heads))
                             .set_stride(strides(seqlen, heads)));
  };
  auto q = tensor("Q", kQ, c.seqlen_q, c.heads_q);
  auto k = tensor("K", kK, c.seqlen_k, c.heads_kv);
  auto v = tensor("V", kV, c.seqlen_k, c.heads_kv);
  auto o = tensor("O", kO, c.seqlen_q, c.heads_q);
  auto d_o = tensor("dO", kDo, c.seqlen_q, c.heads_q);
  // cuDNN's softmax stats are max + log(sum exp) of the scaled scores, natural log, [B, H, Sq, 1]:
  // flashcore's LSE ([B, Hq, Sq] fp32) as it is.
  auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                 .set_name("Stats")
                                 .set_uid(kStats)
                                 .set_dim({c.batch, c.heads_q, c.seqlen_q, 1})
                                 .set_stride({c.heads_q * c.seqlen_q, c.seqlen_q, 1, 1})
                                 .set_data_type(fe::DataType_t::FLOAT));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("flash_attention_backward")
                     .set_attn_scale(1.0f / std::sqrt(static_cast<float>(c.head_dim)));
  if (c.causal) {
    // Bottom-right aligned like flashcore, as the forward peer (cudnn_peer.cpp).
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT)
        .set_diagonal_band_right_bound(0);
  }
  if (c.window_left >= 0) {
    // cuDNN's left bound counts the diagonal (cudnn_peer.cpp); the parity gate checks this.
    options.set_diagonal_band_left_bound(static_cast<int>(c.window_left + 1));
  }
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
  dq->set_output(true)
      .set_uid(kDq)
      .set_dim(dims(c.seqlen_q, c.heads_q))
      .set_stride(strides(c.seqlen_q, c.heads_q));
  dk->set_output(true)
      .set_uid(kDk)
      .set_dim(dims(c.seqlen_k, c.heads_kv))
      .set_stride(strides(c.seqlen_k, c.heads_kv));
  dv->set_output(true)
      .set_uid(kDv)
      .set_dim(dims(c.seqlen_k, c.heads_kv))
      .set_stride(strides(c.seqlen_k, c.heads_kv));

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

bool CudnnSdpaBackward::run(const BackwardData& data, int set, std::string* error) {
  State& s = *state_;
  const BackwardTensors& t = data.tensors(set);
  s.pack[kQ] = const_cast<void*>(t.q);
  s.pack[kK] = const_cast<void*>(t.k);
  s.pack[kV] = const_cast<void*>(t.v);
  s.pack[kO] = const_cast<void*>(t.o);
  s.pack[kDo] = const_cast<void*>(t.d_o);
  s.pack[kStats] = const_cast<float*>(t.lse);
  s.pack[kDq] = t.dq;
  s.pack[kDk] = t.dk;
  s.pack[kDv] = t.dv;
  fe::error_t status = s.graph->execute(s.handle, s.pack, s.workspace);
  if (status.is_bad()) {
    *error = "cuDNN execute: " + status.get_message();
    return false;
  }
  return true;
}

}  // namespace flashcore::bench
