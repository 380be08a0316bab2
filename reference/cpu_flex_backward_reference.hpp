// Float64 CPU reference of the FlexAttention backward: dQ, dK and dV of cpu_flex_attention
// (cpu_flex_reference.hpp) with the same functors, visibility rule (BlockMask, mask_mod, sinks,
// varlen, GQA) and the score_mod's derivative by the rule the kernels use
// (common/flex_score_grad.hpp, here in double). Per row, from scratch: the visible scores and
// their slopes, the LSE (sink included), P = exp(s - LSE), dP = dO . v, D = sum P dP,
// dS = P (dP - D) slope; dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/flex_score_grad.hpp"
#include "reference/cpu_flex_reference.hpp"

namespace flashcore::reference {

// q, k, v, d_o: as cpu_flex_attention's q, k, v (d_o in q's layout). Fills dq (q's layout) and
// dk, dv (k's). A row that sees nothing gets dq = 0; a key no row sees gets dk = dv = 0.
// row_sees_keys (optional): per (query row, head) of q's layout, whether the row sees any key (a
// row that sees exactly one has dq = 0 too, from P = 1 and dP = D, so zeros do not tell).
// stored_o (optional, q's layout): the O a forward stored; D = dO . O is then taken from it, as
// every backward kernel takes it, instead of sum P dP. O in fp16/bf16 is off by its rounding,
// and dS = P (dP - D) can cancel that far below it: a decode row (one query, thousands of keys)
// moved dQ's relative error past 1% from O's rounding alone (docs/backward.md, session 30).
template <typename MaskMod, typename ScoreMod>
Status cpu_flex_attention_backward(const FlexReferenceProblem& p, const std::vector<double>& q,
                                   const std::vector<double>& k, const std::vector<double>& v,
                                   const std::vector<double>& d_o, const MaskMod& mask_mod,
                                   const ScoreMod& score_mod, std::vector<double>* dq,
                                   std::vector<double>* dk, std::vector<double>* dv,
                                   std::vector<uint8_t>* row_sees_keys = nullptr,
                                   const std::vector<double>* stored_o = nullptr) {
  if (Status s = detail::validate_flex_reference(p, q.size(), k.size(), v.size()); !s.ok()) {
    return s;
  }
  if (stored_o != nullptr && stored_o->size() != q.size()) {
    return {StatusCode::kInvalidArgument, "cpu_flex_attention_backward: stored_o is not q's size"};
  }
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const int64_t Hq = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, group = Hq / Hkv;
  const double scale =
      p.softmax_scale != 0.0 ? p.softmax_scale : 1.0 / std::sqrt(static_cast<double>(D));
  dq->assign(q.size(), 0.0);
  dk->assign(k.size(), 0.0);
  dv->assign(v.size(), 0.0);
  if (row_sees_keys != nullptr) row_sees_keys->assign(q.size() / static_cast<size_t>(D), 0);

  // Each (b, kv head) owns its keys' dK and dV and its group's dQ rows, so the pairs run in
  // parallel.
  detail::for_each_head(p.batch, Hkv, [&](int64_t b, int64_t hk) {
    const detail::SequenceSpan seq = detail::sequence_span(p, b);
    const MaskMod mask = flex::bind_seqlens(mask_mod, seq.seqlen_q, seq.seqlen_k);
    const ScoreMod score_fn = flex::bind_seqlens(score_mod, seq.seqlen_q, seq.seqlen_k);
    const int bi = static_cast<int>(b);
    const size_t keys = static_cast<size_t>(seq.seqlen_k);
    std::vector<double> scores(keys), slopes(keys), dp(keys);
    std::vector<detail::ListedAs> listed;
    auto at = [&](int64_t row, int64_t heads, int64_t h) {
      return static_cast<size_t>((row * heads + h) * D);
    };
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      const int hi = static_cast<int>(h);
      for (int64_t i = 0; i < seq.seqlen_q; ++i) {
        if (p.block_mask != nullptr) {
          detail::block_row_states(*p.block_mask, b, h, i / p.block_mask->q_block_size, &listed);
        }
        const double* qi = &q[at(seq.q_begin + i, Hq, h)];
        const double* doi = &d_o[at(seq.q_begin + i, Hq, h)];
        double row_max = kNegInf;
        for (int64_t j = 0; j < seq.seqlen_k; ++j) {
          const int ii = static_cast<int>(i), ji = static_cast<int>(j);
          bool visible = true;
          if (p.block_mask != nullptr) {
            const detail::ListedAs as =
                listed[static_cast<size_t>(j / p.block_mask->kv_block_size)];
            visible = as == detail::ListedAs::kFull ||
                      (as == detail::ListedAs::kPartial && mask(bi, hi, ii, ji));
          } else {
            visible = mask(bi, hi, ii, ji);
          }
          double& s = scores[static_cast<size_t>(j)];
          if (!visible) {
            s = kNegInf;
            continue;
          }
          const double* kj = &k[at(seq.k_begin + j, Hkv, hk)];
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          s = flashcore::detail::ScoreModGrad<ScoreMod>::apply(score_fn, dot * scale, bi, hi, ii,
                                                               ji, &slopes[static_cast<size_t>(j)]);
          row_max = std::max(row_max, s);
        }
        const double sink = p.sinks.enabled() ? static_cast<double>(p.sinks.logit(hi)) : kNegInf;
        const double m = std::max(row_max, sink);
        if (row_max == kNegInf) continue;  // no visible key: no gradient from this row
        if (row_sees_keys != nullptr) {
          (*row_sees_keys)[static_cast<size_t>((seq.q_begin + i) * Hq + h)] = 1;
        }
        double sum = sink == kNegInf ? 0.0 : std::exp(sink - m);
        for (const double s : scores) sum += std::exp(s - m);
        const double lse = m + std::log(sum);
        double delta = 0.0;
        for (int64_t j = 0; j < seq.seqlen_k; ++j) {
          const size_t jj = static_cast<size_t>(j);
          scores[jj] = std::exp(scores[jj] - lse);  // P; 0 for hidden keys
          if (scores[jj] == 0.0) continue;
          const double* vj = &v[at(seq.k_begin + j, Hkv, hk)];
          double dpj = 0.0;
          for (int64_t d = 0; d < D; ++d) dpj += doi[d] * vj[d];
          dp[jj] = dpj;
          delta += scores[jj] * dpj;
        }
        if (stored_o != nullptr) {
          const double* oi = &(*stored_o)[at(seq.q_begin + i, Hq, h)];
          delta = 0.0;
          for (int64_t d = 0; d < D; ++d) delta += doi[d] * oi[d];
        }
        double* dqi = &(*dq)[at(seq.q_begin + i, Hq, h)];
        for (int64_t j = 0; j < seq.seqlen_k; ++j) {
          const size_t jj = static_cast<size_t>(j);
          const double pj = scores[jj];
          if (pj == 0.0) continue;
          const double ds = pj * (dp[jj] - delta) * slopes[jj] * scale;
          const double* kj = &k[at(seq.k_begin + j, Hkv, hk)];
          double* dkj = &(*dk)[at(seq.k_begin + j, Hkv, hk)];
          double* dvj = &(*dv)[at(seq.k_begin + j, Hkv, hk)];
          for (int64_t d = 0; d < D; ++d) {
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
            dvj[d] += pj * doi[d];
          }
        }
      }
    }
  });
  return Status::Ok();
}

}  // namespace flashcore::reference
