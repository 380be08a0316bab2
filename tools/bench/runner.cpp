#include "runner.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nvtx3/nvtx3.hpp>

#include "backward_data.hpp"
#include "backward_runner.hpp"
#include "case_data.hpp"
#include "ceilings.hpp"
#include "cudnn_peer.hpp"
#include "cutlass_peer.hpp"
#include "device.hpp"
#include "flashcore/attention.hpp"
#include "gate.hpp"
#include "timer.hpp"

namespace flashcore::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Headroom left free after a workspace so the timed launches never page or fail allocation.
constexpr size_t kMemoryHeadroom = size_t{1} << 30;

TimingConfig timing_for(Profile profile) {
  TimingConfig config;
  if (profile == Profile::kFull) {
    // The grid has 36 cases x 3 targets; shorter budgets keep it well inside 10 minutes.
    config.warmup_ms = 15;
    config.budget_ms = 80;
    config.min_samples = 8;
  }
  return config;
}

struct Work {
  Case c;
  std::vector<size_t> targets;  // indices into the run's target list
};

class Progress {
 public:
  explicit Progress(size_t total) : total_(total), start_(Clock::now()) {}

  void start(const std::string& target, const Case& c) {
    ++started_;
    std::printf("[%3zu/%zu] start %s  %s  (%s)\n", started_, total_, target.c_str(),
                c.describe().c_str(), remaining().c_str());
    std::fflush(stdout);
  }
  void finish(const Result& r) {
    ++finished_;
    char detail[160] = "";
    if (r.outcome == Outcome::kOk && r.timing) {
      std::snprintf(detail, sizeof(detail),
                    "ok  provider %s  p50 %.2f us  %.1f TFLOP/s  rel_l2 %.1e", r.provider.c_str(),
                    r.timing->p50_us, r.c.flops() / (r.timing->p50_us * 1e-6) / 1e12,
                    r.parity ? r.parity->rel_l2 : 0.0);
    } else {
      std::snprintf(detail, sizeof(detail), "%s  %s", outcome_name(r.outcome), r.reason.c_str());
    }
    std::printf("[%3zu/%zu] done  %s  %s\n", finished_, total_, r.target().c_str(), detail);
    std::fflush(stdout);
  }

 private:
  // Average time per finished target so far, times what is left.
  std::string remaining() const {
    if (finished_ == 0) return "estimating time left";
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double left =
        elapsed / static_cast<double>(finished_) * static_cast<double>(total_ - finished_);
    char buf[64];
    std::snprintf(buf, sizeof(buf), "~%d:%02d left", static_cast<int>(left) / 60,
                  static_cast<int>(left) % 60);
    return buf;
  }

  size_t total_, started_ = 0, finished_ = 0;
  Clock::time_point start_;
};

Result base_result(const Target& t, const Case& c, const std::string& backend) {
  Result r;
  r.chapter = t.chapter->name;
  r.workload = t.workload->name;
  r.role = t.workload->role;
  r.requested_backend = backend;
  r.provider = backend;
  r.c = c;
  return r;
}

// The forward targets' gate: the output of set 0 against the case's reference.
ParityGate output_gate(const CaseData& data, cudaStream_t stream) {
  return {[&data, stream] { data.poison_output(stream); },
          [&data, stream](Parity* parity, std::string* error) {
            return data.check_output(stream, parity, error);
          },
          "rel L2", "output"};
}

Result run_library_target(const Target& t, const std::string& backend_name_requested,
                          const TargetArgs* args, const CaseData& data, Profile profile,
                          bool profiled, cudaStream_t stream) {
  Result r = base_result(t, data.get_case(), backend_name_requested);
  Backend backend = Backend::kAuto;
  parse_backend(backend_name_requested, &backend);
  AttentionParams p = data.params(0);
  p.backend = backend;
  p.stream = stream;
  if (args != nullptr) {
    p.num_splits = args->num_splits;
    parse_tile_shape(args->tile, &p.tile);  // cli.cpp accepted only names this parses
    p.enable_pdl = args->enable_pdl;
  }
  if (const Status status = can_implement(p); !status.ok()) {
    r.outcome = status.code == StatusCode::kUnsupported ? Outcome::kSkipped : Outcome::kFailed;
    r.reason = status.message;
    return r;
  }
  r.provider = flashcore::backend_name(resolve_backend(p));
  const size_t workspace_bytes = workspace_size(p);
  void* workspace = nullptr;
  if (workspace_bytes > 0) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    if (workspace_bytes + kMemoryHeadroom > free_bytes ||
        cudaMalloc(&workspace, workspace_bytes) != cudaSuccess) {
      cudaGetLastError();
      r.outcome = Outcome::kSkipped;
      r.reason = "needs " + std::to_string(workspace_bytes >> 20) + " MiB of workspace, " +
                 std::to_string(free_bytes >> 20) + " MiB free";
      return r;
    }
  }
  const Launch launch = [&](int set, std::string* error) {
    AttentionParams q = data.params(set);
    q.backend = backend;
    q.stream = stream;
    q.num_splits = p.num_splits;
    q.tile = p.tile;
    q.enable_pdl = p.enable_pdl;
    q.workspace = workspace;
    q.workspace_bytes = workspace_bytes;
    RunInfo info;
    const Status status = flashcore::run(q, &info);
    if (!status.ok()) *error = status.message;
    return status.ok();
  };
  gate_and_time(t, launch, output_gate(data, stream), data.sets(), timing_for(profile), profiled,
                stream, &r);
  cudaFree(workspace);
  return r;
}

Result run_cudnn_target(const Target& t, const CaseData& data, Profile profile, bool profiled,
                        cudaStream_t stream) {
  Result r = base_result(t, data.get_case(), "cudnn");
  CudnnSdpa sdpa;
  std::string error;
  if (!sdpa.build(data, stream, &error)) {
    r.outcome = Outcome::kSkipped;
    r.reason = error;
    return r;
  }
  const Launch launch = [&](int set, std::string* err) { return sdpa.run(data, set, err); };
  gate_and_time(t, launch, output_gate(data, stream), data.sets(), timing_for(profile), profiled,
                stream, &r);
  return r;
}

Result run_cutlass_target(const Target& t, const CaseData& data, Profile profile, bool profiled,
                          cudaStream_t stream) {
  Result r = base_result(t, data.get_case(), "cutlass");
  CutlassFmha fmha;
  std::string error;
  if (!fmha.build(data, stream, &error)) {
    r.outcome = Outcome::kSkipped;
    r.reason = error;
    return r;
  }
  r.provider = fmha.provider();
  const Launch launch = [&](int set, std::string* err) { return fmha.run(data, set, err); };
  gate_and_time(t, launch, output_gate(data, stream), data.sets(), timing_for(profile), profiled,
                stream, &r);
  return r;
}

}  // namespace

bool run_lab(const Options& options, const Knobs& knobs, RunRecord* record, std::string* error) {
  if (const std::string why = check_device(); !why.empty()) {
    *error = why;
    return false;
  }
  const DeviceInfo device = query_device();
  record->environment = device.environment;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    *error = std::string("cannot create a CUDA stream: ") + cudaGetErrorString(cudaGetLastError());
    return false;
  }

  // Every selected target plus the cuDNN peer of each case's direction (forward or backward);
  // cases in first-seen order, each run once with all of its targets so the inputs and the
  // reference are shared.
  std::vector<Target> targets = options.targets;
  const size_t selected = targets.size();
  auto index_of = [&](const Target& peer) {
    const auto it = std::find_if(targets.begin(), targets.end(),
                                 [&](const Target& t) { return t.workload == peer.workload; });
    if (it != targets.end()) return static_cast<size_t>(it - targets.begin());
    targets.push_back(peer);
    return targets.size() - 1;
  };
  std::vector<Work> work;
  std::map<std::string, size_t> by_label;
  for (size_t ti = 0; ti < selected; ++ti) {
    for (const Case& c : cases_for(targets[ti], options.profile, knobs)) {
      auto [it, inserted] = by_label.emplace(c.label(), work.size());
      if (inserted) work.push_back({c, {}});
      work[it->second].targets.push_back(ti);
    }
  }
  size_t total = 0;
  for (Work& w : work) {
    const size_t peer_index = index_of(cudnn_peer_for(w.c));
    if (std::find(w.targets.begin(), w.targets.end(), peer_index) == w.targets.end()) {
      w.targets.push_back(peer_index);
    }
    total += w.targets.size();
  }

  // A run that `profile` starts under ncu reports no ceilings: its results.json is read only for
  // the provider and status, and the ceilings would cost ncu's interception for nothing.
  if (!options.profiled_launch) {
    {
      nvtx3::scoped_range range("gemm_ceiling");
      std::string gemm_error;
      if (!measure_gemm_ceiling(&record->gemm_tflops, &record->gemm_problem, &gemm_error)) {
        std::fprintf(stderr, "flashcore-bench: warning: GEMM ceiling not measured: %s\n",
                     gemm_error.c_str());
        record->gemm_tflops = 0;
      }
    }
    {
      nvtx3::scoped_range range("copy_ceiling");
      std::string copy_error;
      if (!measure_copy_ceiling(&record->copy_gbps, &record->copy_problem, &copy_error)) {
        std::fprintf(stderr, "flashcore-bench: warning: copy ceiling not measured: %s\n",
                     copy_error.c_str());
        record->copy_gbps = 0;
      }
    }
  }

  Progress progress(total);
  std::vector<std::pair<size_t, Result>> ordered;  // (target index, result)
  for (const Work& w : work) {
    CaseData data;
    BackwardData backward_data;
    std::string why;
    const bool prepared = w.c.backward ? backward_data.prepare(w.c, device.l2_bytes, stream, &why)
                                       : data.prepare(w.c, device.l2_bytes, stream, &why);
    for (const size_t ti : w.targets) {
      const Target& t = targets[ti];
      const auto args_it = options.target_args.find(t.name());
      const TargetArgs* args = args_it == options.target_args.end() ? nullptr : &args_it->second;
      const std::string backend = backend_for(t, knobs, args);
      // A peer added to a case is a reference for the timings, not a profiling target.
      const bool profiled = options.profiled_launch && ti < selected;
      progress.start(t.name(), w.c);
      Result r;
      if (!prepared) {
        r = base_result(t, w.c, backend);
        r.outcome = Outcome::kSkipped;
        r.reason = "case not prepared: " + why;
      } else if (t.workload->engine == Engine::kLibraryBackward ||
                 t.workload->engine == Engine::kCudnnBackward) {
        r = run_backward_target(t, backward_data, timing_for(options.profile), profiled, stream);
      } else if (t.workload->engine == Engine::kCudnn) {
        r = run_cudnn_target(t, data, options.profile, profiled, stream);
      } else if (t.workload->engine == Engine::kCutlass) {
        r = run_cutlass_target(t, data, options.profile, profiled, stream);
      } else {
        r = run_library_target(t, backend, args, data, options.profile, profiled, stream);
      }
      progress.finish(r);
      ordered.emplace_back(ti, std::move(r));
    }
  }
  cudaStreamDestroy(stream);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, r] : ordered) record->results.push_back(std::move(r));
  return true;
}

}  // namespace flashcore::bench
