// The sm80 flex kernel: the FlashAttention-2 schedule of fwd_kernel.cuh (one CTA per query tile,
// head and batch; the two-barrier K/V pipeline) over the KV tiles a block walk lists
// (common/block_walk.hpp) instead of a contiguous range, with the mods applied on the way into the
// online softmax (common/flex_scores.hpp) and the sink added when it finishes.
//  - Cost follows the visited tiles: a BlockMask's listed blocks, or the mask's key range.
//  - Full tiles run no mask code; partial tiles call mask_mod per element (the built-in mask
//    compares against per-row key ranges and document ids, common/flex_builtin.hpp); score_mod
//    runs on every visible score.
//  - Varlen: CTA (m, h, b) takes sequence b's rows [m * kBlockM, ...) from cu_seqlens; tiles past
//    the sequence exit at once. LSE is [Hq, total_q].
//  - A row that sees nothing gets O = 0 and LSE = -inf (the sink's logit with sinks).
//  - Decode under GQA may be packed (flex_view.hpp): the CTA of kv head h then runs the group's
//    query heads as its rows, and the mods see each row's own head and query row 0.
// Templated on the mods: the library instantiates it with the built-ins selected at run time
// (flex::BuiltinMask, flex::BuiltinScoreMod); a caller may instantiate it with functors of their
// own. One tile (FlexTileConfig). Split-KV (flash-decoding, for grids that leave SMs idle:
// decode): split s of a query tile walks its share of the tile's walk steps and writes fp32
// partials that combine.cuh merges, adding the sink there, once per row; varlen is never split.
#pragma once

#include <cstdint>
#include <new>
#include <type_traits>

#include "common/block_walk.hpp"
#include "common/flex_scores.hpp"
#include "common/flex_sequence.hpp"
#include "common/launch.hpp"
#include "common/online_softmax.hpp"
#include "sm80/combine.cuh"
#include "sm80/epilogue.hpp"
#include "sm80/flex_params.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/mainloop.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

// Where a CTA's sequence lives in q/o and k/v, and its lengths.
struct SequenceSlice {
  int64_t q_offset, k_offset, v_offset, o_offset;  // elements from the tensors' starts
  int64_t lse_offset;                              // entries from lse's start
  int seqlen_q, seqlen_k;                          // as the mods see them
  int rows;   // the kernel's rows: seqlen_q, or a packed decode's query heads
  int batch;  // the index the output tile is addressed by: 0 for a varlen batch
};

// packed_heads: FlexParams::packed_heads as the kernel knows it.
template <typename Mask, typename ScoreMod>
__device__ __forceinline__ SequenceSlice sequence_slice(const FlexParams<Mask, ScoreMod>& fp, int b,
                                                        int packed_heads) {
  const FwdParams& p = fp.fwd;
  if (fp.cu_seqlens_q == nullptr) {
    const int seqlen_q = packed_heads > 0 ? 1 : p.seqlen_q;
    return {b * p.q_batch, b * p.k_batch, b * p.v_batch, 0, 0, seqlen_q, p.seqlen_k, p.seqlen_q, b};
  }
  const detail::FlexSequence s =
      detail::flex_sequence(fp.cu_seqlens_q, fp.cu_seqlens_k, b, p.seqlen_q, p.seqlen_k);
  SequenceSlice slice;
  slice.q_offset = s.q_start * p.q_seq;
  slice.k_offset = s.k_start * p.k_seq;
  slice.v_offset = s.k_start * p.v_seq;
  slice.o_offset = s.q_start * p.o_seq;
  slice.lse_offset = s.q_start;
  slice.seqlen_q = slice.rows = s.seqlen_q;
  slice.seqlen_k = s.seqlen_k;
  slice.batch = 0;
  return slice;
}

// kMayPack: whether fp may be a packed decode (FlexParams::packed_heads); without it the kernel
// has none of the packed tile's code (launch_flex_kernel says when).
template <typename Traits, typename Mask, typename ScoreMod, bool kMayPack>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinCtasPerSm)
    flex_fwd_kernel(const __grid_constant__ FlexParams<Mask, ScoreMod> fp) {
  static_assert(Traits::kKeyGroups == 1 && Traits::kStages == 1 && Traits::kClusterCtas == 1,
                "the flex kernel runs the one-group, two-barrier schedule");
  static_assert(kFlexQBlockMultiple % Traits::kWarpRows == 0,
                "a warp's rows lie in one BlockMask query block");
  using Element = typename Traits::Element;
  extern __shared__ __align__(128) char smem[];
  char* const q_smem = smem;
  char* const k_smem = smem + Traits::kQBytes;
  char* const v_smem = k_smem + Traits::kKVTileBytes;
  const FwdParams& p = fp.fwd;

  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int b = blockIdx.z, h = blockIdx.y;
  // The mods' head of the tile's first row (of every row unless packed).
  const int packed_heads = kMayPack ? fp.packed_heads : 0;
  const int first_head = packed_heads > 0 ? h * packed_heads : h;
  // Later query tiles see more keys under causal masks; launching them first shortens the tail.
  // The splits of one query tile are neighbours in x.
  const int split = static_cast<int>(blockIdx.x) % p.num_splits;
  const int m_block = p.num_m_blocks - 1 - static_cast<int>(blockIdx.x) / p.num_splits;
  const int row_begin = m_block * Traits::kBlockM;
  // The sequence, the bound mods, K/V's addresses and the walk are the same for every thread: they
  // live in shared memory, read where used, because the 128-row tile's 128 O + 64 S accumulators
  // leave no registers to hold them through the loop (held in registers, hd128 spilled 292 bytes
  // on sm_90a; from here it still spills about 100, docs/flex.md).
  using Walk = detail::KvTileWalk<Traits::kBlockKV>;
  struct CtaState {
    SequenceSlice seq;
    int row_end;
    const Element* k;
    const Element* v;
    Mask mask;
    ScoreMod score_mod;
    Walk walk;
  };
  __shared__ __align__(16) unsigned char state_bytes[sizeof(CtaState)];
  CtaState& state = *reinterpret_cast<CtaState*>(state_bytes);
  {
    const SequenceSlice seq = sequence_slice(fp, b, packed_heads);
    if (row_begin >= seq.rows) return;  // varlen: past this sequence's rows (uniform)
    if (tid == 0) {
      const int row_end = min(row_begin + Traits::kBlockM, seq.rows);
      const int kv_head = h / p.kv_group;
      const Mask bound = flex::bind_seqlens(fp.mask, seq.seqlen_q, seq.seqlen_k);
      new (&state)
          CtaState{seq,
                   row_end,
                   static_cast<const Element*>(p.k) + seq.k_offset + kv_head * p.k_head,
                   static_cast<const Element*>(p.v) + seq.v_offset + kv_head * p.v_head,
                   bound,
                   flex::bind_seqlens(fp.score_mod, seq.seqlen_q, seq.seqlen_k),
                   detail::kv_tile_walk<Traits::kBlockKV>(
                       fp.block_mask, bound, b, first_head, packed_heads > 0 ? 0 : row_begin,
                       packed_heads > 0 ? 1 : row_end, seq.seqlen_k)};
      // Every row of the tile takes every step (a packed decode's walk is for one query row).
      state.walk.num_rows = row_end - row_begin;
    }
    __syncthreads();
  }
  const SequenceSlice& seq = state.seq;
  const int row_end = state.row_end;
  const Mask& mask = state.mask;
  const ScoreMod& score_mod = state.score_mod;
  const Walk& walk = state.walk;
  // The query rows the walk is for: a packed decode's rows are all query row 0.
  const int walk_q_begin = packed_heads > 0 ? 0 : row_begin;
  const int walk_q_end = packed_heads > 0 ? 1 : row_end;
  // This split's steps of the walk, [first, last): shares that differ by at most one step.
  const int first = static_cast<int>(static_cast<int64_t>(walk.count()) * split / p.num_splits);
  const int last =
      static_cast<int>(static_cast<int64_t>(walk.count()) * (split + 1) / p.num_splits);
  const Element* q = static_cast<const Element*>(p.q) + seq.q_offset + h * p.q_head +
                     static_cast<int64_t>(row_begin) * p.q_seq;
  // A tile past the keys (the tail of a long last KV block; the walk skips its math), or outside
  // them (a BlockMask index outside [0, Mk)), is all zero-fill, from the head's first row: no
  // address outside the tensor is formed. Unsigned, as KvTileWalk::at tests it: a negative index
  // is past the keys, in the instructions of a signed test (64-bit ones cost the loop 1%).
  auto load_kv = [&](char* dst, const Element* base, int64_t row_stride, int i) {
    const unsigned key0 = static_cast<unsigned>(walk.tile_index(i)) * Traits::kBlockKV;
    const bool in_keys = key0 < static_cast<unsigned>(seq.seqlen_k);
    const int first_key = static_cast<int>(key0);  // a key of the sequence where in_keys
    load_tile_async<Traits, Traits::kBlockKV>(dst, in_keys ? base + first_key * row_stride : base,
                                              row_stride, in_keys ? seq.seqlen_k - first_key : 0,
                                              p.head_dim, tid);
  };

  const int warp_row0 = warp * Traits::kWarpRows;
  const bool warp_has_rows = row_begin + warp_row0 < row_end;
  float o[Traits::kWarpMTiles][Traits::kOutNTiles][4];
#pragma unroll
  for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < Traits::kOutNTiles; ++dt) {
      o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    }
  }
  OnlineSoftmax<Traits::kWarpMTiles> softmax;

  // Q rides in the first cp.async group, K and V of the first tile in the next two (as
  // fwd_kernel's kStages == 1 schedule; its comments explain the waits).
  load_tile_async<Traits, Traits::kBlockM>(q_smem, q, p.q_seq, row_end - row_begin, p.head_dim,
                                           tid);
  if (first < last) {
    load_kv(k_smem, state.k, p.k_seq, first);
    cute::cp_async_fence();
    load_kv(v_smem, state.v, p.v_seq, first);
  }
  cute::cp_async_fence();
  for (int i = first; i < last; ++i) {
    const detail::KvTile tile =
        walk.at(i, mask, b, first_head, walk_q_begin, walk_q_end, seq.seqlen_k);
    if (i == first) {
      cute::cp_async_wait<1>();
    } else {
      cute::cp_async_wait<0>();
    }
    __syncthreads();
    if (i > first) {
      load_kv(v_smem, state.v, p.v_seq, i);
      cute::cp_async_fence();
    }
    // A step of the other query block's lists (BlockMask blocks shorter than the tile) is not for
    // this warp: its rows lie in one block (the static_assert above).
    const bool compute = warp_has_rows && tile.masking != detail::TileMasking::kSkip &&
                         warp_row0 >= tile.rows_begin && warp_row0 < tile.rows_end;
    ProbFrag<Traits> probs;
    if (compute) {
      const detail::FragmentPlace at{b,
                                     first_head,
                                     row_begin + warp_row0,
                                     tile.index * Traits::kBlockKV,
                                     seq.seqlen_q,
                                     seq.seqlen_k,
                                     lane,
                                     packed_heads};
      // Visibility before S = Q K^T (flex_scores.hpp says why).
      uint32_t visible[Traits::kWarpMTiles];
      detail::visible_elements<Mask, Traits::kWarpMTiles, Traits::kScoreNTiles>(tile.masking, mask,
                                                                                at, visible);
      float s[Traits::kWarpMTiles][Traits::kScoreNTiles][4];
      Traits::Mma::template gemm_qk<Traits>(q_smem, k_smem, warp_row0, lane, s);
      detail::flex_scores(s, visible, score_mod, at, p.scale);
      softmax.update(s, o, /*factor=*/1.f);
      pack_probabilities<Traits>(s, probs);
    }
    cute::cp_async_wait<0>();
    __syncthreads();
    if (i + 1 < last) {
      load_kv(k_smem, state.k, p.k_seq, i + 1);
      cute::cp_async_fence();
    }
    if (compute) Traits::Mma::template gemm_pv<Traits>(v_smem, lane, probs, o);
  }
  // With no tile nothing waited for Q's group, and the epilogue stages O in Q's buffer.
  cute::cp_async_wait<0>();
  __syncthreads();
  if (!warp_has_rows) return;

  float inv_sum[Traits::kWarpMTiles][2];
  float lse[Traits::kWarpMTiles][2];
  if (fp.sinks.enabled() && p.num_splits == 1) {  // a split's sink joins in the combine
    // Each row's head's sink (one head unless packed; padding rows past the group take the first).
    float sinks[Traits::kWarpMTiles][2];
#pragma unroll
    for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = row_begin + warp_row0 + mt * kMmaM + lane / 4 + 8 * half;
        const int head = packed_heads > 0 && row < packed_heads ? first_head + row : first_head;
        sinks[mt][half] = fp.sinks.logit(head) * kLog2e;
      }
    }
    softmax.finalize_with_sink(/*factor=*/1.f, sinks, inv_sum, lse);
  } else {
    softmax.finalize</*kFast=*/false>(/*factor=*/1.f, inv_sum, lse);
  }
  // store_output addresses O by (batch, head, row) and LSE by ((batch * heads + head) * seqlen_q
  // + row): a varlen sequence is batch 0 of tensors that start at its first row, and of an LSE
  // [Hq, total_q] that starts at its first entry. A split writes its partials instead
  // ([splits, B, Hq, Sq] rows; never varlen).
  FwdParams out = p;
  out.o = static_cast<Element*>(p.o) + seq.o_offset;
  out.lse = p.lse != nullptr ? p.lse + seq.lse_offset : nullptr;
  const OutputTile out_tile{seq.batch, h, row_begin, row_end, split};
  store_output<Traits, Traits::kOutNTiles>(out, out_tile, q_smem, warp, lane, 0, o, inv_sum, lse,
                                           /*write_lse=*/true);
}

// Launches flex_fwd_kernel on (num_m_blocks * num_splits, heads, batch), then, when split, the
// combine (with the sinks) into O and LSE. The built-in mods (the library's kernels) have a kernel
// without the packed tile's code for every problem but a packed decode: in one kernel with it, the
// unpacked decode ran 4-6% slower on the H200 (the same source path, another code layout). A
// functor of one's own keeps one kernel for both, so a JIT object compiles one.
template <typename Traits, typename Mask, typename ScoreMod>
cudaError_t launch_flex_kernel(const FlexParams<Mask, ScoreMod>& fp, cudaStream_t stream) {
  constexpr bool kBuiltinMods =
      std::is_same_v<Mask, flex::BuiltinMask> && std::is_same_v<ScoreMod, flex::BuiltinScoreMod>;
  auto kernel = flex_fwd_kernel<Traits, Mask, ScoreMod, /*kMayPack=*/true>;
  if constexpr (kBuiltinMods) {
    if (fp.packed_heads == 0) kernel = flex_fwd_kernel<Traits, Mask, ScoreMod, /*kMayPack=*/false>;
  }
  if (cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Traits::kSmemBytes);
      err != cudaSuccess) {
    return err;
  }
  detail::LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(fp.fwd.num_m_blocks * fp.fwd.num_splits),
                    static_cast<unsigned>(fp.fwd.heads), static_cast<unsigned>(fp.fwd.batch));
  shape.threads = Traits::kThreads;
  shape.smem_bytes = Traits::kSmemBytes;
  if (cudaError_t err = detail::launch_kernel(kernel, shape, stream, fp);
      err != cudaSuccess || fp.fwd.num_splits == 1) {
    return err;
  }
  // The combine adds each row's head's sink, so it sees real heads: a packed decode's rows (G
  // query heads of each kv head, query row 0) are the same partials, O and LSE rows as one query
  // row of each of the G * heads query heads.
  FwdParams rows = fp.fwd;
  if (fp.packed_heads > 0) {
    rows.heads *= fp.packed_heads;
    rows.seqlen_q = 1;
    rows.o_head = fp.fwd.o_seq;
  }
  return launch_combine<typename Traits::Element>(rows, rows.head_dim, stream, fp.sinks.logits);
}

}  // namespace flashcore::sm80
