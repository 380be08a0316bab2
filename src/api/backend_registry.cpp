#include "api/backend_registry.hpp"

#include <atomic>

#include "baseline/scalar_fused.hpp"
#include "sm80/sm80_fwd.hpp"
#include "sm90/sm90_fwd.hpp"
#include "wmma/wmma_fused.hpp"

namespace flashcore::detail {
namespace {

size_t no_workspace(const Problem&) { return 0; }

// Constant-initialized, so a static initializer in another translation unit may plug it.
std::atomic<const BackendImpl*> unfused_impl{nullptr};

const char* unfused_rejects(const Problem& problem, const cudaDeviceProp& device) {
  const BackendImpl* impl = unfused_impl.load(std::memory_order_acquire);
  if (impl == nullptr) {
    return "is not linked into this program: it needs cuBLAS, so it lives in the "
           "flashcore_unfused target; link that target to use it";
  }
  return impl->rejects(problem, device);
}

// Reached only after unfused_rejects() accepted, so the implementation is plugged.
size_t unfused_workspace_bytes(const Problem& problem) {
  return unfused_impl.load(std::memory_order_acquire)->workspace_bytes(problem);
}

Status launch_unfused(const Problem& problem, void* workspace, cudaStream_t stream) {
  return unfused_impl.load(std::memory_order_acquire)->launch(problem, workspace, stream);
}

const BackendEntry kEntries[] = {
    // Hopper only; small grids run its small-grid tiles, except where the sm80 backend's large
    // tile was measured faster (sm90_auto_declines).
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

void plug_unfused(const BackendImpl* impl) { unfused_impl.store(impl, std::memory_order_release); }

}  // namespace flashcore::detail
