// The "matmul + softmax + matmul" baseline, as eager frameworks run attention:
//   1. cuBLAS batched GEMM  S = scale * Q K^T       -> fp32 workspace [B*Hq, Sq, pitch]
//   2. one block per query row: softcap, mask, softmax in fp32 -> P (input dtype) and LSE
//   3. cuBLAS batched GEMM  O = P V                 -> straight into O with O's strides
// cuBLAS is column-major while our tensors are row-major, so each GEMM computes the transpose:
// a row-major [rows, D] tensor with row stride ld is a column-major [D, rows] matrix with leading
// dimension ld, and S^T = K Q^T, O^T = V^T P^T need no copies.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "baseline/unfused.hpp"
#include "common/feature_gates.hpp"
#include "common/launch_status.hpp"

namespace flashcore::detail {
namespace {

// Workspace sections start on 256 bytes: what cudaMalloc guarantees and cuBLAS prefers.
constexpr size_t kWorkspaceAlign = 256;
// S and P rows are padded to a multiple of 8 elements so that every row starts 16-byte aligned for
// P (8 x 2 bytes) and S (2 x 8 x 4 bytes): the softmax kernel reads S as float4, and cuBLAS picks
// its vectorized tensor-core kernels only for aligned leading dimensions.
constexpr int64_t kRowPad = 8;
// One query row per 128-thread block: Sk = 512 is exactly one float4 per thread, and rows long
// enough to matter keep their scores in registers (see kMaxCachedVectors).
constexpr int kSoftmaxThreads = 128;
constexpr int kWarpSize = 32;
constexpr int kSoftmaxWarps = kSoftmaxThreads / kWarpSize;
constexpr int kVectorCols = 4;  // one float4 of S
constexpr int64_t kColsPerSweep = kSoftmaxThreads * kVectorCols;
// A thread keeps up to 16 float4 of its row in registers (64 floats; rows up to 8192 keys are read
// from global memory once). Longer rows re-read the rest from L2 in the sum and write sweeps.
constexpr int kMaxCachedVectors = 16;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kPointerThreads = 256;
constexpr int kElementBytes = 2;  // fp16 and bf16

size_t align_up(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

int64_t row_pitch(const AttentionParams& p) {
  return (p.seqlen_k + kRowPad - 1) / kRowPad * kRowPad;
}

// Byte offsets of the workspace sections: per-head GEMM pointer arrays, fp32 S, P in input dtype.
struct WorkspaceLayout {
  size_t pointers = 0;
  size_t scores = 0;
  size_t probs = 0;
  size_t total = 0;
};

// Device pointer arrays for cublasGemmBatchedEx, one entry per (b, h) in b * Hq + h order.
struct GemmPointers {
  const void** q;
  const void** k;
  void** s;
  const void** v;
  const void** p;
  void** o;
};
constexpr int kNumPointerArrays = sizeof(GemmPointers) / sizeof(void*);

WorkspaceLayout workspace_layout(const AttentionParams& p) {
  const size_t heads = static_cast<size_t>(p.batch * p.heads_q);
  const size_t elements =
      heads * static_cast<size_t>(p.seqlen_q) * static_cast<size_t>(row_pitch(p));
  WorkspaceLayout layout;
  layout.scores = align_up(kNumPointerArrays * heads * sizeof(void*), kWorkspaceAlign);
  layout.probs = align_up(layout.scores + elements * sizeof(float), kWorkspaceAlign);
  layout.total = align_up(layout.probs + elements * kElementBytes, kWorkspaceAlign);
  return layout;
}

// ---------------------------------------------------------------------------------------------
// Error handling and the per-(thread, device) cuBLAS handle.

Status cuda_status(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::Ok();
  return {StatusCode::kCudaError, std::string(call) + " failed: " + cudaGetErrorString(err)};
}

Status cublas_status(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return {StatusCode::kCudaError, std::string(call) + " failed: " + cublasGetStatusString(status)};
}

// cublasCreate allocates and costs far more than a launch, so each thread keeps one handle per
// device (a handle must not be used by two threads at once, and is bound to its device).
struct HandleCache {
  std::unordered_map<int, cublasHandle_t> handles;
  ~HandleCache() {
    for (const auto& [device, handle] : handles) cublasDestroy(handle);
  }
};

Status cublas_handle(cudaStream_t stream, cublasHandle_t* handle) {
  thread_local HandleCache cache;
  int device = 0;
  if (Status s = cuda_status(cudaGetDevice(&device), "cudaGetDevice"); !s.ok()) return s;
  auto it = cache.handles.find(device);
  if (it == cache.handles.end()) {
    cublasHandle_t created = nullptr;
    if (Status s = cublas_status(cublasCreate(&created), "cublasCreate"); !s.ok()) return s;
    it = cache.handles.emplace(device, created).first;
  }
  *handle = it->second;
  return cublas_status(cublasSetStream(*handle, stream), "cublasSetStream");
}

// ---------------------------------------------------------------------------------------------
// Batch addressing. cuBLAS batches over the flattened (b, h); a tensor's head (b, h) starts at
// b * batch_stride + (h / group) * head_stride elements.

struct HeadOffsets {
  const char* base;
  int64_t batch_stride;  // bytes
  int64_t head_stride;   // bytes
  int64_t group;         // query heads per head of this tensor (1 for q and o)
};

HeadOffsets head_offsets(const void* data, const Strides& s, int64_t group) {
  return {static_cast<const char*>(data), s.batch * kElementBytes, s.head * kElementBytes, group};
}

// The strided-batched API needs the offset of head bh = b * Hq + h to be bh * stride, which holds
// for BHSD tensors, for B == 1 and for Hq == 1, but not for BSHD with B > 1 or for GQA.
bool uniform_stride(const HeadOffsets& t, int64_t batch, int64_t heads_q, long long* stride) {
  if (heads_q == 1) {
    *stride = t.batch_stride / kElementBytes;
    return true;
  }
  if (t.group != 1 || (batch > 1 && t.batch_stride != heads_q * t.head_stride)) return false;
  *stride = t.head_stride / kElementBytes;
  return true;
}

struct PointerArgs {
  HeadOffsets q, k, v, o;
  char* scores;
  char* probs;
  int64_t score_matrix_bytes;
  int64_t prob_matrix_bytes;
  int64_t heads_q;
  int64_t count;  // B * Hq
};

__device__ const char* head_pointer(const HeadOffsets& t, int64_t b, int64_t h) {
  return t.base + b * t.batch_stride + (h / t.group) * t.head_stride;
}

__global__ void __launch_bounds__(kPointerThreads)
    gemm_pointers_kernel(const PointerArgs a, const GemmPointers out) {
  const int64_t bh = static_cast<int64_t>(blockIdx.x) * kPointerThreads + threadIdx.x;
  if (bh >= a.count) return;
  const int64_t b = bh / a.heads_q;
  const int64_t h = bh % a.heads_q;
  out.q[bh] = head_pointer(a.q, b, h);
  out.k[bh] = head_pointer(a.k, b, h);
  out.v[bh] = head_pointer(a.v, b, h);
  out.o[bh] = const_cast<char*>(head_pointer(a.o, b, h));
  out.s[bh] = a.scores + bh * a.score_matrix_bytes;
  out.p[bh] = a.probs + bh * a.prob_matrix_bytes;
}

// ---------------------------------------------------------------------------------------------
// Softmax: one block per row of S.

struct SoftmaxArgs {
  const float* scores;
  void* probs;
  float* lse;  // may be null
  int64_t seqlen_q;
  int64_t seqlen_k;
  int64_t pitch;  // elements per row of S and P
  WindowMask<int64_t> mask;
  Softcap softcap;
};

template <typename T>
struct Pack;
template <>
struct Pack<__half> {
  static __device__ uint32_t two(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
};
template <>
struct Pack<__nv_bfloat16> {
  static __device__ uint32_t two(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
};

__device__ float max4(const float4& v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// Softcapped scores of keys [col, col + 4) of query row `query`, -inf where masked. Vectors wholly
// outside the visible range are not loaded; wholly inside ones skip the element mask. Reads only
// columns below end_key <= Sk, but the float4 may cover padding columns < pitch: those are masked.
__device__ float4 masked_scores(const SoftmaxArgs& a, const float* s_row, int64_t query,
                                int64_t first, int64_t end, int64_t col) {
  constexpr float kNegInf = -INFINITY;
  if (col >= end || col + kVectorCols <= first)
    return make_float4(kNegInf, kNegInf, kNegInf, kNegInf);
  float4 v = *reinterpret_cast<const float4*>(s_row + col);
  v.x = a.softcap(v.x);
  v.y = a.softcap(v.y);
  v.z = a.softcap(v.z);
  v.w = a.softcap(v.w);
  if (col >= first && col + kVectorCols <= end) return v;
  if (!a.mask.visible(query, col + 0)) v.x = kNegInf;
  if (!a.mask.visible(query, col + 1)) v.y = kNegInf;
  if (!a.mask.visible(query, col + 2)) v.z = kNegInf;
  if (!a.mask.visible(query, col + 3)) v.w = kNegInf;
  return v;
}

// exp(s - max) for four scores; max_log2 is the row max times log2(e), folded into one FFMA.
__device__ float4 exp_shifted(const float4& s, float max_log2) {
  return make_float4(exp2f(fmaf(s.x, kLog2e, -max_log2)), exp2f(fmaf(s.y, kLog2e, -max_log2)),
                     exp2f(fmaf(s.z, kLog2e, -max_log2)), exp2f(fmaf(s.w, kLog2e, -max_log2)));
}

template <typename T>
__device__ void store_probs(T* p_row, int64_t col, const float4& e, float inv_sum) {
  const uint2 packed{Pack<T>::two(e.x * inv_sum, e.y * inv_sum),
                     Pack<T>::two(e.z * inv_sum, e.w * inv_sum)};
  *reinterpret_cast<uint2*>(p_row + col) = packed;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Every thread gets the same result (all read the per-warp partials in the same order). `partials`
// must not be reused by the caller before a later __syncthreads().
template <typename Op>
__device__ float block_reduce(float value, Op op, float* partials) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  if (threadIdx.x % kWarpSize == 0) partials[threadIdx.x / kWarpSize] = value;
  __syncthreads();
  value = partials[0];
  for (int w = 1; w < kSoftmaxWarps; ++w) value = op(value, partials[w]);
  return value;
}

// Thread t owns columns 4t + 512u of the row, u = 0, 1, ...; the first kCached of those vectors
// stay in registers between the max, sum and write sweeps.
template <typename T, int kCached>
__global__ void __launch_bounds__(kSoftmaxThreads) softmax_rows_kernel(const SoftmaxArgs a) {
  __shared__ float max_partials[kSoftmaxWarps];
  __shared__ float sum_partials[kSoftmaxWarps];
  const int64_t row = blockIdx.x;  // (b * Hq + h) * Sq + query: also the row's LSE index
  const int64_t query = row % a.seqlen_q;
  const int64_t first = a.mask.first_key(query);
  const int64_t end = a.mask.end_key(query);
  const float* s_row = a.scores + row * a.pitch;
  T* p_row = static_cast<T*>(a.probs) + row * a.pitch;
  const int64_t col0 = static_cast<int64_t>(threadIdx.x) * kVectorCols;
  const int64_t uncached_col0 = col0 + kCached * kColsPerSweep;

  float4 cached[kCached];
  float thread_max = -INFINITY;
#pragma unroll
  for (int u = 0; u < kCached; ++u) {
    cached[u] = masked_scores(a, s_row, query, first, end, col0 + u * kColsPerSweep);
    thread_max = fmaxf(thread_max, max4(cached[u]));
  }
  for (int64_t col = uncached_col0; col < end; col += kColsPerSweep) {
    thread_max = fmaxf(thread_max, max4(masked_scores(a, s_row, query, first, end, col)));
  }
  const float row_max = block_reduce(thread_max, MaxOp{}, max_partials);

  // A fully masked row has max -inf; shifting by 0 instead keeps every exponent at -inf (p = 0)
  // where -inf - -inf would give NaN.
  const float max_log2 = row_max == -INFINITY ? 0.f : row_max * kLog2e;
  float thread_sum = 0.f;
#pragma unroll
  for (int u = 0; u < kCached; ++u) {
    cached[u] = exp_shifted(cached[u], max_log2);
    thread_sum += (cached[u].x + cached[u].y) + (cached[u].z + cached[u].w);
  }
  for (int64_t col = uncached_col0; col < end; col += kColsPerSweep) {
    const float4 e = exp_shifted(masked_scores(a, s_row, query, first, end, col), max_log2);
    thread_sum += (e.x + e.y) + (e.z + e.w);
  }
  const float row_sum = block_reduce(thread_sum, SumOp{}, sum_partials);
  const float inv_sum = row_sum > 0.f ? 1.f / row_sum : 0.f;  // fully masked: P = 0, so O = 0

  // Every column below Sk gets written, masked ones with 0: the PV GEMM reads the whole row.
#pragma unroll
  for (int u = 0; u < kCached; ++u) {
    const int64_t col = col0 + u * kColsPerSweep;
    if (col < a.seqlen_k) store_probs(p_row, col, cached[u], inv_sum);
  }
  for (int64_t col = uncached_col0; col < a.seqlen_k; col += kColsPerSweep) {
    store_probs(p_row, col, exp_shifted(masked_scores(a, s_row, query, first, end, col), max_log2),
                inv_sum);
  }
  if (a.lse != nullptr && threadIdx.x == 0) {
    a.lse[row] = row_sum > 0.f ? row_max + logf(row_sum) : -INFINITY;
  }
}

template <typename T>
Status launch_softmax(const SoftmaxArgs& args, int64_t rows, cudaStream_t stream) {
  const int64_t sweeps = (args.seqlen_k + kColsPerSweep - 1) / kColsPerSweep;
  const dim3 grid(static_cast<unsigned>(rows));
  // The smallest register cache that holds the row, so short rows do not pay for unused registers.
  if (sweeps <= 1) {
    softmax_rows_kernel<T, 1><<<grid, kSoftmaxThreads, 0, stream>>>(args);
  } else if (sweeps <= 2) {
    softmax_rows_kernel<T, 2><<<grid, kSoftmaxThreads, 0, stream>>>(args);
  } else if (sweeps <= 4) {
    softmax_rows_kernel<T, 4><<<grid, kSoftmaxThreads, 0, stream>>>(args);
  } else if (sweeps <= 8) {
    softmax_rows_kernel<T, 8><<<grid, kSoftmaxThreads, 0, stream>>>(args);
  } else {
    softmax_rows_kernel<T, kMaxCachedVectors><<<grid, kSoftmaxThreads, 0, stream>>>(args);
  }
  return launch_status(cudaGetLastError(), "unfused softmax_rows_kernel");
}

// ---------------------------------------------------------------------------------------------
// Host side.

// cuBLAS needs a leading dimension >= the rows of the column-major operand (D); a sequence of
// length 1 has no meaningful seq stride, so D stands in for it.
int64_t seq_ld(const Strides& s, int64_t seqlen, int64_t head_dim) {
  return seqlen == 1 ? head_dim : s.seq;
}

bool fits_int(int64_t value) { return value <= INT_MAX; }

const char* unfused_rejects(const Problem& problem, const cudaDeviceProp&) {
  if (const char* why = rejects_varlen(problem); why[0] != '\0') return why;
  const AttentionParams& p = problem.params;
  // cuBLAS takes sizes and leading dimensions as int; the softmax grid has one block per row.
  if (!fits_int(p.seqlen_q) || !fits_int(row_pitch(p))) {
    return "needs seqlen_q and seqlen_k below 2^31 (cuBLAS sizes are int)";
  }
  if (!fits_int(p.batch * p.heads_q))
    return "needs batch * heads_q below 2^31 (cuBLAS batch count)";
  if (!fits_int(p.batch * p.heads_q * p.seqlen_q)) {
    return "needs batch * heads_q * seqlen_q below 2^31 (one softmax block per row)";
  }
  size_t elements = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q),
                             static_cast<size_t>(row_pitch(p)), &elements) ||
      elements > SIZE_MAX / (sizeof(float) + kElementBytes)) {
    return "would need a score workspace larger than 64-bit sizes can hold";
  }
  // cuBLAS leading dimensions: at least D (rows must not overlap) and int.
  struct SeqStride {
    const Strides& strides;
    int64_t seqlen;
    const char* too_small;
    const char* too_large;
  };
  const SeqStride seq_strides[] = {
      {p.q.strides, p.seqlen_q, "needs q's seq stride >= head_dim (cuBLAS leading dimension)",
       "needs q's seq stride below 2^31 (cuBLAS leading dimension)"},
      {p.k.strides, p.seqlen_k, "needs k's seq stride >= head_dim (cuBLAS leading dimension)",
       "needs k's seq stride below 2^31 (cuBLAS leading dimension)"},
      {p.v.strides, p.seqlen_k, "needs v's seq stride >= head_dim (cuBLAS leading dimension)",
       "needs v's seq stride below 2^31 (cuBLAS leading dimension)"},
      {p.o.strides, p.seqlen_q, "needs o's seq stride >= head_dim (cuBLAS leading dimension)",
       "needs o's seq stride below 2^31 (cuBLAS leading dimension)"},
  };
  for (const SeqStride& s : seq_strides) {
    const int64_t ld = seq_ld(s.strides, s.seqlen, p.head_dim);
    if (ld < p.head_dim) return s.too_small;
    if (!fits_int(ld)) return s.too_large;
  }
  return "";
}

size_t unfused_workspace_bytes(const Problem& problem) {
  return workspace_layout(problem.params).total;
}

Status launch_unfused(const Problem& problem, void* workspace, cudaStream_t stream) {
  const AttentionParams& p = problem.params;
  const WorkspaceLayout layout = workspace_layout(p);
  char* base = static_cast<char*>(workspace);
  const int64_t heads = p.batch * p.heads_q;
  const int64_t pitch = row_pitch(p);
  const long long score_stride = p.seqlen_q * pitch;  // elements between heads of S and of P
  float* scores = reinterpret_cast<float*>(base + layout.scores);
  char* probs = base + layout.probs;
  const cudaDataType_t io_type = p.q.dtype == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;

  const int64_t group = problem.group();
  const HeadOffsets q = head_offsets(p.q.data, p.q.strides, 1);
  const HeadOffsets k = head_offsets(p.k.data, p.k.strides, group);
  const HeadOffsets v = head_offsets(p.v.data, p.v.strides, group);
  const HeadOffsets o = head_offsets(p.o.data, p.o.strides, 1);
  long long q_stride = 0, k_stride = 0, v_stride = 0, o_stride = 0;
  const bool qk_strided = uniform_stride(q, p.batch, p.heads_q, &q_stride) &&
                          uniform_stride(k, p.batch, p.heads_q, &k_stride);
  const bool pv_strided = uniform_stride(v, p.batch, p.heads_q, &v_stride) &&
                          uniform_stride(o, p.batch, p.heads_q, &o_stride);

  const auto array = [&](int index) {
    return reinterpret_cast<void**>(base + layout.pointers) + index * heads;
  };
  const GemmPointers ptrs{
      const_cast<const void**>(array(0)), const_cast<const void**>(array(1)), array(2),
      const_cast<const void**>(array(3)), const_cast<const void**>(array(4)), array(5)};
  if (!qk_strided || !pv_strided) {
    const PointerArgs args{q,
                           k,
                           v,
                           o,
                           reinterpret_cast<char*>(scores),
                           probs,
                           score_stride * static_cast<int64_t>(sizeof(float)),
                           score_stride * kElementBytes,
                           p.heads_q,
                           heads};
    const unsigned blocks = static_cast<unsigned>((heads + kPointerThreads - 1) / kPointerThreads);
    gemm_pointers_kernel<<<blocks, kPointerThreads, 0, stream>>>(args, ptrs);
    if (Status s = launch_status(cudaGetLastError(), "unfused gemm_pointers_kernel"); !s.ok())
      return s;
  }

  cublasHandle_t handle = nullptr;
  if (Status s = cublas_handle(stream, &handle); !s.ok()) return s;
  const int sq = static_cast<int>(p.seqlen_q);
  const int sk = static_cast<int>(p.seqlen_k);
  const int d = static_cast<int>(p.head_dim);
  const int batch_count = static_cast<int>(heads);
  const int ld_q = static_cast<int>(seq_ld(p.q.strides, p.seqlen_q, p.head_dim));
  const int ld_k = static_cast<int>(seq_ld(p.k.strides, p.seqlen_k, p.head_dim));
  const int ld_v = static_cast<int>(seq_ld(p.v.strides, p.seqlen_k, p.head_dim));
  const int ld_o = static_cast<int>(seq_ld(p.o.strides, p.seqlen_q, p.head_dim));
  const int ld_s = static_cast<int>(pitch);
  const float zero = 0.f;
  const float one = 1.f;

  // S^T [Sk, Sq] = scale * op_T(K as [D, Sk]) x (Q as [D, Sq]), fp32 out.
  cublasStatus_t qk = CUBLAS_STATUS_SUCCESS;
  if (qk_strided) {
    qk = cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, sk, sq, d, &problem.scale,
                                    p.k.data, io_type, ld_k, k_stride, p.q.data, io_type, ld_q,
                                    q_stride, &zero, scores, CUDA_R_32F, ld_s, score_stride,
                                    batch_count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  } else {
    qk = cublasGemmBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, sk, sq, d, &problem.scale, ptrs.k,
                             io_type, ld_k, ptrs.q, io_type, ld_q, &zero, ptrs.s, CUDA_R_32F, ld_s,
                             batch_count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  if (Status s = cublas_status(qk, "unfused QK^T cublasGemm(Strided)BatchedEx"); !s.ok()) return s;

  const SoftmaxArgs softmax{scores,     probs, p.lse,        p.seqlen_q,
                            p.seqlen_k, pitch, problem.mask, problem.softcap};
  const int64_t rows = heads * p.seqlen_q;
  const Status softmax_status = p.q.dtype == DType::kFloat16
                                    ? launch_softmax<__half>(softmax, rows, stream)
                                    : launch_softmax<__nv_bfloat16>(softmax, rows, stream);
  if (!softmax_status.ok()) return softmax_status;

  // O^T [D, Sq] = (V as [D, Sk]) x (P^T as [Sk, Sq]), written in place with O's seq stride.
  cublasStatus_t pv = CUBLAS_STATUS_SUCCESS;
  if (pv_strided) {
    pv = cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, sq, sk, &one, p.v.data,
                                    io_type, ld_v, v_stride, probs, io_type, ld_s, score_stride,
                                    &zero, p.o.data, io_type, ld_o, o_stride, batch_count,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  } else {
    pv = cublasGemmBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, sq, sk, &one, ptrs.v, io_type,
                             ld_v, ptrs.p, io_type, ld_s, &zero, ptrs.o, io_type, ld_o, batch_count,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  return cublas_status(pv, "unfused PV cublasGemm(Strided)BatchedEx");
}

}  // namespace

const BackendImpl& unfused_backend() {
  static constexpr BackendImpl kImpl{unfused_rejects, unfused_workspace_bytes, launch_unfused};
  return kImpl;
}

}  // namespace flashcore::detail
