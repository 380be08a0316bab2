// One instantiation's launcher: builds the TMA descriptors for this call's tensors (on the
// host, through the driver entry point the runtime exposes), raises the kernel's shared-memory
// limit once, and launches the persistent grid. Included by sm90_fwd_hd<D>.cu only.
#pragma once

#include <cutlass/numeric_types.h>

#include <algorithm>
#include <type_traits>

#include "common/launch.hpp"
#include "sm90/fwd_kernel.cuh"
#include "sm90/instantiations.hpp"
#include "sm90/kernel_traits.hpp"
#include "sm90/launch_args.hpp"
#include "sm90/varlen_tiles.hpp"

namespace flashcore::sm90 {

template <typename Traits>
auto make_gmem_tensor(const GmemInput& in, int head_dim, int batch) {
  using Element = typename Traits::Element;
  return make_tensor(
      make_gmem_ptr(static_cast<const Element*>(in.data)),
      make_layout(make_shape(in.seqlen, head_dim, in.heads, batch),
                  make_stride(in.seq_stride, _1{}, in.head_stride, in.batch_stride)));
}

// num_ctas: the persistent grid the plan asked for (whole clusters). A cluster launch is clamped
// to the clusters that fit on the device at once (asked once per kernel: GPCs whose SM count is
// not a multiple of the cluster size leave SMs out), so that every CTA is resident and none waits
// for another to finish.
template <typename Traits, typename Variant>
cudaError_t launch_kernel(const FwdParams<Traits>& params, int num_ctas, cudaStream_t stream) {
  auto kernel = fwd_kernel<Traits, Variant>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  if (configured != cudaSuccess) return configured;
  detail::LaunchShape shape;
  shape.grid = dim3(num_ctas);
  shape.threads = Traits::kThreads;
  shape.smem_bytes = Traits::kSmemBytes;
  shape.cluster_ctas = Traits::kClusterCtas;
  if constexpr (Traits::kClusterCtas > 1) {
    static int resident_clusters = 0;
    static const cudaError_t counted =
        detail::max_active_clusters(kernel, shape, &resident_clusters);
    if (counted != cudaSuccess) return counted;
    if (resident_clusters < 1) return cudaErrorInvalidConfiguration;
    shape.grid = dim3(std::min(num_ctas, resident_clusters * Traits::kClusterCtas));
  }
  return detail::launch_kernel(kernel, shape, stream, params);
}

// The kernel's parameters for this call: its problem view and the TMA descriptors. Also
// used by the tuner's generated translation units (tools/bench/tune_source.cpp).
template <typename Traits>
FwdParams<Traits> make_fwd_params(const LaunchArgs& in) {
  using TileShape = typename Traits::TileShape;
  FwdParams<Traits> params;
  params.args = in.args;
  // A varlen batch is one sequence of every packed row to the descriptors (sequence_view.hpp).
  const int d = in.args.head_dim, b = in.args.cu_seqlens_q != nullptr ? 1 : in.args.batch;
  params.tma_q = make_tma_copy(SM90_TMA_LOAD{}, make_gmem_tensor<Traits>(in.q, d, b),
                               typename Traits::SmemLayoutQTile{}, select<0, 2>(TileShape{}), _1{});
  using Cluster = Int<Traits::kClusterCtas>;
  params.tma_k = make_tma_copy(typename Traits::TmaLoadKV{}, make_gmem_tensor<Traits>(in.k, d, b),
                               take<0, 2>(typename Traits::SmemLayoutK{}),
                               select<1, 2>(TileShape{}), Cluster{});
  params.tma_v = make_tma_copy(typename Traits::TmaLoadKV{}, make_gmem_tensor<Traits>(in.v, d, b),
                               take<0, 2>(typename Traits::SmemLayoutV{}),
                               select<1, 2>(TileShape{}), Cluster{});
  params.args.o_by_tma = in.args.o_by_tma && Traits::kStoresOByTma;
  if (params.args.o_by_tma) {
    const FwdArgs& a = in.args;
    Tensor o = make_tensor(make_gmem_ptr(static_cast<typename Traits::Element*>(a.o)),
                           make_layout(make_shape(a.seqlen_q, d, a.heads, a.batch),
                                       make_stride(a.o_seq, _1{}, a.o_head, a.o_batch)));
    params.tma_o = make_tma_copy(SM90_TMA_STORE{}, o, typename Traits::SmemLayoutOBox{},
                                 typename Traits::OBoxShape{}, _1{});
  }
  return params;
}

template <typename Element, int kHeadDim, int kClusterCtas = 1>
cudaError_t launch_traits(const LaunchArgs& in, cudaStream_t stream) {
  using Traits = KernelTraits<Element, kHeadDim, kClusterCtas>;
  constexpr bool kBf16 = std::is_same_v<Element, cutlass::bfloat16_t>;
  static_assert(Traits::kBlockM == kernel_block_m(kBf16, kHeadDim) &&
                    Traits::kBlockN == kernel_block_n(kBf16, kHeadDim),
                "sm90_fwd.cu's plan sizes the grid with tuned_tiles.hpp's tiles: they must be the "
                "kernel's");
  const FwdParams<Traits> params = make_fwd_params<Traits>(in);
  const bool softcap = in.args.softcap_out > 0.f;
  const bool sinks = in.args.sink_logits != nullptr;
  if constexpr (kClusterCtas > 1) {
    // Clusters run unmasked problems without softcap or sinks, full schedule only (plan() in
    // sm90_fwd.cu).
    if (softcap || sinks || !in.pingpong || !in.intra_overlap) return cudaErrorNotSupported;
    return launch_kernel<Traits, Variant<false>>(params, in.num_ctas, stream);
  } else {
    if (sinks) {
      // The sinks variants, listed (a varlen batch's tile list) or not: unsplit (a sink joins each
      // row once, after any merge), without softcap, full schedule (sm90_fwd.cu routes only such
      // problems here).
      if constexpr (has_sinks_kernel(kHeadDim)) {
        if (softcap || in.args.num_splits > 1 || !in.pingpong || !in.intra_overlap) {
          return cudaErrorNotSupported;
        }
        if (in.args.varlen_tiles != nullptr) {
          return launch_kernel<Traits, Variant<false, true, true, true, true>>(params, in.num_ctas,
                                                                               stream);
        }
        return launch_kernel<Traits, Variant<false, true, true, false, true>>(params, in.num_ctas,
                                                                              stream);
      } else {
        return cudaErrorNotSupported;
      }
    }
    if (in.pingpong && in.intra_overlap) {
      // A varlen batch with its tile list (sm90_fwd.cu's plan asks for one only where it exists).
      if (in.args.varlen_tiles != nullptr) {
        if constexpr (has_listed_varlen_kernel(kHeadDim)) {
          if (softcap) return cudaErrorNotSupported;
          return launch_kernel<Traits, Variant<false, true, true, true>>(params, in.num_ctas,
                                                                         stream);
        } else {
          return cudaErrorNotSupported;
        }
      }
      return softcap ? launch_kernel<Traits, Variant<true>>(params, in.num_ctas, stream)
                     : launch_kernel<Traits, Variant<false>>(params, in.num_ctas, stream);
    }
#if defined(FLASHCORE_SM90_SCHEDULE_VARIANTS)
    // The lab's schedule steps (docs/perf.md), at hd128 without softcap only.
    if constexpr (kHeadDim == 128) {
      if (!softcap) {
        if (in.pingpong) {
          return launch_kernel<Traits, Variant<false, true, false>>(params, in.num_ctas, stream);
        }
        if (in.intra_overlap) {
          return launch_kernel<Traits, Variant<false, false, true>>(params, in.num_ctas, stream);
        }
        return launch_kernel<Traits, Variant<false, false, false>>(params, in.num_ctas, stream);
      }
    }
#endif
    return cudaErrorNotSupported;
  }
}

// One dtype's kernels of an instantiation: none when this build leaves the dtype out
// (FLASHCORE_DTYPES, common/pruning.hpp; sm90_rejects says so before any launch).
template <typename Element, int kHeadDim>
cudaError_t launch_dtype(const LaunchArgs& args, cudaStream_t stream) {
  constexpr DType kDType =
      std::is_same_v<Element, cutlass::bfloat16_t> ? DType::kBFloat16 : DType::kFloat16;
  if constexpr (!detail::kernel_built(kDType, kHeadDim)) {
    (void)args;
    (void)stream;
    return cudaErrorInvalidDeviceFunction;
  } else {
    // The cluster size plan() asks for unmasked problems (tuned_tiles.hpp).
    constexpr int kClusterCtas = kernel_cluster_ctas(kDType == DType::kBFloat16, kHeadDim);
    if constexpr (kClusterCtas > 1) {
      if (args.cluster_ctas == kClusterCtas) {
        return launch_traits<Element, kHeadDim, kClusterCtas>(args, stream);
      }
    }
    if (args.cluster_ctas != 1) return cudaErrorNotSupported;
    return launch_traits<Element, kHeadDim>(args, stream);
  }
}

template <int kHeadDim>
cudaError_t launch_head_dim(const LaunchArgs& args, cudaStream_t stream) {
  return args.bf16 ? launch_dtype<cutlass::bfloat16_t, kHeadDim>(args, stream)
                   : launch_dtype<cutlass::half_t, kHeadDim>(args, stream);
}

template <int kHeadDim>
int smem_bytes_head_dim(bool bf16) {
  return bf16 ? KernelTraits<cutlass::bfloat16_t, kHeadDim>::kSmemBytes
              : KernelTraits<cutlass::half_t, kHeadDim>::kSmemBytes;
}

#define FLASHCORE_SM90_INSTANTIATE(D)                                                   \
  template cudaError_t launch_head_dim<D>(const LaunchArgs& args, cudaStream_t stream); \
  template int smem_bytes_head_dim<D>(bool bf16);

}  // namespace flashcore::sm90
