// wgmma and TMA-ring helpers shared by the sm90 forward (fwd_kernel.cuh) and backward
// (bwd_kernel.cuh): where an accumulator register sits in its tile, how one warpgroup GEMM is
// issued, and the parameters of a TMA ring.
#pragma once

// clang-format off
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
// clang-format on
#include <cutlass/pipeline/sm90_pipeline.hpp>

namespace flashcore::sm90 {

using namespace cute;

// Whether TiledMma issues one wgmma over the whole N it was built for. CuTe's selectors offer the
// N outside {8, 16, 32, 64, 96, 128, 192, 256} (80, 160, 224, ...) only under
// CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED, and without it split such an N into narrower instructions
// (2.5x the HGMMA at hd160). That define's headers cost every translation unit that includes them
// about 20 s of compile time (cute_dense_wgmma.hpp), so src/CMakeLists.txt gives it only to those
// that need it; the traits assert this, so that a translation unit left without it fails to build
// instead of running slower.
template <typename TiledMma, int kN>
inline constexpr bool kWholeWgmmaN = size<1>(typename TiledMma::AtomShape_MNK{}) == kN;

// Where register i of a consumer thread's m64nN wgmma accumulator sits in the 128-row tile: row
// row0 + 8 * ((i / 2) % 2), column col0 + 8 * (i / 4) + i % 2 (PTX ISA, wgmma D fragment layout,
// the same per warp as mma.sync's m16n8 C fragment). Computed from the thread index instead of a
// partitioned identity tensor, whose per-register coordinates the compiler hoists out of the loops
// and keeps live (128 registers for a 64 x 128 tile, which spilled).
struct AccumulatorCoords {
  int row0;
  int col0;

  __device__ __forceinline__ static AccumulatorCoords of(int consumer_thread) {
    const int lane = consumer_thread % 32;
    const int warp = consumer_thread / 32;  // 0..7 over both consumer warpgroups, 16 rows each
    return {warp * 16 + lane / 4, 2 * (lane % 4)};
  }
  __device__ __forceinline__ static constexpr int row_offset(int i) { return 8 * ((i / 2) % 2); }
  __device__ __forceinline__ static constexpr int col_offset(int i) { return 8 * (i / 4) + i % 2; }
  __device__ __forceinline__ int row(int i) const { return row0 + row_offset(i); }
  __device__ __forceinline__ int col(int i) const { return col0 + col_offset(i); }
};

// Issues one warpgroup GEMM over the whole K extent of its operands and commits it as one batch;
// the caller waits with warpgroup_wait<N>. The fences keep the compiler from moving register reads
// or writes of the accumulators (and of a register A operand) across the asynchronous MMA.
template <bool kZeroInit, typename TiledMma, typename TensorA, typename TensorB, typename TensorC>
__device__ __forceinline__ void issue_gemm(TiledMma& mma, const TensorA& a, const TensorB& b,
                                           TensorC& c) {
  // A in shared memory comes as wgmma descriptors; anything else is a register operand.
  constexpr bool kRegisterA =
      !cute::is_same_v<typename TensorA::engine_type::iterator, GMMA::DescriptorIterator>;
  if constexpr (kRegisterA) warpgroup_fence_operand(const_cast<TensorA&>(a));
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  mma.accumulate_ = kZeroInit ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
  if constexpr (kRegisterA) warpgroup_fence_operand(const_cast<TensorA&>(a));
}

// One TMA ring's parameters: the producer warpgroup fills it, every consumer thread releases it.
template <typename Pipeline>
__device__ __forceinline__ typename Pipeline::Params tma_pipeline_params(
    bool is_producer, uint32_t consumer_threads, uint32_t transaction_bytes) {
  typename Pipeline::Params params;
  params.role =
      is_producer ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  params.is_leader = threadIdx.x == 0;
  params.num_consumers = consumer_threads;
  params.transaction_bytes = transaction_bytes;
  return params;
}

}  // namespace flashcore::sm90
