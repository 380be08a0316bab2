#include "reference/cpu_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/problem.hpp"
#include "flashcore/flex/builtin_mods.hpp"
#include "flashcore/varlen.hpp"
#include "reference/cpu_flex_reference.hpp"

namespace flashcore::reference {
namespace {

// A varlen batch through the flex reference: the window bound to each sequence's lengths, the
// softcap as a score_mod. The dense path below stays separate, so that the two can check each
// other (tests/cpu/test_flex_reference.cpp).
Status cpu_attention_varlen(const AttentionParams& params, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v,
                            std::vector<double>* o, std::vector<double>* lse) {
  FlexReferenceProblem problem;
  problem.batch = params.batch;
  problem.seqlen_q = params.seqlen_q;
  problem.seqlen_k = params.seqlen_k;
  problem.heads_q = params.heads_q;
  problem.heads_kv = params.heads_kv;
  problem.head_dim = params.head_dim;
  problem.softmax_scale = static_cast<double>(params.softmax_scale);
  problem.cu_seqlens_q = params.cu_seqlens_q;
  problem.cu_seqlens_k = params.cu_seqlens_k;
  const flex::WindowMod window =
      flex::sliding_window_mask(params.window_left, params.causal ? 0 : params.window_right);
  flex::BuiltinScoreMod score_mod;
  score_mod.softcap.cap = params.softcap;
  return cpu_flex_attention(problem, q, k, v, window, score_mod, o, lse);
}

}  // namespace

Status cpu_attention(const AttentionParams& params, const std::vector<double>& q,
                     const std::vector<double>& k, const std::vector<double>& v,
                     std::vector<double>* o, std::vector<double>* lse) {
  if (is_varlen(params)) return cpu_attention_varlen(params, q, k, v, o, lse);
  const flashcore::detail::Problem problem = flashcore::detail::make_problem(params);
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
  detail::for_each_head(B, Hq, [&](int64_t b, int64_t h) {
    std::vector<double> scores(static_cast<size_t>(Sk));
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
  });
  return Status::Ok();
}

}  // namespace flashcore::reference
