// The Mma policy of the FA2-class schedule (src/sm80/kernel_traits.hpp) for the Hopper small-grid
// tiles whose key group is a warpgroup (tile_table.hpp): the two GEMMs of one KV step as warpgroup
// MMAs (wgmma, sm_90a), S = Q K^T with both operands in shared memory, and O += P V with P in
// registers. The rest of the schedule is unchanged, because a warpgroup's
// m64nN accumulator gives each of its four warps exactly the m16 x N fragment mma.sync would
// (warp w of the group holds rows 16w..16w+15; register 4j+e holds row g + 8*(e/2), column
// 8j + 2*(lane%4) + e%2, as in common/online_softmax.hpp), and the register A operand of m64k16 is,
// per warp, mma.sync's m16k16 A fragment, which pack_probabilities already builds.
//
// Shared-memory operands: tile_io.hpp stores a 64-wide row as 128 bytes whose 16-byte chunk c sits
// at slot c ^ (row & 7). On a 1024-byte-aligned tile that is wgmma's 128-byte swizzle, in both
// readings the GEMMs need: K-major (Q, K: rows are M or N, the 64 dims are K) and MN-major (V:
// rows are keys = K, the 64 dims are N). In both, one 8-row group is one 1024-byte swizzle atom
// and the descriptor's stride byte offset is the distance to the next group.
#pragma once

#include <cstdint>
#include <cute/arch/mma_sm90_gmma.hpp>
#include <cute/arch/util.hpp>

#include "sm80/kernel_traits.hpp"
#include "sm80/mainloop.hpp"

// src/sm90 is compiled for sm_90a alone (src/CMakeLists.txt): wgmma exists nowhere else.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "src/sm90/small_grid/warpgroup_mma.hpp needs sm_90a"
#endif

namespace flashcore::sm90::small_grid {

using sm80::kMmaK;
using sm80::OutFrag;
using sm80::ProbFrag;
using sm80::ScoreFrag;

inline constexpr int kWarpgroupWarps = 4;
inline constexpr int kSwizzleAtomBytes = 1024;  // 8 rows x 128 bytes
inline constexpr int kSwizzledRowBytes = 128;

// A wgmma shared-memory matrix descriptor for a 128-byte-swizzled operand starting at smem_addr
// (a shared-window byte address). Fields (PTX ISA, "Matrix Descriptor Format"): start address and
// both byte offsets in 16-byte units; leading byte offset 1 (unused by swizzled K-major layouts,
// and by MN-major ones only one atom wide, as here); stride byte offset one swizzle atom; layout
// type 1 = SWIZZLE_128B in bits 62-63.
__device__ __forceinline__ uint64_t swizzle128_descriptor(uint32_t smem_addr) {
  constexpr uint64_t kLeadingByteOffset = 1;
  constexpr uint64_t kStrideByteOffset = kSwizzleAtomBytes / 16;
  constexpr uint64_t kSwizzle128B = 1;
  return (kSwizzle128B << 62) | (kStrideByteOffset << 32) | (kLeadingByteOffset << 16) |
         ((smem_addr >> 4) & 0x3FFF);
}

template <typename Element>
struct WarpgroupMmaFor;
template <>
struct WarpgroupMmaFor<__half> {
  using QK = cute::SM90::GMMA::MMA_64x64x16_F32F16F16_SS<cute::SM90::GMMA::Major::K,
                                                         cute::SM90::GMMA::Major::K>;
  using PV = cute::SM90::GMMA::MMA_64x64x16_F32F16F16_RS<cute::SM90::GMMA::Major::K,
                                                         cute::SM90::GMMA::Major::MN>;
};
template <>
struct WarpgroupMmaFor<__nv_bfloat16> {
  using QK = cute::SM90::GMMA::MMA_64x64x16_F32BF16BF16_SS<cute::SM90::GMMA::Major::K,
                                                           cute::SM90::GMMA::Major::K>;
  using PV = cute::SM90::GMMA::MMA_64x64x16_F32BF16BF16_RS<cute::SM90::GMMA::Major::K,
                                                           cute::SM90::GMMA::Major::MN>;
};

// One m64n64k16 accumulator (32 floats per thread) as the atoms' argument list wants it.
template <typename Atom, typename... Operands>
__device__ __forceinline__ void wgmma_64x64(float (&d)[8][4], cute::SM90::GMMA::ScaleOut scale,
                                            const Operands&... operands) {
  Atom::fma(operands..., d[0][0], d[0][1], d[0][2], d[0][3], d[1][0], d[1][1], d[1][2], d[1][3],
            d[2][0], d[2][1], d[2][2], d[2][3], d[3][0], d[3][1], d[3][2], d[3][3], d[4][0],
            d[4][1], d[4][2], d[4][3], d[5][0], d[5][1], d[5][2], d[5][3], d[6][0], d[6][1],
            d[6][2], d[6][3], d[7][0], d[7][1], d[7][2], d[7][3], scale);
}

// The compiler must not move accumulator reads or writes across an asynchronous MMA.
template <int kN>
__device__ __forceinline__ void fence_accumulators(float (&d)[kN][4]) {
#pragma unroll
  for (int j = 0; j < kN; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) cute::warpgroup_fence_operand(d[j][e]);
  }
}

template <typename Traits>
__device__ __forceinline__ void check_warpgroup_tile() {
  static_assert(Traits::kRowWarps == kWarpgroupWarps && Traits::kWarpMTiles == 1,
                "a key group is one warpgroup; each warp owns one m16 tile");
  static_assert(Traits::kHeadDim * 2 == kSwizzledRowBytes && Traits::kBlockN == 64,
                "one 128-byte swizzled row per key and query (hd64), 64 keys per warpgroup");
  static_assert(
      Traits::kQBytes % kSwizzleAtomBytes == 0 && Traits::kSliceBytes % kSwizzleAtomBytes == 0,
      "every operand starts on a swizzle atom");
}

// S = Q K^T for the warpgroup's 64 rows and its 64-key slice: four k16 steps over the head dim.
// Within a 128-byte swizzled row, k-step kk starts 32 bytes further; the hardware applies the
// swizzle to the address it forms, so advancing the start address is enough.
// Called by all 128 threads of the warpgroup; returns with S complete in registers.
template <typename Traits>
__device__ __forceinline__ void gemm_qk_warpgroup(const char* q_smem, const char* k_smem,
                                                  ScoreFrag<Traits>& s) {
  check_warpgroup_tile<Traits>();
  using Atom = typename WarpgroupMmaFor<typename Traits::Element>::QK;
  constexpr int kStepBytes = kMmaK * 2;
  const uint32_t q_addr = cute::cast_smem_ptr_to_uint(q_smem);
  const uint32_t k_addr = cute::cast_smem_ptr_to_uint(k_smem);
  fence_accumulators(s[0]);
  cute::warpgroup_arrive();
#pragma unroll
  for (int kk = 0; kk < Traits::kHeadDim / kMmaK; ++kk) {
    const uint64_t q_desc = swizzle128_descriptor(q_addr + kk * kStepBytes);
    const uint64_t k_desc = swizzle128_descriptor(k_addr + kk * kStepBytes);
    wgmma_64x64<Atom>(s[0],
                      kk == 0 ? cute::SM90::GMMA::ScaleOut::Zero : cute::SM90::GMMA::ScaleOut::One,
                      q_desc, k_desc);
  }
  cute::warpgroup_commit_batch();
  cute::warpgroup_wait<0>();
  fence_accumulators(s[0]);
}

// O += P V over the slice's 64 keys: four k16 steps, each 16 V rows = two swizzle atoms further.
template <typename Traits>
__device__ __forceinline__ void gemm_pv_warpgroup(const char* v_smem, const ProbFrag<Traits>& p,
                                                  OutFrag<Traits>& o) {
  check_warpgroup_tile<Traits>();
  using Atom = typename WarpgroupMmaFor<typename Traits::Element>::PV;
  constexpr int kStepBytes = kMmaK * kSwizzledRowBytes;
  const uint32_t v_addr = cute::cast_smem_ptr_to_uint(v_smem);
  fence_accumulators(o[0]);
  cute::warpgroup_arrive();
#pragma unroll
  for (int kk = 0; kk < Traits::kBlockN / kMmaK; ++kk) {
    const uint64_t v_desc = swizzle128_descriptor(v_addr + kk * kStepBytes);
    wgmma_64x64<Atom>(o[0], cute::SM90::GMMA::ScaleOut::One, p[0][kk][0], p[0][kk][1], p[0][kk][2],
                      p[0][kk][3], v_desc);
  }
  cute::warpgroup_commit_batch();
  cute::warpgroup_wait<0>();
  fence_accumulators(o[0]);
}

// The policy the tile configs name (tile_table.hpp).
struct WarpgroupMma {
  // A wgmma needs its whole warpgroup, so every warp computes, rows past seqlen_q included.
  static constexpr bool kEveryWarpComputes = true;

  template <typename Traits>
  __device__ __forceinline__ static void gemm_qk(const char* q_smem, const char* k_slice,
                                                 int /*warp_row0*/, int /*lane*/,
                                                 ScoreFrag<Traits>& s) {
    gemm_qk_warpgroup<Traits>(q_smem, k_slice, s);
  }
  template <typename Traits>
  __device__ __forceinline__ static void gemm_pv(const char* v_slice, int /*lane*/,
                                                 const ProbFrag<Traits>& p, OutFrag<Traits>& o) {
    gemm_pv_warpgroup<Traits>(v_slice, p, o);
  }
  // cp.async writes shared memory through the generic proxy and wgmma reads it through the async
  // proxy: each writer fences its own completed copies before the barrier that publishes them.
  __device__ __forceinline__ static void fence_copies() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
};

}  // namespace flashcore::sm90::small_grid
