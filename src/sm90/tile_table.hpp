// The sm90 kernel's shapes as plain constants, for the kernel and for the host code that plans
// its grid (which must not need CuTe): warp roles, the CTA tile and the key tile per head dim.
#pragma once

namespace flashcore::sm90 {

// Warp roles. Warpgroup 0 is the producer: its first warp issues every TMA load, the other three
// only give their registers back. Warpgroups 1 and 2 are the consumers; each owns 64 query rows of
// the 128-row tile and runs both GEMMs and the softmax for them.
enum class WarpgroupRole { kProducer = 0, kConsumer = 1 };
inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kConsumerWarpgroups = 2;
inline constexpr int kConsumerThreads = kConsumerWarpgroups * kWarpgroupThreads;
inline constexpr int kThreads = kWarpgroupThreads + kConsumerThreads;
inline constexpr int kRowsPerWarpgroup = 64;  // wgmma's M
inline constexpr int kBlockM = kConsumerWarpgroups * kRowsPerWarpgroup;

constexpr WarpgroupRole warpgroup_role(int warpgroup) {
  return warpgroup == 0 ? WarpgroupRole::kProducer : WarpgroupRole::kConsumer;
}

// The tile table. kBlockN is the key tile; kStages the depth of the K and V rings. Wider key
// tiles amortize the per-step softmax and barriers, and the limit is registers (S is 64 x kBlockN
// fp32 per consumer warpgroup next to the 64 x D O accumulator and P) and shared memory (Q plus
// two stages each of K and V, and O where it fits, within the 227 KiB of one CTA):
//   D <= 128: 128-key tiles (S 64 regs, O <= 64 regs; 192 KiB at D = 128 with O's buffer). At
//             D = 64, 192-key tiles measured no better (docs/perf.md, sm90 v3).
//   D <= 192: 96-key tiles (192 KiB at D = 192).
//   D <= 256: 64-key tiles (O takes 128 regs; 192 KiB at D = 256).
constexpr int block_n_for(int head_dim) {
  return head_dim <= 128 ? 128 : head_dim <= 192 ? 96 : 64;
}
inline constexpr int kStages = 2;

}  // namespace flashcore::sm90
