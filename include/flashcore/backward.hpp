// flashcore public C++ API for the backward pass: dQ, dK and dV of the forward's attention, from
// Q, K, V, the forward's O and LSE, and dO. One params struct, can_implement_backward(), a
// workspace query and run_backward(), as the forward (flashcore/attention.hpp).
//
// Layouts are the forward's: Q, O, dO, dQ [B, Sq, Hq, D]; K, V, dK, dV [B, Sk, Hkv, D], each with
// int64 element strides and a contiguous last dim; LSE [B, Hq, Sq] fp32 natural log, contiguous,
// exactly as flashcore::run() writes it (a fully masked row has -inf and gets zero gradients).
// The mask, softcap, varlen and flex options mean what they mean in AttentionParams and must be
// the forward's: a varlen batch packs q, o, dO, dq [total_q, Hq, D] and k, v, dk, dv
// [total_k, Hkv, D], with LSE [Hq, total_q] (docs/backward.md, "Varlen and flex").
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "flashcore/attention.hpp"

namespace flashcore {

struct BackwardParams {
  int64_t batch = 0;
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;  // heads_q % heads_kv == 0; dK and dV sum over the query heads of a group
  int64_t head_dim = 0;

  // The forward's inputs and outputs, and the gradient of the loss with respect to O. All share
  // one dtype (fp16 or bf16) with the gradients below.
  InputTensor q, k, v, o, d_o;
  const float* lse = nullptr;  // required: [B, Hq, Sq] from the forward

  // Written in full (every element, fully masked rows and unseen keys as zeros); accumulation is
  // fp32. dq may not overlap dk or dv.
  OutputTensor dq, dk, dv;

  float softmax_scale = 0.f;  // 0 means 1/sqrt(head_dim), as the forward
  bool causal = false;
  int64_t window_left = kUnboundedWindow;
  int64_t window_right = kUnboundedWindow;
  float softcap = 0.f;  // the forward's; its derivative, 1 - tanh^2, enters dS

  // Variable-length batches, as AttentionParams::cu_seqlens_q / cu_seqlens_k (flashcore/varlen.hpp
  // checks their contents): seqlen_q and seqlen_k are then the totals and batch the number of
  // sequences; the arrays are read on the device only.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int64_t max_seqlen_q = 0;
  int64_t max_seqlen_k = 0;

  // The forward's FlexAttention options (AttentionParams::flex): built-in mask_mod and score_mod
  // (the score_mod's derivative enters dS: 1 for ALiBi and the relative bias, 1 - tanh^2 for
  // softcap), the BlockMask and sinks (the LSE already holds the sink). The sm80 backward runs
  // these and varlen (BlockMask blocks must be multiples of 64 query rows and 128 keys there); the
  // sm90 one varlen and sinks.
  flex::FlexOptions flex;

  // Optional, with flex.sinks: fp32 [Hq] device memory that gets the sink logits' gradient,
  // d_sinks[h] = -sum over head h's rows i of exp(sink[h] - LSE_i) * rowsum(dO * O)_i (written,
  // not added to; the same bits run to run). Null: not computed.
  float* d_sinks = nullptr;

  // dQ sums the contributions of every key block. false: fp32 atomics in whatever order the CTAs
  // reach them, so dQ may differ in its last bits from run to run. true: the key blocks add theirs
  // in a fixed order (a semaphore per query block), so dQ, dK and dV are bitwise identical run to
  // run, at a cost docs/backward.md states. dK and dV are deterministic either way.
  bool deterministic = false;

  // Which backward runs: kAuto the sm90 one (wgmma, TMA; sm_90a) where it implements the problem,
  // else the sm80 one (mma.sync; every sm_80+ GPU). kSm90 or kSm80 runs that one or fails with
  // kUnsupported and its reason; the other backends have no backward.
  Backend backend = Backend::kAuto;
};

// Checks every argument and the device without launching anything.
Status can_implement_backward(const BackwardParams& params);

// The backward kAuto (or the named backend) runs for these params on the current device; kAuto
// when none implements them (can_implement_backward() says why).
Backend resolve_backward_backend(const BackwardParams& params);

// Bytes of workspace run_backward() needs: fp32 dQ accumulators, the per-row D = rowsum(dO * O)
// and LSE, and the semaphores of deterministic mode; O(B * Hq * Sq * D), linear in Sq. 0 when the
// params are invalid (can_implement_backward() says why).
size_t backward_workspace_bytes(const BackwardParams& params);

// Validates (as can_implement_backward), then launches on stream. workspace holds at least
// backward_workspace_bytes(params) bytes of device memory, or is null: then run_backward()
// allocates it on the stream with cudaMallocAsync and frees it after the launches, stream-ordered.
// Writes nothing when validation fails. Does not synchronize.
Status run_backward(const BackwardParams& params, void* workspace, size_t workspace_bytes,
                    cudaStream_t stream);

}  // namespace flashcore
