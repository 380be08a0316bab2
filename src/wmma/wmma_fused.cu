// WMMA fused attention. A CTA of 4 warps owns 64 query rows, 16 per warp; K/V tiles of 32 keys are
// staged in shared memory. wmma fragments have an unspecified register layout, so everything that
// needs per-row access (softmax, O rescaling) goes through shared memory: S and O are kept there in
// fp32 and each warp only ever touches its own 16 rows of them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>

#include "common/feature_gates.hpp"
#include "common/fp16_bf16.hpp"
#include "common/launch_status.hpp"
#include "wmma/wmma_fused.hpp"

namespace flashcore::detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 16;  // wmma m16n16k16
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockM = kWarps * kTile;  // one 16-row strip per warp
constexpr int kBlockN = 32;
constexpr int kVector = 8;  // elements per 16-byte load
constexpr int64_t kMaxGridYZ = 65535;

struct WmmaParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  Strides qs, ks, vs, os;
  int64_t heads, group, seqlen_q, seqlen_k, head_dim;
  float scale;
  WindowMask<int64_t> mask;
  Softcap softcap;
};

// Shared memory carve-up, in bytes, for a head dim; every section stays 128-byte aligned because
// every size is a multiple of 128 for head_dim % 16 == 0.
struct SmemLayout {
  int q, k, v, s, p, o, stats, total;
  __host__ __device__ explicit SmemLayout(int head_dim) {
    q = 0;
    k = q + kBlockM * head_dim * 2;
    v = k + kBlockN * head_dim * 2;
    s = v + kBlockN * head_dim * 2;
    p = s + kBlockM * kBlockN * 4;
    o = p + kBlockM * kBlockN * 2;
    stats = o + kBlockM * head_dim * 4;
    total = stats + 3 * kBlockM * 4;  // row max, row sum, rescale factor
  }
};

// Copies rows [row0, row0 + rows) x head_dim of a strided tensor slice into a dense smem tile,
// writing zeros for rows >= limit.
template <typename Element>
__device__ void load_rows(Element* dst, const Element* src, int64_t row_stride, int64_t row0,
                          int rows, int64_t limit, int head_dim) {
  const int vectors = head_dim / kVector;
  for (int idx = threadIdx.x; idx < rows * vectors; idx += kThreads) {
    const int r = idx / vectors;
    const int c = (idx % vectors) * kVector;
    uint4 value = make_uint4(0u, 0u, 0u, 0u);
    if (row0 + r < limit)
      value = *reinterpret_cast<const uint4*>(src + (row0 + r) * row_stride + c);
    *reinterpret_cast<uint4*>(dst + r * head_dim + c) = value;
  }
}

template <typename Element>
__global__ void __launch_bounds__(kThreads)
    wmma_fused_kernel(const __grid_constant__ WmmaParams p) {
  extern __shared__ __align__(128) char smem[];
  const int D = static_cast<int>(p.head_dim);
  const SmemLayout layout(D);
  auto* q_s = reinterpret_cast<Element*>(smem + layout.q);
  auto* k_s = reinterpret_cast<Element*>(smem + layout.k);
  auto* v_s = reinterpret_cast<Element*>(smem + layout.v);
  auto* s_s = reinterpret_cast<float*>(smem + layout.s);
  auto* p_s = reinterpret_cast<Element*>(smem + layout.p);
  auto* o_s = reinterpret_cast<float*>(smem + layout.o);
  float* row_max = reinterpret_cast<float*>(smem + layout.stats);
  float* row_sum = row_max + kBlockM;
  float* row_rescale = row_sum + kBlockM;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t b = blockIdx.z, h = blockIdx.y, kv_h = h / p.group;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kBlockM;
  const int64_t m_end = m0 + kBlockM < p.seqlen_q ? m0 + kBlockM : p.seqlen_q;
  const auto* q = static_cast<const Element*>(p.q) + b * p.qs.batch + h * p.qs.head;
  const auto* k = static_cast<const Element*>(p.k) + b * p.ks.batch + kv_h * p.ks.head;
  const auto* v = static_cast<const Element*>(p.v) + b * p.vs.batch + kv_h * p.vs.head;

  load_rows(q_s, q, p.qs.seq, m0, kBlockM, p.seqlen_q, D);
  for (int i = threadIdx.x; i < kBlockM * D; i += kThreads) o_s[i] = 0.f;
  for (int i = threadIdx.x; i < kBlockM; i += kThreads) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.f;
  }

  // Only key tiles some row of the block can see; the per-element mask handles the rest.
  const int64_t key_begin = p.mask.block_first_key(m0) / kBlockN * kBlockN;
  const int64_t key_end = p.mask.block_end_key(m_end);
  const int warp_row = warp * kTile;  // first row of this warp's strip inside the block

  for (int64_t n0 = key_begin; n0 < key_end; n0 += kBlockN) {
    __syncthreads();  // everyone is done with the previous K/V tile
    load_rows(k_s, k, p.ks.seq, n0, kBlockN, p.seqlen_k, D);
    load_rows(v_s, v, p.vs.seq, n0, kBlockN, p.seqlen_k, D);
    __syncthreads();

    // S strip = Q strip (16 x D) K^T. K is stored [key][dim], which is B = K^T in column-major.
    for (int nt = 0; nt < kBlockN / kTile; ++nt) {
      wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kt = 0; kt < D / kTile; ++kt) {
        wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, Element, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, Element, wmma::col_major> bk;
        wmma::load_matrix_sync(a, q_s + warp_row * D + kt * kTile, D);
        wmma::load_matrix_sync(bk, k_s + nt * kTile * D + kt * kTile, D);
        wmma::mma_sync(acc, a, bk, acc);
      }
      wmma::store_matrix_sync(s_s + warp_row * kBlockN + nt * kTile, acc, kBlockN,
                              wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: lane r < 16 owns row warp_row + r of the strip.
    if (lane < kTile) {
      const int r = warp_row + lane;
      const int64_t row = m0 + r;
      float* scores = s_s + r * kBlockN;
      float tile_max = -INFINITY;
      for (int c = 0; c < kBlockN; ++c) {
        const int64_t key = n0 + c;
        const bool visible = row < p.seqlen_q && p.mask.visible(row, key);
        scores[c] = visible ? p.softcap(scores[c] * p.scale) : -INFINITY;
        tile_max = fmaxf(tile_max, scores[c]);
      }
      const float new_max = fmaxf(row_max[r], tile_max);
      const float base = new_max == -INFINITY ? 0.f : new_max;  // keeps exp(-inf - max) at 0
      const float rescale = expf(row_max[r] - base);
      float sum = 0.f;
      for (int c = 0; c < kBlockN; ++c) {
        const float prob = expf(scores[c] - base);
        sum += prob;
        p_s[r * kBlockN + c] = from_float<Element>(prob);
      }
      row_sum[r] = row_sum[r] * rescale + sum;
      row_max[r] = new_max;
      row_rescale[r] = rescale;
    }
    __syncwarp();
    for (int i = lane; i < kTile * D; i += 32)
      o_s[warp_row * D + i] *= row_rescale[warp_row + i / D];
    __syncwarp();

    // O strip += P strip (16 x 32) V, accumulating through the fp32 O strip in shared memory.
    for (int dt = 0; dt < D / kTile; ++dt) {
      wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> acc;
      wmma::load_matrix_sync(acc, o_s + warp_row * D + dt * kTile, D, wmma::mem_row_major);
      for (int kt = 0; kt < kBlockN / kTile; ++kt) {
        wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, Element, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, Element, wmma::row_major> bv;
        wmma::load_matrix_sync(a, p_s + warp_row * kBlockN + kt * kTile, kBlockN);
        wmma::load_matrix_sync(bv, v_s + kt * kTile * D + dt * kTile, D);
        wmma::mma_sync(acc, a, bv, acc);
      }
      wmma::store_matrix_sync(o_s + warp_row * D + dt * kTile, acc, D, wmma::mem_row_major);
    }
  }
  __syncthreads();

  // Epilogue: O = acc / sum; a row that saw no key has sum 0 and gets O = 0, LSE = -inf.
  auto* o = static_cast<Element*>(p.o) + b * p.os.batch + h * p.os.head;
  for (int idx = threadIdx.x; idx < kBlockM * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    if (m0 + r >= m_end) continue;
    const float inv = row_sum[r] > 0.f ? 1.f / row_sum[r] : 0.f;
    o[(m0 + r) * p.os.seq + c] = from_float<Element>(o_s[idx] * inv);
  }
  if (p.lse != nullptr) {
    for (int r = threadIdx.x; r < kBlockM; r += kThreads) {
      if (m0 + r >= m_end) continue;
      p.lse[(b * p.heads + h) * p.seqlen_q + m0 + r] =
          row_sum[r] > 0.f ? row_max[r] + logf(row_sum[r]) : -INFINITY;
    }
  }
}

}  // namespace

const char* wmma_rejects(const Problem& problem, const cudaDeviceProp& device) {
  if (const char* why = rejects_varlen(problem); why[0] != '\0') return why;
  const AttentionParams& a = problem.params;
  if (device.major < 8) return "needs an sm_80 or newer GPU (bf16 wmma)";
  if (a.head_dim % kTile != 0) return "needs head_dim to be a multiple of 16 (wmma tiles)";
  if (a.heads_q > kMaxGridYZ || a.batch > kMaxGridYZ)
    return "supports batch and heads_q up to 65535";
  if (static_cast<size_t>(SmemLayout(static_cast<int>(a.head_dim)).total) >
      device.sharedMemPerBlockOptin) {
    return "needs more shared memory per block than this GPU allows for this head_dim";
  }
  return "";
}

Status launch_wmma(const Problem& problem, void*, cudaStream_t stream) {
  const AttentionParams& a = problem.params;
  WmmaParams p{a.q.data,    a.k.data,    a.v.data,      a.o.data,     a.lse,           a.q.strides,
               a.k.strides, a.v.strides, a.o.strides,   a.heads_q,    problem.group(), a.seqlen_q,
               a.seqlen_k,  a.head_dim,  problem.scale, problem.mask, problem.softcap};
  const int smem = SmemLayout(static_cast<int>(a.head_dim)).total;
  const dim3 grid(static_cast<unsigned>((a.seqlen_q + kBlockM - 1) / kBlockM),
                  static_cast<unsigned>(a.heads_q), static_cast<unsigned>(a.batch));
  const auto launch = [&](auto kernel) {
    if (cudaError_t err =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        err != cudaSuccess) {
      return launch_status(err, "wmma_fused_kernel");
    }
    kernel<<<grid, kThreads, smem, stream>>>(p);
    return launch_status(cudaGetLastError(), "wmma_fused_kernel");
  };
  return a.q.dtype == DType::kFloat16 ? launch(wmma_fused_kernel<__half>)
                                      : launch(wmma_fused_kernel<__nv_bfloat16>);
}

}  // namespace flashcore::detail
