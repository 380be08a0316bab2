// The C ABI of the backward: translates flashcore_backward_params to BackwardParams.
#include <string>

#include "api/c_api_flex.hpp"
#include "api/c_api_status.hpp"
#include "flashcore/backward.hpp"
#include "flashcore/flashcore.h"

namespace {

flashcore::Strides to_strides(const flashcore_strides& s) { return {s.batch, s.seq, s.head, 1}; }

// The C struct as BackwardParams; false (with the error kept) for a bad dtype or backend name.
bool to_params(const flashcore_backward_params& c, flashcore::BackwardParams* p) {
  if (c.dtype != FLASHCORE_FLOAT16 && c.dtype != FLASHCORE_BFLOAT16) {
    flashcore::detail::c_api_fail(FLASHCORE_INVALID_ARGUMENT,
                                  "dtype must be FLASHCORE_FLOAT16 or FLASHCORE_BFLOAT16");
    return false;
  }
  const flashcore::DType dtype =
      c.dtype == FLASHCORE_FLOAT16 ? flashcore::DType::kFloat16 : flashcore::DType::kBFloat16;
  p->batch = c.batch;
  p->seqlen_q = c.seqlen_q;
  p->seqlen_k = c.seqlen_k;
  p->heads_q = c.heads_q;
  p->heads_kv = c.heads_kv;
  p->head_dim = c.head_dim;
  p->q = {c.q, dtype, to_strides(c.q_strides)};
  p->k = {c.k, dtype, to_strides(c.k_strides)};
  p->v = {c.v, dtype, to_strides(c.v_strides)};
  p->o = {c.o, dtype, to_strides(c.o_strides)};
  p->d_o = {c.d_o, dtype, to_strides(c.do_strides)};
  p->lse = c.lse;
  p->dq = {c.dq, dtype, to_strides(c.dq_strides)};
  p->dk = {c.dk, dtype, to_strides(c.dk_strides)};
  p->dv = {c.dv, dtype, to_strides(c.dv_strides)};
  p->softmax_scale = c.softmax_scale;
  p->causal = c.causal != 0;
  p->window_left = c.window_left;
  p->window_right = c.window_right;
  p->softcap = c.softcap;
  p->deterministic = c.deterministic != 0;
  p->cu_seqlens_q = c.cu_seqlens_q;
  p->cu_seqlens_k = c.cu_seqlens_k;
  p->max_seqlen_q = c.max_seqlen_q;
  p->max_seqlen_k = c.max_seqlen_k;
  p->flex = flashcore::detail::to_flex_options(c);
  p->d_sinks = c.d_sink_logits;
  if (c.backend != nullptr && !flashcore::parse_backend(c.backend, &p->backend)) {
    flashcore::detail::c_api_fail(
        FLASHCORE_INVALID_ARGUMENT,
        std::string("unknown backend '") + c.backend + "'; the backward has auto, sm90 and sm80");
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

void flashcore_backward_params_init(flashcore_backward_params* params) {
  if (params == nullptr) return;
  *params = flashcore_backward_params{};
  params->window_left = -1;
  params->window_right = -1;
  flashcore_mask_mod_init(&params->mask_mod);
}

size_t flashcore_backward_workspace_bytes(const flashcore_backward_params* c) {
  if (c == nullptr) {
    flashcore::detail::c_api_fail(FLASHCORE_INVALID_ARGUMENT, "params is null");
    return 0;
  }
  flashcore::BackwardParams p;
  if (!to_params(*c, &p)) return 0;
  const size_t bytes = flashcore::backward_workspace_bytes(p);
  if (bytes == 0) flashcore::detail::c_api_result(flashcore::can_implement_backward(p));
  return bytes;
}

flashcore_status flashcore_attention_backward(const flashcore_backward_params* c) {
  if (c == nullptr) {
    return flashcore::detail::c_api_fail(FLASHCORE_INVALID_ARGUMENT, "params is null");
  }
  flashcore::BackwardParams p;
  if (!to_params(*c, &p)) return FLASHCORE_INVALID_ARGUMENT;
  return flashcore::detail::c_api_result(flashcore::run_backward(
      p, c->workspace, c->workspace_bytes, static_cast<cudaStream_t>(c->stream)));
}

}  // extern "C"
