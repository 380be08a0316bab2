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

// The backward kernel's (bwd_kernel.cuh), a kernel of its own, so its ids start over.
enum class BwdBarrierId : uint32_t {
  // Both consumer warpgroups stored their dS^T halves: dQ = dS K may read all of dS.
  kDsReady = 0,
  // The consumers staged a step's dQ in shared memory / the dQ writer warp has read it out.
  kDqFull = 1,
  kDqEmpty = 2,
  // The consumers: a cut tile's piece has added its partial dK and dV (bwd_key_grad_fixup.hpp).
  kKeyGradsAdded = 3,
  kEnd = 4,
};
static_assert(static_cast<uint32_t>(BwdBarrierId::kEnd) +
                      cutlass::arch::NamedBarrier::ReservedNamedBarrierCount <=
                  cutlass::arch::NamedBarrier::HardwareMaxNumNamedBarriers,
              "the hardware has 16 named barriers, CUTLASS reserves the first ones");

__device__ __forceinline__ uint32_t barrier_id(BwdBarrierId id) {
  return static_cast<uint32_t>(id);
}

// The hd256 backward kernel's (bwd256_kernel.cuh), another kernel of its own.
enum class Bwd256BarrierId : uint32_t {
  // Warpgroup 0 stored P^T (and G^T): dV may read it, warpgroup 1 forms dS^T from it.
  kPReady = 0,
  // Warpgroup 1 stored dS^T: dK and dQ may read it.
  kDsReady = 1,
  // kDqFull0 + w: consumer warpgroup w staged its dQ half. kDqEmpty0 + w: the writer has read out
  // the staging buffer, warpgroup w may stage into it (warpgroup 1 first each step). Both: w and
  // the dQ writer warp.
  kDqFull0 = 2,
  kDqEmpty0 = 4,
  // Both consumer warpgroups: warpgroup 1's dQ stores precede warpgroup 0's into the same buffer.
  kDqHandOver = 6,
  // The consumers: a cut tile's piece has added its partial dK and dV (bwd_key_grad_fixup.hpp).
  kKeyGradsAdded = 7,
  kEnd = 8,
};
static_assert(static_cast<uint32_t>(Bwd256BarrierId::kEnd) +
                      cutlass::arch::NamedBarrier::ReservedNamedBarrierCount <=
                  cutlass::arch::NamedBarrier::HardwareMaxNumNamedBarriers,
              "the hardware has 16 named barriers, CUTLASS reserves the first ones");

__device__ __forceinline__ uint32_t barrier_id(Bwd256BarrierId id, int warpgroup = 0) {
  return static_cast<uint32_t>(id) + static_cast<uint32_t>(warpgroup);
}

}  // namespace flashcore::sm90
