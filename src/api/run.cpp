// can_implement / workspace_size / run: validate, pick a backend from the registry, launch.
#include <cuda_runtime_api.h>

#include <iterator>
#include <string>

#include "api/backend_registry.hpp"
#include "api/validate.hpp"
#include "common/problem.hpp"
#include "flashcore/attention.hpp"

namespace flashcore {
namespace {

using detail::BackendEntry;
using detail::Problem;

struct Choice {
  Status status;
  const BackendEntry* entry = nullptr;
  Problem problem{};
};

Choice choose(const AttentionParams& params) {
  Choice choice;
  if (choice.status = detail::validate_arguments(params); !choice.status.ok()) return choice;
  cudaDeviceProp device{};
  if (choice.status = detail::validate_device(params, &device); !choice.status.ok()) return choice;
  choice.problem = detail::make_problem(params);

  if (params.backend != Backend::kAuto) {
    const BackendEntry* entry = detail::find_backend(params.backend);
    if (entry == nullptr) {
      choice.status = {StatusCode::kInvalidArgument, "unknown backend"};
      return choice;
    }
    if (const char* why = entry->rejects(choice.problem, device); why[0] != '\0') {
      choice.status = {StatusCode::kUnsupported,
                       std::string("backend '") + entry->name + "' " + why};
      return choice;
    }
    choice.entry = entry;
    return choice;
  }
  size_t count = 0;
  const BackendEntry* entries = detail::backend_entries(&count);
  std::string reasons;
  for (size_t i = 0; i < count; ++i) {
    if (!entries[i].in_auto) continue;
    const char* why = entries[i].rejects(choice.problem, device);
    if (why[0] == '\0' && entries[i].auto_declines != nullptr) {
      why = entries[i].auto_declines(choice.problem, device);
    }
    if (why[0] == '\0') {
      choice.entry = &entries[i];
      return choice;
    }
    reasons += std::string(reasons.empty() ? "" : "; ") + entries[i].name + ": " + why;
  }
  choice.status = {StatusCode::kUnsupported,
                   "no backend implements this problem (" + reasons + ")"};
  return choice;
}

}  // namespace

Status can_implement(const AttentionParams& params) { return choose(params).status; }

size_t workspace_size(const AttentionParams& params) {
  const Choice choice = choose(params);
  return choice.status.ok() ? choice.entry->workspace_bytes(choice.problem) : 0;
}

Backend resolve_backend(const AttentionParams& params) {
  const Choice choice = choose(params);
  return choice.status.ok() ? choice.entry->backend : Backend::kAuto;
}

Status run(const AttentionParams& params, RunInfo* info) {
  const Choice choice = choose(params);
  if (!choice.status.ok()) return choice.status;
  const size_t needed = choice.entry->workspace_bytes(choice.problem);
  void* workspace = params.workspace;
  bool owns_workspace = false;
  if (needed > 0 && (workspace == nullptr || params.workspace_bytes < needed)) {
    if (workspace != nullptr) {
      return {StatusCode::kInvalidArgument,
              "workspace_bytes is " + std::to_string(params.workspace_bytes) + " but backend '" +
                  choice.entry->name + "' needs " + std::to_string(needed) +
                  "; size it with workspace_size() or pass null to let run() allocate it"};
    }
    if (cudaError_t err = cudaMallocAsync(&workspace, needed, params.stream); err != cudaSuccess) {
      cudaGetLastError();
      return {StatusCode::kCudaError, "cannot allocate " + std::to_string(needed) +
                                          " bytes of workspace: " + cudaGetErrorString(err)};
    }
    owns_workspace = true;
  }
  Status status = choice.entry->launch(choice.problem, workspace, params.stream);
  if (owns_workspace) {
    const cudaError_t err = cudaFreeAsync(workspace, params.stream);
    if (status.ok() && err != cudaSuccess) {
      status = {StatusCode::kCudaError,
                std::string("freeing workspace: ") + cudaGetErrorString(err)};
    }
  }
  if (status.ok() && info != nullptr) {
    info->backend = choice.entry->backend;
    info->provider = choice.entry->name;
  }
  return status;
}

std::vector<Backend> backends() {
  size_t count = 0;
  const BackendEntry* entries = detail::backend_entries(&count);
  std::vector<Backend> result;
  for (size_t i = 0; i < count; ++i) result.push_back(entries[i].backend);
  return result;
}

const char* backend_name(Backend backend) {
  if (backend == Backend::kAuto) return "auto";
  const detail::BackendEntry* entry = detail::find_backend(backend);
  return entry != nullptr ? entry->name : "unknown";
}

bool parse_tile_shape(const std::string& name, TileShape* tile) {
  for (size_t i = 0; i < std::size(kTileShapeNames); ++i) {
    if (name == kTileShapeNames[i]) {
      *tile = static_cast<TileShape>(i);
      return true;
    }
  }
  for (const TileShapeAlias& alias : kDeprecatedTileShapeNames) {
    if (name == alias.name) {
      *tile = alias.tile;
      return true;
    }
  }
  return false;
}

bool parse_backend(const std::string& name, Backend* backend) {
  if (name == "auto") {
    *backend = Backend::kAuto;
    return true;
  }
  size_t count = 0;
  const BackendEntry* entries = detail::backend_entries(&count);
  for (size_t i = 0; i < count; ++i) {
    if (name == entries[i].name) {
      *backend = entries[i].backend;
      return true;
    }
  }
  return false;
}

}  // namespace flashcore
