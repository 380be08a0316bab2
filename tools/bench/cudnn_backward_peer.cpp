#include "cudnn_backward_peer.hpp"

#include <cmath>

#include "cudnn_graph.hpp"

namespace flashcore::bench {
namespace fe = cudnn_frontend;

struct CudnnSdpaBackward::State : cudnn::GraphState {};

CudnnSdpaBackward::CudnnSdpaBackward() : state_(std::make_unique<State>()) {}

CudnnSdpaBackward::~CudnnSdpaBackward() = default;

bool CudnnSdpaBackward::build(const BackwardData& data, cudaStream_t stream, std::string* error) {
  const Case& c = data.get_case();
  auto graph = state_->start(c, stream, error);
  if (graph == nullptr) return false;
  auto q = cudnn::bshd_tensor(*graph, "Q", cudnn::kQ, c, c.seqlen_q, c.heads_q);
  auto k = cudnn::bshd_tensor(*graph, "K", cudnn::kK, c, c.seqlen_k, c.heads_kv);
  auto v = cudnn::bshd_tensor(*graph, "V", cudnn::kV, c, c.seqlen_k, c.heads_kv);
  auto o = cudnn::bshd_tensor(*graph, "O", cudnn::kO, c, c.seqlen_q, c.heads_q);
  auto d_o = cudnn::bshd_tensor(*graph, "dO", cudnn::kDo, c, c.seqlen_q, c.heads_q);
  // cuDNN's softmax stats are max + log(sum exp) of the scaled scores, natural log, [B, H, Sq, 1]:
  // flashcore's LSE ([B, Hq, Sq] fp32) as it is.
  auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                 .set_name("Stats")
                                 .set_uid(cudnn::kStats)
                                 .set_dim({c.batch, c.heads_q, c.seqlen_q, 1})
                                 .set_stride({c.heads_q * c.seqlen_q, c.seqlen_q, 1, 1})
                                 .set_data_type(fe::DataType_t::FLOAT));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("flash_attention_backward")
                     .set_attn_scale(1.0f / std::sqrt(static_cast<float>(c.head_dim)));
  cudnn::set_mask(options, c);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
  auto bshd_output = [&](auto& tensor, int64_t uid, int64_t seqlen, int64_t heads) {
    tensor->set_output(true)
        .set_uid(uid)
        .set_dim(cudnn::bshd_dims(c, seqlen, heads))
        .set_stride(cudnn::bshd_strides(c, seqlen, heads));
  };
  bshd_output(dq, cudnn::kDq, c.seqlen_q, c.heads_q);
  bshd_output(dk, cudnn::kDk, c.seqlen_k, c.heads_kv);
  bshd_output(dv, cudnn::kDv, c.seqlen_k, c.heads_kv);
  return state_->finish(graph, error);
}

bool CudnnSdpaBackward::run(const BackwardData& data, int set, std::string* error) {
  State& s = *state_;
  const BackwardTensors& t = data.tensors(set);
  s.pack[cudnn::kQ] = const_cast<void*>(t.q);
  s.pack[cudnn::kK] = const_cast<void*>(t.k);
  s.pack[cudnn::kV] = const_cast<void*>(t.v);
  s.pack[cudnn::kO] = const_cast<void*>(t.o);
  s.pack[cudnn::kDo] = const_cast<void*>(t.d_o);
  s.pack[cudnn::kStats] = const_cast<float*>(t.lse);
  s.pack[cudnn::kDq] = t.dq;
  s.pack[cudnn::kDk] = t.dk;
  s.pack[cudnn::kDv] = t.dv;
  return s.execute(error);
}

}  // namespace flashcore::bench
