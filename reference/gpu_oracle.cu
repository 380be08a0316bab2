// fp32 GPU oracle. Deliberately plain: one warp per (batch, head, query row), lanes split the head
// dim, every score is a warp-shuffle reduction, and softmax takes two exact passes over the row's
// visible keys (pass 1 the max; pass 2 recomputes each score bit-identically, sums exp and
// accumulates p * v). No tiling, no shared memory, no online rescaling to get wrong. Varlen
// batches: a warp finds its row's sequence by a binary search of cu_seqlens_q.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "api/validate.hpp"
#include "common/fp16_bf16.hpp"
#include "common/launch_status.hpp"
#include "common/problem.hpp"
#include "flashcore/varlen.hpp"
#include "reference/gpu_oracle.hpp"

namespace flashcore::reference {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kMaxDimsPerLane = static_cast<int>(kMaxHeadDim) / kWarpSize;
// Warps stride over the rows, so any B * Hq * Sq fits in a bounded grid.
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

struct OracleArgs {
  const void* q;
  const void* k;
  const void* v;
  Strides q_strides, k_strides, v_strides;
  float* o;
  float* lse;  // may be null
  int64_t seqlen_q;
  int64_t heads_q;
  int64_t group;
  int64_t head_dim;
  int64_t rows;  // B * Hq * Sq (varlen: Hq * total_q)
  float scale;
  WindowMask<int64_t> mask;  // varlen: rebound to each sequence's lengths
  Softcap softcap;
  const int32_t* cu_seqlens_q;  // null: a dense batch
  const int32_t* cu_seqlens_k;
  int64_t batch;
};

// Where row w (its LSE index) lives: batch b, head h, row i of the sequence, the sequence's first
// q and k rows and its lengths.
struct OracleRow {
  int64_t b, h, i, q_start, k_start, seqlen_q, seqlen_k;
};

__device__ OracleRow oracle_row(const OracleArgs& a, int64_t w) {
  if (a.cu_seqlens_q == nullptr) {
    const int64_t bh = w / a.seqlen_q;
    return {bh / a.heads_q, bh % a.heads_q, w % a.seqlen_q, 0, 0, a.seqlen_q, a.mask.seqlen_k};
  }
  // LSE is [Hq, total_q]: w = h * total_q + packed row; the sequence is the last b with
  // cu_seqlens_q[b] <= row (empty sequences before it share its start).
  const int64_t h = w / a.seqlen_q, row = w % a.seqlen_q;
  int64_t lo = 0, hi = a.batch - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (a.cu_seqlens_q[mid] <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int64_t q_start = a.cu_seqlens_q[lo], k_start = a.cu_seqlens_k[lo];
  return {lo,
          h,
          row - q_start,
          q_start,
          k_start,
          a.cu_seqlens_q[lo + 1] - q_start,
          a.cu_seqlens_k[lo + 1] - k_start};
}

// Lane l holds dims l, l + 32, ... of a row; dims beyond D read as 0.
template <typename T>
__device__ void load_row(const T* row, int64_t head_dim, int lane, float* out) {
#pragma unroll
  for (int e = 0; e < kMaxDimsPerLane; ++e) {
    const int64_t d = lane + e * kWarpSize;
    out[e] = d < head_dim ? detail::to_float(row[d]) : 0.f;
  }
}

__device__ float warp_sum(float x) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <typename T>
__global__ void __launch_bounds__(kWarpSize* kWarpsPerBlock) oracle_kernel(const OracleArgs a) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t first_warp =
      static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int64_t warp_stride = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  // The warp index is the row's LSE index, (b * Hq + h) * Sq + i.
  for (int64_t w = first_warp; w < a.rows; w += warp_stride) {
    const OracleRow r = oracle_row(a, w);
    const int64_t i = r.i, h = r.h;
    const int64_t h_kv = h / a.group;
    // A varlen batch packs its sequences along seq (batch strides ignored): b's rows start at
    // its q_start / k_start; a dense batch starts each at 0 and steps by the batch stride.
    const bool varlen = a.cu_seqlens_q != nullptr;
    const int64_t q_batch = varlen ? 0 : r.b, k_batch = q_batch;
    const T* k_head = static_cast<const T*>(a.k) + k_batch * a.k_strides.batch +
                      r.k_start * a.k_strides.seq + h_kv * a.k_strides.head;
    const T* v_head = static_cast<const T*>(a.v) + k_batch * a.v_strides.batch +
                      r.k_start * a.v_strides.seq + h_kv * a.v_strides.head;
    float q[kMaxDimsPerLane];
    load_row(static_cast<const T*>(a.q) + q_batch * a.q_strides.batch + h * a.q_strides.head +
                 (r.q_start + i) * a.q_strides.seq,
             a.head_dim, lane, q);
    const WindowMask<int64_t> mask = a.mask.with_seqlens(r.seqlen_q, r.seqlen_k);

    const auto score = [&](int64_t j) {
      float kj[kMaxDimsPerLane];
      load_row(k_head + j * a.k_strides.seq, a.head_dim, lane, kj);
      float dot = 0.f;
#pragma unroll
      for (int e = 0; e < kMaxDimsPerLane; ++e) dot = fmaf(q[e], kj[e], dot);
      // __fmul_rn keeps the compiler from fusing this product into pass 2's subtraction, so both
      // passes see bit-identical scores and exp(score - max) <= 1.
      return a.softcap(__fmul_rn(warp_sum(dot), a.scale));
    };

    // The visible keys of row i are exactly [first_key(i), end_key(i)).
    const int64_t first = mask.first_key(i);
    const int64_t end = mask.end_key(i);
    float row_max = -INFINITY;
    for (int64_t j = first; j < end; ++j) row_max = fmaxf(row_max, score(j));

    float sum = 0.f;
    float acc[kMaxDimsPerLane] = {};
    if (row_max != -INFINITY) {  // a fully masked row skips pass 2: exp(-inf - -inf) is NaN
      for (int64_t j = first; j < end; ++j) {
        const float p = expf(score(j) - row_max);
        sum += p;
        float vj[kMaxDimsPerLane];
        load_row(v_head + j * a.v_strides.seq, a.head_dim, lane, vj);
#pragma unroll
        for (int e = 0; e < kMaxDimsPerLane; ++e) acc[e] = fmaf(p, vj[e], acc[e]);
      }
    }
    const float inv_sum = sum > 0.f ? 1.f / sum : 0.f;
    // [B, Sq, Hq, D], or [total_q, Hq, D] varlen.
    float* o_row = a.o + ((q_batch * a.seqlen_q + r.q_start + i) * a.heads_q + h) * a.head_dim;
#pragma unroll
    for (int e = 0; e < kMaxDimsPerLane; ++e) {
      const int64_t d = lane + e * kWarpSize;
      if (d < a.head_dim) o_row[d] = acc[e] * inv_sum;
    }
    if (a.lse != nullptr && lane == 0) a.lse[w] = sum > 0.f ? row_max + logf(sum) : -INFINITY;
  }
}

}  // namespace

Status gpu_oracle(const AttentionParams& params, float* o, float* lse, cudaStream_t stream) {
  // Validate what the oracle actually reads and writes: params' q, k, v and sizes, with params.o
  // and params.lse replaced by the fp32 outputs (checked for null, alignment and device memory;
  // o's element strides are those of a contiguous [B, Sq, Hq, D]).
  AttentionParams checked = params;
  checked.o = {o, params.q.dtype, bshd_strides(params.seqlen_q, params.heads_q, params.head_dim)};
  checked.lse = lse;
  if (Status s = detail::validate_arguments(checked); !s.ok()) return s;
  if (params.flex.active()) {
    return {StatusCode::kUnsupported,
            "gpu_oracle has no flex mods; check them against reference::cpu_flex_attention"};
  }
  cudaDeviceProp device{};
  if (Status s = detail::validate_device(checked, &device); !s.ok()) return s;

  const detail::Problem problem = detail::make_problem(params);
  const int64_t rows = (is_varlen(params) ? 1 : params.batch) * params.heads_q * params.seqlen_q;
  const OracleArgs args{params.q.data,
                        params.k.data,
                        params.v.data,
                        params.q.strides,
                        params.k.strides,
                        params.v.strides,
                        o,
                        lse,
                        params.seqlen_q,
                        params.heads_q,
                        problem.group(),
                        params.head_dim,
                        rows,
                        problem.scale,
                        problem.mask,
                        problem.softcap,
                        params.cu_seqlens_q,
                        params.cu_seqlens_k,
                        params.batch};
  const int64_t blocks = std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks);
  const dim3 grid(static_cast<unsigned>(blocks));
  const dim3 block(kWarpSize * kWarpsPerBlock);
  if (params.q.dtype == DType::kFloat16) {
    oracle_kernel<__half><<<grid, block, 0, stream>>>(args);
  } else {
    oracle_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(args);
  }
  return detail::launch_status(cudaGetLastError(), "gpu oracle_kernel");
}

}  // namespace flashcore::reference
