// What the host side of the sm90 backend hands to one instantiation's launcher: the kernel's
// problem view, the input tensors as the TMA descriptors will describe them, and the grid.
// Plain host types only, so that sm90_fwd.cu needs no CuTe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "sm90/fwd_params.hpp"

namespace flashcore::sm90 {

struct GmemInput {
  const void* data;
  int seqlen;
  int heads;
  int64_t seq_stride, head_stride, batch_stride;  // elements
};

struct LaunchArgs {
  FwdArgs args;
  GmemInput q, k, v;
  bool bf16;
  int num_ctas;          // whole clusters
  int cluster_ctas = 1;  // 1, or the instantiation's K/V multicast cluster (tuned_tiles.hpp)
  bool dynamic = false;  // masked: CTAs take tiles from FwdArgs::tile_counter (set at launch)
  // > 0: a varlen batch whose tiles are listed before the launch (varlen_tiles.hpp), in at most
  // this many entries (FwdArgs::varlen_tiles, set at launch).
  int varlen_tile_capacity = 0;
  // AttentionParams::enable_pdl: a kernel that waits for the prior grid (the flex kernel) may be
  // launched dependently on whatever kernel precedes it in the stream.
  bool enable_pdl = false;
  bool pingpong = true;  // Schedule switches (fwd_kernel.cuh); production runs both on
  bool intra_overlap = true;
};

}  // namespace flashcore::sm90
