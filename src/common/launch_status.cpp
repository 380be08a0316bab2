#include "common/launch_status.hpp"

#include <string>

namespace flashcore::detail {

Status launch_status(cudaError_t err, const char* kernel) {
  if (err == cudaSuccess) return Status::Ok();
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    return {StatusCode::kUnsupported,
            std::string(kernel) +
                ": this build has no code for the current GPU; rebuild with its "
                "architecture in FLASHCORE_CUDA_ARCHITECTURES"};
  }
  return {StatusCode::kCudaError, std::string(kernel) + " failed: " + cudaGetErrorString(err)};
}

}  // namespace flashcore::detail
