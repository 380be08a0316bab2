#include "reference/cpu_reference.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "common/problem.hpp"

namespace flashcore::reference {

void cpu_attention(const AttentionParams& params, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v,
                   std::vector<double>* o, std::vector<double>* lse) {
  const detail::Problem problem = detail::make_problem(params);
  const int64_t B = params.batch, Sq = params.seqlen_q, Sk = params.seqlen_k;
  const int64_t Hq = params.heads_q, Hkv = params.heads_kv, D = params.head_dim;
  const int64_t group = Hq / Hkv;
  o->assign(static_cast<size_t>(B * Sq * Hq * D), 0.0);
  lse->assign(static_cast<size_t>(B * Hq * Sq), -std::numeric_limits<double>::infinity());
  // The scale in double: the float one in Problem would put a 1e-8 error into the reference.
  const double scale = params.softmax_scale != 0.f ? static_cast<double>(params.softmax_scale)
                                                   : 1.0 / std::sqrt(static_cast<double>(D));
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();

  // One (batch, head) pair at a time per thread: the pairs write disjoint parts of o and lse.
  auto attend_head = [&](int64_t b, int64_t h, std::vector<double>& scores) {
    const int64_t hk = h / group;
    for (int64_t i = 0; i < Sq; ++i) {
      const double* qi = &q[static_cast<size_t>(((b * Sq + i) * Hq + h) * D)];
      double row_max = kNegInf;
      for (int64_t j = 0; j < Sk; ++j) {
        if (!problem.mask.visible(i, j)) {
          scores[j] = kNegInf;
          continue;
        }
        const double* kj = &k[static_cast<size_t>(((b * Sk + j) * Hkv + hk) * D)];
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
        scores[j] = problem.softcap(dot * scale);
        row_max = std::max(row_max, scores[j]);
      }
      if (row_max == kNegInf) continue;  // fully masked: o stays 0, lse stays -inf

      double sum = 0.0;
      for (int64_t j = 0; j < Sk; ++j) {
        scores[j] = std::exp(scores[j] - row_max);  // exp(-inf) = 0 for masked keys
        sum += scores[j];
      }
      double* oi = &(*o)[static_cast<size_t>(((b * Sq + i) * Hq + h) * D)];
      for (int64_t j = 0; j < Sk; ++j) {
        if (scores[j] == 0.0) continue;
        const double p = scores[j] / sum;
        const double* vj = &v[static_cast<size_t>(((b * Sk + j) * Hkv + hk) * D)];
        for (int64_t d = 0; d < D; ++d) oi[d] += p * vj[d];
      }
      (*lse)[static_cast<size_t>((b * Hq + h) * Sq + i)] = row_max + std::log(sum);
    }
  };

  std::atomic<int64_t> next_pair{0};
  auto worker = [&] {
    std::vector<double> scores(static_cast<size_t>(Sk));
    for (int64_t pair = next_pair++; pair < B * Hq; pair = next_pair++) {
      attend_head(pair / Hq, pair % Hq, scores);
    }
  };
  const int64_t threads =
      std::min<int64_t>(B * Hq, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace flashcore::reference
