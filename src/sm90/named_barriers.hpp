// The named barriers of the sm90 kernel, in one place so that no two uses share an id. Ids are
// CUTLASS's user ids (NamedBarrier adds the ids CUTLASS reserves for itself).
#pragma once

#include <cutlass/arch/barrier.h>

#include "sm90/tile_table.hpp"

namespace flashcore::sm90 {

enum class NamedBarrierId : uint32_t {
  // Pingpong: consumer warpgroup w waits on kTurn0 + w before issuing its GEMMs and hands the turn
  // to the next warpgroup (round robin) after issuing them.
  kTurn0 = 0,
  // Each consumer warpgroup's own barrier between staging O in shared memory and reading it back.
  kEpilogue0 = kTurn0 + kMaxConsumerWarpgroups,
  kEnd = kEpilogue0 + kMaxConsumerWarpgroups,
};

static_assert(static_cast<uint32_t>(NamedBarrierId::kEnd) +
                      cutlass::arch::NamedBarrier::ReservedNamedBarrierCount <=
                  cutlass::arch::NamedBarrier::HardwareMaxNumNamedBarriers,
              "the hardware has 16 named barriers, CUTLASS reserves the first ones");

__device__ __forceinline__ uint32_t barrier_id(NamedBarrierId id, int offset = 0) {
  return static_cast<uint32_t>(id) + static_cast<uint32_t>(offset);
}

}  // namespace flashcore::sm90
