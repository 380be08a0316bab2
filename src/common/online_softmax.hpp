// Online softmax on the mma C fragments, entirely in registers. Shared by the sm80 kernels and the
// sm90 one: a wgmma m64nN accumulator gives each warp of the warpgroup exactly this m16 x N
// fragment (warp w holds rows 16w..16w+15).
//
// C fragment of an m16n8 tile: lane l holds rows g = l/4 (elements 0, 1) and g + 8 (elements 2,
// 3), columns 2*(l%4) and +1. A row therefore lives in the 4 lanes of one quad, and every row
// reduction is two xor-shuffles (1, 2) inside the quad. Scores arrive in "raw" units x (masked
// ones -inf) together with a positive factor that takes them to the log2 domain, so each
// probability is one FFMA and one MUFU.EX2: exp2(x * factor - max * factor).
#pragma once

#include <cmath>

namespace flashcore {

inline constexpr float kLn2 = 0.69314718055994530942f;
inline constexpr float kLog2e = 1.44269504088896340736f;

// ex2.approx.ftz: one MUFU op. exp2f without -use_fast_math adds a denormal range fix-up around
// it; results below 2^-126 flush to 0, far under what the fp16/bf16 P can hold anyway.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// State of the 2 rows (g, g + 8) a lane holds in each of a warp's kMTiles m16 tiles.
template <int kMTiles>
struct OnlineSoftmax {
  float row_max[kMTiles][2];  // running max in raw units; -inf while every key seen was masked
  float row_sum[kMTiles][2];  // this lane's share of the running sum; quad-reduced at the end

  __device__ __forceinline__ OnlineSoftmax() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        row_max[mt][half] = -INFINITY;
        row_sum[mt][half] = 0.f;
      }
    }
  }

  // Turns the scores s of one KV tile into probabilities in place and rescales the O accumulators
  // by exp2(old max - new max). The rescale is unconditional: a branch per row would split the
  // warp's straight-line MMA/softmax code into blocks the scheduler cannot interleave.
  template <int kNTiles, int kOutNTiles>
  __device__ __forceinline__ void update(float (&s)[kMTiles][kNTiles][4],
                                         float (&o)[kMTiles][kOutNTiles][4], float factor) {
    float correction[kMTiles][2];
    update_scores(s, factor, correction);
    rescale(o, correction);
  }

  // update() in two halves, for kernels whose O accumulators are still being written by an
  // asynchronous GEMM (sm90: the previous tile's P V) while this tile's softmax runs: the scores
  // half needs only s, and the per-row corrections wait for rescale() until O is free.
  // Two options, taken by the sm90 mainloop (the max chains where its traits say so, the lazy max
  // always; docs/perf.md, sessions 32-33); the defaults are the plain algorithm (sm80):
  //  - kMaxChains: the row max as that many independent fmax chains joined at the end, so that the
  //    first exp2 waits for N / 2 / kMaxChains + log2(kMaxChains) dependent FMNMX instead of N / 2.
  //  - kLazyMax: a row keeps its running max unless this block raises it by more than
  //    2^kLazyMaxSlackLog2 (log2 units). Every probability is then at most 2^kLazyMaxSlackLog2
  //    before normalization, far inside fp32 and the fp16/bf16 P, and O, the sum and the LSE stay
  //    relative to the same max, so the result is the same up to rounding. A row that keeps its
  //    max gets a correction of exactly 1, and a warp none of whose rows moved may skip O's rescale
  //    (most blocks after the first few: a new block rarely beats the running max by 256x).
  static constexpr float kLazyMaxSlackLog2 = 8.f;
  template <int kNTiles, int kMaxChains = 1, bool kLazyMax = false>
  __device__ __forceinline__ void update_scores(float (&s)[kMTiles][kNTiles][4], float factor,
                                                float (&correction)[kMTiles][2]) {
    static_assert(
        kMaxChains > 0 && (kMaxChains & (kMaxChains - 1)) == 0 && kNTiles % kMaxChains == 0,
        "a power-of-two number of chains, each as long as the others");
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float chains[kMaxChains];
        chains[0] = row_max[mt][half];
#pragma unroll
        for (int c = 1; c < kMaxChains; ++c) chains[c] = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          float& chain = chains[nt % kMaxChains];
          chain = fmaxf(chain, fmaxf(s[mt][nt][2 * half], s[mt][nt][2 * half + 1]));
        }
#pragma unroll
        for (int width = kMaxChains / 2; width > 0; width /= 2) {
#pragma unroll
          for (int c = 0; c < width; ++c) chains[c] = fmaxf(chains[c], chains[c + width]);
        }
        float new_max = quad_max(chains[0]);
        // The comparison is false for a row still without a visible key (-inf - -inf is NaN):
        // it keeps -inf, as below.
        const bool keep = kLazyMax && !((new_max - row_max[mt][half]) * factor > kLazyMaxSlackLog2);
        if (keep) new_max = row_max[mt][half];
        // A row with every key so far masked keeps max -inf; subtracting 0 instead keeps
        // exp2(-inf - max) = 0 rather than NaN (and its correction exp2(-inf) = 0 on zeros).
        const float base = new_max == -INFINITY ? 0.f : new_max * factor;
        correction[mt][half] = keep ? 1.f : fast_exp2(fmaf(row_max[mt][half], factor, -base));
        row_max[mt][half] = new_max;
        row_sum[mt][half] *= correction[mt][half];
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          s[mt][nt][2 * half] = fast_exp2(fmaf(s[mt][nt][2 * half], factor, -base));
          s[mt][nt][2 * half + 1] = fast_exp2(fmaf(s[mt][nt][2 * half + 1], factor, -base));
          sum += s[mt][nt][2 * half] + s[mt][nt][2 * half + 1];
        }
        row_sum[mt][half] += sum;
      }
    }
  }

  template <int kOutNTiles>
  __device__ __forceinline__ static void rescale(float (&o)[kMTiles][kOutNTiles][4],
                                                 const float (&correction)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
#pragma unroll
        for (int dt = 0; dt < kOutNTiles; ++dt) {
          o[mt][dt][2 * half] *= correction[mt][half];
          o[mt][dt][2 * half + 1] *= correction[mt][half];
        }
      }
    }
  }

  // Final per-row normalizer 1/sum (0 for a fully masked row, so O stays 0) and natural-log LSE
  // (-inf for a fully masked row). Every lane of the quad gets the same values.
  // kFast (the small-grid tiles): one MUFU op each for 1/sum and log2(sum). A row that saw a key
  // has sum >= 1 (its max contributes exp2(0)), where both are good to about 2 ulp, far below the
  // fp16/bf16 rounding of O. IEEE 1/x and logf put a slow-path branch and ~40 dependent
  // instructions on the launch-bound grids' critical path: 0.2 us of B1 H8 S512. The large tiles
  // keep them: their epilogue is amortized over many KV steps, and the edit moved their main-loop
  // code (hd256 2-4% slower; docs/perf.md v9).
  template <bool kFast>
  __device__ __forceinline__ void finalize(float factor, float (&inv_sum)[kMTiles][2],
                                           float (&lse)[kMTiles][2]) const {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float sum = quad_sum(row_sum[mt][half]);
        const bool empty = sum == 0.f || row_max[mt][half] == -INFINITY;
        if constexpr (kFast) {
          inv_sum[mt][half] = empty ? 0.f : __fdividef(1.f, sum);
          lse[mt][half] = empty ? -INFINITY : (row_max[mt][half] * factor + __log2f(sum)) * kLn2;
        } else {
          inv_sum[mt][half] = empty ? 0.f : 1.f / sum;
          lse[mt][half] = empty ? -INFINITY : row_max[mt][half] * factor * kLn2 + logf(sum);
        }
      }
    }
  }

  // finalize() with an attention sink (flashcore/flex/sinks.hpp): one more term exp2(sink *
  // factor) in each row's denominator, with no value. sink is in the scores' raw units. The
  // rows' max becomes M = max(row max, sink), so a large sink cannot overflow the sum; O was
  // accumulated relative to the row max, so inv_sum carries the exp2(row max - M) that takes it
  // to M. A row that saw no key gets O = 0 and LSE = sink (-inf when the sink is -inf too).
  __device__ __forceinline__ void finalize_with_sink(float factor, float sink,
                                                     float (&inv_sum)[kMTiles][2],
                                                     float (&lse)[kMTiles][2]) const {
    float sinks[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) sinks[mt][0] = sinks[mt][1] = sink;
    finalize_with_sink(factor, sinks, inv_sum, lse);
  }
  // The same with a sink per row (the thread's rows mt * 16 + lane / 4 + 8 * half): the rows of a
  // packed decode tile are different heads, each with its own sink.
  __device__ __forceinline__ void finalize_with_sink(float factor, const float (&sinks)[kMTiles][2],
                                                     float (&inv_sum)[kMTiles][2],
                                                     float (&lse)[kMTiles][2]) const {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float sink = sinks[mt][half];
        const float sum = quad_sum(row_sum[mt][half]);
        const float row = row_max[mt][half];
        const float top = fmaxf(row, sink);
        if (top == -INFINITY) {
          inv_sum[mt][half] = 0.f;
          lse[mt][half] = -INFINITY;
          continue;
        }
        // exp2(-inf) = 0: a row without keys keeps only the sink's term.
        const float rows_weight = exp2f((row - top) * factor);
        const float total = sum * rows_weight + exp2f((sink - top) * factor);
        inv_sum[mt][half] = rows_weight / total;
        lse[mt][half] = top * factor * kLn2 + logf(total);
      }
    }
  }
};

}  // namespace flashcore
