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

// A launch's cudaLaunchConfig_t with its attributes (which it points into, so it is not copied).
class LaunchConfig {
 public:
  LaunchConfig(const LaunchShape& shape, cudaStream_t stream) {
    unsigned count = 0;
    if (shape.cluster_ctas > 1) {
      attributes_[count].id = cudaLaunchAttributeClusterDimension;
      attributes_[count].val.clusterDim.x = shape.cluster_ctas;
      attributes_[count].val.clusterDim.y = 1;
      attributes_[count].val.clusterDim.z = 1;
      ++count;
    }
    if (shape.dependent) {
      attributes_[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attributes_[count].val.programmaticStreamSerializationAllowed = 1;
      ++count;
    }
    config_.gridDim = shape.grid;
    config_.blockDim = dim3(shape.threads);
    config_.dynamicSmemBytes = shape.smem_bytes;
    config_.stream = stream;
    config_.attrs = attributes_;
    config_.numAttrs = count;
  }
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;
  const cudaLaunchConfig_t* get() const { return &config_; }

 private:
  cudaLaunchAttribute attributes_[2]{};
  cudaLaunchConfig_t config_{};
};

template <typename... KernelArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelArgs...), const LaunchShape& shape,
                          cudaStream_t stream, Args&&... args) {
  const LaunchConfig config(shape, stream);
  return cudaLaunchKernelEx(config.get(), kernel, std::forward<Args>(args)...);
}

// How many clusters of shape.cluster_ctas CTAs of kernel fit on the device at once.
template <typename... KernelArgs>
cudaError_t max_active_clusters(void (*kernel)(KernelArgs...), const LaunchShape& shape,
                                int* clusters) {
  const LaunchConfig config(shape, nullptr);
  return cudaOccupancyMaxActiveClusters(clusters, kernel, config.get());
}

}  // namespace flashcore::detail
