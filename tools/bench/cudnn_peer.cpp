#include "cudnn_peer.hpp"

#include <cmath>

#include "cudnn_graph.hpp"

namespace flashcore::bench {
namespace fe = cudnn_frontend;

struct CudnnSdpa::State : cudnn::GraphState {};

CudnnSdpa::CudnnSdpa() : state_(std::make_unique<State>()) {}

CudnnSdpa::~CudnnSdpa() = default;

bool CudnnSdpa::build(const CaseData& data, cudaStream_t stream, std::string* error) {
  const Case& c = data.get_case();
  auto graph = state_->start(c, stream, error);
  if (graph == nullptr) return false;
  auto q = cudnn::bshd_tensor(*graph, "Q", cudnn::kQ, c, c.seqlen_q, c.heads_q);
  auto k = cudnn::bshd_tensor(*graph, "K", cudnn::kK, c, c.seqlen_k, c.heads_kv);
  auto v = cudnn::bshd_tensor(*graph, "V", cudnn::kV, c, c.seqlen_k, c.heads_kv);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("flash_attention")
                     .set_generate_stats(false)
                     .set_attn_scale(1.0f / std::sqrt(static_cast<float>(c.head_dim)));
  cudnn::set_mask(options, c);
  auto outputs = graph->sdpa(q, k, v, options);
  outputs[0]
      ->set_output(true)
      .set_uid(cudnn::kO)
      .set_dim(cudnn::bshd_dims(c, c.seqlen_q, c.heads_q))
      .set_stride(cudnn::bshd_strides(c, c.seqlen_q, c.heads_q));
  return state_->finish(graph, error);
}

bool CudnnSdpa::run(const CaseData& data, int set, std::string* error) {
  State& s = *state_;
  s.pack[cudnn::kQ] = const_cast<void*>(data.q(set));
  s.pack[cudnn::kK] = const_cast<void*>(data.k(set));
  s.pack[cudnn::kV] = const_cast<void*>(data.v(set));
  s.pack[cudnn::kO] = data.o(set);
  return s.execute(error);
}

}  // namespace flashcore::bench
