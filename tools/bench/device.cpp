#include "device.hpp"

#include <cuda_runtime_api.h>
#if FLASHCORE_BENCH_HAS_CUDNN
#include <cudnn.h>
#include <cudnn_frontend_version.h>
#endif

namespace flashcore::bench {
namespace {

std::string cuda_version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

std::string check_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    return std::string(
               "no CUDA device: the lab needs an NVIDIA GPU (sm_80 or newer) and its driver") +
           (err != cudaSuccess ? std::string(" (") + cudaGetErrorString(err) + ")"
                               : std::string()) +
           "; list-targets, check and --help work without one";
  }
  return "";
}

DeviceInfo query_device() {
  DeviceInfo info;
  int device = 0;
  cudaGetDevice(&device);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  info.name = prop.name;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.environment = {
      {"device", prop.name},
      {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
      {"sm_count", std::to_string(prop.multiProcessorCount)},
      {"l2_bytes", std::to_string(prop.l2CacheSize)},
      {"memory_bytes", std::to_string(prop.totalGlobalMem)},
      {"driver_cuda_version", cuda_version(driver)},
      {"cuda_runtime_version", cuda_version(runtime)},
  };
#if FLASHCORE_BENCH_HAS_CUDNN
  const size_t cudnn = cudnnGetVersion();
  info.environment.push_back({"cudnn_version", std::to_string(cudnn / 10000) + "." +
                                                   std::to_string(cudnn % 10000 / 100) + "." +
                                                   std::to_string(cudnn % 100)});
  info.environment.push_back(
      {"cudnn_frontend_version", std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
                                     std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
                                     std::to_string(CUDNN_FRONTEND_PATCH_VERSION)});
#else
  info.environment.push_back({"cudnn_version", "none (built without cuDNN)"});
#endif
  return info;
}

}  // namespace flashcore::bench
