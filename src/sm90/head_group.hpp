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
// there the wave rule measured within noise, -2.6% to +2% (docs/perf.md, session 31), and only the
// L2 bound applies: the group's K/V within half of L2, the other half for the Q and O streams. That
// bound also caps the wave rule.
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
  const int64_t within_l2 = in.l2_bytes / 2 / std::max<int64_t>(1, in.kv_bytes_per_head);
  int64_t heads = within_l2;
  if (in.uniform_tiles) {
    const int64_t tiles_per_head = std::max<int64_t>(1, in.tiles_per_head);
    heads = std::min(heads, (in.concurrent_tiles + tiles_per_head - 1) / tiles_per_head);
  }
  return static_cast<int>(std::clamp<int64_t>(heads, 1, std::max<int64_t>(1, in.pairs)));
}

}  // namespace flashcore::sm90
