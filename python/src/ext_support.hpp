// What the binding's translation units share: Status to Python exceptions, and the device guard
// every call into the library runs under.
#pragma once

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>

#include "flashcore/attention.hpp"

namespace flashcore_python {

namespace nb = nanobind;

// A failed Status as an exception: ValueError for bad or unsupported arguments (raised before
// anything is launched), RuntimeError for a missing device or a CUDA failure.
inline void raise_status(const flashcore::Status& status) {
  switch (status.code) {
    case flashcore::StatusCode::kOk:
      return;
    case flashcore::StatusCode::kInvalidArgument:
    case flashcore::StatusCode::kUnsupported:
      throw nb::value_error(status.message.c_str());
    case flashcore::StatusCode::kNoDevice:
    case flashcore::StatusCode::kCudaError:
      throw std::runtime_error(status.message);
  }
}

// Makes the arrays' device current for the call and restores the caller's device afterwards, as
// a framework's device guard would: flashcore::run works on the current device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("no CUDA device: flashcore needs an NVIDIA GPU (sm_80 or newer)");
    }
    if (previous_ != device) {
      if (const cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
        cudaGetLastError();
        throw std::runtime_error(std::string("cannot make cuda:") + std::to_string(device) +
                                 " current: " + cudaGetErrorString(err));
      }
      restore_ = true;
    }
  }
  ~DeviceGuard() {
    if (restore_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};

}  // namespace flashcore_python
