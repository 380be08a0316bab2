// The named barriers of the sm90 kernel, in one place so that no two uses share an id. Ids are
// CUTLASS's user ids (NamedBarrier adds the ids CUTLASS reserves for itself).
#pragma once

#include <cutlass/arch/barrier.h>

#include "sm90/tile_table.hpp"

namespace flashcore::sm90 {

enum class NamedBarrierId : uint32_t {
  // The producer warp waits here until both consumer warpgroups have stored the tile's O out of
  // Q's shared memory (the consumers arrive).
  kQueryEmpty = 0,
  // Pingpong: consumer warpgroup w waits on kTurn0 + w before issuing its GEMMs and hands the turn
  // to the other warpgroup after issuing them.
  kTurn0 = 1,
  kTurn1 = 2,
  // Each consumer warpgroup's own barrier between staging O in shared memory and reading it back.
  kEpilogue0 = 3,
  kEpilogue1 = 4,
};

inline constexpr uint32_t kQueryEmptyThreads = kConsumerThreads + 32;  // + the producer warp

__device__ __forceinline__ uint32_t barrier_id(NamedBarrierId id, int offset = 0) {
  return static_cast<uint32_t>(id) + static_cast<uint32_t>(offset);
}

__device__ __forceinline__ void wait_query_empty() {
  cutlass::arch::NamedBarrier::sync(kQueryEmptyThreads, barrier_id(NamedBarrierId::kQueryEmpty));
}
__device__ __forceinline__ void signal_query_empty() {
  cutlass::arch::NamedBarrier::arrive(kQueryEmptyThreads, barrier_id(NamedBarrierId::kQueryEmpty));
}

}  // namespace flashcore::sm90
