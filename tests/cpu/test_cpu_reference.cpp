// Properties of the float64 reference that hold on any input, checked on fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "reference/cpu_reference.hpp"

namespace flashcore {
namespace {

struct Inputs {
  AttentionParams params;
  std::vector<double> q, k, v;
};

Inputs random_inputs(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d) {
  Inputs in;
  in.params.batch = b;
  in.params.seqlen_q = sq;
  in.params.seqlen_k = sk;
  in.params.heads_q = hq;
  in.params.heads_kv = hkv;
  in.params.head_dim = d;
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> normal;
  for (auto [vec, n] :
       {std::pair{&in.q, b * sq * hq * d}, {&in.k, b * sk * hkv * d}, {&in.v, b * sk * hkv * d}}) {
    vec->resize(static_cast<size_t>(n));
    for (double& x : *vec) x = normal(rng);
  }
  return in;
}

TEST(CpuReference, RowsAreConvexCombinationsWithCorrectLse) {
  Inputs in = random_inputs(2, 5, 9, 4, 2, 8);
  in.params.softcap = 3.f;
  std::vector<double> o, lse;
  reference::cpu_attention(in.params, in.q, in.k, in.v, &o, &lse);
  const double scale = 1.0 / std::sqrt(8.0);
  // Recompute one row by hand: b=1, h=3 (kv head 1), i=4.
  const int64_t b = 1, h = 3, hk = 1, i = 4;
  std::vector<double> s(9);
  double mx = -1e300;
  for (int j = 0; j < 9; ++j) {
    double dot = 0;
    for (int d = 0; d < 8; ++d)
      dot += in.q[((b * 5 + i) * 4 + h) * 8 + d] * in.k[((b * 9 + j) * 2 + hk) * 8 + d];
    s[j] = 3.0 * std::tanh(dot * scale / 3.0);
    mx = std::max(mx, s[j]);
  }
  double sum = 0;
  for (double x : s) sum += std::exp(x - mx);
  EXPECT_NEAR(lse[(b * 4 + h) * 5 + i], mx + std::log(sum), 1e-12);
  for (int d = 0; d < 8; ++d) {
    double expect = 0;
    for (int j = 0; j < 9; ++j)
      expect += std::exp(s[j] - mx) / sum * in.v[((b * 9 + j) * 2 + hk) * 8 + d];
    EXPECT_NEAR(o[((b * 5 + i) * 4 + h) * 8 + d], expect, 1e-12);
  }
}

TEST(CpuReference, FullyMaskedRowsAreZeroWithMinusInfLse) {
  Inputs in = random_inputs(1, 6, 2, 1, 1, 8);
  in.params.causal = true;  // Sq > Sk: rows 0..3 see no key
  std::vector<double> o, lse;
  reference::cpu_attention(in.params, in.q, in.k, in.v, &o, &lse);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(std::isinf(lse[i]) && lse[i] < 0);
    for (int d = 0; d < 8; ++d) EXPECT_EQ(o[i * 8 + d], 0.0);
  }
  for (int i = 4; i < 6; ++i) EXPECT_TRUE(std::isfinite(lse[i]));
  for (double x : o) EXPECT_FALSE(std::isnan(x));
}

TEST(CpuReference, SingleVisibleKeyCopiesItsValue) {
  Inputs in = random_inputs(1, 4, 4, 2, 1, 16);
  in.params.window_left = 0;
  in.params.window_right = 0;  // each query sees exactly its diagonal key
  std::vector<double> o, lse;
  reference::cpu_attention(in.params, in.q, in.k, in.v, &o, &lse);
  for (int i = 0; i < 4; ++i) {
    for (int h = 0; h < 2; ++h) {
      for (int d = 0; d < 16; ++d) EXPECT_NEAR(o[(i * 2 + h) * 16 + d], in.v[i * 16 + d], 1e-14);
    }
  }
}

}  // namespace
}  // namespace flashcore
