// The sm90 kernel's tile per (dtype, head dim) as this build ships it: the tile table's row
// (tile_table.hpp), unless a reviewed row of the tuned table replaces it. At configure time
// cmake/sm90_tuned_table.cmake turns the reviewed rows of FLASHCORE_SM90_TUNED_TABLE (default
// labs/flashcore/sm90_tuned_h100.json, exported by `flashcore-bench tune`) into the header included
// below, refusing rows the kernel cannot build; the targets that compile src/sm90 define
// FLASHCORE_SM90_TUNED_TABLE and put it on their include path (src/CMakeLists.txt). Code built
// without it sees no row: the tuner's candidates, which name their own tile. CuTe-free, for the
// host code that plans the grid as well as for the kernel's traits.
#pragma once

#include "sm90/tile_table.hpp"

namespace flashcore::sm90 {

// One reviewed row; block_n == 0 when there is none.
struct TunedTile {
  int block_n = 0;
  int stages = 0;
  int consumer_warpgroups = 0;
  int consumer_registers = 0;  // setmaxnreg of each consumer thread
  int cluster_ctas = 0;        // CTAs sharing K/V tiles on unmasked problems
  int smem_bytes = 0;          // as the configure step computed it, for the tests to compare
};

}  // namespace flashcore::sm90

#if defined(FLASHCORE_SM90_TUNED_TABLE)
#include "flashcore_sm90_tuned_table.hpp"  // generated: table_tile()
#else
namespace flashcore::sm90 {
constexpr TunedTile table_tile(bool, int) { return {}; }
}  // namespace flashcore::sm90
#endif

namespace flashcore::sm90 {

constexpr TunedTile reviewed_tile(bool bf16, int head_dim) { return table_tile(bf16, head_dim); }
constexpr bool has_reviewed_tile(bool bf16, int head_dim) {
  return reviewed_tile(bf16, head_dim).block_n != 0;
}

// The tiles of the instantiation for (dtype, head dim): the kernel's traits take them, and the
// host's plan (sm90_fwd.cu) sizes the grid with the same values (launch.cuh asserts they agree).
constexpr int kernel_block_n(bool bf16, int head_dim) {
  return has_reviewed_tile(bf16, head_dim) ? reviewed_tile(bf16, head_dim).block_n
                                           : block_n_for(head_dim);
}
constexpr int kernel_block_m(bool bf16, int head_dim) {
  return has_reviewed_tile(bf16, head_dim)
             ? reviewed_tile(bf16, head_dim).consumer_warpgroups * kRowsPerWarpgroup
             : block_m_for(head_dim);
}
constexpr int kernel_cluster_ctas(bool bf16, int head_dim) {
  return has_reviewed_tile(bf16, head_dim) ? reviewed_tile(bf16, head_dim).cluster_ctas
                                           : kKVClusterCtas;
}

}  // namespace flashcore::sm90
