// Argument and device validation of the backward: everything run_backward() checks before it
// launches anything. The forward's checks (api/validate.cpp) cover the sizes, options and the
// tensors they share; this adds dO, LSE and the three gradients.
#include "api/validate_backward.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "api/validate.hpp"
#include "common/backward_problem.hpp"
#include "common/device_properties.hpp"
#include "common/status_message.hpp"

namespace flashcore::detail {
namespace {

// [first, last] byte addresses a tensor's elements span (strides are non-negative and checked
// for overflow before this runs).
struct ByteSpan {
  uintptr_t first, last;
};
ByteSpan byte_span(const void* data, const Strides& s, int64_t batch, int64_t seqlen, int64_t heads,
                   int64_t head_dim) {
  const int64_t last_element =
      (batch - 1) * s.batch + (seqlen - 1) * s.seq + (heads - 1) * s.head + head_dim - 1;
  const auto first = reinterpret_cast<uintptr_t>(data);
  return {first, first + static_cast<uintptr_t>(last_element) * 2 + 1};
}
bool spans_overlap(const ByteSpan& a, const ByteSpan& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

Status validate_backward_arguments(const BackwardParams& p) {
  // Sizes, head dim, dtype, window, softcap, scale and the q, k, v, o tensors: the forward's
  // checks on the forward this backward differentiates.
  if (Status s = validate_arguments(forward_params(p)); !s.ok()) return s;
  // A varlen batch packs its sequences along seq: each tensor is one [total, H, D] slab.
  const int64_t tensor_batch = p.cu_seqlens_q != nullptr ? 1 : p.batch;
  struct TensorCheck {
    const char* name;
    const void* data;
    DType dtype;
    Strides strides;
    int64_t seqlen, heads;
    bool is_output;
  };
  const TensorCheck tensors[] = {
      {"d_o", p.d_o.data, p.d_o.dtype, p.d_o.strides, p.seqlen_q, p.heads_q, false},
      {"dq", p.dq.data, p.dq.dtype, p.dq.strides, p.seqlen_q, p.heads_q, true},
      {"dk", p.dk.data, p.dk.dtype, p.dk.strides, p.seqlen_k, p.heads_kv, true},
      {"dv", p.dv.data, p.dv.dtype, p.dv.strides, p.seqlen_k, p.heads_kv, true},
  };
  for (const TensorCheck& t : tensors) {
    if (Status s = check_tensor(t.name, t.data, t.dtype, p.q.dtype, t.strides, tensor_batch,
                                t.seqlen, t.heads, p.head_dim, t.is_output);
        !s.ok()) {
      return s;
    }
  }
  if (p.lse == nullptr) {
    return invalid_argument(
        "lse is null; the backward needs the forward's LSE ([B, Hq, Sq], varlen [Hq, total_q]; "
        "run the forward with AttentionParams::lse set)");
  }
  if (reinterpret_cast<uintptr_t>(p.lse) % alignof(float) != 0) {
    return invalid_argument("lse pointer is not 4-byte aligned");
  }
  if (p.d_sinks != nullptr) {
    if (!p.flex.sinks.enabled()) {
      return invalid_argument(
          "d_sinks is set but flex.sinks.logits is null; pass the forward's sink logits, or leave "
          "d_sinks null");
    }
    if (reinterpret_cast<uintptr_t>(p.d_sinks) % alignof(float) != 0) {
      return invalid_argument("d_sinks is not 4-byte aligned; pass fp32 [Hq]");
    }
  }
  // dq is written by one kernel and dk, dv by another: sharing memory would race.
  const std::array<std::pair<const char*, ByteSpan>, 3> outputs{{
      {"dq", byte_span(p.dq.data, p.dq.strides, tensor_batch, p.seqlen_q, p.heads_q, p.head_dim)},
      {"dk", byte_span(p.dk.data, p.dk.strides, tensor_batch, p.seqlen_k, p.heads_kv, p.head_dim)},
      {"dv", byte_span(p.dv.data, p.dv.strides, tensor_batch, p.seqlen_k, p.heads_kv, p.head_dim)},
  }};
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (spans_overlap(outputs[i].second, outputs[j].second)) {
        return invalid_argument(
            cat(outputs[i].first, " and ", outputs[j].first,
                " overlap in memory; pass a separate buffer for each gradient"));
      }
    }
  }
  return Status::Ok();
}

Status validate_backward_device(const BackwardParams& p, cudaDeviceProp* properties) {
  // The device, and q, k, v, o, lse, the varlen arrays and the flex arrays: the forward's checks.
  if (Status s = validate_device(forward_params(p), properties); !s.ok()) return s;
  for (const auto& [name, data] : {std::pair<const char*, const void*>{"d_o", p.d_o.data},
                                   {"dq", p.dq.data},
                                   {"dk", p.dk.data},
                                   {"dv", p.dv.data}}) {
    if (Status s = check_device_pointer(name, data); !s.ok()) return s;
  }
  if (p.d_sinks != nullptr) {
    if (Status s = check_device_pointer("d_sinks", p.d_sinks); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace flashcore::detail
