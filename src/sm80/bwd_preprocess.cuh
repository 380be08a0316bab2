// The backward's first kernel: per query row, D = rowsum(dO * O) in fp32 and the forward's LSE in
// the log2 domain, both into the workspace (bwd_params.hpp) where the main kernel copies them a
// query block at a time; varlen batches read their sequence's rows through cu_seqlens_q. Rows past
// seqlen_q, and rows that saw no key (LSE -inf), get LSE +inf, so that every P the main kernel
// recomputes for them is exp2(x - inf) = 0, never exp2(-inf + inf).
#pragma once

#include <cstdint>

#include "common/fp16_bf16.hpp"
#include "common/launch.hpp"
#include "common/online_softmax.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

inline constexpr int kPreprocessThreads = 128;

// A CTA's rows: passes of kRowsPerPass rows (one 16-byte chunk per thread, a row's threads
// meeting by xor-shuffles within its group of lanes). A dense batch takes one pass a CTA. A varlen
// CTA first finds its rows' sequence (workspace_row_owner's binary search), so there a CTA takes
// up to kMaxVarlenPasses passes inside one query block of the workspace (kBlockM rows: what the
// backward pads its rows to), one search for all of them. Measured on the H200 (docs/perf.md,
// session 29): one pass a CTA took a skewed varlen batch 103 us against 25 us for its long
// sequence alone; eight, 50-53 us. Eight on dense batches took 47-51 us against one's 40-43 us:
// with no search to share, fewer CTAs only meant fewer loads in flight.
template <typename Traits, int kBlockM, bool kVarlen>
struct PreprocessShape {
  static constexpr int kMaxVarlenPasses = 8;
  static constexpr int kThreadsPerRow = Traits::kChunksPerRow;
  static constexpr int kRowsPerPass = kPreprocessThreads / kThreadsPerRow;
  static constexpr int kMaxPasses = kVarlen ? kMaxVarlenPasses : 1;
  static constexpr int kRowsPerCta =
      kBlockM < kMaxPasses * kRowsPerPass ? kBlockM : kMaxPasses * kRowsPerPass;
  static constexpr int kPasses = kRowsPerCta / kRowsPerPass;
  static_assert(kWarpSize % kThreadsPerRow == 0, "a row's lanes lie in one warp");
  static_assert(kRowsPerCta % kRowsPerPass == 0 && kBlockM % kRowsPerCta == 0,
                "a CTA's passes cover whole rows inside one query block");
};

// kBlockM: the query block the workspace rows are padded to (BwdParams::block_m); kVarlen: the
// batch has cu_seqlens_q.
template <typename Traits, int kBlockM, bool kVarlen>
__global__ void __launch_bounds__(kPreprocessThreads)
    bwd_preprocess_kernel(const __grid_constant__ BwdParams p) {
  using Element = typename Traits::Element;
  using Shape = PreprocessShape<Traits, kBlockM, kVarlen>;
  const int chunk = threadIdx.x % Shape::kThreadsPerRow;
  const int pass_row = threadIdx.x / Shape::kThreadsPerRow;
  const int head = blockIdx.y;
  // The grid covers exactly num_m_blocks whole query blocks, so every lane reaches the shuffles
  // below. Varlen: the grid covers the workspace rows, each CTA's inside one query block of one
  // sequence (workspace_row_owner). A CTA of rows no sequence has (between sequences' padded
  // blocks, and past the last) marks them as rows past a sequence, so that every workspace row
  // holds LSE and D (the sinks' gradient sums all of them, bwd_sink_grad.hpp), and leaves.
  int first_row = blockIdx.x * Shape::kRowsPerCta;  // in the sequence or batch entry
  int seqlen_q = p.seqlen_q;
  int64_t q_start = 0, batch_index = blockIdx.z, lse_at = 0;
  int64_t workspace_row = 0;  // the head's row 0 of the sequence or batch entry
  if constexpr (kVarlen) {
    const int64_t cta_row = int64_t{blockIdx.x} * Shape::kRowsPerCta;
    const WorkspaceRowOwner owner = workspace_row_owner(p, cta_row);
    if (owner.batch < 0) {
      for (int row = threadIdx.x; row < Shape::kRowsPerCta; row += kPreprocessThreads) {
        const int64_t at = static_cast<int64_t>(head) * p.seqlen_q_rounded + cta_row + row;
        p.lse_log2[at] = INFINITY;
        p.delta[at] = 0.f;
      }
      return;
    }
    first_row = owner.row;
    q_start = owner.seq.q_start;
    seqlen_q = owner.seq.seqlen_q;
    batch_index = 0;
    lse_at = static_cast<int64_t>(head) * p.seqlen_q + q_start;  // LSE [heads_q, total_q]
    workspace_row = owner.row0(p, head);
  } else {
    lse_at = (batch_index * p.heads_q + head) * p.seqlen_q;
    workspace_row = workspace_row0(p, static_cast<int>(blockIdx.z), head);
  }

  // Every pass's loads first, then the sums, so that ptxas can issue loads of later passes before
  // the sums of earlier ones. The loads are unconditional for that (with a branch around each it
  // issued them one pass at a time): a row past the sequence reads its last row (an owned CTA's
  // sequence has one, a dense batch entry too) and its sum is dropped.
  Chunk o_chunks[Shape::kPasses], do_chunks[Shape::kPasses];
#pragma unroll
  for (int pass = 0; pass < Shape::kPasses; ++pass) {
    const int row = first_row + pass * Shape::kRowsPerPass + pass_row;
    const int64_t at_row = q_start + min(row, seqlen_q - 1);
    const auto* o = static_cast<const Element*>(p.o) + batch_index * p.o_batch + at_row * p.o_seq +
                    head * p.o_head + chunk * kChunkElems;
    const auto* d_o = static_cast<const Element*>(p.d_o) + batch_index * p.do_batch +
                      at_row * p.do_seq + head * p.do_head + chunk * kChunkElems;
    o_chunks[pass] = *reinterpret_cast<const Chunk*>(o);
    do_chunks[pass] = *reinterpret_cast<const Chunk*>(d_o);
  }
  float dots[Shape::kPasses];
#pragma unroll
  for (int pass = 0; pass < Shape::kPasses; ++pass) {
    const auto* o_elems = reinterpret_cast<const Element*>(&o_chunks[pass]);
    const auto* do_elems = reinterpret_cast<const Element*>(&do_chunks[pass]);
    float dot = 0.f;
#pragma unroll
    for (int e = 0; e < kChunkElems; ++e) {
      dot = fmaf(detail::to_float(o_elems[e]), detail::to_float(do_elems[e]), dot);
    }
    const int row = first_row + pass * Shape::kRowsPerPass + pass_row;
    dots[pass] = row < seqlen_q ? dot : 0.f;
  }
#pragma unroll
  for (int pass = 0; pass < Shape::kPasses; ++pass) {
#pragma unroll
    for (int lanes = Shape::kThreadsPerRow / 2; lanes > 0; lanes /= 2) {
      dots[pass] += __shfl_xor_sync(0xffffffffu, dots[pass], lanes);
    }
  }
  if (chunk != 0) return;
#pragma unroll
  for (int pass = 0; pass < Shape::kPasses; ++pass) {
    const int row = first_row + pass * Shape::kRowsPerPass + pass_row;
    float lse_log2 = INFINITY;
    if (row < seqlen_q) {
      const float lse = p.lse[lse_at + row];
      if (lse != -INFINITY) lse_log2 = lse * kLog2e;
    }
    p.lse_log2[workspace_row + row] = lse_log2;
    p.delta[workspace_row + row] = dots[pass];
  }
}

// Traits: the element type and its chunking; kBlockM: p.block_m (the sm90 backward pads its
// workspace rows to its own query block).
template <typename Traits, int kBlockM = Traits::kBlockM>
cudaError_t launch_bwd_preprocess(const BwdParams& p, cudaStream_t stream) {
  detail::LaunchShape shape;
  shape.threads = kPreprocessThreads;
  // Dense: num_m_blocks * block_m rows (seqlen_q_rounded) of each batch entry. Varlen: the
  // workspace's seqlen_q_rounded rows, every sequence's padded blocks among them.
  if (p.cu_seqlens_q != nullptr) {
    constexpr int kRowsPerCta = PreprocessShape<Traits, kBlockM, true>::kRowsPerCta;
    shape.grid = dim3(static_cast<unsigned>((p.seqlen_q_rounded + kRowsPerCta - 1) / kRowsPerCta),
                      static_cast<unsigned>(p.heads_q), 1);
    return detail::launch_kernel(bwd_preprocess_kernel<Traits, kBlockM, true>, shape, stream, p);
  }
  constexpr int kRowsPerCta = PreprocessShape<Traits, kBlockM, false>::kRowsPerCta;
  const int64_t rows = static_cast<int64_t>(p.num_m_blocks) * p.block_m;
  shape.grid = dim3(static_cast<unsigned>((rows + kRowsPerCta - 1) / kRowsPerCta),
                    static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
  return detail::launch_kernel(bwd_preprocess_kernel<Traits, kBlockM, false>, shape, stream, p);
}

}  // namespace flashcore::sm80
