// The backward's last kernel: dQ = scale * the fp32 accumulators of the main kernel, converted to
// the output dtype and stored with the caller's strides. One 16-byte chunk (8 elements) per thread.
#pragma once

#include <cstdint>

#include "common/launch.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

inline constexpr int kConvertThreads = 128;

template <typename Traits>
__global__ void __launch_bounds__(kConvertThreads)
    bwd_convert_kernel(const __grid_constant__ BwdParams p) {
  using Element = typename Traits::Element;
  constexpr int kThreadsPerRow = Traits::kChunksPerRow;
  constexpr int kRowsPerCta = kConvertThreads / kThreadsPerRow;
  int row = blockIdx.x * kRowsPerCta + threadIdx.x / kThreadsPerRow;
  const int chunk = threadIdx.x % kThreadsPerRow;
  const int head = blockIdx.y;
  // Varlen: the grid covers the workspace rows (workspace_row_owner), each CTA's inside one query
  // block of one sequence, whose rows go to their place in the packed dq.
  int seqlen_q = p.seqlen_q;
  int64_t q_start = 0, batch_index = blockIdx.z;
  int64_t workspace_row = 0;  // the head's row 0 of the sequence or batch entry
  if (p.cu_seqlens_q != nullptr) {
    const WorkspaceRowOwner owner = workspace_row_owner(p, int64_t{blockIdx.x} * kRowsPerCta);
    if (owner.batch < 0) return;
    row = owner.row + static_cast<int>(threadIdx.x) / kThreadsPerRow;
    q_start = owner.seq.q_start;
    seqlen_q = owner.seq.seqlen_q;
    batch_index = 0;
    workspace_row = owner.row0(p, head);
  } else {
    workspace_row = workspace_row0(p, static_cast<int>(blockIdx.z), head);
  }
  if (row >= seqlen_q) return;
  const float* src = p.dq_accum + (workspace_row + row) * Traits::kHeadDim + chunk * kChunkElems;
  const float4 lo = *reinterpret_cast<const float4*>(src);
  const float4 hi = *reinterpret_cast<const float4*>(src + 4);
  uint32_t packed[4] = {pack2<Element>(lo.x * p.scale, lo.y * p.scale),
                        pack2<Element>(lo.z * p.scale, lo.w * p.scale),
                        pack2<Element>(hi.x * p.scale, hi.y * p.scale),
                        pack2<Element>(hi.z * p.scale, hi.w * p.scale)};
  Element* dst = static_cast<Element*>(p.dq) + batch_index * p.dq_batch +
                 (q_start + row) * p.dq_seq + head * p.dq_head + chunk * kChunkElems;
  *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
}

template <typename Traits>
cudaError_t launch_bwd_convert(const BwdParams& p, cudaStream_t stream) {
  constexpr int kRowsPerCta = kConvertThreads / Traits::kChunksPerRow;
  detail::LaunchShape shape;
  // Dense: seqlen_q rows of each batch entry; varlen: the workspace's seqlen_q_rounded rows.
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t rows = varlen ? p.seqlen_q_rounded : p.seqlen_q;
  shape.grid = dim3(static_cast<unsigned>((rows + kRowsPerCta - 1) / kRowsPerCta),
                    static_cast<unsigned>(p.heads_q), static_cast<unsigned>(varlen ? 1 : p.batch));
  shape.threads = kConvertThreads;
  return detail::launch_kernel(bwd_convert_kernel<Traits>, shape, stream, p);
}

}  // namespace flashcore::sm80
