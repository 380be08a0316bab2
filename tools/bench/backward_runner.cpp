#include "backward_runner.hpp"

#include <cstdio>
#include <nvtx3/nvtx3.hpp>

#include "cudnn_backward_peer.hpp"
#include "flashcore/backward.hpp"
#include "profile_command.hpp"

namespace flashcore::bench {
namespace {

void gate_and_time(const Target& t, const Launch& launch, const BackwardData& data,
                   const TimingConfig& timing, bool profiled, cudaStream_t stream, Result* r) {
  // Named as the forward targets' ranges: <prefix>_<role>_<provider>.
  const std::string name =
      std::string(t.chapter->range_prefix) + "_" + t.workload->role + "_" + r->provider;
  nvtx3::scoped_range range(name);
  std::string error;
  {
    nvtx3::scoped_range phase("parity");
    data.poison_gradients(stream);
    Parity parity;
    if (!launch(0, &error) || !data.check_gradients(stream, &parity, &error)) {
      r->outcome = Outcome::kFailed;
      r->reason = error;
      return;
    }
    r->parity = parity;
    if (!parity.passed) {
      r->outcome = Outcome::kFailed;
      char buf[160];
      std::snprintf(buf, sizeof(buf), "parity: max rel L2 of dQ, dK, dV %.3e > %.0e%s vs %s",
                    parity.rel_l2, parity.tolerance,
                    parity.has_nan ? " (NaN/Inf in gradients)" : "", parity.reference.c_str());
      r->reason = buf;
      return;
    }
  }
  Summary summary;
  if (!time_launches(launch, data.sets(), timing, stream, &summary, &error)) {
    r->outcome = Outcome::kFailed;
    r->reason = error;
    return;
  }
  r->timing = summary;
  if (profiled) {
    nvtx3::scoped_range phase(kProfiledLaunchRange);
    if (!launch(0, &error)) {
      r->outcome = Outcome::kFailed;
      r->reason = "profiled launch: " + error;
      return;
    }
    if (const cudaError_t err = cudaStreamSynchronize(stream); err != cudaSuccess) {
      r->outcome = Outcome::kFailed;
      r->reason = std::string("profiled launch: ") + cudaGetErrorString(err);
    }
  }
}

Result library_backward(const Target& t, Result r, const BackwardData& data,
                        const TimingConfig& timing, bool profiled, cudaStream_t stream) {
  const BackwardParams p = data.params(0);
  if (const Status status = can_implement_backward(p); !status.ok()) {
    r.outcome = status.code == StatusCode::kUnsupported ? Outcome::kSkipped : Outcome::kFailed;
    r.reason = status.message;
    return r;
  }
  const size_t workspace_bytes = backward_workspace_bytes(p);
  void* workspace = nullptr;
  if (cudaMalloc(&workspace, workspace_bytes) != cudaSuccess) {
    cudaGetLastError();
    r.outcome = Outcome::kSkipped;
    r.reason =
        "cannot allocate " + std::to_string(workspace_bytes >> 20) + " MiB of backward workspace";
    return r;
  }
  const Launch launch = [&](int set, std::string* error) {
    const Status status = run_backward(data.params(set), workspace, workspace_bytes, stream);
    if (!status.ok()) *error = status.message;
    return status.ok();
  };
  gate_and_time(t, launch, data, timing, profiled, stream, &r);
  cudaFree(workspace);
  return r;
}

Result cudnn_backward(const Target& t, Result r, const BackwardData& data,
                      const TimingConfig& timing, bool profiled, cudaStream_t stream) {
  CudnnSdpaBackward sdpa;
  std::string error;
  if (!sdpa.build(data, stream, &error)) {
    r.outcome = Outcome::kSkipped;
    r.reason = error;
    return r;
  }
  const Launch launch = [&](int set, std::string* err) { return sdpa.run(data, set, err); };
  gate_and_time(t, launch, data, timing, profiled, stream, &r);
  return r;
}

}  // namespace

Result run_backward_target(const Target& t, const BackwardData& data, const TimingConfig& timing,
                           bool profiled, cudaStream_t stream) {
  Result r;
  r.chapter = t.chapter->name;
  r.workload = t.workload->name;
  r.role = t.workload->role;
  r.requested_backend = t.workload->backend;
  // The sm80 backward is flashcore's only backward provider (docs/backward.md).
  r.provider = t.workload->engine == Engine::kCudnnBackward ? "cudnn" : "sm80";
  r.c = data.get_case();
  return t.workload->engine == Engine::kCudnnBackward
             ? cudnn_backward(t, r, data, timing, profiled, stream)
             : library_backward(t, r, data, timing, profiled, stream);
}

}  // namespace flashcore::bench
