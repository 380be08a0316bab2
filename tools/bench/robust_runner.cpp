#include "robust_runner.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <set>

#include "common/fp16_bf16.hpp"
#include "device.hpp"
#include "flashcore/attention.hpp"
#include "reference_output.hpp"

namespace flashcore::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The device buffers of one cell.
class CellBuffers {
 public:
  ~CellBuffers() {
    for (void* p : {q_, k_, v_, o_, workspace_}) cudaFree(p);
  }
  bool upload(const Case& c, const HostInputs& in, std::string* error) {
    o_elems_ = static_cast<size_t>(c.batch * c.seqlen_q * c.heads_q * c.head_dim);
    return alloc_copy(&q_, in.q_bits, error) && alloc_copy(&k_, in.k_bits, error) &&
           alloc_copy(&v_, in.v_bits, error) && check(cudaMalloc(&o_, 2 * o_elems_), error);
  }
  // A workspace of at least `bytes`, kept across providers.
  bool workspace(size_t bytes, void** out, std::string* error) {
    if (bytes > workspace_bytes_) {
      cudaFree(workspace_);
      workspace_ = nullptr;
      workspace_bytes_ = 0;
      if (!check(cudaMalloc(&workspace_, bytes), error)) return false;
      workspace_bytes_ = bytes;
    }
    *out = workspace_;
    return true;
  }
  const void* q() const { return q_; }
  const void* k() const { return k_; }
  const void* v() const { return v_; }
  void* o() const { return o_; }
  size_t o_elems() const { return o_elems_; }

 private:
  static bool check(cudaError_t err, std::string* error) {
    if (err == cudaSuccess) return true;
    *error = cudaGetErrorString(err);
    cudaGetLastError();
    return false;
  }
  static bool alloc_copy(void** p, const std::vector<uint16_t>& bits, std::string* error) {
    return check(cudaMalloc(p, 2 * bits.size()), error) &&
           check(cudaMemcpy(*p, bits.data(), 2 * bits.size(), cudaMemcpyHostToDevice), error);
  }

  void *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *o_ = nullptr, *workspace_ = nullptr;
  size_t o_elems_ = 0, workspace_bytes_ = 0;
};

class Progress {
 public:
  Progress(size_t total, int every) : total_(total), every_(every), start_(Clock::now()) {}
  void add(const RobustResult& r) {
    ++done_;
    failed_ += r.status == RobustStatus::kFailed;
    rejected_ += r.status == RobustStatus::kRejected;
    if (r.status == RobustStatus::kFailed) {
      std::printf("  FAILED %s %s: %s\n", r.provider.c_str(), r.cell.name().c_str(),
                  r.reason.c_str());
    }
    if (done_ % static_cast<size_t>(every_) == 0 || done_ == total_) {
      const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
      const double left =
          elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_);
      std::printf("[%5zu/%zu] %4.0f s, ~%d:%02d left: %zu FAILED, %zu rejected\n", done_, total_,
                  elapsed, static_cast<int>(left) / 60, static_cast<int>(left) % 60, failed_,
                  rejected_);
    }
    std::fflush(stdout);
  }

 private:
  size_t total_, done_ = 0, failed_ = 0, rejected_ = 0;
  int every_;
  Clock::time_point start_;
};

// Runs one provider on the cell's buffers and fills r. Returns false when the CUDA context is no
// longer usable (a sticky error), so the grid must stop.
bool run_provider(Backend backend, const RobustCase& cell, CellBuffers& buffers,
                  const std::vector<double>& reference, cudaStream_t stream, RobustResult* r) {
  AttentionParams p = case_params(cell.c, buffers.q(), buffers.k(), buffers.v(), buffers.o());
  p.backend = backend;
  p.stream = stream;
  if (const Status status = can_implement(p); !status.ok()) {
    r->status =
        status.code == StatusCode::kUnsupported ? RobustStatus::kRejected : RobustStatus::kFailed;
    r->reason = status.message;
    return true;
  }
  std::string error;
  p.workspace_bytes = workspace_size(p);
  if (p.workspace_bytes > 0 && !buffers.workspace(p.workspace_bytes, &p.workspace, &error)) {
    r->status = RobustStatus::kSkipped;
    r->reason = "workspace of " + std::to_string(p.workspace_bytes >> 20) + " MiB: " + error;
    return true;
  }
  // 0xFFFF is NaN in fp16 and bf16: an element the kernel does not write fails the cell.
  cudaMemsetAsync(buffers.o(), 0xFF, 2 * buffers.o_elems(), stream);
  const Status status = run(p);
  cudaError_t err = status.ok() ? cudaStreamSynchronize(stream) : cudaSuccess;
  if (!status.ok() || err != cudaSuccess) {
    r->status = RobustStatus::kFailed;
    r->reason =
        status.ok() ? std::string("CUDA error: ") + cudaGetErrorString(err) : status.message;
    cudaGetLastError();
    // A sticky error (e.g. an illegal address) fails every later call too.
    return cudaDeviceSynchronize() == cudaSuccess;
  }
  std::vector<uint16_t> bits(buffers.o_elems());
  err = cudaMemcpy(bits.data(), buffers.o(), 2 * bits.size(), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) {
    r->status = RobustStatus::kFailed;
    r->reason = std::string("download: ") + cudaGetErrorString(err);
    return cudaDeviceSynchronize() == cudaSuccess;
  }
  const DType dtype = cell.c.dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = detail::bits_to_float(bits[i], dtype);
  r->stats = error_stats(out.data(), reference.data(), out.size());
  r->ran = true;
  if (!robust_passes(r->stats, r->tolerance)) {
    r->status = RobustStatus::kFailed;
    char buf[160];
    std::snprintf(buf, sizeof(buf), "rel L2 %.3e (tolerance %.0e), %zu NaN, %zu Inf",
                  r->stats.rel_l2, r->tolerance, r->stats.nan_count, r->stats.inf_count);
    r->reason = buf;
  }
  return true;
}

}  // namespace

bool run_robust(const Options& options, RobustRecord* record, std::string* error) {
  if (const std::string why = check_device(); !why.empty()) {
    *error = why;
    return false;
  }
  record->device = query_device().name;
  // Fresh inputs every run unless a seed is given to reproduce one, or the resumed run's (its
  // seed is already in the record); recorded either way. 62 random bits: the seed stays a positive
  // integer in robust.json.
  std::random_device entropy;
  if (options.seed != 0) {
    record->seed = options.seed;
  } else if (record->seed == 0) {
    record->seed = ((uint64_t{entropy()} << 30) ^ entropy()) & ((uint64_t{1} << 62) - 1);
  }
  // Cells with results from the resumed run (--resume) do not run again.
  std::set<std::string> done;
  for (const RobustResult& r : record->results) done.insert(r.cell.name());
  record->interrupted = false;
  record->interruption.clear();
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    *error = std::string("cannot create a CUDA stream: ") + cudaGetErrorString(cudaGetLastError());
    return false;
  }
  const std::vector<Backend> providers = backends();
  // This run's cells: the grid's (or, with --shapes, those of the shapes named, in that order)
  // less those already done.
  std::vector<RobustCase> grid;
  const std::vector<RobustCase> all = robust_grid(options.quick);
  std::vector<std::string> shapes = options.shapes;
  if (shapes.empty()) {
    for (const RobustShape& s : robust_shapes()) shapes.push_back(s.name);
  }
  std::set<std::string> taken;
  for (const std::string& shape : shapes) {
    if (!taken.insert(shape).second) continue;
    for (const RobustCase& cell : all) {
      if (cell.shape == shape && done.count(cell.name()) == 0) grid.push_back(cell);
    }
  }
  Progress progress(grid.size() * providers.size(), options.progress_every);
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < grid.size(); ++i) {
    const RobustCase& cell = grid[i];
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (options.time_budget_s > 0 && elapsed >= options.time_budget_s) {
      record->interrupted = true;
      char buf[200];
      std::snprintf(buf, sizeof(buf),
                    "the time budget of %.0f s ran out after %zu of this run's %zu cells; the "
                    "cells that did not run are listed below (--resume this robust.json runs them)",
                    options.time_budget_s, i, grid.size());
      record->interruption = buf;
      std::printf("time budget reached: %zu of %zu cells ran\n", i, grid.size());
      break;
    }
    const Case& c = cell.c;
    // The exact values are drawn only for the float64 CPU reference; larger cells (decode,
    // large_bh: up to 85M elements) upload the bits and check against the GPU oracle.
    const bool cpu_reference = c.flops() <= kRobustCpuReferenceMaxFlops;
    HostInputs inputs;
    generate_inputs(cell.distribution, c, record->seed ^ std::hash<std::string>{}(cell.name()),
                    &inputs, GenerateOptions{0, cpu_reference});
    CellBuffers buffers;
    std::vector<double> reference;
    std::string kind, why;
    const HostValues host{&inputs.q, &inputs.k, &inputs.v};
    const bool prepared =
        buffers.upload(c, inputs, &why) &&
        reference_output(case_params(c, buffers.q(), buffers.k(), buffers.v(), buffers.o()),
                         cpu_reference ? &host : nullptr, stream, &reference, &kind, &why);
    for (const Backend backend : providers) {
      RobustResult r;
      r.cell = cell;
      r.provider = backend_name(backend);
      r.reference = kind;
      r.tolerance = parity_tolerance(c.dtype);
      bool usable = true;
      if (!prepared) {
        r.status = RobustStatus::kSkipped;
        r.reason = "cell not prepared: " + why;
      } else {
        usable = run_provider(backend, cell, buffers, reference, stream, &r);
      }
      progress.add(r);
      record->results.push_back(std::move(r));
      if (!usable) {
        record->interrupted = true;
        record->interruption = "the CUDA context failed at " + record->results.back().provider +
                               " " + cell.name() + " (" + record->results.back().reason +
                               "); later cells did not run";
        cudaStreamDestroy(stream);
        return true;
      }
    }
  }
  cudaStreamDestroy(stream);
  return true;
}

}  // namespace flashcore::bench
