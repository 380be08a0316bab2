// A consumer warpgroup's epilogue for its 64 rows of a tile: O scaled by 1/sum in the input dtype
// and LSE, or (split-KV) fp32 partial O and partial LSE in the layout the combine kernel reads.
// Only rows below the sequence's length and dims < head_dim are written.
//
// O is staged through the warpgroup's own rows of the tile's Q stage (its last S GEMM has retired;
// the other warpgroups' rows are disjoint). From there the producer warpgroup's storer warp stores
// it with the TMA where FwdArgs::o_by_tma (o_store.hpp; stage_for_tma and stage here); otherwise
// (split-KV, varlen, strides no descriptor takes, hd256) the warpgroup's own threads copy it out,
// every global store a whole 16-byte chunk, coalesced along the head dim and valid for any
// 16-byte-aligned O strides.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cstring>
#include <cute/arch/copy_sm90.hpp>

#include "common/online_softmax.hpp"
#include "sm90/fwd_params.hpp"
#include "sm90/kernel_traits.hpp"
#include "sm90/named_barriers.hpp"
#include "sm90/tile_scheduler.hpp"

namespace flashcore::sm90 {

template <typename Traits>
struct Epilogue {
  using Element = typename Traits::Element;
  using TileShape = typename Traits::TileShape;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kChunkElements = 16 / sizeof(Element);
  static constexpr int kChunksPerRow = kHeadDim / kChunkElements;
  // The store's passes over a warpgroup's rows: whole rows of chunks, one chunk a thread.
  static constexpr int kRowsPerPass = kWarpgroupThreads / kChunksPerRow;
  static constexpr int kPasses = (kRowsPerWarpgroup + kRowsPerPass - 1) / kRowsPerPass;
  static_assert(kRowsPerPass >= 1, "a row of chunks per pass at most");
  static constexpr int kOutTiles = kHeadDim / 8;  // n tiles of a warp's O accumulator

  // Two fp32 values as two elements of the input dtype in one 32-bit word, low one first.
  __device__ static uint32_t pack(float low, float high) {
    const Element pair[2] = {static_cast<Element>(low), static_cast<Element>(high)};
    uint32_t word;
    memcpy(&word, pair, sizeof(word));
    return word;
  }

  // The staged O tile (a Q stage) without its swizzle: the store walks its rows by a constant
  // element stride, which holds because the layout is linear in the row (checked here at every
  // row).
  using StagedLayout = decltype(get_nonswizzle_portion(typename Traits::SmemLayoutQTile{}));
  static constexpr int kStagedRowStride = StagedLayout{}(1, 0) - StagedLayout{}(0, 0);
  static constexpr bool staged_rows_are_linear() {
    for (int row = 0; row < Traits::kBlockM; ++row) {
      if (StagedLayout{}(row, 0) != row * kStagedRowStride) return false;
    }
    return true;
  }
  static_assert(staged_rows_are_linear(), "the O store steps its staged rows by a fixed stride");

  // The TMA store's boxes (a warpgroup's rows, one atom column each) read the staged tile in the
  // box layout its descriptor was built for, from a base where the swizzle pattern starts over
  // (the swizzle acts on shared-memory addresses, so the box sees the same pattern the stmatrix
  // wrote). Checked at every 16-byte chunk of every box.
  using BoxLayout = decltype(get_nonswizzle_portion(typename Traits::SmemLayoutOBox{}));
  static constexpr bool boxes_are_staged_rows() {
    constexpr int kAtomElements = cute::cosize_v<typename Traits::SmemAtomQ>;
    for (int warpgroup = 0; warpgroup < Traits::kConsumerWarpgroups; ++warpgroup) {
      for (int box = 0; box < Traits::kOBoxes; ++box) {
        const int row0 = warpgroup * kRowsPerWarpgroup, col0 = box * Traits::kOBoxColumns;
        const int base = StagedLayout{}(row0, col0);
        if (base % kAtomElements != 0) return false;
        for (int row = 0; row < kRowsPerWarpgroup; ++row) {
          for (int col = 0; col < Traits::kOBoxColumns; col += kChunkElements) {
            if (StagedLayout{}(row0 + row, col0 + col) != base + BoxLayout{}(row, col)) {
              return false;
            }
          }
        }
      }
    }
    return true;
  }
  static_assert(boxes_are_staged_rows(), "O's TMA boxes must be the staged tile's rows");

  // The consumer thread index (0..255), read anew at each call: the epilogue's shared-memory and
  // chunk addresses depend only on it, and derived from a plain value the compiler hoists all of
  // them out of the persistent tile loop, where they spill (tens of registers the mainloop needs).
  // A volatile read keeps them per tile, at a few integer ops each.
  __device__ static int thread_index_here() {
    uint32_t tid;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
    return static_cast<int>(tid) - kWarpgroupThreads;
  }

  // Each row's 1/sum and LSE from the softmax, with an attention sink's term where kSink: one more
  // term exp(sink) in each row's denominator, with no value (flashcore/flex/sinks.hpp); sink is the
  // head's logit in natural-log units. The softmax keeps its max in the scores' raw units, which
  // exp_factor takes to log2 units.
  template <bool kSink>
  __device__ static void finalize(const FwdArgs& a, const OnlineSoftmax<1>& softmax, float sink,
                                  float (&inv_sum)[1][2], float (&lse)[1][2]) {
    if constexpr (kSink) {
      softmax.finalize_with_sink(a.exp_factor, sink * kLog2e / a.exp_factor, inv_sum, lse);
    } else {
      softmax.finalize</*kFast=*/false>(a.exp_factor, inv_sum, lse);
    }
  }

  // Rows below row_end. a.seqlen_q stays LSE's row stride: a varlen sequence passes its own
  // length as row_end and a view whose o and lse start at its first row (sequence_output in
  // sequence_view.hpp).
  template <bool kSink = false, typename TensorO, typename TiledMma>
  __device__ static void store(const FwdArgs& a, const Tile& tile, int row_end, int warpgroup,
                               const TensorO& tOrO, const OnlineSoftmax<1>& softmax, float sink,
                               const TiledMma& tiled_pv, Element* o_smem) {
    float inv_sum[1][2], lse[1][2];
    finalize<kSink>(a, softmax, sink, inv_sum, lse);
    store_normalized(a, tile, row_end, warpgroup, tOrO, inv_sum, lse, tiled_pv, o_smem);
  }

  // store() for an unsplit, unpacked problem (FwdArgs::o_by_tma) up to the staging: O normalized
  // and staged, and LSE; the storer warp stores the staged rows with the TMA (o_store.hpp).
  template <bool kSink = false, typename TensorO, typename TiledMma>
  __device__ static void stage_for_tma(const FwdArgs& a, const Tile& tile, const TensorO& tOrO,
                                       const OnlineSoftmax<1>& softmax, float sink,
                                       const TiledMma& tiled_pv, Element* o_smem) {
    float inv_sum[1][2], lse[1][2];
    finalize<kSink>(a, softmax, sink, inv_sum, lse);
    stage(a, tile, a.seqlen_q, tOrO, inv_sum, lse, tiled_pv, o_smem, thread_index_here());
  }

  // O normalized and converted into the warpgroup's rows of the staged tile (o_smem, a Q stage in
  // Q's layout) with stmatrix (8x8 blocks, four per instruction: few shared addresses per thread,
  // which the compiler would otherwise compute once per element and keep live across tiles), and
  // LSE for rows below row_end.
  template <typename TensorO, typename TiledMma>
  __device__ static void stage(const FwdArgs& a, const Tile& tile, int row_end, const TensorO& tOrO,
                               const float (&inv_sum)[1][2], const float (&lse)[1][2],
                               const TiledMma& tiled_pv, Element* o_smem, int thread) {
    const AccumulatorCoords coords = AccumulatorCoords::of(thread);
    const int tile_row0 = tile.m_block * Traits::kBlockM;
    const int64_t row_index0 =
        (static_cast<int64_t>(tile.batch) * a.heads + tile.head) * a.seqlen_q;
    auto half_of = [](int i) { return (i / 2) % 2; };  // the row half of register i
    Tensor sO = make_tensor(make_smem_ptr(o_smem), typename Traits::SmemLayoutQTile{});
    Tensor tOrOut = make_tensor_like<Element>(tOrO);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tOrO); ++i) {
      tOrOut(i) = static_cast<Element>(tOrO(i) * inv_sum[0][half_of(i)]);
    }
    auto stage_copy = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, tiled_pv);
    auto stage_thr = stage_copy.get_thread_slice(thread);
    copy(stage_copy, stage_thr.retile_S(tOrOut), stage_thr.partition_D(sO));
    if (a.lse != nullptr) {
      CUTLASS_PRAGMA_UNROLL
      for (int half = 0; half < 2; ++half) {
        const int row = tile_row0 + coords.row(2 * half);
        if (thread % 4 == 0 && row < row_end) a.lse[row_index0 + row] = lse[0][half];
      }
    }
  }

  // Where a warpgroup's box of atom column `box` starts in the staged tile.
  __device__ static int box_offset(int warpgroup, int box) {
    return StagedLayout{}(warpgroup * kRowsPerWarpgroup, box * Traits::kOBoxColumns);
  }

  // store() with the rows' 1/sum and LSE given (the flex kernel finalizes with a sink).
  template <typename TensorO, typename TiledMma>
  __device__ static void store_normalized(const FwdArgs& a, const Tile& tile, int row_end,
                                          int warpgroup, const TensorO& tOrO,
                                          const float (&inv_sum)[1][2], const float (&lse)[1][2],
                                          const TiledMma& tiled_pv, Element* o_smem) {
    const int thread = thread_index_here();
    if (a.num_splits > 1) {
      store_partial(a, tile, row_end, tOrO, inv_sum, lse, thread);
      return;
    }
    const int tile_row0 = tile.m_block * Traits::kBlockM;

    stage(a, tile, row_end, tOrO, inv_sum, lse, tiled_pv, o_smem, thread);
    cutlass::arch::NamedBarrier::sync(kWarpgroupThreads,
                                      barrier_id(NamedBarrierId::kEpilogue0, warpgroup));

    // Each thread copies one 16-byte column chunk of rows first_row, first_row + kRowsPerPass, ...
    // of the warpgroup's rows. Both addresses advance by a constant a pass: the staged tile is
    // linear in its row (its swizzle acts on the final address, so staged[] applies it per pass)
    // and O's rows are o_seq apart. Derived per chunk from (row, column) instead, they took about
    // 50 integer instructions each (signed divisions, 64-bit products): 400 a warp and a tile at
    // D = 128, a sixth of the kernel's instructions at S = 512 (docs/perf.md, session 34).
    const int lane_in_wg = thread % kWarpgroupThreads;
    const int chunk_row = lane_in_wg / kChunksPerRow;
    const int col = (lane_in_wg % kChunksPerRow) * kChunkElements;
    if (chunk_row >= kRowsPerPass || col >= a.head_dim) return;       // lanes past a whole pass
    const int first_row = warpgroup * kRowsPerWarpgroup + chunk_row;  // in the tile
    Tensor sO = make_tensor(make_smem_ptr(o_smem), typename Traits::SmemLayoutQTile{});
    const auto staged = sO.data() + sO.layout()(first_row, col);  // applies the swizzle on access
    Element* out = static_cast<Element*>(a.o) + tile.batch * a.o_batch + tile.head * a.o_head +
                   (tile_row0 + first_row) * a.o_seq + col;
    const int rows_left = row_end - (tile_row0 + first_row);
    CUTLASS_PRAGMA_UNROLL
    for (int pass = 0; pass < kPasses; ++pass) {
      const int row = pass * kRowsPerPass;  // after first_row
      if (row >= rows_left ||
          (kRowsPerWarpgroup % kRowsPerPass != 0 && chunk_row + row >= kRowsPerWarpgroup)) {
        break;
      }
      const uint32_t address = cute::cast_smem_ptr_to_uint(&staged[row * kStagedRowStride]);
      uint4 value;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(value.x), "=r"(value.y), "=r"(value.z), "=r"(value.w)
                   : "r"(address));
      *reinterpret_cast<uint4*>(out + row * a.o_seq) = value;
    }
  }

  // store() where nothing is staged (KernelTraits::kReleasesQEarly: the tile's Q stage is freed
  // before the epilogue): O normalized and converted straight from the accumulators, or fp32
  // partials where the keys are split.
  template <bool kSink = false, typename TensorO>
  __device__ static void store_unstaged(const FwdArgs& a, const Tile& tile, int row_end,
                                        const TensorO& tOrO, const OnlineSoftmax<1>& softmax,
                                        float sink) {
    float inv_sum[1][2], lse[1][2];
    finalize<kSink>(a, softmax, sink, inv_sum, lse);
    store_unstaged_normalized(a, tile, row_end, tOrO, inv_sum, lse);
  }

  // store_unstaged() with the rows' 1/sum and LSE given (the flex kernel finalizes with a sink).
  template <typename TensorO>
  __device__ static void store_unstaged_normalized(const FwdArgs& a, const Tile& tile, int row_end,
                                                   const TensorO& tOrO,
                                                   const float (&inv_sum)[1][2],
                                                   const float (&lse)[1][2]) {
    const int thread = thread_index_here();
    if (a.num_splits > 1) {
      store_partial(a, tile, row_end, tOrO, inv_sum, lse, thread);
      return;
    }
    // A thread holds two elements of a row side by side for each n tile, on two rows eight apart,
    // and a row's four lanes hold the tile's eight columns. A 4 x 4 transpose within the row's
    // four lanes (two rounds of shuffles) gives lane t all eight columns of tile j + t of each
    // group of four, which it writes as one 16-byte store: the four lanes write 64 contiguous
    // bytes. One 4-byte store per pair (compiled to two 2-byte stores) took 16 times the L2 write
    // requests of the staged copy-out and the tiles 1.7x the time at hd256 S512 (ncu, H200;
    // docs/perf.md, session 37).
    static_assert(kOutTiles % 4 == 0, "n tiles in groups of four");
    const AccumulatorCoords coords = AccumulatorCoords::of(thread);
    const int tile_row0 = tile.m_block * Traits::kBlockM;
    const bool odd = thread % 2 != 0, high = thread % 4 >= 2;
    const int lane_col = 8 * (thread % 4);  // the lane's tile within a group of four
    uint32_t packed[2][kOutTiles];          // [row half][n tile]: this lane's pair, normalized
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tOrO); i += 2) {
      const int half = (i / 2) % 2;
      packed[half][i / 4] = pack(tOrO(i) * inv_sum[0][half], tOrO(i + 1) * inv_sum[0][half]);
    }
    Element* o = static_cast<Element*>(a.o) + tile.batch * a.o_batch + tile.head * a.o_head;
    CUTLASS_PRAGMA_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int row = tile_row0 + coords.row(2 * half);
      Element* out = o + static_cast<int64_t>(row) * a.o_seq + lane_col;
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kOutTiles; j += 4) {
        const uint32_t* v = &packed[half][j];  // this lane's pair of tiles j .. j + 3
        // Round 1 (lanes t, t ^ 2): a low lane (t < 2) keeps its pairs of tiles j, j + 1 and
        // takes its partner's; a high lane does so for tiles j + 2, j + 3. u0, u1: the two tiles'
        // pairs of lane t & 1; u2, u3: those of lane (t & 1) + 2.
        const uint32_t r0 = __shfl_xor_sync(0xffffffffu, high ? v[0] : v[2], 2);
        const uint32_t r1 = __shfl_xor_sync(0xffffffffu, high ? v[1] : v[3], 2);
        const uint32_t u0 = high ? r0 : v[0], u1 = high ? r1 : v[1];
        const uint32_t u2 = high ? v[2] : r0, u3 = high ? v[3] : r1;
        // Round 2 (lanes t, t ^ 1): the even lane gathers the first of its half's two tiles from
        // all four lanes, in column order, the odd lane the second.
        const uint32_t s0 = __shfl_xor_sync(0xffffffffu, odd ? u0 : u1, 1);
        const uint32_t s1 = __shfl_xor_sync(0xffffffffu, odd ? u2 : u3, 1);
        const uint4 eight = odd ? make_uint4(s0, u1, s1, u3) : make_uint4(u0, s0, u2, s1);
        // Every lane shuffles (the rows' bounds differ between lanes): the store alone is guarded.
        if (row < row_end && 8 * j + lane_col < a.head_dim) {
          *reinterpret_cast<uint4*>(out + 8 * j) = eight;
        }
      }
    }
    store_lse(a, tile, row_end, lse, thread, a.lse);
  }

  // The fp32 partial O and LSE of a split, straight from the accumulators (the combine kernel's
  // layout).
  template <typename TensorO>
  __device__ static void store_partial(const FwdArgs& a, const Tile& tile, int row_end,
                                       const TensorO& tOrO, const float (&inv_sum)[1][2],
                                       const float (&lse)[1][2], int thread) {
    const AccumulatorCoords coords = AccumulatorCoords::of(thread);
    const int tile_row0 = tile.m_block * Traits::kBlockM;
    const int64_t row_index0 =
        (static_cast<int64_t>(tile.batch) * a.heads + tile.head) * a.seqlen_q;
    const int64_t split_rows =
        static_cast<int64_t>(tile.split) * a.batch * a.heads * a.seqlen_q + row_index0;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tOrO); i += 2) {
      const int row = tile_row0 + coords.row(i);
      const int col = coords.col(i);
      if (row < row_end && col < a.head_dim) {
        const float scale = inv_sum[0][(i / 2) % 2];
        *reinterpret_cast<float2*>(a.o_partial + (split_rows + row) * a.head_dim + col) =
            make_float2(tOrO(i) * scale, tOrO(i + 1) * scale);
      }
    }
    store_lse(a, tile, row_end, lse, thread, a.lse_partial + (split_rows - row_index0));
  }

  // The rows' LSE, from the first lane of each row's quad, into lse (a.lse or a split's partials)
  // at the tile's rows of (batch, head); nothing where lse is null.
  __device__ static void store_lse(const FwdArgs& a, const Tile& tile, int row_end,
                                   const float (&lse)[1][2], int thread, float* lse_out) {
    if (lse_out == nullptr || thread % 4 != 0) return;
    const AccumulatorCoords coords = AccumulatorCoords::of(thread);
    const int tile_row0 = tile.m_block * Traits::kBlockM;
    const int64_t row_index0 =
        (static_cast<int64_t>(tile.batch) * a.heads + tile.head) * a.seqlen_q;
    CUTLASS_PRAGMA_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int row = tile_row0 + coords.row(2 * half);
      if (row < row_end) lse_out[row_index0 + row] = lse[0][half];
    }
  }

  // A tile (or split) whose rows see no key, for rows below row_end (store's meaning): O = 0 and
  // LSE = empty_lse (-inf, or a sink's logit: a row that sees no key keeps only the sink's term),
  // without touching shared memory.
  __device__ static void store_empty_rows(const FwdArgs& a, const Tile& tile, int row_end,
                                          float empty_lse, int warpgroup, int thread) {
    const int tile_row0 = tile.m_block * Traits::kBlockM + warpgroup * kRowsPerWarpgroup;
    const int64_t row_index0 =
        (static_cast<int64_t>(tile.batch) * a.heads + tile.head) * a.seqlen_q;
    const int lane_in_wg = thread % kWarpgroupThreads;
    const int chunks_per_row = (a.head_dim + kChunkElements - 1) / kChunkElements;
    for (int chunk = lane_in_wg; chunk < kRowsPerWarpgroup * chunks_per_row;
         chunk += kWarpgroupThreads) {
      const int row = tile_row0 + chunk / chunks_per_row;
      const int col = (chunk % chunks_per_row) * kChunkElements;
      if (row >= row_end) continue;
      if (a.num_splits > 1) {
        const int64_t index =
            static_cast<int64_t>(tile.split) * a.batch * a.heads * a.seqlen_q + row_index0 + row;
        float4* out = reinterpret_cast<float4*>(a.o_partial + index * a.head_dim + col);
        out[0] = make_float4(0.f, 0.f, 0.f, 0.f);
        out[1] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (col == 0) a.lse_partial[index] = empty_lse;
      } else {
        Element* o = static_cast<Element*>(a.o) + tile.batch * a.o_batch + tile.head * a.o_head;
        *reinterpret_cast<uint4*>(o + row * a.o_seq + col) = make_uint4(0, 0, 0, 0);
        if (col == 0 && a.lse != nullptr) a.lse[row_index0 + row] = empty_lse;
      }
    }
  }
};

}  // namespace flashcore::sm90
