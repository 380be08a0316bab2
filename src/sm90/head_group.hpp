// How many (batch, head) pairs the persistent forward schedules side by side (FwdArgs::head_group;
// the order itself is in tile_scheduler.hpp). Host only: the dense and the flex plans both call it.
//
// The CTAs running at one time read the K/V of the heads they work on. Where every tile is the
// same work (no mask, not varlen: the fixed sequence of tile_scheduler.hpp), a wave of CTAs starts
// and ends together, and a head's K/V is read from DRAM once only while all of its query blocks
// fall in one or two neighbouring waves. So there a group is the heads one wave covers: wave /
// tiles-per-head, rounded up. A larger group spreads each head's query blocks over several waves
// and its K/V must survive in L2 between them (ncu, H200, B4 H16 S4096 hd128: a 12-head group read
// 524 MB from DRAM, 66% L2 hits, where flash-attn-4's query-block-first grid read the 201 MB of Q,
// K and V once, 91% hits; the wave rule took that shape from 570 to 589 TFLOP/s). Masked and varlen
// tiles (the dynamic schedule, and the flex kernel) differ in length, so no wave finishes together;
// there the wave rule measured within noise, -2.6% to +2% (docs/perf.md, session 31), and the L2
// bound applies: the group's K/V within half of L2, the other half for the Q and O streams. That
// bound also caps the wave rule.
//
// With tiles of unequal length the groups should also be equal. Groups run one after another, each
// longest tile first, so a last group smaller than the others (16 heads in groups of 3: 3, 3, 3,
// 3, 3, 1) starts its longest tiles when the other CTAs have little left, and they run alone at
// the end: ncu, hd256 causal B2 H8 S8192, the SMs active 86% of the kernel's time. So the group is
// the largest divisor of the pairs between half the L2 bound and the bound, where there is one
// (H200, bf16 causal, median TFLOP/s in alternating processes: hd256 S8192 groups of 2 instead of
// 3 600-609 -> 653-659, S4096 4 instead of 6 +4-5%, S2048 8 instead of 12 +4-5%; hd128 +0-3%;
// hd64 +1%; docs/perf.md, session 33). Groups below half the bound gave up too much of L2 (hd256
// S4096 in groups of 2: -1.7%).
#pragma once

#include <algorithm>
#include <cstdint>

namespace flashcore::sm90 {

struct HeadGroupInputs {
  int64_t pairs;              // batch * query heads
  int64_t tiles_per_head;     // tile indices of one (batch, head): query-block groups * splits
  int64_t concurrent_tiles;   // tile indices in flight at once: persistent CTAs (or clusters)
  int64_t kv_bytes_per_head;  // K and V of one query head's keys (a kv head's / kv_group)
  int64_t l2_bytes;
  bool uniform_tiles;  // every tile the same work: no mask, not varlen
};

// K and V of one query head's keys, two bytes an element; a kv head's K/V is shared by its kv_group
// query heads.
inline int64_t kv_bytes_per_query_head(int64_t keys, int64_t head_dim, int kv_group) {
  constexpr int64_t kTensors = 2, kElementBytes = 2;
  return kTensors * keys * head_dim * kElementBytes / std::max(1, kv_group);
}

inline int heads_per_group(const HeadGroupInputs& in) {
  const int64_t pairs = std::max<int64_t>(1, in.pairs);
  const int64_t within_l2 = in.l2_bytes / 2 / std::max<int64_t>(1, in.kv_bytes_per_head);
  int64_t heads = within_l2;
  if (in.uniform_tiles) {
    const int64_t tiles_per_head = std::max<int64_t>(1, in.tiles_per_head);
    heads = std::min(heads, (in.concurrent_tiles + tiles_per_head - 1) / tiles_per_head);
  }
  heads = std::clamp<int64_t>(heads, 1, pairs);
  if (!in.uniform_tiles) {
    for (int64_t equal = heads; 2 * equal >= heads; --equal) {
      if (pairs % equal == 0) return static_cast<int>(equal);
    }
  }
  return static_cast<int>(heads);
}

}  // namespace flashcore::sm90
