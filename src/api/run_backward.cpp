// can_implement_backward / backward_workspace_bytes / run_backward: validate, pick the backward
// that implements the problem (kAuto: sm90 where it does, else sm80, which runs on every sm_80+
// GPU), launch.
#include <cuda_runtime_api.h>

#include <string>

#include "api/validate_backward.hpp"
#include "common/backward_problem.hpp"
#include "common/status_message.hpp"
#include "flashcore/backward.hpp"
#include "sm80/sm80_bwd.hpp"
#include "sm90/sm90_bwd.hpp"

namespace flashcore {
namespace {

struct BackwardChoice {
  Status status;
  detail::BackwardProblem problem{};
  Backend backend = Backend::kAuto;  // kSm90 or kSm80 once status is ok
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
  const Backend asked = params.backend;
  if (asked != Backend::kAuto && asked != Backend::kSm90 && asked != Backend::kSm80) {
    choice.status = {StatusCode::kUnsupported, std::string("backend ") + backend_name(asked) +
                                                   " has no backward; use kAuto, kSm90 or kSm80"};
    return choice;
  }
  if (asked != Backend::kSm80) {
    const char* why = detail::sm90_backward_rejects(choice.problem, device);
    if (why[0] == '\0') {
      choice.backend = Backend::kSm90;
      return choice;
    }
    if (asked == Backend::kSm90) {
      choice.status = {StatusCode::kUnsupported, std::string("backward (sm90) ") + why};
      return choice;
    }
  }
  if (const char* why = detail::sm80_backward_rejects(choice.problem, device); why[0] != '\0') {
    choice.status = {StatusCode::kUnsupported, std::string("backward (sm80) ") + why};
    return choice;
  }
  choice.backend = Backend::kSm80;
  return choice;
}

size_t workspace_bytes_of(const BackwardChoice& choice) {
  if (!choice.status.ok()) return 0;
  return choice.backend == Backend::kSm90 ? detail::sm90_backward_workspace_bytes(choice.problem)
                                          : detail::sm80_backward_workspace_bytes(choice.problem);
}

}  // namespace

Status can_implement_backward(const BackwardParams& params) {
  return choose_backward(params).status;
}

Backend resolve_backward_backend(const BackwardParams& params) {
  const BackwardChoice choice = choose_backward(params);
  return choice.status.ok() ? choice.backend : Backend::kAuto;
}

size_t backward_workspace_bytes(const BackwardParams& params) {
  return workspace_bytes_of(choose_backward(params));
}

Status run_backward(const BackwardParams& params, void* workspace, size_t workspace_bytes,
                    cudaStream_t stream) {
  const BackwardChoice choice = choose_backward(params);
  if (!choice.status.ok()) return choice.status;
  const size_t needed = workspace_bytes_of(choice);
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
  Status status = choice.backend == Backend::kSm90
                      ? detail::launch_sm90_backward(choice.problem, workspace, stream)
                      : detail::launch_sm80_backward(choice.problem, workspace, stream);
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
