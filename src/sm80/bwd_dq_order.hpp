// Deterministic mode of the sm80 and sm90 backwards: the key blocks add their dQ to a query block
// in a fixed order, so every dQ element sums its terms in one order, run after run.
//
// A semaphore per (batch, query head, query block) counts the key blocks that have added theirs.
// The key blocks that see a query block are contiguous (common/key_block_rows.hpp: the rows each
// block sees move right with the block), and they add from the highest down: key block n waits
// for the count last - n, last being the highest key block that sees the query block. That is
// the order in which the walks reach a query block: each CTA walks its query blocks upward, and a
// higher key block starts at a later query block (causal, windows; all start at the first one
// without a mask), so it is ahead. In increasing order a causal head ran as a wavefront behind
// key block 0, the longest walk (docs/backward.md, "Deterministic mode (sm90)"). The grid
// dispatches the last key block first, so a waiting CTA waits only on CTAs dispatched before it,
// which are running or done: no cycle. The cost is the waiting (docs/backward.md).
#pragma once

#include <cstdint>

#include "common/key_block_rows.hpp"
#include "sm80/bwd_params.hpp"

namespace flashcore::sm80 {

// The key block a CTA runs: blockIdx.x, in deterministic mode counted from the last (the
// dispatch order above). Both backwards number their CTAs through it.
__device__ __forceinline__ int key_block_of_cta(bool deterministic) {
  return static_cast<int>(deterministic ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
}

// The count of adds key block n_block waits for at the query block whose rows start at m_row0
// (kBlockM rows), which it sees: last - n_block, last the highest key block that sees the query
// block. rows_seeing_keys(...).begin is nondecreasing in the key block, so a binary search over
// [n_block, last key block]. mask: the problem's, or a varlen sequence's (its keys are the key
// blocks of the count, so a tile past them, which adds nothing, is never counted).
template <int kBlockM, int kBlockN>
__device__ __forceinline__ int dq_turn(const WindowMask<int>& mask, int m_row0, int n_block) {
  int lo = n_block, hi = (mask.seqlen_k + kBlockN - 1) / kBlockN - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    const int key_begin = mid * kBlockN;
    const int key_end = min(key_begin + kBlockN, mask.seqlen_k);
    const RowRange<int> rows = rows_seeing_keys(mask, key_begin, key_end);
    // Past n_block, rows.end only grows, so seeing the block comes down to its first row.
    if (rows.begin < rows.end && rows.begin < m_row0 + kBlockM) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo - n_block;
}

// The dense problem's turn (p.mask covers every batch entry).
template <int kBlockM, int kBlockN>
__device__ __forceinline__ int dq_turn(const BwdParams& p, int m_row0, int n_block) {
  return dq_turn<kBlockM, kBlockN>(p.mask, m_row0, n_block);
}

// Spins (one thread) until the semaphore reaches turn. The acquire load orders what the thread
// does next after the adds of the key blocks before it.
__device__ __forceinline__ void spin_until_turn(const int* semaphore, int turn) {
  int count;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(count) : "l"(semaphore) : "memory");
  } while (count != turn);
}

// Publishes what was ordered before the call (the release fence is cumulative) and passes the
// turn on (one thread).
__device__ __forceinline__ void publish_turn(int* semaphore) {
  __threadfence();
  atomicAdd(semaphore, 1);
}

// The sm80 backward's turn, CTA-wide: thread 0 spins; the barrier after it releases the CTA.
__device__ __forceinline__ void wait_for_turn(const int* semaphore, int turn) {
  if (threadIdx.x == 0) spin_until_turn(semaphore, turn);
  __syncthreads();
}

// After every thread's adds (the barrier), thread 0 publishes them and passes the turn on.
__device__ __forceinline__ void pass_turn(int* semaphore) {
  __syncthreads();
  if (threadIdx.x == 0) publish_turn(semaphore);
}

}  // namespace flashcore::sm80
