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

// Threads per row: one 16-byte chunk each. Their partial sums meet by xor-shuffles within the row's
// group of lanes.
template <typename Traits>
__global__ void __launch_bounds__(kPreprocessThreads)
    bwd_preprocess_kernel(const __grid_constant__ BwdParams p) {
  using Element = typename Traits::Element;
  constexpr int kThreadsPerRow = Traits::kChunksPerRow;
  constexpr int kRowsPerCta = kPreprocessThreads / kThreadsPerRow;
  static_assert(kWarpSize % kThreadsPerRow == 0, "a row's lanes lie in one warp");
  int row = blockIdx.x * kRowsPerCta + threadIdx.x / kThreadsPerRow;
  const int chunk = threadIdx.x % kThreadsPerRow;
  const int head = blockIdx.y;
  // The grid covers exactly num_m_blocks whole query blocks (a multiple of every kRowsPerCta), so
  // every lane reaches the shuffles below. Varlen: the grid covers the workspace rows, each CTA's
  // inside one query block of one sequence (workspace_row_owner). A CTA of rows no sequence has
  // (between sequences' padded blocks, and past the last) marks them as rows past a sequence, so
  // that every workspace row holds LSE and D (the sinks' gradient sums all of them,
  // bwd_sink_grad.hpp), and leaves.
  int seqlen_q = p.seqlen_q;
  int64_t q_start = 0, batch_index = blockIdx.z, lse_at = 0;
  int64_t workspace_row = 0;  // the head's row 0 of the sequence or batch entry
  if (p.cu_seqlens_q != nullptr) {
    const WorkspaceRowOwner owner = workspace_row_owner(p, int64_t{blockIdx.x} * kRowsPerCta);
    if (owner.batch < 0) {
      if (threadIdx.x < kRowsPerCta) {
        const int64_t at = static_cast<int64_t>(head) * p.seqlen_q_rounded +
                           int64_t{blockIdx.x} * kRowsPerCta + threadIdx.x;
        p.lse_log2[at] = INFINITY;
        p.delta[at] = 0.f;
      }
      return;
    }
    row = owner.row + static_cast<int>(threadIdx.x) / kThreadsPerRow;
    q_start = owner.seq.q_start;
    seqlen_q = owner.seq.seqlen_q;
    batch_index = 0;
    lse_at = static_cast<int64_t>(head) * p.seqlen_q + q_start;  // LSE [heads_q, total_q]
    workspace_row = owner.row0(p, head);
  } else {
    lse_at = (batch_index * p.heads_q + head) * p.seqlen_q;
    workspace_row = workspace_row0(p, static_cast<int>(blockIdx.z), head);
  }

  float dot = 0.f;
  if (row < seqlen_q) {
    const int64_t at_row = q_start + row;
    const auto* o = static_cast<const Element*>(p.o) + batch_index * p.o_batch + at_row * p.o_seq +
                    head * p.o_head + chunk * kChunkElems;
    const auto* d_o = static_cast<const Element*>(p.d_o) + batch_index * p.do_batch +
                      at_row * p.do_seq + head * p.do_head + chunk * kChunkElems;
    const Chunk o_chunk = *reinterpret_cast<const Chunk*>(o);
    const Chunk do_chunk = *reinterpret_cast<const Chunk*>(d_o);
    const auto* o_elems = reinterpret_cast<const Element*>(&o_chunk);
    const auto* do_elems = reinterpret_cast<const Element*>(&do_chunk);
#pragma unroll
    for (int e = 0; e < kChunkElems; ++e) {
      dot = fmaf(detail::to_float(o_elems[e]), detail::to_float(do_elems[e]), dot);
    }
  }
#pragma unroll
  for (int lanes = kThreadsPerRow / 2; lanes > 0; lanes /= 2) {
    dot += __shfl_xor_sync(0xffffffffu, dot, lanes);
  }
  if (chunk != 0) return;
  const int64_t at = workspace_row + row;
  float lse_log2 = INFINITY;
  if (row < seqlen_q) {
    const float lse = p.lse[lse_at + row];
    if (lse != -INFINITY) lse_log2 = lse * kLog2e;
  }
  p.lse_log2[at] = lse_log2;
  p.delta[at] = dot;
}

template <typename Traits>
cudaError_t launch_bwd_preprocess(const BwdParams& p, cudaStream_t stream) {
  constexpr int kRowsPerCta = kPreprocessThreads / Traits::kChunksPerRow;
  static_assert(Traits::kBlockM % kRowsPerCta == 0,
                "the grid covers whole query blocks (the kernel's shuffles need every lane)");
  detail::LaunchShape shape;
  // Dense: num_m_blocks * block_m rows (seqlen_q_rounded) of each batch entry. Varlen: the
  // workspace's seqlen_q_rounded rows, every sequence's padded blocks among them.
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t rows =
      varlen ? p.seqlen_q_rounded : static_cast<int64_t>(p.num_m_blocks) * p.block_m;
  shape.grid = dim3(static_cast<unsigned>((rows + kRowsPerCta - 1) / kRowsPerCta),
                    static_cast<unsigned>(p.heads_q), static_cast<unsigned>(varlen ? 1 : p.batch));
  shape.threads = kPreprocessThreads;
  return detail::launch_kernel(bwd_preprocess_kernel<Traits>, shape, stream, p);
}

}  // namespace flashcore::sm80
