// The float64 backward reference against central finite differences of the forward reference, on
// tiny shapes with every mask and softcap: for the loss L = sum(dO * O), dL/dQ, dL/dK and dL/dV
// are the reference's dQ, dK and dV.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/backward_problem.hpp"
#include "reference/cpu_backward_reference.hpp"
#include "reference/cpu_reference.hpp"

namespace flashcore {
namespace {

struct FdCase {
  const char* name;
  int64_t sq, sk, hq, hkv;
  bool causal;
  int64_t window_left, window_right;
  float softcap;
  float scale;
};

struct Inputs {
  BackwardParams params;
  std::vector<double> q, k, v, d_o;
};

Inputs random_inputs(const FdCase& c, uint64_t seed) {
  Inputs in;
  BackwardParams& p = in.params;
  p.batch = 2;
  p.seqlen_q = c.sq;
  p.seqlen_k = c.sk;
  p.heads_q = c.hq;
  p.heads_kv = c.hkv;
  p.head_dim = 4;
  p.causal = c.causal;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.softmax_scale = c.scale;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const int64_t nq = p.batch * c.sq * c.hq * p.head_dim;
  const int64_t nk = p.batch * c.sk * c.hkv * p.head_dim;
  for (auto [vec, n] : {std::pair{&in.q, nq}, {&in.k, nk}, {&in.v, nk}, {&in.d_o, nq}}) {
    vec->resize(static_cast<size_t>(n));
    for (double& x : *vec) x = normal(rng);
  }
  return in;
}

// L = sum(dO * O) of the forward reference.
double loss(const Inputs& in) {
  std::vector<double> o, lse;
  EXPECT_TRUE(
      reference::cpu_attention(detail::forward_params(in.params), in.q, in.k, in.v, &o, &lse).ok());
  double l = 0.0;
  for (size_t i = 0; i < o.size(); ++i) l += in.d_o[i] * o[i];
  return l;
}

// Largest |analytic - numeric| over every element of one input, relative to the largest gradient
// element of that input (so that near-zero elements do not dominate).
double fd_error(Inputs in, std::vector<double> Inputs::*which, const std::vector<double>& grad) {
  constexpr double kStep = 1e-5;
  double max_err = 0.0, max_grad = 0.0;
  std::vector<double>& x = in.*which;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + kStep;
    const double up = loss(in);
    x[i] = saved - kStep;
    const double down = loss(in);
    x[i] = saved;
    const double numeric = (up - down) / (2 * kStep);
    max_err = std::max(max_err, std::abs(numeric - grad[i]));
    max_grad = std::max(max_grad, std::abs(grad[i]));
  }
  return max_grad > 0.0 ? max_err / max_grad : max_err;
}

class BackwardReferenceTest : public ::testing::TestWithParam<FdCase> {};

TEST_P(BackwardReferenceTest, MatchesFiniteDifferencesOfTheForward) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Inputs in = random_inputs(GetParam(), seed);
  std::vector<double> dq, dk, dv;
  reference::cpu_attention_backward(in.params, in.q, in.k, in.v, in.d_o, &dq, &dk, &dv);
  // Central differences of a smooth function at step 1e-5: truncation ~1e-10, rounding ~1e-11.
  constexpr double kTolerance = 1e-6;
  EXPECT_LT(fd_error(in, &Inputs::q, dq), kTolerance) << "dQ";
  EXPECT_LT(fd_error(in, &Inputs::k, dk), kTolerance) << "dK";
  EXPECT_LT(fd_error(in, &Inputs::v, dv), kTolerance) << "dV";
}

// Sq != Sk both ways, GQA 1, 2 and 4, each mask, softcap (with and without a custom scale).
const FdCase kFdCases[] = {
    {"plain", 3, 5, 2, 2, false, -1, -1, 0.f, 0.f},
    {"gqa2_causal", 5, 3, 4, 2, true, -1, -1, 0.f, 0.f},
    {"mqa_window", 6, 6, 4, 1, false, 2, 1, 0.f, 0.f},
    {"softcap", 4, 5, 2, 1, false, -1, -1, 1.5f, 0.f},
    {"softcap_causal_scaled", 5, 4, 2, 2, true, -1, -1, 2.f, 0.9f},
    {"window_left_only", 4, 7, 2, 2, false, 1, -1, 0.f, 0.f},
};

INSTANTIATE_TEST_SUITE_P(Cases, BackwardReferenceTest, ::testing::ValuesIn(kFdCases),
                         [](const ::testing::TestParamInfo<FdCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(BackwardReference, FullyMaskedRowsGetZeroGradientAndNoNan) {
  // Causal with Sq > Sk: query rows 0..2 see no key.
  const FdCase c{"masked_rows", 6, 3, 2, 1, true, -1, -1, 0.f, 0.f};
  const Inputs in = random_inputs(c, std::random_device{}());
  std::vector<double> dq, dk, dv;
  reference::cpu_attention_backward(in.params, in.q, in.k, in.v, in.d_o, &dq, &dk, &dv);
  const int64_t D = in.params.head_dim;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t d = 0; d < D; ++d)
          EXPECT_EQ(dq[static_cast<size_t>(((b * 6 + i) * 2 + h) * D + d)], 0.0);
      }
    }
  }
  for (const auto* grad : {&dq, &dk, &dv}) {
    for (double x : *grad) EXPECT_TRUE(std::isfinite(x));
  }
}

TEST(BackwardReference, KeysNoQuerySeesGetZeroGradient) {
  // Window (0, 0) with Sk > Sq: query i sees key i + 2 only, so keys 0 and 1 get no gradient.
  const FdCase c{"unseen_keys", 3, 5, 1, 1, false, 0, 0, 0.f, 0.f};
  const Inputs in = random_inputs(c, std::random_device{}());
  std::vector<double> dq, dk, dv;
  reference::cpu_attention_backward(in.params, in.q, in.k, in.v, in.d_o, &dq, &dk, &dv);
  const int64_t D = in.params.head_dim;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t d = 0; d < D; ++d) {
        EXPECT_EQ(dk[static_cast<size_t>((b * 5 + j) * D + d)], 0.0);
        EXPECT_EQ(dv[static_cast<size_t>((b * 5 + j) * D + d)], 0.0);
      }
    }
  }
  // One visible key per row: P = 1, so dP - D = 0 and dQ vanishes too.
  for (double x : dq) EXPECT_NEAR(x, 0.0, 1e-12);
}

}  // namespace
}  // namespace flashcore
