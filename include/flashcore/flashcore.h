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

/* FlexAttention's BlockMask (flashcore/flex/block_mask.hpp): int32 arrays in PyTorch's layout,
 * kv_num_blocks [batch, heads, Mq], kv_indices [batch, heads, Mq, Mk], full_* the same (optional);
 * batch or heads 1 broadcasts. */
typedef struct {
  int64_t batch, heads, seqlen_q, seqlen_k, q_block_size, kv_block_size;
  const int32_t* kv_num_blocks;
  const int32_t* kv_indices;
  const int32_t* full_kv_num_blocks;
  const int32_t* full_kv_indices;
} flashcore_block_mask;

/* The built-in mask_mods (flex::BuiltinMask): window AND documents AND prefix-LM, each part on when
 * set. Arrays are int32 device memory. */
typedef struct {
  int64_t window_left, window_right; /* -1: unbounded; causal is (-1, 0) */
  const int32_t* doc_ids_q;          /* [B, Sq], NULL: no documents */
  const int32_t* doc_ids_k;          /* [B, Sk]; may equal doc_ids_q for self-attention */
  int64_t doc_batch_stride_q, doc_batch_stride_k;
  int use_prefix_lm;
  const int32_t* prefix_lengths; /* [B], or NULL to use prefix_length for every batch */
  int64_t prefix_length;
} flashcore_mask_mod;

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
  /* Varlen batches (AttentionParams' meaning): int32 [batch + 1] device arrays, both or neither.
   * With them seqlen_q/k are the packed totals and lse is [Hq, total_q]. */
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int64_t max_seqlen_q, max_seqlen_k; /* 0 unless varlen */
  /* FlexAttention (AttentionParams::flex, docs/flex.md); init turns every part off. Arrays are
   * device memory. The window goes through causal / window_left / window_right (mask_mod's window
   * must stay -1, -1) and softcap through softcap, applied after ALiBi and the bias. */
  flashcore_mask_mod mask_mod; /* documents and prefix-LM */
  const float* alibi_slopes;   /* fp32 [Hq], NULL: no ALiBi */
  const float* rel_bias_table; /* fp32 [Hq, 2 * rel_bias_max_distance - 1], NULL: none */
  int64_t rel_bias_max_distance;
  const float* sink_logits;        /* fp32 [Hq], NULL: no sinks */
  flashcore_block_mask block_mask; /* kv_num_blocks NULL: none */
} flashcore_attention_params;

/* Zero sizes and pointers, default scale, no mask, auto backend, enable_pdl 1, not varlen, no flex
 * part. */
void flashcore_attention_params_init(flashcore_attention_params* params);

/* Validates, then launches on params->stream. On success *provider (if not NULL) names the kernel
 * that ran. On failure nothing was launched and flashcore_last_error() says why. */
flashcore_status flashcore_attention(const flashcore_attention_params* params,
                                     const char** provider);

/* The backward of flashcore_attention (flashcore/backward.hpp): dq, dk and dv from q, k, v, the
 * forward's o and lse, and d_o. Layouts, masks and softcap are the forward's; every tensor has
 * dtype. */
typedef struct {
  flashcore_dtype dtype;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* d_o;
  const float* lse; /* required: [B, Hq, Sq] ([Hq, total_q] varlen) from the forward */
  void* dq;
  void* dk;
  void* dv;
  flashcore_strides q_strides, k_strides, v_strides, o_strides, do_strides;
  flashcore_strides dq_strides, dk_strides, dv_strides;
  float softmax_scale; /* 0: 1/sqrt(head_dim) */
  int causal;
  int64_t window_left, window_right; /* -1: unbounded */
  float softcap;                     /* 0: off */
  int deterministic; /* 1: bitwise-identical gradients run to run (docs/backward.md: its cost) */
  void* stream;      /* cudaStream_t; NULL is the legacy default stream */
  void* workspace;   /* optional; NULL lets the call allocate what it needs */
  size_t workspace_bytes;
  const char* backend; /* NULL or "auto" (sm90 on sm_90a where it implements the problem, else
                          sm80), "sm90" or "sm80" */
  /* The forward's varlen and flex fields, as in flashcore_attention_params (the sm80 backward
   * runs them; not with deterministic). */
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int64_t max_seqlen_q, max_seqlen_k;
  flashcore_mask_mod mask_mod;
  const float* alibi_slopes;
  const float* rel_bias_table;
  int64_t rel_bias_max_distance;
  const float* sink_logits;
  flashcore_block_mask block_mask;
  float* d_sink_logits; /* optional, with sink_logits: fp32 [Hq], gets their gradient */
} flashcore_backward_params;

/* Zero sizes and pointers, default scale, no mask, not deterministic, auto backend, not varlen,
 * no flex part. */
void flashcore_backward_params_init(flashcore_backward_params* params);

/* Device bytes of workspace flashcore_attention_backward needs; 0 when the params are invalid
 * (flashcore_last_error() says why). */
size_t flashcore_backward_workspace_bytes(const flashcore_backward_params* params);

/* Validates, then launches on params->stream. On failure nothing was launched and
 * flashcore_last_error() says why. */
flashcore_status flashcore_attention_backward(const flashcore_backward_params* params);

/* A mask_mod that sees every key: windows unbounded, no documents, no prefix-LM. */
void flashcore_mask_mod_init(flashcore_mask_mod* mask);

/* Device bytes that flashcore_create_block_mask needs for shape (its sizes; pointers ignored);
 * 0 when the shape is invalid. */
size_t flashcore_block_mask_bytes(const flashcore_block_mask* shape);

/* Builds the BlockMask of mask for shape into buffer (device memory of at least
 * flashcore_block_mask_bytes) in one launch on stream (a cudaStream_t; NULL: the legacy default
 * stream); *out gets shape's sizes with its arrays in buffer. Does not synchronize. */
flashcore_status flashcore_create_block_mask(const flashcore_mask_mod* mask,
                                             const flashcore_block_mask* shape, void* buffer,
                                             size_t buffer_bytes, flashcore_block_mask* out,
                                             void* stream);

/* The message of this thread's last failed call, or "" after a success. */
const char* flashcore_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHCORE_FLASHCORE_H_ */
