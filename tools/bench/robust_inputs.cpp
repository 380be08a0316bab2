#include "robust_inputs.hpp"

#include <cmath>
#include <functional>

#include "common/fp16_bf16.hpp"

namespace flashcore::bench {
namespace {

// splitmix64, as case_data.cpp's fill_random: fast, well mixed, deterministic.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // [0, 1) with 53 random bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform() { return 2 * unit() - 1; }
  double sign() { return (next() >> 63) != 0 ? 1.0 : -1.0; }
  // Box-Muller; 1 - unit() is in (0, 1], so the log is finite.
  double normal() {
    const double r = std::sqrt(-2 * std::log(1 - unit()));
    return r * std::cos(2 * M_PI * unit());
  }

 private:
  uint64_t state_;
};

enum class Tensor { kQ, kK, kV };

// Fills one tensor row by row: value(random, row, column).
void fill(DType dtype, size_t n, int64_t row_len, uint64_t seed,
          const std::function<void(Random&, std::vector<double>&)>& row_values,
          std::vector<uint16_t>* bits, std::vector<double>* exact) {
  bits->resize(n);
  exact->resize(n);
  Random random(seed);
  std::vector<double> row(static_cast<size_t>(row_len));
  for (size_t start = 0; start < n; start += row.size()) {
    row_values(random, row);
    for (size_t j = 0; j < row.size(); ++j) {
      const uint16_t b = detail::float_to_bits(static_cast<float>(row[j]), dtype);
      (*bits)[start + j] = b;
      (*exact)[start + j] = detail::bits_to_float(b, dtype);
    }
  }
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

void generate_inputs(Distribution d, const Case& c, uint64_t seed, HostInputs* inputs) {
  const DType dtype = c.dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  const size_t q_elems = static_cast<size_t>(c.batch * c.seqlen_q * c.heads_q * c.head_dim);
  const size_t kv_elems = static_cast<size_t>(c.batch * c.seqlen_k * c.heads_kv * c.head_dim);
  Random shared(seed ^ 0xC0);
  const double k_constant = shared.normal();
  fill(dtype, q_elems, c.head_dim, seed ^ 0x51, row_generator(d, Tensor::kQ, 0), &inputs->q_bits,
       &inputs->q);
  fill(dtype, kv_elems, c.head_dim, seed ^ 0x4B, row_generator(d, Tensor::kK, k_constant),
       &inputs->k_bits, &inputs->k);
  fill(dtype, kv_elems, c.head_dim, seed ^ 0x56, row_generator(d, Tensor::kV, 0), &inputs->v_bits,
       &inputs->v);
}

}  // namespace flashcore::bench
