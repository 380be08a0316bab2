#include "tune_runner.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "case_data.hpp"
#include "device.hpp"
#include "subprocess.hpp"
#include "timer.hpp"
#include "tune_plan.hpp"
#include "tune_search.hpp"
#include "tune_source.hpp"

namespace flashcore::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using LaunchFn = cudaError_t (*)(const sm90::LaunchArgs*, cudaStream_t);

// A candidate that hangs the GPU cannot be stopped from the host: past this long in one
// measurement the process exits, and the marker file names the candidate for the next run.
constexpr int kHangSeconds = 120;
constexpr const char* kInFlightFile = "in_flight.txt";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

std::string tail(const std::string& text, size_t n) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string cuda_error(cudaError_t err) { return cudaGetErrorString(err); }

class GpuBackend final : public CandidateBackend {
 public:
  GpuBackend(const TuneOptions& t, CompileSetup setup, fs::path dir, int jobs, std::string commit)
      : t_(t),
        setup_(std::move(setup)),
        dir_(std::move(dir)),
        jobs_(jobs),
        commit_(std::move(commit)) {}

  ~GpuBackend() override {
    for (auto& [key, handle] : handles_) dlclose(handle);
    cudaFree(counter_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  bool prepare(const std::vector<GateCase>& cases, std::string* error) {
    cases_ = cases;
    const DeviceInfo device = query_device();
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
      *error = "cudaGetDeviceProperties: " + cuda_error(cudaGetLastError());
      return false;
    }
    sm_count_ = prop.multiProcessorCount;
    smem_optin_ = static_cast<int>(prop.sharedMemPerBlockOptin);
    l2_bytes_ = device.l2_bytes;
    if (const cudaError_t err = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
        err != cudaSuccess) {
      *error = "cudaStreamCreate: " + cuda_error(err);
      return false;
    }
    if (const cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&counter_), sizeof(int));
        err != cudaSuccess) {
      *error = "cudaMalloc tile counter: " + cuda_error(err);
      return false;
    }
    for (const GateCase& g : cases_) {
      data_.push_back(std::make_unique<CaseData>());
      if (!data_.back()->prepare(g.c, l2_bytes_, stream_, error)) {
        *error = g.c.label() + ": " + *error;
        return false;
      }
    }
    return true;
  }

  std::vector<BuildOutcome> build(const std::vector<TuneConfig>& configs) override {
    std::vector<BuildOutcome> outcomes(configs.size());
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i = next++; i < configs.size(); i = next++) outcomes[i] = build_one(configs[i]);
    };
    std::vector<std::thread> threads;
    const size_t n = std::min<size_t>(configs.size(), static_cast<size_t>(jobs_));
    for (size_t i = 0; i < n; ++i) threads.emplace_back(worker);
    for (std::thread& th : threads) th.join();
    return outcomes;
  }

  Measurement measure(const TuneConfig& config) override {
    Measurement m;
    m.failure = CandidateStatus::kLaunchError;
    const LaunchFn launch = load(config, &m.reason);
    if (launch == nullptr) return m;
    write_text(dir_ / kInFlightFile, config.key() + "\n");
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      const auto deadline = Clock::now() + std::chrono::seconds(kHangSeconds);
      while (!done && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!done) {
        std::fprintf(stderr,
                     "flashcore-bench tune: candidate %s has run %d s without finishing (a hang?); "
                     "exiting. The next run records it as a launch error and goes on.\n",
                     config.key().c_str(), kHangSeconds);
        std::_Exit(1);
      }
    });
    Runner runner(this, config, launch);
    m = measure_candidate(cases_, &runner);
    done = true;
    watchdog.join();
    fs::remove(dir_ / kInFlightFile);
    return m;
  }

 private:
  // Gate and timing of one loaded candidate on the prepared cases.
  class Runner final : public CandidateRunner {
   public:
    Runner(GpuBackend* b, const TuneConfig& c, LaunchFn fn) : b_(b), c_(c), fn_(fn) {}

    bool check(size_t i, Parity* parity, std::string* error) override {
      const CaseData& data = *b_->data_[i];
      data.poison_output(b_->stream_);
      return launch(data, 0, error) && data.check_output(b_->stream_, parity, error);
    }

    bool time(size_t i, double* p50_us, std::string* error) override {
      const CaseData& data = *b_->data_[i];
      const Launch launch_set = [&](int set, std::string* err) { return launch(data, set, err); };
      Summary summary;
      if (!time_launches(launch_set, data.sets(), TimingConfig{}, b_->stream_, &summary, error)) {
        return false;
      }
      *p50_us = summary.p50_us;
      return true;
    }

   private:
    bool launch(const CaseData& data, int set, std::string* error) const {
      const sm90::LaunchArgs in =
          plan_candidate(data.params(set), c_, b_->sm_count_, b_->l2_bytes_, b_->counter_);
      if (in.dynamic) {
        if (const cudaError_t err = cudaMemsetAsync(b_->counter_, 0, sizeof(int), b_->stream_);
            err != cudaSuccess) {
          *error = "tile counter reset: " + cuda_error(err);
          return false;
        }
      }
      if (const cudaError_t err = fn_(&in, b_->stream_); err != cudaSuccess) {
        *error = "launch: " + cuda_error(err);
        return false;
      }
      return true;
    }

    GpuBackend* b_;
    TuneConfig c_;
    LaunchFn fn_;
  };

  fs::path object_path(const TuneConfig& c) const { return dir_ / (c.key() + ".so"); }

  BuildOutcome build_one(const TuneConfig& c) const {
    BuildOutcome out;
    const fs::path source = dir_ / (c.key() + ".cu");
    const fs::path object = object_path(c);
    const fs::path log = dir_ / (c.key() + ".log");
    const fs::path ok = dir_ / (c.key() + ".ok");
    // Built by an earlier run from the same commit (the marker holds it): reused.
    if (fs::exists(object) && read_text(ok) == commit_) {
      out.ok = true;
      out.spill_bytes = spill_bytes(read_text(log));
      return out;
    }
    if (!write_text(source, candidate_source(c, t_.head_dim, t_.dtype))) {
      out.error = "cannot write " + source.string();
      return out;
    }
    const auto start = Clock::now();
    const CommandResult r = run_command(compile_command(setup_, source.string(), object.string()),
                                        log.string(), log.string() + ".err");
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string text = read_text(log) + read_text(log.string() + ".err");
    write_text(log, text);
    fs::remove(log.string() + ".err");
    if (!r.started) {
      out.error = r.error;
      return out;
    }
    if (r.exit_code != 0) {
      out.error = "nvcc exit " + std::to_string(r.exit_code) + ": " + tail(text, 600);
      return out;
    }
    out.ok = true;
    out.spill_bytes = spill_bytes(text);
    write_text(ok, commit_);
    return out;
  }

  LaunchFn load(const TuneConfig& c, std::string* error) {
    void* handle = handles_[c.key()];
    if (handle == nullptr) {
      handle = dlopen(object_path(c).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        *error = std::string("dlopen: ") + dlerror();
        return nullptr;
      }
      handles_[c.key()] = handle;
    }
    auto abi = reinterpret_cast<int (*)()>(dlsym(handle, kTuneAbiSymbol));
    auto smem = reinterpret_cast<int (*)(int)>(dlsym(handle, kTuneSmemSymbol));
    auto launch = reinterpret_cast<LaunchFn>(dlsym(handle, kTuneLaunchSymbol));
    if (abi == nullptr || smem == nullptr || launch == nullptr || abi() != kTuneAbi) {
      *error = "the shared object lacks the tuner's entry points or has another ABI";
      return nullptr;
    }
    if (smem(c.cluster_ctas) > smem_optin_) {
      *error = "needs " + std::to_string(smem(c.cluster_ctas)) +
               " bytes of shared memory, the GPU "
               "allows " +
               std::to_string(smem_optin_);
      return nullptr;
    }
    return launch;
  }

  const TuneOptions& t_;
  CompileSetup setup_;
  fs::path dir_;
  int jobs_;
  std::string commit_;
  std::vector<GateCase> cases_;
  std::vector<std::unique_ptr<CaseData>> data_;
  std::map<std::string, void*> handles_;
  cudaStream_t stream_ = nullptr;
  int* counter_ = nullptr;
  int sm_count_ = 0, smem_optin_ = 0;
  size_t l2_bytes_ = 0;
};

// A candidate the previous run was measuring when it died is recorded, so no run tries it again.
void record_in_flight(const fs::path& dir, const std::string& commit, const std::string& run_id,
                      Leaderboard* board) {
  const fs::path marker = dir / kInFlightFile;
  if (!fs::exists(marker)) return;
  std::string key = read_text(marker);
  key.erase(key.find_last_not_of("\n") + 1);
  for (const LeaderboardEntry& e : board->entries) {
    if (e.config.key() != key || e.commit != commit) continue;
    if (e.status == CandidateStatus::kIncumbent) return;  // the shipped config: fail loudly instead
  }
  TuneConfig c;
  if (parse_key(key, &c)) {
    LeaderboardEntry e;
    e.config = c;
    e.status = CandidateStatus::kLaunchError;
    e.reason = "the previous run stopped while measuring it (hang or crash)";
    e.run = run_id;
    e.commit = commit;
    board->entries.push_back(e);
  }
  fs::remove(marker);
}

}  // namespace

int run_tune(const Options& options, const std::string& default_source_root,
             const std::string& commit, const std::string& command_line) {
  const TuneOptions& t = options.tune;
  const fs::path dir =
      options.out_dir.empty() ? fs::path("lab-out/tune") : fs::path(options.out_dir);
  const std::string board_path =
      t.leaderboard.empty() ? (dir / "leaderboard.json").string() : t.leaderboard;
  Leaderboard board;
  board.head_dim = t.head_dim;
  board.dtype = t.dtype;
  std::string error;
  if (!load_leaderboard(board_path, &board, &error)) {
    std::fprintf(stderr, "flashcore-bench: error: %s\n", error.c_str());
    return 2;
  }
  if (t.export_only) {
    const std::string device = board.runs.empty() ? "" : board.runs.back().device;
    if (!write_text(t.export_table, dump_json(export_table(board, device)) + "\n")) {
      std::fprintf(stderr, "flashcore-bench: error: cannot write %s\n", t.export_table.c_str());
      return 1;
    }
    std::printf("exported %s (device %s)\n", t.export_table.c_str(), device.c_str());
    return 0;
  }
  if (const std::string why = check_device(); !why.empty()) {
    std::fprintf(stderr, "flashcore-bench: error: %s\n", why.c_str());
    return 4;
  }
  std::error_code ec;
  fs::create_directories(dir / "candidates", ec);
  if (ec) {
    std::fprintf(stderr, "flashcore-bench: error: cannot create %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    return 1;
  }
  CompileSetup setup;
  setup.nvcc = find_program(t.nvcc);
  setup.source_root = t.source_root.empty() ? default_source_root : t.source_root;
  setup.cutlass_include = t.cutlass_include.empty()
                              ? setup.source_root + "/.deps/cutlass/cutlass_library/source/include"
                              : t.cutlass_include;
  if (setup.nvcc.empty()) {
    std::fprintf(stderr, "flashcore-bench: error: %s not found; pass --nvcc PATH\n",
                 t.nvcc.c_str());
    return 1;
  }
  TuneSettings s;
  s.head_dim = t.head_dim;
  s.dtype = t.dtype;
  s.population = t.population;
  s.max_generations = t.generations;
  s.budget_s = t.budget_s;
  s.min_gain = t.min_gain;
  s.seed = options.seed != 0 ? options.seed : std::random_device{}();
  s.commit = commit;
  s.device = query_device().name;
  s.run_id = utc_now();
  s.command_line = command_line;
  const int jobs = t.jobs > 0 ? t.jobs : std::max(1u, std::thread::hardware_concurrency());
  const std::vector<Case> shapes = default_tune_shapes(t.head_dim, t.dtype);
  if (board.timed_cases.empty()) {
    for (const Case& c : shapes) board.timed_cases.push_back(c.label());
  }
  record_in_flight(dir / "candidates", commit, s.run_id, &board);
  std::printf(
      "tune: sm90 hd%d %s on %s, seed %llu, population %d, budget %.0f s, %d nvcc jobs, "
      "leaderboard %s (%zu earlier entries)\n",
      t.head_dim, t.dtype.c_str(), s.device.c_str(), static_cast<unsigned long long>(s.seed),
      s.population, s.budget_s, jobs, board_path.c_str(), board.entries.size());
  GpuBackend backend(t, setup, dir / "candidates", jobs, commit);
  if (!backend.prepare(tune_gate_cases(shapes), &error)) {
    std::fprintf(stderr, "flashcore-bench: error: %s\n", error.c_str());
    return 1;
  }
  const auto start = Clock::now();
  const TuneClock clock = [start] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const TunePersist persist = [&](const Leaderboard& b, std::string* err) {
    return save_leaderboard(board_path, b, err);
  };
  const TuneLog log = [&](const std::string& line) {
    std::printf("[%6.1f s] %s\n", clock(), line.c_str());
    std::fflush(stdout);
  };
  TuneSummary summary;
  const bool ok = run_search(s, &backend, &board, persist, log, clock, &summary, &error);
  if (!ok) {
    std::fprintf(stderr, "flashcore-bench: error: %s\n", error.c_str());
    return 1;
  }
  std::printf("tune: %d candidates in %d generations (%.0f s):", summary.candidates,
              summary.generations, clock());
  for (const auto& [status, n] : summary.by_status) std::printf(" %d %s", n, status_name(status));
  std::printf("\nwinner: %s, %.3fx the shipped config (%.1f us against %.1f us over %zu shapes)\n",
              summary.winner.c_str(), summary.winner_speedup, summary.winner_total_us,
              summary.baseline_total_us, shapes.size());
  if (!t.export_table.empty()) {
    if (!write_text(t.export_table, dump_json(export_table(board, s.device)) + "\n")) {
      std::fprintf(stderr, "flashcore-bench: error: cannot write %s\n", t.export_table.c_str());
      return 1;
    }
    std::printf("exported %s\n", t.export_table.c_str());
  }
  return 0;
}

}  // namespace flashcore::bench
