// A tuner candidate as code: the translation unit that instantiates the sm90 kernel with one
// TuneConfig from our own headers (src/sm90/launch.cuh), the nvcc command that builds it into a
// shared object, and the C entry points the tuner looks up in it. Pure CPU code: the text and the
// command are tested without a compiler.
#pragma once

#include <string>
#include <vector>

#include "tune_config.hpp"

namespace flashcore::bench {

// The entry points of a candidate's shared object, all extern "C":
//   int flashcore_tune_abi(void): kTuneAbi, so a stale object built for another layout is refused.
//   int flashcore_tune_smem_bytes(int cluster_ctas): SharedStorage of that kernel.
//   cudaError_t flashcore_tune_launch(const flashcore::sm90::LaunchArgs*, cudaStream_t): launches
//     the clustered kernel when LaunchArgs::cluster_ctas > 1, else the one-CTA kernel (masked
//     problems, and query-block counts the cluster does not divide).
inline constexpr int kTuneAbi = 1;
inline constexpr const char* kTuneAbiSymbol = "flashcore_tune_abi";
inline constexpr const char* kTuneSmemSymbol = "flashcore_tune_smem_bytes";
inline constexpr const char* kTuneLaunchSymbol = "flashcore_tune_launch";

// "bf16" or "fp16"; head_dim one of the instantiated ones.
std::string candidate_source(const TuneConfig& config, int head_dim, const std::string& dtype);

struct CompileSetup {
  std::string nvcc = "nvcc";
  std::string source_root;      // the repository: src/ and include/ are included from it
  std::string cutlass_include;  // CUTLASS/CuTe headers (.deps/cutlass/.../include)
  std::string arch = "sm_90a";  // -gencode=arch=compute_90a,code=sm_90a
};

// nvcc's argv building `source` into the shared object `output`, with the flags the library's
// own sm90 objects get (C++17, -O3, -DNDEBUG, --expt-relaxed-constexpr, -lineinfo and the extended
// wgmma shapes: CMakeLists.txt, src/CMakeLists.txt) and -Xptxas=-v so that the log shows registers
// and spills.
std::vector<std::string> compile_command(const CompileSetup& setup, const std::string& source,
                                         const std::string& output);

// Spill stores + loads ptxas reported for the kernels in a compile log (0 when none), so the
// leaderboard can say why a candidate is slow.
long spill_bytes(const std::string& ptxas_log);

}  // namespace flashcore::bench
