// dK and dV of a tile that bwd_tail_split.hpp cut into pieces run by different CTAs: each piece
// adds its partial sums to the tile's fp32 slot in the workspace (zeroed with the dQ
// accumulators), and the piece that arrives last loads the complete sums and stores the tile's
// dK and dV as an uncut tile would. Both sm90 backwards' consumers (bwd_mainloop.hpp,
// bwd256_mainloop.hpp).
//
// The slot is in the accumulators' register order (float4 i of thread t at i * kThreads + t), not
// in key and dimension order: every piece of a tile runs the same kernel with the same fragments,
// so each thread adds and reads back exactly its own registers, and a warp's 16-byte adds are
// contiguous.
#pragma once

#include <cutlass/arch/barrier.h>

#include "sm90/bwd_tail_split.hpp"

namespace flashcore::sm90 {

// Every consumer thread of the CTA (thread: 0 .. kThreads - 1; barrier: a named barrier of theirs
// alone; last_piece: one int of shared memory), after the piece's last GEMM into dk and dv has
// retired. kSlotFloats: a slot's size, 2 x keys x head dims of the tile (the host sizes the
// workspace with it). True when this CTA is to store the tile's dK and dV, now in dk and dv: the
// tile is uncut, or this piece arrived last and dk and dv hold the sums of every piece.
template <int kThreads, int kSlotFloats, typename Frag>
__device__ bool gather_key_grads(const BwdTail& tail, int slot, int pieces, int thread,
                                 uint32_t barrier, int* last_piece, Frag& dk, Frag& dv) {
  if (pieces == 1) return true;
  constexpr int kElems = decltype(cute::size(dk))::value;
  static_assert(kElems % 4 == 0, "float4 adds");
  static_assert(2 * kThreads * kElems == kSlotFloats, "the threads hold each dK, dV element once");
  constexpr int kVectors = kElems / 4;
  float4* const dk_sums =
      reinterpret_cast<float4*>(tail.key_grad_partials + int64_t{slot} * kSlotFloats) + thread;
  float4* const dv_sums = dk_sums + kVectors * kThreads;
  CUTLASS_PRAGMA_UNROLL
  for (int v = 0; v < kVectors; ++v) {
    atomicAdd(dk_sums + v * kThreads,
              make_float4(dk(4 * v), dk(4 * v + 1), dk(4 * v + 2), dk(4 * v + 3)));
    atomicAdd(dv_sums + v * kThreads,
              make_float4(dv(4 * v), dv(4 * v + 1), dv(4 * v + 2), dv(4 * v + 3)));
  }
  // The classic last-block pattern: each thread's adds are ordered before the arrival (fence,
  // then the CTA's barrier), and the last arrival's fence orders the sums' loads after every
  // other piece's adds.
  __threadfence();
  cutlass::arch::NamedBarrier::sync(kThreads, barrier);
  if (thread == 0) {
    *last_piece = atomicAdd(tail.key_grad_arrivals + slot, 1) == pieces - 1;
    __threadfence();
  }
  cutlass::arch::NamedBarrier::sync(kThreads, barrier);
  if (*last_piece == 0) return false;
  CUTLASS_PRAGMA_UNROLL
  for (int v = 0; v < kVectors; ++v) {
    // L2 (.cg): the adds landed there, and this SM's L1 is not coherent with other SMs' writes.
    const float4 k = __ldcg(dk_sums + v * kThreads);
    const float4 w = __ldcg(dv_sums + v * kThreads);
    dk(4 * v) = k.x;
    dk(4 * v + 1) = k.y;
    dk(4 * v + 2) = k.z;
    dk(4 * v + 3) = k.w;
    dv(4 * v) = w.x;
    dv(4 * v + 1) = w.y;
    dv(4 * v + 2) = w.z;
    dv(4 * v + 3) = w.w;
  }
  return true;
}

}  // namespace flashcore::sm90
