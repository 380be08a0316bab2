// Deterministic mode of the sm80 backward: the key blocks add their dQ to a query block in
// increasing order, so every dQ element sums its terms in one fixed order, run after run.
//
// A semaphore per (batch, query head, query block) counts the key blocks that have added theirs.
// The key blocks that see a query block are contiguous (common/key_block_rows.hpp: the rows each
// block sees move right with the block), so key block n waits for the count n - first, where
// first is the lowest key block that sees the query block. CTAs are numbered with the key block
// fastest (gridDim.x), so a waiting CTA waits only on CTAs dispatched before it, which are running
// or done: no cycle. The cost is the waiting (docs/backward.md).
#pragma once

#include <cstdint>

#include "common/key_block_rows.hpp"
#include "sm80/bwd_params.hpp"

namespace flashcore::sm80 {

// The lowest key block whose rows_seeing_keys ends past row m_row0 (the first row of a query block
// that key block `upper` sees): rows_seeing_keys(...).end is nondecreasing in the key block, so a
// binary search over [0, upper].
template <int kBlockN>
__device__ __forceinline__ int first_key_block_seeing(const BwdParams& p, int m_row0, int upper) {
  int lo = 0, hi = upper;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const int key_begin = mid * kBlockN;
    const int key_end = min(key_begin + kBlockN, p.seqlen_k);
    const RowRange<int> rows = rows_seeing_keys(p.mask, key_begin, key_end);
    // Blocks no row sees lie before or after the seen ones (the seen keys are contiguous): false.
    if (rows.begin < rows.end && rows.end > m_row0) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The highest key block that sees the query block whose rows start at m_row0 (kBlockM rows), given
// that key block `lower` sees it: the seeing blocks are contiguous and rows_seeing_keys(...).begin
// is nondecreasing in the key block, so a binary search over [lower, num_n_blocks - 1]. (The sm90
// backward's deterministic mode adds in decreasing key-block order, bwd_kernel.cuh.)
template <int kBlockM, int kBlockN>
__device__ __forceinline__ int last_key_block_seeing(const BwdParams& p, int m_row0, int lower) {
  int lo = lower, hi = p.num_n_blocks - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    const int key_begin = mid * kBlockN;
    const int key_end = min(key_begin + kBlockN, p.seqlen_k);
    const RowRange<int> rows = rows_seeing_keys(p.mask, key_begin, key_end);
    // Past `lower`, rows.end only grows, so seeing the block comes down to its first row.
    if (rows.begin < rows.end && rows.begin < m_row0 + kBlockM) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Thread 0 spins until the semaphore reaches turn; the barrier after it releases the CTA. The
// acquire load orders this CTA's dQ adds after the adds of the key blocks before it.
__device__ __forceinline__ void wait_for_turn(const int* semaphore, int turn) {
  if (threadIdx.x == 0) {
    int count;
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(count) : "l"(semaphore) : "memory");
    } while (count != turn);
  }
  __syncthreads();
}

// After every thread's adds (the barrier), thread 0 publishes them (the release fence is
// cumulative over what the barrier ordered before it) and passes the turn on.
__device__ __forceinline__ void pass_turn(int* semaphore) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(semaphore, 1);
  }
}

}  // namespace flashcore::sm80
