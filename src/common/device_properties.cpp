#include "common/device_properties.hpp"

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

namespace flashcore::detail {

Status current_device_properties(cudaDeviceProp* properties) {
  // cudaGetDeviceProperties costs far more than a launch, so each device is queried once.
  constexpr int kMaxDevices = 64;
  static cudaDeviceProp cache[kMaxDevices];
  static std::once_flag queried[kMaxDevices];
  static cudaError_t query_error[kMaxDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();
    return {StatusCode::kNoDevice,
            "no CUDA device: flashcore needs an NVIDIA GPU (sm_80 or newer)"};
  }
  std::call_once(queried[device],
                 [&] { query_error[device] = cudaGetDeviceProperties(&cache[device], device); });
  if (query_error[device] != cudaSuccess) {
    cudaGetLastError();
    // std::to_string, not iostreams: see the note on message formatting in api/validate.cpp.
    return {StatusCode::kNoDevice, "cannot query CUDA device " + std::to_string(device) + ": " +
                                       cudaGetErrorString(query_error[device])};
  }
  *properties = cache[device];
  return Status::Ok();
}

}  // namespace flashcore::detail
