// The FlashCore journey's first step: one fused kernel, no tensor cores.
//
// A CTA owns a tile of query rows of one (batch, head) and walks the keys that tile can see in
// tiles of kTileK, staged through shared memory. Each query row belongs to a small group of
// threads (kThreadsPerRow); each thread keeps its slice of q and of the output accumulator in fp32
// registers, computes partial dot products for its slice and completes them with warp shuffles.
// Softmax is online: a running max and sum per row, the accumulator rescaled when the max grows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>

#include "baseline/scalar_fused.hpp"
#include "common/feature_gates.hpp"
#include "common/launch_status.hpp"

namespace flashcore::detail {
namespace {

constexpr int kThreads = 256;
// Two CTAs per SM (<= 128 registers per thread): one CTA's tile loads hide behind the other's math.
constexpr int kMinCtasPerSm = 2;
constexpr int kVecElems = 8;  // one 16-byte vector of fp16/bf16
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int kHeadDim>
struct TileConfig {
  // Four threads per row up to D = 128 (<= 32 dims each of q and the accumulator); eight above, so
  // that the per-thread state stays near 100 registers and two 256-thread CTAs fit on an SM.
  static constexpr int kThreadsPerRow = kHeadDim > 128 ? 8 : 4;
  static constexpr int kRows = kThreads / kThreadsPerRow;
  static constexpr int kVecsPerKey = kHeadDim / kVecElems;
  static constexpr int kVecsPerThread = kVecsPerKey / kThreadsPerRow;
  static constexpr int kDimsPerThread = kVecsPerThread * kVecElems;
  // Keys per tile. A tile's scores live in registers between its QK and PV halves, next to q and
  // the accumulator: 32 keys pay the online-softmax rescale once per 32, but from 24 dims per
  // thread (D = 96, 128, 192, 256) 32 scores on top of q and the accumulator spill under the
  // 128-register budget, so those take 16 (the rescale is still < 5% of the tile's FMAs).
  static constexpr int kTileK = kDimsPerThread >= 24 ? 16 : 32;
  static constexpr int kTileVecs = kTileK * kVecsPerKey;  // 16-byte vectors in one K or V tile
  static_assert(kVecsPerKey % kThreadsPerRow == 0,
                "head dim must split evenly over a row's threads");
};

struct ScalarArgs {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // may be null
  Strides q_strides, k_strides, v_strides, o_strides;
  int64_t seqlen_q;
  int64_t heads_q;
  int64_t group;
  int64_t num_q_tiles;
  float scale;
  WindowMask<int64_t> mask;
  Softcap softcap;
};

template <typename T>
struct Convert;
template <>
struct Convert<__half> {
  static __device__ void unpack(const uint4& raw, float* out) {
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < kVecElems / 2; ++i) {
      const float2 f = __half22float2(h[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
  static __device__ uint4 pack(const float* in) {
    uint4 raw;
    __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
    for (int i = 0; i < kVecElems / 2; ++i) h[i] = __floats2half2_rn(in[2 * i], in[2 * i + 1]);
    return raw;
  }
};
template <>
struct Convert<__nv_bfloat16> {
  static __device__ void unpack(const uint4& raw, float* out) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < kVecElems / 2; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
  static __device__ uint4 pack(const float* in) {
    uint4 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < kVecElems / 2; ++i) h[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
    return raw;
  }
};

// Copies keys [key_begin, key_begin + tile_keys) of one head into shared memory, zero-filling the
// rest of the tile: a tail key gets p = 0, and 0 * (stale bits that may be NaN) would poison O.
template <typename T, int kHeadDim>
__device__ void load_tile(uint4* tile, const T* head, int64_t seq_stride, int64_t key_begin,
                          int tile_keys) {
  using Cfg = TileConfig<kHeadDim>;
  for (int i = threadIdx.x; i < Cfg::kTileVecs; i += kThreads) {
    const int key = i / Cfg::kVecsPerKey;
    const int vec = i % Cfg::kVecsPerKey;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (key < tile_keys) {
      value =
          *reinterpret_cast<const uint4*>(head + (key_begin + key) * seq_stride + vec * kVecElems);
    }
    tile[i] = value;
  }
}

// Thread `lane` of a row owns the 16-byte vectors lane, lane + kThreadsPerRow, ... of each row of
// q, K, V and O: at every step the row's threads read consecutive vectors of one key, so shared
// memory reads are conflict-free (and broadcast across the rows of a warp) for every head dim.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm) scalar_fused_kernel(const ScalarArgs a) {
  using Cfg = TileConfig<kHeadDim>;
  __shared__ uint4 k_tile[Cfg::kTileVecs];
  __shared__ uint4 v_tile[Cfg::kTileVecs];

  // Query tiles of one head are adjacent in launch order (and heads of one KV group too), so the
  // CTAs that share K/V run together and hit L2.
  const int64_t q_tile = blockIdx.x % a.num_q_tiles;
  const int64_t bh = blockIdx.x / a.num_q_tiles;
  const int64_t b = bh / a.heads_q;
  const int64_t h = bh % a.heads_q;
  const int64_t h_kv = h / a.group;
  const int64_t row_begin = q_tile * Cfg::kRows;
  const int64_t row_end = min(row_begin + Cfg::kRows, a.seqlen_q);
  const int lane = threadIdx.x % Cfg::kThreadsPerRow;
  const int64_t row = row_begin + threadIdx.x / Cfg::kThreadsPerRow;
  const bool row_valid = row < a.seqlen_q;

  // q is pre-scaled so that a dot product is the scaled score.
  float q[Cfg::kDimsPerThread];
  {
    const T* q_row = static_cast<const T*>(a.q) + b * a.q_strides.batch + h * a.q_strides.head +
                     row * a.q_strides.seq;
#pragma unroll
    for (int u = 0; u < Cfg::kVecsPerThread; ++u) {
      uint4 raw = make_uint4(0, 0, 0, 0);
      if (row_valid) {
        raw = *reinterpret_cast<const uint4*>(q_row + (u * Cfg::kThreadsPerRow + lane) * kVecElems);
      }
      Convert<T>::unpack(raw, &q[u * kVecElems]);
#pragma unroll
      for (int e = 0; e < kVecElems; ++e) q[u * kVecElems + e] *= a.scale;
    }
  }
  const T* k_head = static_cast<const T*>(a.k) + b * a.k_strides.batch + h_kv * a.k_strides.head;
  const T* v_head = static_cast<const T*>(a.v) + b * a.v_strides.batch + h_kv * a.v_strides.head;

  float acc[Cfg::kDimsPerThread];
#pragma unroll
  for (int d = 0; d < Cfg::kDimsPerThread; ++d) acc[d] = 0.f;
  float row_max = -INFINITY;  // in log2 units: scores are kept as s * log2(e) for exp2f
  float row_sum = 0.f;

  // Tiles outside the keys any row of this CTA can see are skipped; tiles inside it where every
  // (row, key) is visible skip the element mask.
  const int64_t kv_begin = a.mask.block_first_key(row_begin);
  const int64_t kv_end = a.mask.block_end_key(row_end);
  for (int64_t key_begin = kv_begin; key_begin < kv_end; key_begin += Cfg::kTileK) {
    const int64_t key_end = min(key_begin + Cfg::kTileK, kv_end);
    const int tile_keys = static_cast<int>(key_end - key_begin);
    __syncthreads();  // every thread is done with the previous tile
    load_tile<T, kHeadDim>(k_tile, k_head, a.k_strides.seq, key_begin, tile_keys);
    load_tile<T, kHeadDim>(v_tile, v_head, a.v_strides.seq, key_begin, tile_keys);
    __syncthreads();
    const bool needs_mask = tile_keys < Cfg::kTileK ||
                            !a.mask.tile_fully_visible(row_begin, row_end, key_begin, key_end);

    float scores[Cfg::kTileK];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < Cfg::kTileK; ++j) {
      float dot = 0.f;
#pragma unroll
      for (int u = 0; u < Cfg::kVecsPerThread; ++u) {
        float kv[kVecElems];
        Convert<T>::unpack(k_tile[j * Cfg::kVecsPerKey + u * Cfg::kThreadsPerRow + lane], kv);
#pragma unroll
        for (int e = 0; e < kVecElems; ++e) dot = fmaf(q[u * kVecElems + e], kv[e], dot);
      }
      // The row's threads are adjacent lanes of one warp; xor offsets below kThreadsPerRow stay
      // inside the group, and every lane ends with the full dot product.
#pragma unroll
      for (int offset = Cfg::kThreadsPerRow / 2; offset > 0; offset /= 2) {
        dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      }
      float s = a.softcap(dot) * kLog2e;
      if (needs_mask && !(j < tile_keys && a.mask.visible(row, key_begin + j))) s = -INFINITY;
      scores[j] = s;
      tile_max = fmaxf(tile_max, s);
    }

    // While every key seen so far is masked the max is -inf; shifting by 0 instead keeps all
    // exponents at -inf (p = 0, correction 0) where -inf - -inf would give NaN.
    const float new_max = fmaxf(row_max, tile_max);
    const float shift = new_max == -INFINITY ? 0.f : new_max;
    const float correction = exp2f(row_max - shift);
    row_max = new_max;
    row_sum *= correction;
#pragma unroll
    for (int d = 0; d < Cfg::kDimsPerThread; ++d) acc[d] *= correction;
#pragma unroll
    for (int j = 0; j < Cfg::kTileK; ++j) {
      const float p = exp2f(scores[j] - shift);
      row_sum += p;
#pragma unroll
      for (int u = 0; u < Cfg::kVecsPerThread; ++u) {
        float vv[kVecElems];
        Convert<T>::unpack(v_tile[j * Cfg::kVecsPerKey + u * Cfg::kThreadsPerRow + lane], vv);
#pragma unroll
        for (int e = 0; e < kVecElems; ++e)
          acc[u * kVecElems + e] = fmaf(p, vv[e], acc[u * kVecElems + e]);
      }
    }
  }

  if (!row_valid) return;
  // A fully masked row never added a p > 0 (a visible key contributes exp2(0) = 1 at the max), so
  // its sum is 0: O = 0 and LSE = -inf.
  const float inv_sum = row_sum > 0.f ? 1.f / row_sum : 0.f;
  T* o_row =
      static_cast<T*>(a.o) + b * a.o_strides.batch + h * a.o_strides.head + row * a.o_strides.seq;
#pragma unroll
  for (int u = 0; u < Cfg::kVecsPerThread; ++u) {
    float out[kVecElems];
#pragma unroll
    for (int e = 0; e < kVecElems; ++e) out[e] = acc[u * kVecElems + e] * inv_sum;
    *reinterpret_cast<uint4*>(o_row + (u * Cfg::kThreadsPerRow + lane) * kVecElems) =
        Convert<T>::pack(out);
  }
  if (a.lse != nullptr && lane == 0) {
    a.lse[bh * a.seqlen_q + row] = row_sum > 0.f ? (row_max + log2f(row_sum)) * kLn2 : -INFINITY;
  }
}

int64_t num_q_tiles(const Problem& problem, int rows_per_cta) {
  return (problem.params.seqlen_q + rows_per_cta - 1) / rows_per_cta;
}

template <typename T, int kHeadDim>
Status launch_typed(const Problem& problem, cudaStream_t stream) {
  const AttentionParams& p = problem.params;
  const int64_t tiles = num_q_tiles(problem, TileConfig<kHeadDim>::kRows);
  const ScalarArgs args{p.q.data,    p.k.data,      p.v.data,     p.o.data,
                        p.lse,       p.q.strides,   p.k.strides,  p.v.strides,
                        p.o.strides, p.seqlen_q,    p.heads_q,    problem.group(),
                        tiles,       problem.scale, problem.mask, problem.softcap};
  const dim3 grid(static_cast<unsigned>(tiles * p.batch * p.heads_q));
  scalar_fused_kernel<T, kHeadDim><<<grid, kThreads, 0, stream>>>(args);
  return launch_status(cudaGetLastError(), "scalar_fused_kernel");
}

// Every compiled instantiation of the scalar kernel.
struct Instance {
  int64_t head_dim;
  DType dtype;
  Status (*launch)(const Problem&, cudaStream_t);
};
constexpr Instance kInstances[] = {
    {32, DType::kFloat16, launch_typed<__half, 32>},
    {64, DType::kFloat16, launch_typed<__half, 64>},
    {96, DType::kFloat16, launch_typed<__half, 96>},
    {128, DType::kFloat16, launch_typed<__half, 128>},
    {192, DType::kFloat16, launch_typed<__half, 192>},
    {256, DType::kFloat16, launch_typed<__half, 256>},
    {32, DType::kBFloat16, launch_typed<__nv_bfloat16, 32>},
    {64, DType::kBFloat16, launch_typed<__nv_bfloat16, 64>},
    {96, DType::kBFloat16, launch_typed<__nv_bfloat16, 96>},
    {128, DType::kBFloat16, launch_typed<__nv_bfloat16, 128>},
    {192, DType::kBFloat16, launch_typed<__nv_bfloat16, 192>},
    {256, DType::kBFloat16, launch_typed<__nv_bfloat16, 256>},
};

const Instance* find_instance(const Problem& problem) {
  for (const Instance& instance : kInstances) {
    if (instance.head_dim == problem.params.head_dim && instance.dtype == problem.params.q.dtype) {
      return &instance;
    }
  }
  return nullptr;
}

// The smallest row tile of any instantiation, which gives the most CTAs.
constexpr int kMinRowsPerCta = TileConfig<256>::kRows;

}  // namespace

const char* scalar_rejects(const Problem& problem, const cudaDeviceProp&) {
  if (const char* why = rejects_varlen(problem); why[0] != '\0') return why;
  if (find_instance(problem) == nullptr) {
    return "supports head_dim 32, 64, 96, 128, 192 and 256 only";
  }
  const AttentionParams& p = problem.params;
  if (num_q_tiles(problem, kMinRowsPerCta) * p.batch * p.heads_q > INT_MAX) {
    return "needs batch * heads_q * ceil(seqlen_q / 32) below 2^31 (one CTA per query tile)";
  }
  return "";
}

Status launch_scalar(const Problem& problem, void*, cudaStream_t stream) {
  return find_instance(problem)->launch(problem, stream);
}

}  // namespace flashcore::detail
