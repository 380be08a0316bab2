// The C ABI: translates flashcore_attention_params to AttentionParams and keeps the last error
// message per thread.
#include <string>

#include "api/c_api_flex.hpp"
#include "api/c_api_status.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/flashcore.h"

namespace flashcore::detail {
namespace {

thread_local std::string last_error;

}  // namespace

flashcore_status c_api_fail(flashcore_status code, std::string message) {
  last_error = std::move(message);
  return code;
}

flashcore_status c_api_result(const Status& status) {
  if (!status.ok()) {
    return c_api_fail(static_cast<flashcore_status>(static_cast<int>(status.code)), status.message);
  }
  last_error.clear();
  return FLASHCORE_OK;
}

const char* c_api_last_error() { return last_error.c_str(); }

}  // namespace flashcore::detail

namespace {

static_assert(static_cast<int>(flashcore::StatusCode::kOk) == FLASHCORE_OK &&
                  static_cast<int>(flashcore::StatusCode::kInvalidArgument) ==
                      FLASHCORE_INVALID_ARGUMENT &&
                  static_cast<int>(flashcore::StatusCode::kUnsupported) == FLASHCORE_UNSUPPORTED &&
                  static_cast<int>(flashcore::StatusCode::kNoDevice) == FLASHCORE_NO_DEVICE &&
                  static_cast<int>(flashcore::StatusCode::kCudaError) == FLASHCORE_CUDA_ERROR,
              "the C status codes mirror flashcore::StatusCode");

flashcore::Strides to_strides(const flashcore_strides& s) { return {s.batch, s.seq, s.head, 1}; }

flashcore_status fail(flashcore_status code, std::string message) {
  return flashcore::detail::c_api_fail(code, std::move(message));
}

}  // namespace

extern "C" {

void flashcore_attention_params_init(flashcore_attention_params* params) {
  if (params == nullptr) return;
  *params = flashcore_attention_params{};
  params->window_left = -1;
  params->window_right = -1;
  params->enable_pdl = 1;
  flashcore_mask_mod_init(&params->mask_mod);
}

flashcore_status flashcore_attention(const flashcore_attention_params* c, const char** provider) {
  if (c == nullptr) return fail(FLASHCORE_INVALID_ARGUMENT, "params is null");
  if (c->dtype != FLASHCORE_FLOAT16 && c->dtype != FLASHCORE_BFLOAT16) {
    return fail(FLASHCORE_INVALID_ARGUMENT,
                "dtype must be FLASHCORE_FLOAT16 or FLASHCORE_BFLOAT16");
  }
  flashcore::AttentionParams p;
  const flashcore::DType dtype =
      c->dtype == FLASHCORE_FLOAT16 ? flashcore::DType::kFloat16 : flashcore::DType::kBFloat16;
  p.batch = c->batch;
  p.seqlen_q = c->seqlen_q;
  p.seqlen_k = c->seqlen_k;
  p.heads_q = c->heads_q;
  p.heads_kv = c->heads_kv;
  p.head_dim = c->head_dim;
  p.q = {c->q, dtype, to_strides(c->q_strides)};
  p.k = {c->k, dtype, to_strides(c->k_strides)};
  p.v = {c->v, dtype, to_strides(c->v_strides)};
  p.o = {c->o, dtype, to_strides(c->o_strides)};
  p.lse = c->lse;
  p.softmax_scale = c->softmax_scale;
  p.causal = c->causal != 0;
  p.window_left = c->window_left;
  p.window_right = c->window_right;
  p.softcap = c->softcap;
  p.num_splits = c->num_splits;
  p.tile = static_cast<flashcore::TileShape>(c->tile);
  p.enable_pdl = c->enable_pdl != 0;
  p.stream = static_cast<cudaStream_t>(c->stream);
  p.workspace = c->workspace;
  p.workspace_bytes = c->workspace_bytes;
  p.cu_seqlens_q = c->cu_seqlens_q;
  p.cu_seqlens_k = c->cu_seqlens_k;
  p.max_seqlen_q = c->max_seqlen_q;
  p.max_seqlen_k = c->max_seqlen_k;
  p.flex = flashcore::detail::to_flex_options(*c);
  if (c->backend != nullptr && !flashcore::parse_backend(c->backend, &p.backend)) {
    std::string names = "auto";
    for (flashcore::Backend b : flashcore::backends())
      names += std::string(", ") + flashcore::backend_name(b);
    return fail(FLASHCORE_INVALID_ARGUMENT,
                std::string("unknown backend '") + c->backend + "'; use one of: " + names);
  }
  flashcore::RunInfo info;
  const flashcore::Status status = flashcore::run(p, &info);
  const flashcore_status code = flashcore::detail::c_api_result(status);
  if (code == FLASHCORE_OK && provider != nullptr) *provider = info.provider;
  return code;
}

const char* flashcore_last_error(void) { return flashcore::detail::c_api_last_error(); }

}  // extern "C"
