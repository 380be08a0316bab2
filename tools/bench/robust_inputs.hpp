// Input distributions of the robustness suite: Q, K and V for one case, as 16-bit patterns of
// the case's dtype plus the exact values they round to (what the float64 reference reads).
// Deterministic for a seed, whatever the thread count: each tensor is drawn in chunks of
// kRowsPerChunk rows, each chunk from its own stream seeded by (tensor seed, chunk index), and the
// chunks are spread over threads. Rows are the head_dim-long vectors of the BSHD layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/attention.hpp"
#include "model.hpp"

namespace flashcore::bench {

enum class Distribution {
  kNormal,          // N(0, 1)
  kUniform,         // U[-1, 1)
  kLargeMagnitude,  // Q, K ~ N(0, kLargeSigma^2): scores of order 1e4, stressing the running max
  kConstantRows,    // each Q row one value, every K element one value: all scores of a row tie
  kOutliers,        // N(0, 1) with kOutliersPerRow entries per row of +-kOutlierMagnitude
  kNearOverflow,    // Q and V within a factor 2 of kNearOverflow (fp16's max is 65504), K tiny
  kMaskedRows,      // N(0, 1) inputs; the grid gives these cells a mask with fully masked rows
};

const std::vector<Distribution>& all_distributions();
const char* distribution_name(Distribution d);  // "normal", "large_magnitude", ...
bool parse_distribution(const std::string& name, Distribution* d);

// Scores q.k / sqrt(D) have standard deviation kLargeSigma^2: 16384, above 1e4.
inline constexpr double kLargeSigma = 128;
inline constexpr int kOutliersPerRow = 3;
// Exactly representable in fp16 and bf16, and 200 standard deviations out.
inline constexpr double kOutlierMagnitude = 200;
// fp16's largest finite value is 65504; outputs, weighted means of V, stay below it.
inline constexpr double kNearOverflow = 60000;
// K's scale for kNearOverflow: q.k / sqrt(D) then has a standard deviation of about 1.4, so the
// softmax stays well conditioned while Q sits near overflow and K among fp16's subnormals.
inline constexpr double kNearOverflowKScale = 0x1.0p-15;

// Rows drawn from one random stream. Fixed, so that a seed gives the same inputs on any machine.
inline constexpr size_t kRowsPerChunk = 1024;
// Names the generator in robust.json ("inputs"): a seed reproduces a run's inputs only with the
// generator that drew them. kSerialInputGenerator drew every tensor from one stream on one thread
// (robust.json files without "inputs"); the same seed gives other inputs with the chunked one.
inline constexpr const char* kInputGenerator = "splitmix64, one stream per 1024-row chunk";
inline constexpr const char* kSerialInputGenerator = "splitmix64, one stream per tensor";

struct HostInputs {
  std::vector<uint16_t> q_bits, k_bits, v_bits;
  std::vector<double> q, k, v;  // the values of the bits (empty unless GenerateOptions::values)
};

struct GenerateOptions {
  int threads = 0;     // 0: one per hardware thread; the inputs do not depend on it
  bool values = true;  // also fill q, k, v (the float64 CPU reference reads them)
};

// Fills Q [B, Sq, Hq, D], K and V [B, Sk, Hkv, D] for the case.
void generate_inputs(Distribution d, const Case& c, uint64_t seed, HostInputs* inputs,
                     const GenerateOptions& options = {});

}  // namespace flashcore::bench
