// The GPU the lab runs on: presence check and the environment recorded in results.json.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace flashcore::bench {

// Empty when a CUDA device is usable, else a message that starts with "no CUDA device".
std::string check_device();

struct DeviceInfo {
  std::string name;
  size_t l2_bytes = 0;
  // device, compute capability, SMs, L2, memory, driver, CUDA runtime, cuDNN (library and frontend)
  std::vector<std::pair<std::string, std::string>> environment;
};
DeviceInfo query_device();

}  // namespace flashcore::bench
