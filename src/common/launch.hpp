// Kernel launches through cudaLaunchKernelEx, so that a launch can carry the two attributes a
// kernel may take: clusters (the sm90 backend's cluster-pair tile) and programmatic dependent
// launch (the sm90 backend's small-grid tiles, src/sm90/dependent_launch.hpp). Plain launches
// (every sm_80 one) go through here too, so that there is one launcher.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace flashcore::detail {

struct LaunchShape {
  dim3 grid;
  unsigned threads = 0;
  size_t smem_bytes = 0;
  unsigned cluster_ctas = 1;  // > 1: clusters of this many consecutive CTAs along x
  // May start while the previous kernel in the stream still runs. Only for kernels that call
  // wait_for_prior_grid() before their first global access, and only on sm_90+.
  bool dependent = false;
};

template <typename... KernelArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelArgs...), const LaunchShape& shape,
                          cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (shape.cluster_ctas > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = shape.cluster_ctas;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  if (shape.dependent) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = shape.grid;
  config.blockDim = dim3(shape.threads);
  config.dynamicSmemBytes = shape.smem_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace flashcore::detail
