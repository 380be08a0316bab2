/* flashcore C ABI: the same attention as flashcore::run(), for FFI users. Plain C99. */
#ifndef FLASHCORE_FLASHCORE_H_
#define FLASHCORE_FLASHCORE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FLASHCORE_FLOAT16 = 0, FLASHCORE_BFLOAT16 = 1 } flashcore_dtype;

typedef enum {
  FLASHCORE_OK = 0,
  FLASHCORE_INVALID_ARGUMENT = 1,
  FLASHCORE_UNSUPPORTED = 2,
  FLASHCORE_NO_DEVICE = 3,
  FLASHCORE_CUDA_ERROR = 4
} flashcore_status;

/* Element strides of a BSHD tensor; the head dim is contiguous. */
typedef struct {
  int64_t batch;
  int64_t seq;
  int64_t head;
} flashcore_strides;

typedef struct {
  flashcore_dtype dtype; /* of q, k, v and o */
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse; /* optional [B, Hq, Sq] */
  flashcore_strides q_strides, k_strides, v_strides, o_strides;
  float softmax_scale; /* 0: 1/sqrt(head_dim) */
  int causal;
  int64_t window_left, window_right; /* -1: unbounded */
  float softcap;                     /* 0: off */
  const char* backend;               /* NULL or "auto", or a provider name such as "scalar" */
  int num_splits;                    /* split-KV: 0 heuristic, 1 off, n forced */
  int tile; /* CTA tile (sm80, sm90): 0 auto, 1 large, 2 small, 3 medium, 4 cta pair (3 and 4 were
             * named warpgroup and warpgroup pair; same values) */
  int enable_pdl;  /* programmatic dependent launch where it applies (sm_90+): 1 (init) or 0 */
  void* stream;    /* cudaStream_t; NULL is the legacy default stream */
  void* workspace; /* optional; NULL lets the call allocate what it needs */
  size_t workspace_bytes;
} flashcore_attention_params;

/* Zero sizes and pointers, default scale, no mask, auto backend, enable_pdl 1. */
void flashcore_attention_params_init(flashcore_attention_params* params);

/* Validates, then launches on params->stream. On success *provider (if not NULL) names the kernel
 * that ran. On failure nothing was launched and flashcore_last_error() says why. */
flashcore_status flashcore_attention(const flashcore_attention_params* params,
                                     const char** provider);

/* The message of this thread's last failed call, or "" after a success. */
const char* flashcore_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHCORE_FLASHCORE_H_ */
