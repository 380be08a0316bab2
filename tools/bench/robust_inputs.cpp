#include "robust_inputs.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "common/fp16_bf16.hpp"

namespace flashcore::bench {
namespace {

// splitmix64's output function.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// splitmix64, as case_data.cpp's fill_random: fast, well mixed, deterministic.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix(state_ += 0x9E3779B97F4A7C15ull); }
  // [0, 1) with 53 random bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform() { return 2 * unit() - 1; }
  double sign() { return (next() >> 63) != 0 ? 1.0 : -1.0; }
  // Box-Muller, both values of a pair used; 1 - unit() is in (0, 1], so the log is finite.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2 * std::log(1 - unit()));
    const double angle = 2 * M_PI * unit();
    spare_ = r * std::sin(angle);
    has_spare_ = true;
    return r * std::cos(angle);
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

enum class Tensor { kQ, kK, kV };

// The start of chunk `chunk`'s stream. Mixed, not seed + chunk * step: splitmix64 streams that
// start one step apart are the same stream shifted by one.
uint64_t chunk_seed(uint64_t tensor_seed, size_t chunk) {
  return mix(tensor_seed ^ mix(0x632BE59BD9B4E019ull + chunk));
}

// Runs work(0 .. n-1) on up to `threads` threads (0: one per hardware thread), each index once.
void parallel_for(size_t n, int threads, const std::function<void(size_t)>& work) {
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t workers = std::min(n, threads > 0 ? static_cast<size_t>(threads) : hardware);
  std::atomic<size_t> next{0};
  auto drain = [&] {
    for (size_t i = next++; i < n; i = next++) work(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(drain);
  drain();
  for (std::thread& t : pool) t.join();
}

// Fills one tensor of n elements row by row, kRowsPerChunk rows from each chunk's stream.
void fill(DType dtype, size_t n, int64_t row_len, uint64_t seed,
          const std::function<void(Random&, std::vector<double>&)>& row_values,
          const GenerateOptions& options, std::vector<uint16_t>* bits, std::vector<double>* exact) {
  bits->resize(n);
  exact->resize(options.values ? n : 0);
  const size_t row_elems = static_cast<size_t>(row_len);
  const size_t rows = n / row_elems;
  const size_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  parallel_for(chunks, options.threads, [&](size_t chunk) {
    Random random(chunk_seed(seed, chunk));
    std::vector<double> row(row_elems);
    const size_t end = std::min(rows, (chunk + 1) * kRowsPerChunk);
    for (size_t r = chunk * kRowsPerChunk; r < end; ++r) {
      row_values(random, row);
      const size_t start = r * row_elems;
      for (size_t j = 0; j < row_elems; ++j) {
        const uint16_t b = detail::float_to_bits(static_cast<float>(row[j]), dtype);
        (*bits)[start + j] = b;
        if (options.values) (*exact)[start + j] = detail::bits_to_float(b, dtype);
      }
    }
  });
}

// The row generator of one tensor under one distribution. shared is drawn once per tensor (the
// constant that every K element takes in kConstantRows).
std::function<void(Random&, std::vector<double>&)> row_generator(Distribution d, Tensor t,
                                                                 double shared) {
  auto normal = [](double scale) {
    return [scale](Random& r, std::vector<double>& row) {
      for (double& x : row) x = scale * r.normal();
    };
  };
  switch (d) {
    case Distribution::kNormal:
    case Distribution::kMaskedRows:
      return normal(1);
    case Distribution::kUniform:
      return [](Random& r, std::vector<double>& row) {
        for (double& x : row) x = r.uniform();
      };
    case Distribution::kLargeMagnitude:
      return normal(t == Tensor::kV ? 1 : kLargeSigma);
    case Distribution::kConstantRows:
      if (t == Tensor::kV) return normal(1);
      if (t == Tensor::kK) {
        return [shared](Random&, std::vector<double>& row) {
          for (double& x : row) x = shared;
        };
      }
      return [](Random& r, std::vector<double>& row) {
        const double value = r.normal();
        for (double& x : row) x = value;
      };
    case Distribution::kOutliers:
      return [](Random& r, std::vector<double>& row) {
        for (double& x : row) x = r.normal();
        // Distinct positions: a normal value never reaches kOutlierMagnitude / 2, so a slot
        // already holding an outlier is recognised by its size.
        for (int placed = 0; placed < kOutliersPerRow && placed < static_cast<int>(row.size());) {
          double& x = row[r.next() % row.size()];
          if (std::fabs(x) >= kOutlierMagnitude / 2) continue;
          x = r.sign() * kOutlierMagnitude;
          ++placed;
        }
      };
    case Distribution::kNearOverflow:
      if (t == Tensor::kK) return normal(kNearOverflowKScale);
      return [](Random& r, std::vector<double>& row) {
        for (double& x : row) x = r.sign() * kNearOverflow * (0.5 + 0.5 * r.unit());
      };
  }
  return normal(1);
}

}  // namespace

const std::vector<Distribution>& all_distributions() {
  static const std::vector<Distribution> kAll = {
      Distribution::kNormal,       Distribution::kUniform,  Distribution::kLargeMagnitude,
      Distribution::kConstantRows, Distribution::kOutliers, Distribution::kNearOverflow,
      Distribution::kMaskedRows};
  return kAll;
}

const char* distribution_name(Distribution d) {
  switch (d) {
    case Distribution::kNormal:
      return "normal";
    case Distribution::kUniform:
      return "uniform";
    case Distribution::kLargeMagnitude:
      return "large_magnitude";
    case Distribution::kConstantRows:
      return "constant_rows";
    case Distribution::kOutliers:
      return "outliers";
    case Distribution::kNearOverflow:
      return "near_overflow";
    case Distribution::kMaskedRows:
      return "masked_rows";
  }
  return "?";
}

bool parse_distribution(const std::string& name, Distribution* d) {
  for (const Distribution x : all_distributions()) {
    if (name == distribution_name(x)) {
      *d = x;
      return true;
    }
  }
  return false;
}

void generate_inputs(Distribution d, const Case& c, uint64_t seed, HostInputs* inputs,
                     const GenerateOptions& options) {
  const DType dtype = c.dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  const size_t q_elems = static_cast<size_t>(c.batch * c.seqlen_q * c.heads_q * c.head_dim);
  const size_t kv_elems = static_cast<size_t>(c.batch * c.seqlen_k * c.heads_kv * c.head_dim);
  Random shared(seed ^ 0xC0);
  const double k_constant = shared.normal();
  fill(dtype, q_elems, c.head_dim, seed ^ 0x51, row_generator(d, Tensor::kQ, 0), options,
       &inputs->q_bits, &inputs->q);
  fill(dtype, kv_elems, c.head_dim, seed ^ 0x4B, row_generator(d, Tensor::kK, k_constant), options,
       &inputs->k_bits, &inputs->k);
  fill(dtype, kv_elems, c.head_dim, seed ^ 0x56, row_generator(d, Tensor::kV, 0), options,
       &inputs->v_bits, &inputs->v);
}

}  // namespace flashcore::bench
