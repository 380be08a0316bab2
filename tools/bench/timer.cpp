#include "timer.hpp"

#include <algorithm>
#include <cmath>
#include <nvtx3/nvtx3.hpp>
#include <vector>

namespace flashcore::bench {
namespace {

// A graph replay should last about this long, so event resolution (~0.5 us) is negligible.
constexpr double kTargetSampleUs = 2000;
constexpr int kMaxLaunchesPerSample = 1000;

bool cuda_ok(cudaError_t err, const char* what, std::string* error) {
  if (err == cudaSuccess) return true;
  *error = std::string(what) + ": " + cudaGetErrorString(err);
  cudaGetLastError();
  return false;
}

class Events {
 public:
  explicit Events(size_t n) : events_(n, nullptr) {
    for (cudaEvent_t& e : events_) cudaEventCreate(&e);
  }
  ~Events() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

// Captures `count` launches, cycling over the sets, into an executable graph. Returns null when
// the launches cannot be captured (the caller then times plain launches).
cudaGraphExec_t capture(const Launch& launch, int sets, int count, cudaStream_t stream) {
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  bool ok = true;
  std::string ignored;
  for (int i = 0; i < count && ok; ++i) ok = launch(i % sets, &ignored);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  if (ok && end == cudaSuccess && graph != nullptr &&
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    exec = nullptr;
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  return exec;
}

}  // namespace

bool time_launches(const Launch& launch, int sets, const TimingConfig& config, cudaStream_t stream,
                   Summary* summary, std::string* error) {
  Events probe(2);
  int next_set = 0;
  auto launch_next = [&](std::string* err) {
    const bool ok = launch(next_set, err);
    next_set = (next_set + 1) % sets;
    return ok;
  };

  // Estimate one launch (after a first one that absorbs lazy initialization), then warm up.
  double estimate_us = 0;
  {
    nvtx3::scoped_range range("warmup");
    if (!launch_next(error)) return false;
    cudaEventRecord(probe[0], stream);
    if (!launch_next(error)) return false;
    cudaEventRecord(probe[1], stream);
    if (!cuda_ok(cudaEventSynchronize(probe[1]), "warm-up", error)) return false;
    float ms = 0;
    cudaEventElapsedTime(&ms, probe[0], probe[1]);
    estimate_us = std::max(1.0, static_cast<double>(ms) * 1000.0);
    const int warmup = static_cast<int>(std::min(1e5, config.warmup_ms * 1000.0 / estimate_us));
    for (int i = 0; i < warmup; ++i) {
      if (!launch_next(error)) return false;
    }
    if (!cuda_ok(cudaStreamSynchronize(stream), "warm-up", error)) return false;
  }

  int per_sample = 1;
  cudaGraphExec_t graph = nullptr;
  if (estimate_us < kGraphBelowUs) {
    per_sample = static_cast<int>(std::ceil(kTargetSampleUs / estimate_us));
    // A whole number of passes over the sets, so every sample reads each set equally often.
    per_sample = std::min(kMaxLaunchesPerSample, ((per_sample + sets - 1) / sets) * sets);
    per_sample = std::max(per_sample, 1);
    graph = capture(launch, sets, per_sample, stream);
    if (graph != nullptr) {
      // One untimed replay uploads the graph.
      cudaGraphLaunch(graph, stream);
      if (!cuda_ok(cudaStreamSynchronize(stream), "graph warm-up", error)) {
        cudaGraphExecDestroy(graph);
        return false;
      }
    }
  }
  const double sample_us = estimate_us * per_sample;
  const int samples = std::clamp(static_cast<int>(config.budget_ms * 1000.0 / sample_us),
                                 config.min_samples, config.max_samples);

  Events events(2 * static_cast<size_t>(samples));
  bool ok = true;
  {
    nvtx3::scoped_range range("timed");
    for (int s = 0; s < samples && ok; ++s) {
      cudaEventRecord(events[2 * s], stream);
      if (graph != nullptr) {
        ok = cuda_ok(cudaGraphLaunch(graph, stream), "graph launch", error);
      } else {
        for (int i = 0; i < per_sample && ok; ++i) ok = launch_next(error);
      }
      cudaEventRecord(events[2 * s + 1], stream);
    }
    if (ok) ok = cuda_ok(cudaStreamSynchronize(stream), "timed launches", error);
  }
  const bool graphed = graph != nullptr;
  if (graphed) cudaGraphExecDestroy(graph);
  if (!ok) return false;

  std::vector<double> per_launch_us(samples);
  for (int s = 0; s < samples; ++s) {
    float ms = 0;
    cudaEventElapsedTime(&ms, events[2 * s], events[2 * s + 1]);
    per_launch_us[s] = static_cast<double>(ms) * 1000.0 / per_sample;
  }
  *summary = summarize(std::move(per_launch_us));
  summary->method = graphed ? "graph" : "events";
  summary->launches_per_sample = per_sample;
  return true;
}

}  // namespace flashcore::bench
