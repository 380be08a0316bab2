// The sm90 kernel's shapes as plain constants, for the kernel and for the host code that plans
// its grid (which must not need CuTe): warp roles, the CTA tile and the key tile per head dim.
#pragma once

namespace flashcore::sm90 {

// Warp roles. Warpgroup 0 is the producer: its first warp issues every TMA load, the other three
// only give their registers back. The warpgroups after it are the consumers; each owns 64 query
// rows of the tile and runs both GEMMs and the softmax for them.
enum class WarpgroupRole { kProducer = 0, kConsumer = 1 };
inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kRowsPerWarpgroup = 64;  // wgmma's M
inline constexpr int kMaxConsumerWarpgroups = 3;

constexpr WarpgroupRole warpgroup_role(int warpgroup) {
  return warpgroup == 0 ? WarpgroupRole::kProducer : WarpgroupRole::kConsumer;
}
// The forward's producer warpgroup: one warp issues the loads; one stores O with the TMA where the
// problem allows (sm90/o_store.hpp); the others exit.
enum class ProducerWarp { kLoad = 0, kStoreO = 1, kIdle = 2 };
constexpr ProducerWarp producer_warp(int warp_in_warpgroup) {
  return warp_in_warpgroup == 0   ? ProducerWarp::kLoad
         : warp_in_warpgroup == 1 ? ProducerWarp::kStoreO
                                  : ProducerWarp::kIdle;
}

// The tile table (a reviewed row of the tuned table replaces an instantiation's row at compile
// time: tuned_tiles.hpp). Consumer warpgroups set the query tile (64 rows each):
//   D <= 64:  three (192-row tiles). A key block of 64 x D is little work per barrier and
//             softmax step, so the tensor cores idle unless a third warpgroup's GEMMs fill the
//             gaps; the O accumulator is small enough (<= 32 regs) for 160 registers a thread.
//   D > 64:   two (128-row tiles), which leaves each consumer thread 240 registers.
constexpr int consumer_warpgroups_for(int head_dim) { return head_dim <= 64 ? 3 : 2; }
constexpr int block_m_for(int head_dim) {
  return consumer_warpgroups_for(head_dim) * kRowsPerWarpgroup;
}
// kBlockN is the key tile; kStages the depth of the K and V rings. Wider key
// tiles amortize the per-step softmax and barriers, and the limit is registers (S is 64 x kBlockN
// fp32 per consumer warpgroup next to the 64 x D O accumulator and P) and shared memory (Q plus
// two stages each of K and V, and O where it fits, within the 227 KiB of one CTA):
//   D <= 128: 128-key tiles (S 64 regs, O <= 64 regs; 192 KiB at D = 128 with O's buffer). At
//             D = 64, 192-key tiles measured no better (docs/perf.md, sm90 v3).
//   D <= 192: 96-key tiles (192 KiB at D = 192).
//   D <= 256: 80-key tiles (O takes 128 regs, S 40; 224 KiB at D = 256, O staged in Q's buffer).
constexpr int block_n_for(int head_dim) {
  return head_dim <= 128 ? 128 : head_dim <= 192 ? 96 : 80;
}
inline constexpr int kStages = 2;

// Unmasked problems run in clusters of this many CTAs that take neighbouring query blocks of one
// head and share every K and V tile: each CTA loads its share of the tile and the TMA multicasts it
// to the others, so the L2 serves each K/V tile once per cluster instead of once per CTA. A
// 128 x 128 tile of S and of P V takes 64 KiB of K and V per key block, and at 600 TFLOP/s the SMs
// together pull about 5 TB/s of it from L2. Measured (docs/perf.md, sm90 v6): +3 to +14% at hd128
// S 1k-8k and hd256 S 512-2k. Masked problems keep one-CTA tiles: their blocks see different key
// ranges, and they take tiles dynamically.
inline constexpr int kKVClusterCtas = 2;

}  // namespace flashcore::sm90
