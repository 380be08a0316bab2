// Float64 CPU reference of FlexAttention: the SAME mask_mod and score_mod functors the kernels run
// (their host side), the BlockMask with PyTorch's meaning, attention sinks, GQA and varlen batches.
// Computed the obvious way: per row, every key's visibility, its modded score, a two-pass softmax.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "flashcore/attention.hpp"
#include "flashcore/flex/block_mask.hpp"
#include "flashcore/flex/mod_traits.hpp"
#include "flashcore/flex/sinks.hpp"

namespace flashcore::reference {

struct FlexReferenceProblem {
  int64_t batch = 0;
  int64_t seqlen_q = 0;  // varlen: total_q
  int64_t seqlen_k = 0;  // varlen: total_k
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t head_dim = 0;
  double softmax_scale = 0.0;  // 0: 1/sqrt(head_dim)
  // Varlen: host int32 [batch + 1] arrays (AttentionParams' meaning), both or neither.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  flex::AttentionSinks sinks;                   // host logits [Hq], optional
  const flex::BlockMask* block_mask = nullptr;  // host arrays, optional; not with varlen
};

namespace detail {

// Where sequence b lives: its first row in the packed (or batched) q/k and its lengths.
struct SequenceSpan {
  int64_t q_begin, seqlen_q, k_begin, seqlen_k;
};
SequenceSpan sequence_span(const FlexReferenceProblem& p, int64_t b);

// Sizes, varlen arrays (contents too: they are host memory), BlockMask shape and contents.
Status validate_flex_reference(const FlexReferenceProblem& p, size_t q_size, size_t k_size,
                               size_t v_size);

// Calls work(b, h) for every (batch, query head) pair, spread over the machine's cores.
void for_each_head(int64_t batch, int64_t heads, const std::function<void(int64_t, int64_t)>& work);

// What the BlockMask says about each KV block for one query block: not listed, partial or full.
enum class ListedAs : unsigned char { kNone, kPartial, kFull };
void block_row_states(const flex::BlockMask& mask, int64_t b, int64_t h, int64_t q_block,
                      std::vector<ListedAs>* states);

}  // namespace detail

// q, k, v: host arrays, contiguous [B, Sq, Hq, D] / [B, Sk, Hkv, D], or packed [total, H, D] for
// varlen. Writes o in q's layout and lse as [B, Hq, Sq] ([Hq, total_q] varlen). A key is visible to
// a query when the BlockMask (if any) lists its block as full, or as partial and mask_mod says so;
// without a BlockMask when mask_mod says so. Visible scores are score_mod(q.k * scale, b, h, i, j),
// in double where the mod is a template. Both mods are bound to each sequence's lengths
// (bind_seqlens); in a varlen batch b is the sequence and i, j count within it. A row with no
// visible key gets o = 0 and lse = -inf (the sink's logit with sinks, see flex/sinks.hpp).
template <typename MaskMod, typename ScoreMod>
Status cpu_flex_attention(const FlexReferenceProblem& p, const std::vector<double>& q,
                          const std::vector<double>& k, const std::vector<double>& v,
                          const MaskMod& mask_mod, const ScoreMod& score_mod,
                          std::vector<double>* o, std::vector<double>* lse) {
  if (Status s = detail::validate_flex_reference(p, q.size(), k.size(), v.size()); !s.ok()) {
    return s;
  }
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const int64_t Hq = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, group = Hq / Hkv;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const double scale =
      p.softmax_scale != 0.0 ? p.softmax_scale : 1.0 / std::sqrt(static_cast<double>(D));
  o->assign(q.size(), 0.0);
  lse->assign(static_cast<size_t>((varlen ? 1 : p.batch) * Hq * p.seqlen_q), kNegInf);

  // Each (b, h) writes its own rows of o and lse, so the pairs run in parallel.
  detail::for_each_head(p.batch, Hq, [&](int64_t b, int64_t h) {
    const detail::SequenceSpan seq = detail::sequence_span(p, b);
    const MaskMod mask = flex::bind_seqlens(mask_mod, seq.seqlen_q, seq.seqlen_k);
    const ScoreMod score_fn = flex::bind_seqlens(score_mod, seq.seqlen_q, seq.seqlen_k);
    const int64_t hk = h / group;
    const int bi = static_cast<int>(b), hi = static_cast<int>(h);
    std::vector<double> scores(static_cast<size_t>(seq.seqlen_k));
    std::vector<detail::ListedAs> listed;
    for (int64_t i = 0; i < seq.seqlen_q; ++i) {
      if (p.block_mask != nullptr) {
        detail::block_row_states(*p.block_mask, b, h, i / p.block_mask->q_block_size, &listed);
      }
      const double* qi = &q[static_cast<size_t>(((seq.q_begin + i) * Hq + h) * D)];
      double row_max = kNegInf;
      for (int64_t j = 0; j < seq.seqlen_k; ++j) {
        bool visible = true;
        if (p.block_mask != nullptr) {
          const detail::ListedAs as = listed[static_cast<size_t>(j / p.block_mask->kv_block_size)];
          visible = as == detail::ListedAs::kFull ||
                    (as == detail::ListedAs::kPartial &&
                     mask(bi, hi, static_cast<int>(i), static_cast<int>(j)));
        } else {
          visible = mask(bi, hi, static_cast<int>(i), static_cast<int>(j));
        }
        if (!visible) {
          scores[static_cast<size_t>(j)] = kNegInf;
          continue;
        }
        const double* kj = &k[static_cast<size_t>(((seq.k_begin + j) * Hkv + hk) * D)];
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
        const double s = score_fn(dot * scale, bi, hi, static_cast<int>(i), static_cast<int>(j));
        scores[static_cast<size_t>(j)] = s;
        row_max = std::max(row_max, s);
      }
      // The sink joins the max (for a stable exp) and the denominator, with no value.
      const double sink = p.sinks.enabled() ? static_cast<double>(p.sinks.logit(hi)) : kNegInf;
      const double m = std::max(row_max, sink);
      if (m == kNegInf) continue;  // nothing visible and no sink: o stays 0, lse stays -inf

      double sum = sink == kNegInf ? 0.0 : std::exp(sink - m);
      for (double& s : scores) {
        s = std::exp(s - m);  // exp(-inf) = 0 for hidden keys
        sum += s;
      }
      double* oi = &(*o)[static_cast<size_t>(((seq.q_begin + i) * Hq + h) * D)];
      for (int64_t j = 0; j < seq.seqlen_k; ++j) {
        if (scores[static_cast<size_t>(j)] == 0.0) continue;
        const double weight = scores[static_cast<size_t>(j)] / sum;
        const double* vj = &v[static_cast<size_t>(((seq.k_begin + j) * Hkv + hk) * D)];
        for (int64_t d = 0; d < D; ++d) oi[d] += weight * vj[d];
      }
      const size_t lse_index = static_cast<size_t>(varlen ? h * p.seqlen_q + seq.q_begin + i
                                                          : (b * Hq + h) * p.seqlen_q + i);
      (*lse)[lse_index] = m + std::log(sum);
    }
  });
  return Status::Ok();
}

}  // namespace flashcore::reference
