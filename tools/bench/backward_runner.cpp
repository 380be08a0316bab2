#include "backward_runner.hpp"

#include "cudnn_backward_peer.hpp"
#include "flashcore/backward.hpp"
#include "gate.hpp"

namespace flashcore::bench {
namespace {

// The backward targets' gate: dQ, dK and dV of set 0 against the float64 reference.
ParityGate gradient_gate(const BackwardData& data, cudaStream_t stream) {
  return {[&data, stream] { data.poison_gradients(stream); },
          [&data, stream](Parity* parity, std::string* error) {
            return data.check_gradients(stream, parity, error);
          },
          "max rel L2 of dQ, dK, dV", "gradients"};
}

// The workload's backend ("auto", "sm90", "sm80") on set's params.
BackwardParams params_for(const Target& t, const BackwardData& data, int set) {
  BackwardParams p = data.params(set);
  Backend backend = Backend::kAuto;
  parse_backend(t.workload->backend, &backend);
  p.backend = backend;
  return p;
}

Result library_backward(const Target& t, Result r, const BackwardData& data,
                        const TimingConfig& timing, bool profiled, cudaStream_t stream) {
  const BackwardParams p = params_for(t, data, 0);
  if (const Status status = can_implement_backward(p); !status.ok()) {
    r.outcome = status.code == StatusCode::kUnsupported ? Outcome::kSkipped : Outcome::kFailed;
    r.reason = status.message;
    return r;
  }
  r.provider = backend_name(resolve_backward_backend(p));
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
    const Status status =
        run_backward(params_for(t, data, set), workspace, workspace_bytes, stream);
    if (!status.ok()) *error = status.message;
    return status.ok();
  };
  gate_and_time(t, launch, gradient_gate(data, stream), data.sets(), timing, profiled, stream, &r);
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
  gate_and_time(t, launch, gradient_gate(data, stream), data.sets(), timing, profiled, stream, &r);
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
  // flashcore's provider is the backward that ran (library_backward names it).
  r.provider = t.workload->engine == Engine::kCudnnBackward ? "cudnn" : t.workload->backend;
  r.c = data.get_case();
  return t.workload->engine == Engine::kCudnnBackward
             ? cudnn_backward(t, r, data, timing, profiled, stream)
             : library_backward(t, r, data, timing, profiled, stream);
}

}  // namespace flashcore::bench
