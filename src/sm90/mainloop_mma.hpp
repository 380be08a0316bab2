// A consumer warpgroup's work on one tile: S = Q K^T (wgmma, both operands in shared memory),
// scale/softcap/mask, online softmax, O += P V (wgmma with P in registers), for 64 query rows.
//
// Two overlaps, each a template switch so that docs/perf.md can measure what it gives:
// - kIntraOverlap (FlashAttention-3's intra-warpgroup overlap): S of the next key block is issued
//   together with P V of the current one, so the tensor cores work on both while the softmax of
//   the next block waits only for its S. The O rescale moves after that P V retires.
// - kPingpong (inter-warpgroup): the two consumer warpgroups take turns issuing their GEMMs
//   (named barriers kTurn0/kTurn1), so one warpgroup's softmax runs under the other's GEMMs.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cute/arch/mma_sm90_desc.hpp>

#include "common/online_softmax.hpp"
#include "common/score_scaling.hpp"
#include "sm90/fwd_params.hpp"
#include "sm90/kernel_traits.hpp"
#include "sm90/named_barriers.hpp"
#include "sm90/tile_scheduler.hpp"
#include "sm90/wgmma.hpp"

namespace flashcore::sm90 {

// Steps [first, end) of a tile's walk, in the order the producer loads them.
struct StepSpan {
  int first = 0;
  int end = 0;
};

// run_steps' q_read where Q's stage is freed after the epilogue instead (two Q stages).
struct NoQRead {
  __device__ void operator()() const {}
};

// An S GEMM's Q operand made again at each issue: make() returns the partitioned descriptors of
// the tile's Q stage (KernelTraits::kRemakesQOperand says where and why). run_steps takes either
// this or the descriptors themselves.
template <typename Make>
struct QOperandMaker {
  Make make;
};
// The maker of Q stage q_stage's descriptors from Q's shared memory q_smem (thr_qk: the
// warpgroup's slice of the S GEMM). The empty asm hides where the pointer comes from, so the
// compiler cannot keep the result across steps: it makes the descriptors in the uniform datapath
// at each S GEMM and holds no register for them through the loop.
template <typename Traits, typename ThrMmaQK>
__device__ __forceinline__ auto remade_q_operand(typename Traits::Element* q_smem,
                                                 const ThrMmaQK& thr_qk, int q_stage) {
  auto make = [=] {
    typename Traits::Element* q = q_smem;
    asm volatile("" : "+l"(q));
    Tensor sQ = make_tensor(make_smem_ptr(q), typename Traits::SmemLayoutQ{});
    return thr_qk.partition_fragment_A(sQ)(_, _, _, q_stage);
  };
  return QOperandMaker<decltype(make)>{make};
}
template <typename TensorQ>
__device__ __forceinline__ const TensorQ& q_operand(const TensorQ& tSrQ) {
  return tSrQ;
}
template <typename Make>
__device__ __forceinline__ auto q_operand(const QOperandMaker<Make>& maker) {
  return maker.make();
}

template <typename Traits, typename Variant>
struct MainloopMma {
  static constexpr bool kPingpong = Variant::kPingpong;
  static constexpr bool kIntraOverlap = Variant::kIntraOverlap;
  using Element = typename Traits::Element;
  using TileShape = typename Traits::TileShape;
  using Pipeline = typename Traits::Pipeline;
  using PipelineState = typename Pipeline::PipelineState;
  static constexpr int kBlockN = Traits::kBlockN;
  // A wgmma m64nN accumulator is, per warp, the m16 x N fragment the shared online softmax takes
  // (common/online_softmax.hpp): register 4j + e is row g + 8*(e/2), column 8j + 2*(lane%4) + e%2.
  static constexpr int kScoreTiles = kBlockN / 8;
  static constexpr int kOutTiles = Traits::kHeadDim / 8;
  using ScoreFrag = float[1][kScoreTiles][4];
  using OutFrag = float[1][kOutTiles][4];
  using Softmax = OnlineSoftmax<1>;

  int warpgroup;  // among the consumers
  __device__ int next_warpgroup() const {
    return warpgroup + 1 < Traits::kConsumerWarpgroups ? warpgroup + 1 : 0;
  }
  typename Traits::TiledMmaQK mma_qk;
  typename Traits::TiledMmaPV mma_pv;

  __device__ static ScoreFrag& as_scores(float* data) {
    return *reinterpret_cast<ScoreFrag*>(data);
  }
  __device__ static OutFrag& as_out(float* data) { return *reinterpret_cast<OutFrag*>(data); }

  // Pingpong turns, passed round robin. Warpgroup 0 holds the first turn: it arrives on its own
  // barrier once, before its first wait, so that wait completes with its own 2 x 128 arrivals.
  // Every warpgroup takes the same number of turns per tile (one per GEMM issue), so the order
  // holds across tiles.
  __device__ void start_turns() const {
    if constexpr (kPingpong) {
      if (warpgroup == 0) {
        cutlass::arch::NamedBarrier::arrive(2 * kWarpgroupThreads,
                                            barrier_id(NamedBarrierId::kTurn0));
      }
    }
  }
  __device__ void wait_turn() const {
    if constexpr (kPingpong) {
      cutlass::arch::NamedBarrier::sync(2 * kWarpgroupThreads,
                                        barrier_id(NamedBarrierId::kTurn0, warpgroup));
    }
  }
  __device__ void pass_turn() const {
    if constexpr (kPingpong) {
      cutlass::arch::NamedBarrier::arrive(2 * kWarpgroupThreads,
                                          barrier_id(NamedBarrierId::kTurn0, next_warpgroup()));
    }
  }

  // Raw dot products -> what the softmax takes (FwdArgs::prescale), then -inf where the mask hides
  // a key. Only blocks that are not fully visible to this warpgroup's rows pay for the mask.
  // Softcap is a template switch: with tanhf (a long branchy sequence per element) as a runtime
  // branch the kernel's code doubled (instruction-cache misses on every problem); it now uses the
  // one-instruction tanh.approx (common/score_scaling.hpp) and stays a switch.
  template <typename ScoreTensor>
  __device__ static void prepare_scores(const FwdArgs& a, const WindowMask<int>& mask,
                                        ScoreTensor& s, const AccumulatorCoords& coords,
                                        int tile_row0, int key0, bool masked) {
    if constexpr (Variant::kSoftcap) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(s); ++i) s(i) = a.softcap_out * fast_tanh(s(i) * a.softcap_in);
    } else if (a.prescale) {  // a scale <= 0: one multiply per element
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(s); ++i) s(i) *= a.scale_log2;
    }
    if (masked) {
      // The visible keys of each of the thread's two rows, relative to this thread's first column
      // of the block, once per row; then a compare or two and a select per element.
      int begin[2], end[2];
      CUTLASS_PRAGMA_UNROLL
      for (int half = 0; half < 2; ++half) {
        const int row = tile_row0 + coords.row(2 * half);
        const int base = key0 + coords.col0;
        begin[half] = mask.first_key(row) - base;
        end[half] = mask.end_key(row) - base;
      }
      // Without a left edge (causal, the tails of unmasked problems) every row's first visible key
      // is 0, left of every column, and only the right bound needs a test: two instructions an
      // element instead of three, hd64 S512 causal +2.6% (docs/perf.md, session 38).
      if (mask.left >= 0) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(s); ++i) {
          const int half = AccumulatorCoords::row_offset(i) / 8;
          const int col = AccumulatorCoords::col_offset(i);
          s(i) = col >= begin[half] && col < end[half] ? s(i) : -INFINITY;
        }
      } else {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(s); ++i) {
          const int half = AccumulatorCoords::row_offset(i) / 8;
          const int col = AccumulatorCoords::col_offset(i);
          s(i) = col < end[half] ? s(i) : -INFINITY;
        }
      }
    }
  }

  template <typename ScoreTensor, typename ProbTensor>
  __device__ static void convert_probabilities(const ScoreTensor& s, ProbTensor& p) {
    static_assert(size(ScoreTensor{}) == size(ProbTensor{}));
    // Same register order in both (see kScoreTiles): the S accumulator of 16 keys is exactly the
    // m64k16 A operand of the P V GEMM.
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(s); i += 2) {
      p(i) = static_cast<Element>(s(i));
      p(i + 1) = static_cast<Element>(s(i + 1));
    }
  }

  // Runs num_steps key blocks for this warpgroup's rows of the tile, in the order the producer
  // loaded them. O comes back unnormalized in o; softmax holds the row max and sum. Steps is the
  // walk's policy: steps.begin(i, stage) is called once the S GEMM of step i is issued (the K stage
  // it read is still held: a policy may read what the producer left with it), and
  // steps.score(step, s) turns the retired S of that step into what the softmax takes, in units
  // that steps.exp_factor() takes to the log2 domain. DenseSteps (below) is the dense kernel's
  // contiguous range; the flex kernel passes its block walk (flex_steps.hpp).
  //
  // kHidesSteps (the dense kernel; visible is read only then): only the steps [visible.first,
  // visible.end) hold keys this warpgroup's rows can see (DenseSteps::visible_steps), and it runs
  // no GEMM or softmax for the others. They still take their turns, so that every warpgroup takes
  // the same number per tile, and release their stages in order, each after its fill has landed: a
  // release before that would count towards the stage's previous fill, which other warpgroups may
  // still be reading.
  //
  // q_read() runs once per tile, as soon as the tile's last S GEMM has retired (or at once when
  // this warpgroup's rows see no key): nothing reads Q after it (KernelTraits::kReleasesQEarly).
  template <bool kHidesSteps = false, typename Steps, typename TensorQ, typename TensorK,
            typename TensorV, typename TensorO, typename QRead = NoQRead>
  __device__ __forceinline__ void run_steps(Steps& steps, int num_steps, const TensorQ& tSrQ,
                                            const TensorK& tSrK, const TensorV& tOrV, TensorO& tOrO,
                                            Softmax& softmax, Pipeline& pipeline_k,
                                            Pipeline& pipeline_v, PipelineState& read_k,
                                            PipelineState& read_v, StepSpan visible = {},
                                            QRead q_read = {}) {
    Tensor tSrS = partition_fragment_C(mma_qk, select<0, 1>(TileShape{}));
    Tensor tOrP = make_tensor<Element>(partition_shape_A(mma_pv, select<0, 1>(TileShape{})));
    float correction[1][2];  // of the last softmax update, for O before the next P V
    auto release_k = [&] {
      pipeline_k.consumer_release(read_k);
      ++read_k;
    };
    auto release_v = [&] {
      pipeline_v.consumer_release(read_v);
      ++read_v;
    };
    // S of a step (retired) -> probabilities in S's registers, row max/sum, O's correction.
    auto softmax_step = [&](const auto& step) {
      steps.score(step, tSrS);
      softmax.template update_scores<kScoreTiles, Traits::kMaxChains, /*kLazyMax=*/true>(
          as_scores(tSrS.data()), steps.exp_factor(), correction);
    };
    // O for this block's max. With the lazy max (OnlineSoftmax::update_scores) a row whose max
    // stayed has a correction of exactly 1, and a warp none of whose rows moved skips its D / 2
    // multiplies a thread: most blocks after the first few (docs/perf.md, session 32). The vote is
    // per warp because each warp holds whole rows of O.
    auto rescale_o = [&] {
      const bool moved = correction[0][0] != 1.f || correction[0][1] != 1.f;
      if (__any_sync(0xffffffffu, moved)) Softmax::rescale(as_out(tOrO.data()), correction);
    };

    // A step takes one turn with the overlap (its S beside the previous P V), two without; the
    // last P V one more with it.
    constexpr int kTurnsPerStep = kIntraOverlap ? 1 : 2;
    auto skip_steps = [&](int count) {
      for (int i = 0; i < count; ++i) {
        for (int turn = 0; turn < kTurnsPerStep; ++turn) {
          wait_turn();
          pass_turn();
        }
        pipeline_k.consumer_wait(read_k);
        release_k();
        pipeline_v.consumer_wait(read_v);
        release_v();
      }
    };
    const int first_step = kHidesSteps ? visible.first : 0;
    const int end_step = kHidesSteps ? visible.end : num_steps;
    if constexpr (kHidesSteps) {
      skip_steps(first_step);
      if (first_step == num_steps) {  // rows that see no key: O = 0, the softmax stays empty
        q_read();
        if constexpr (kIntraOverlap) {
          wait_turn();
          pass_turn();
        }
        clear(tOrO);
        return;
      }
    }

    // First block: nothing to overlap with yet.
    pipeline_k.consumer_wait(read_k);
    wait_turn();
    issue_gemm</*kZeroInit=*/true>(mma_qk, q_operand(tSrQ), tSrK(_, _, _, read_k.index()), tSrS);
    pass_turn();
    {
      const auto step = steps.begin(first_step, read_k.index());
      warpgroup_wait<0>();
      release_k();
      if (first_step + 1 == end_step) q_read();
      softmax_step(step);
    }
    convert_probabilities(tSrS, tOrP);
    clear(tOrO);

    for (int i = first_step + 1; i < end_step; ++i) {
      pipeline_k.consumer_wait(read_k);
      if constexpr (kIntraOverlap) {
        wait_turn();
        issue_gemm</*kZeroInit=*/true>(mma_qk, q_operand(tSrQ), tSrK(_, _, _, read_k.index()),
                                       tSrS);
        // The previous P V has retired; rescaling O for the previous block's max here, while this
        // S is computed, leaves only the P conversion between a P V retiring and the next issue.
        rescale_o();
        pipeline_v.consumer_wait(read_v);
        issue_gemm</*kZeroInit=*/false>(mma_pv, tOrP, tOrV(_, _, _, read_v.index()), tOrO);
        pass_turn();
        const auto step = steps.begin(i, read_k.index());
        warpgroup_wait<1>();  // S of this block; P V of the previous one may still run
        release_k();
        if (i + 1 == end_step) q_read();
        softmax_step(step);
        warpgroup_wait<0>();
        release_v();
        convert_probabilities(tSrS, tOrP);
      } else {
        // The previous block's P V first, then this block's S, one after the other.
        pipeline_v.consumer_wait(read_v);
        wait_turn();
        issue_gemm</*kZeroInit=*/false>(mma_pv, tOrP, tOrV(_, _, _, read_v.index()), tOrO);
        pass_turn();
        warpgroup_wait<0>();
        release_v();
        wait_turn();
        issue_gemm</*kZeroInit=*/true>(mma_qk, q_operand(tSrQ), tSrK(_, _, _, read_k.index()),
                                       tSrS);
        pass_turn();
        const auto step = steps.begin(i, read_k.index());
        warpgroup_wait<0>();
        release_k();
        if (i + 1 == end_step) q_read();
        softmax_step(step);
        rescale_o();
        convert_probabilities(tSrS, tOrP);
      }
    }

    // The last block's P V.
    if constexpr (kIntraOverlap) rescale_o();
    pipeline_v.consumer_wait(read_v);
    wait_turn();
    issue_gemm</*kZeroInit=*/false>(mma_pv, tOrP, tOrV(_, _, _, read_v.index()), tOrO);
    pass_turn();
    warpgroup_wait<0>();
    release_v();
    if constexpr (kHidesSteps) skip_steps(num_steps - end_step);
  }

  // The dense kernel's steps: the key blocks of a contiguous range, last first; the window mask
  // (bound to the tile's sequence) only where a block is not fully visible to this warpgroup's
  // rows.
  struct DenseSteps {
    const FwdArgs& a;
    WindowMask<int> mask;
    AccumulatorCoords coords;
    int tile_row0, wg_row0, last_block;

    __device__ int begin(int i, int /*stage*/) const { return last_block - i; }
    // The steps whose blocks hold a key this warpgroup's rows see. The tile's range is the union
    // over its warpgroups, and a warpgroup sees less of it when the tile is taller than a key
    // block (three warpgroups' 192 rows at D <= 64: a quarter of the steps at S 512 causal) or
    // its rows are not aligned to the key blocks (80-key blocks at D 256): on a causal diagonal
    // the first steps (the range's last blocks, past what its last row sees), under a window's
    // left edge the last ones; none when its rows lie past the sequence's end.
    __device__ StepSpan visible_steps(const BlockRange& range) const {
      const int steps = range.end - range.begin;
      const int wg_row_end = min(wg_row0 + kRowsPerWarpgroup, mask.seqlen_q);
      if (wg_row_end <= wg_row0) return {steps, steps};
      const int seen_begin = max(range.begin, mask.block_first_key(wg_row0) / kBlockN);
      const int seen_end = min(range.end, (mask.block_end_key(wg_row_end) + kBlockN - 1) / kBlockN);
      if (seen_end <= seen_begin) return {steps, steps};
      return {range.end - seen_end, range.end - seen_begin};
    }
    template <typename ScoreTensor>
    __device__ void score(int n_block, ScoreTensor& s) const {
      const int key0 = n_block * kBlockN;
      const bool masked =
          !mask.tile_fully_visible(wg_row0, wg_row0 + kRowsPerWarpgroup, key0, key0 + kBlockN);
      prepare_scores(a, mask, s, coords, tile_row0, key0, masked);
    }
    __device__ float exp_factor() const { return a.exp_factor; }
  };

  // Where a causal diagonal or a window's edge hides steps from a warpgroup: tiles of other than
  // kBlockN rows. With 128 x 128 tiles (D 96, 128) only rows past a sequence's end or a window's
  // offset would, and there the code that skips them cost the main loop 1-3% (hd128 S 1k-4k
  // causal; docs/perf.md, session 35). Cluster kernels run unmasked problems only, where nothing
  // but rows past the end hides, and at D 256 the code made ptxas spill two values there.
  static constexpr bool kTileHidesSteps = Traits::kBlockM != kBlockN && Traits::kClusterCtas == 1;

  // The key blocks of range (last first), as the dense producer loads them; mask: the window bound
  // to the tile's sequence (sequence_view.hpp).
  template <typename TensorQ, typename TensorK, typename TensorV, typename TensorO, typename QRead>
  __device__ void run(const FwdArgs& a, const WindowMask<int>& mask, const Tile& tile,
                      const BlockRange& range, const TensorQ& tSrQ, const TensorK& tSrK,
                      const TensorV& tOrV, TensorO& tOrO, Softmax& softmax, Pipeline& pipeline_k,
                      Pipeline& pipeline_v, PipelineState& read_k, PipelineState& read_v,
                      int thread, QRead q_read) {
    const int tile_row0 = tile.m_block * Traits::kBlockM;
    DenseSteps steps{a,
                     mask,
                     AccumulatorCoords::of(thread),
                     tile_row0,
                     tile_row0 + warpgroup * kRowsPerWarpgroup,
                     range.end - 1};
    run_steps<kTileHidesSteps>(steps, range.end - range.begin, tSrQ, tSrK, tOrV, tOrO, softmax,
                               pipeline_k, pipeline_v, read_k, read_v, steps.visible_steps(range),
                               q_read);
  }
};

}  // namespace flashcore::sm90
