#include "reference/cpu_backward_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/backward_problem.hpp"
#include "reference/cpu_flex_reference.hpp"

namespace flashcore::reference {

void cpu_attention_backward(const BackwardParams& params, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v,
                            const std::vector<double>& d_o, std::vector<double>* dq,
                            std::vector<double>* dk, std::vector<double>* dv) {
  const flashcore::detail::Problem problem =
      flashcore::detail::make_problem(flashcore::detail::forward_params(params));
  const int64_t B = params.batch, Sq = params.seqlen_q, Sk = params.seqlen_k;
  const int64_t Hq = params.heads_q, Hkv = params.heads_kv, D = params.head_dim;
  const int64_t group = Hq / Hkv;
  dq->assign(static_cast<size_t>(B * Sq * Hq * D), 0.0);
  dk->assign(static_cast<size_t>(B * Sk * Hkv * D), 0.0);
  dv->assign(static_cast<size_t>(B * Sk * Hkv * D), 0.0);
  // The scale in double, as the forward reference.
  const double scale = params.softmax_scale != 0.f ? static_cast<double>(params.softmax_scale)
                                                   : 1.0 / std::sqrt(static_cast<double>(D));
  const double cap = static_cast<double>(params.softcap);
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  auto at_q = [&](int64_t b, int64_t i, int64_t h) {
    return static_cast<size_t>(((b * Sq + i) * Hq + h) * D);
  };
  auto at_k = [&](int64_t b, int64_t j, int64_t hk) {
    return static_cast<size_t>(((b * Sk + j) * Hkv + hk) * D);
  };

  // One (batch, kv head) pair per thread: its query heads are the only writers of its dK and dV,
  // and each query head's dQ rows belong to that pair alone.
  detail::for_each_head(B, Hkv, [&](int64_t b, int64_t hk) {
    std::vector<double> t(static_cast<size_t>(Sk)), dt_ds(static_cast<size_t>(Sk));
    std::vector<double> p(static_cast<size_t>(Sk)), dp(static_cast<size_t>(Sk));
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      for (int64_t i = 0; i < Sq; ++i) {
        const double* qi = &q[at_q(b, i, h)];
        const double* doi = &d_o[at_q(b, i, h)];
        double row_max = kNegInf;
        for (int64_t j = 0; j < Sk; ++j) {
          t[j] = kNegInf;
          if (!problem.mask.visible(i, j)) continue;
          const double* kj = &k[at_k(b, j, hk)];
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          const double s = dot * scale;
          t[j] = problem.softcap(s);
          // d softcap(s) / ds = 1 - tanh^2(s / cap).
          const double u = cap > 0.0 ? std::tanh(s / cap) : 0.0;
          dt_ds[j] = 1.0 - u * u;
          row_max = std::max(row_max, t[j]);
        }
        if (row_max == kNegInf) continue;  // fully masked: P = 0, no gradient

        double sum = 0.0;
        for (int64_t j = 0; j < Sk; ++j) {
          p[j] = std::exp(t[j] - row_max);  // exp(-inf) = 0 for masked keys
          sum += p[j];
        }
        double delta = 0.0;  // D_i = sum_j P_ij dP_ij
        for (int64_t j = 0; j < Sk; ++j) {
          p[j] /= sum;
          dp[j] = 0.0;
          if (p[j] == 0.0) continue;
          const double* vj = &v[at_k(b, j, hk)];
          for (int64_t d = 0; d < D; ++d) dp[j] += doi[d] * vj[d];
          delta += p[j] * dp[j];
        }
        double* dqi = &(*dq)[at_q(b, i, h)];
        for (int64_t j = 0; j < Sk; ++j) {
          if (p[j] == 0.0) continue;
          const double ds = p[j] * (dp[j] - delta) * dt_ds[j];
          const double* kj = &k[at_k(b, j, hk)];
          double* dkj = &(*dk)[at_k(b, j, hk)];
          double* dvj = &(*dv)[at_k(b, j, hk)];
          for (int64_t d = 0; d < D; ++d) {
            dqi[d] += scale * ds * kj[d];
            dkj[d] += scale * ds * qi[d];
            dvj[d] += p[j] * doi[d];
          }
        }
      }
    }
  });
}

}  // namespace flashcore::reference
