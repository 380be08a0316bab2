// can_implement_backward / backward_workspace_bytes / run_backward: validate, ask the backward
// kernel whether it implements the problem, launch. The sm80 backward is the only one so far (it
// runs on every sm_80+ GPU, Hopper included); a Hopper backward will join it here as the forward's
// registry lists its backends (api/backend_registry.cpp).
#include <cuda_runtime_api.h>

#include <string>

#include "api/validate_backward.hpp"
#include "common/backward_problem.hpp"
#include "common/status_message.hpp"
#include "flashcore/backward.hpp"
#include "sm80/sm80_bwd.hpp"

namespace flashcore {
namespace {

struct BackwardChoice {
  Status status;
  detail::BackwardProblem problem{};
};

BackwardChoice choose_backward(const BackwardParams& params) {
  BackwardChoice choice;
  if (choice.status = detail::validate_backward_arguments(params); !choice.status.ok()) {
    return choice;
  }
  cudaDeviceProp device{};
  if (choice.status = detail::validate_backward_device(params, &device); !choice.status.ok()) {
    return choice;
  }
  choice.problem = detail::make_backward_problem(params);
  if (const char* why = detail::sm80_backward_rejects(choice.problem, device); why[0] != '\0') {
    choice.status = {StatusCode::kUnsupported, std::string("backward (sm80) ") + why};
  }
  return choice;
}

}  // namespace

Status can_implement_backward(const BackwardParams& params) {
  return choose_backward(params).status;
}

size_t backward_workspace_bytes(const BackwardParams& params) {
  const BackwardChoice choice = choose_backward(params);
  return choice.status.ok() ? detail::sm80_backward_workspace_bytes(choice.problem) : 0;
}

Status run_backward(const BackwardParams& params, void* workspace, size_t workspace_bytes,
                    cudaStream_t stream) {
  const BackwardChoice choice = choose_backward(params);
  if (!choice.status.ok()) return choice.status;
  const size_t needed = detail::sm80_backward_workspace_bytes(choice.problem);
  bool owns_workspace = false;
  if (workspace != nullptr && workspace_bytes < needed) {
    return detail::invalid_argument(
        detail::cat("workspace_bytes is ", workspace_bytes, " but the backward needs ", needed,
                    "; size it with backward_workspace_bytes() or pass null to let run_backward() "
                    "allocate it"));
  }
  if (workspace == nullptr) {
    if (cudaError_t err = cudaMallocAsync(&workspace, needed, stream); err != cudaSuccess) {
      cudaGetLastError();
      return {StatusCode::kCudaError,
              detail::cat("cannot allocate ", needed,
                          " bytes of backward workspace: ", cudaGetErrorString(err))};
    }
    owns_workspace = true;
  }
  Status status = detail::launch_sm80_backward(choice.problem, workspace, stream);
  if (owns_workspace) {
    const cudaError_t err = cudaFreeAsync(workspace, stream);
    if (status.ok() && err != cudaSuccess) {
      status = {StatusCode::kCudaError,
                std::string("freeing the backward workspace: ") + cudaGetErrorString(err)};
    }
  }
  return status;
}

}  // namespace flashcore
