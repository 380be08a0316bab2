#include "api/backend_registry.hpp"

#include <string>

#include "baseline/scalar_fused.hpp"
#include "baseline/unfused.hpp"
#include "sm80/sm80_fwd.hpp"
#include "sm90/sm90_fwd.hpp"
#include "wmma/wmma_fused.hpp"

namespace flashcore::detail {
namespace {

size_t no_workspace(const Problem&) { return 0; }

const BackendEntry kEntries[] = {
    // Hopper only; auto leaves small grids and decode to sm80 (sm90_auto_declines).
    {Backend::kSm90, "sm90", true, sm90_rejects, sm90_auto_declines, sm90_workspace_bytes,
     launch_sm90},
    {Backend::kSm80, "sm80", true, sm80_rejects, nullptr, sm80_workspace_bytes, launch_sm80},
    // The WMMA teaching kernel is slower than sm80 everywhere: named only.
    {Backend::kWmma, "wmma", false, wmma_rejects, nullptr, no_workspace, launch_wmma},
    {Backend::kScalar, "scalar", true, scalar_rejects, nullptr, no_workspace, launch_scalar},
    // Unfused materializes B*Hq*Sq*Sk scores, so kAuto never picks it: ask for it by name.
    {Backend::kUnfused, "unfused", false, unfused_rejects, nullptr, unfused_workspace_bytes,
     launch_unfused},
};

}  // namespace

const BackendEntry* backend_entries(size_t* count) {
  *count = sizeof(kEntries) / sizeof(kEntries[0]);
  return kEntries;
}

const BackendEntry* find_backend(Backend backend) {
  for (const BackendEntry& entry : kEntries) {
    if (entry.backend == backend) return &entry;
  }
  return nullptr;
}

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
