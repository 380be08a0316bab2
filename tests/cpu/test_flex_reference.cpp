// The float64 flex reference: against the existing reference where both apply (causal, window,
// softcap, GQA: to 1e-12), against independent computations elsewhere (documents as separate
// attentions, prefix-LM as truncated keys, sinks and ALiBi from the formulas), and the BlockMask's
// PyTorch meaning (full blocks skip mask_mod). Fresh random inputs every run.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "flashcore/flex.hpp"
#include "reference/cpu_flex_backward_reference.hpp"
#include "reference/cpu_flex_reference.hpp"
#include "reference/cpu_reference.hpp"

namespace flashcore {
namespace {

using flex::BlockMask;
using reference::FlexReferenceProblem;

constexpr double kExact = 1e-12;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Inputs {
  FlexReferenceProblem problem;
  std::vector<double> q, k, v;

  AttentionParams params() const {
    AttentionParams p;
    p.batch = problem.batch;
    p.seqlen_q = problem.seqlen_q;
    p.seqlen_k = problem.seqlen_k;
    p.heads_q = problem.heads_q;
    p.heads_kv = problem.heads_kv;
    p.head_dim = problem.head_dim;
    return p;
  }
};

Inputs random_inputs(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d) {
  Inputs in;
  in.problem.batch = b;
  in.problem.seqlen_q = sq;
  in.problem.seqlen_k = sk;
  in.problem.heads_q = hq;
  in.problem.heads_kv = hkv;
  in.problem.head_dim = d;
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> normal;
  for (auto [vec, n] :
       {std::pair{&in.q, b * sq * hq * d}, {&in.k, b * sk * hkv * d}, {&in.v, b * sk * hkv * d}}) {
    vec->resize(static_cast<size_t>(n));
    for (double& x : *vec) x = normal(rng);
  }
  return in;
}

struct Output {
  std::vector<double> o, lse;
};

template <typename Mask, typename Score>
Output flex_run(const Inputs& in, const Mask& mask, const Score& score) {
  Output out;
  const Status s =
      reference::cpu_flex_attention(in.problem, in.q, in.k, in.v, mask, score, &out.o, &out.lse);
  EXPECT_TRUE(s.ok()) << s.message;
  return out;
}

Output plain_run(const AttentionParams& params, const Inputs& in) {
  Output out;
  const Status s = reference::cpu_attention(params, in.q, in.k, in.v, &out.o, &out.lse);
  EXPECT_TRUE(s.ok()) << s.message;
  return out;
}

// Max |a - b| with equal infinities counting as 0; a NaN anywhere fails.
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    if (a[i] == b[i]) continue;
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

void expect_same(const Output& got, const Output& want, double tolerance, const std::string& what) {
  EXPECT_LE(max_diff(got.o, want.o), tolerance) << what << ": O";
  EXPECT_LE(max_diff(got.lse, want.lse), tolerance) << what << ": LSE";
}

TEST(FlexReference, AgreesWithTheReferenceOnWindowsSoftcapAndGqa) {
  struct Shape {
    int64_t b, sq, sk, hq, hkv, d;
  };
  const Shape shapes[] = {
      {2, 7, 7, 4, 2, 8}, {1, 1, 33, 2, 1, 16}, {2, 33, 7, 3, 3, 8}, {1, 40, 65, 6, 2, 8}};
  struct Options {
    bool causal;
    int64_t left, right;
    float softcap;
  };
  const Options options[] = {{false, -1, -1, 0.f}, {true, -1, -1, 0.f},  {false, 5, 3, 0.f},
                             {true, 4, -1, 0.f},   {false, -1, -1, 2.f}, {true, -1, -1, 1.5f}};
  for (const Shape& s : shapes) {
    for (const Options& opt : options) {
      Inputs in = random_inputs(s.b, s.sq, s.sk, s.hq, s.hkv, s.d);
      AttentionParams params = in.params();
      params.causal = opt.causal;
      params.window_left = opt.left;
      params.window_right = opt.right;
      params.softcap = opt.softcap;
      const flex::WindowMod mask = flex::sliding_window_mask(opt.left, opt.causal ? 0 : opt.right);
      const std::string what = "Sq " + std::to_string(s.sq) + " Sk " + std::to_string(s.sk) +
                               " causal " + std::to_string(opt.causal) + " window " +
                               std::to_string(opt.left) + "," + std::to_string(opt.right) +
                               " softcap " + std::to_string(opt.softcap);
      const Output want = plain_run(params, in);
      if (opt.softcap > 0.f) {
        expect_same(flex_run(in, mask, flex::SoftcapScore{opt.softcap}), want, kExact, what);
      } else {
        expect_same(flex_run(in, mask, flex::NoScoreMod{}), want, kExact, what);
      }
      // The same through a BlockMask built from the same mask_mod: only which code skips which
      // keys changes. The runtime-selected score mod stands in for the softcap.
      flex::BuiltinScoreMod builtin;
      builtin.softcap.cap = opt.softcap;
      const auto blocks =
          flex::build_block_mask_host(mask, flex::block_mask_shape(s.b, s.hq, s.sq, s.sk, 16, 32));
      const BlockMask view = blocks.view();
      in.problem.block_mask = &view;
      expect_same(flex_run(in, mask, builtin), want, kExact, what + " block mask");
      in.problem.block_mask = nullptr;
      expect_same(flex_run(in, mask, builtin), want, kExact, what + " builtin score mod");
    }
  }
}

TEST(FlexReference, FullyMaskedRowsAreZeroWithMinusInfLse) {
  Inputs in = random_inputs(1, 9, 3, 2, 1, 8);  // causal with Sq > Sk: rows 0..5 see no key
  const Output out = flex_run(in, flex::causal_mask(), flex::NoScoreMod{});
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 9; ++i) {
      const double lse = out.lse[static_cast<size_t>(h * 9 + i)];
      EXPECT_EQ(i < 6, lse == kNegInf) << "row " << i;
      if (i < 6) {
        for (int d = 0; d < 8; ++d) EXPECT_EQ(out.o[static_cast<size_t>((i * 2 + h) * 8 + d)], 0.0);
      }
    }
  }
}

TEST(FlexReference, BlockMaskFullBlocksSkipTheMaskMod) {
  Inputs in = random_inputs(2, 40, 40, 2, 2, 8);
  // Every block listed full: the causal mask_mod is never consulted, so attention is dense.
  const auto all_full =
      flex::build_block_mask_host(flex::NoMask{}, flex::block_mask_shape(1, 1, 40, 40, 16, 16));
  const BlockMask view = all_full.view();
  in.problem.block_mask = &view;
  const Output dense = plain_run(in.params(), in);
  expect_same(flex_run(in, flex::causal_mask(), flex::NoScoreMod{}), dense, kExact, "all full");

  // Blocks of causal, partial ones with no mask code: each query sees its whole diagonal block.
  const auto causal_blocks = flex::build_block_mask_host(
      flex::causal_mask(), flex::block_mask_shape(2, 2, 40, 40, 16, 16));
  const BlockMask causal_view = causal_blocks.view();
  in.problem.block_mask = &causal_view;
  const Output blocky = flex_run(in, flex::NoMask{}, flex::NoScoreMod{});
  struct BlockCausal {  // kv in a block at or before the query's block
    bool operator()(int, int, int q, int kv) const { return kv / 16 <= q / 16; }
  };
  in.problem.block_mask = nullptr;
  expect_same(blocky, flex_run(in, BlockCausal{}, flex::NoScoreMod{}), kExact, "block causal");
}

TEST(FlexReference, EmptyBlockMaskRowsAreFullyMasked) {
  Inputs in = random_inputs(1, 20, 20, 1, 1, 8);
  auto blocks =
      flex::build_block_mask_host(flex::NoMask{}, flex::block_mask_shape(1, 1, 20, 20, 16, 16));
  blocks.full_kv_num_blocks[1] = 0;  // query block 1 (rows 16..19) lists nothing
  const BlockMask view = blocks.view();
  in.problem.block_mask = &view;
  const Output out = flex_run(in, flex::NoMask{}, flex::NoScoreMod{});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(i >= 16, out.lse[static_cast<size_t>(i)] == kNegInf) << i;
  for (int i = 16 * 8; i < 20 * 8; ++i) EXPECT_EQ(out.o[static_cast<size_t>(i)], 0.0);
}

// Rows [begin, begin + n) of a [B=1, S, H, D] array.
std::vector<double> rows(const std::vector<double>& x, int64_t begin, int64_t n, int64_t width) {
  return {x.begin() + begin * width, x.begin() + (begin + n) * width};
}

TEST(FlexReference, DocumentsAreSeparateAttentions) {
  const std::vector<int32_t> lengths = {5, 1, 17, 9};  // boundaries inside 16-blocks
  std::vector<int32_t> ids;
  for (size_t doc = 0; doc < lengths.size(); ++doc) ids.insert(ids.end(), lengths[doc], doc * 7);
  const int64_t S = static_cast<int64_t>(ids.size()), H = 4, Hkv = 2, D = 8;
  Inputs in = random_inputs(1, S, S, H, Hkv, D);
  for (bool causal : {false, true}) {
    const auto docs = flex::document_mask(ids.data(), S);
    const Output out =
        causal ? flex_run(in, flex::and_masks(flex::causal_mask(), docs), flex::NoScoreMod{})
               : flex_run(in, docs, flex::NoScoreMod{});
    const auto blocks = flex::build_block_mask_host(
        flex::and_masks(flex::sliding_window_mask(-1, causal ? 0 : -1), docs),
        flex::block_mask_shape(1, 1, S, S, 16, 16));
    const BlockMask view = blocks.view();
    in.problem.block_mask = &view;
    const Output with_blocks =
        causal ? flex_run(in, flex::and_masks(flex::causal_mask(), docs), flex::NoScoreMod{})
               : flex_run(in, docs, flex::NoScoreMod{});
    in.problem.block_mask = nullptr;
    expect_same(with_blocks, out, kExact, "documents through a BlockMask");

    int64_t begin = 0;
    for (int32_t n : lengths) {
      Inputs doc;
      doc.problem = in.problem;
      doc.problem.seqlen_q = doc.problem.seqlen_k = n;
      doc.q = rows(in.q, begin, n, H * D);
      doc.k = rows(in.k, begin, n, Hkv * D);
      doc.v = rows(in.v, begin, n, Hkv * D);
      AttentionParams params = doc.params();
      params.causal = causal;
      const Output want = plain_run(params, doc);
      EXPECT_LE(max_diff(rows(out.o, begin, n, H * D), want.o), kExact) << "doc at " << begin;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_NEAR(out.lse[static_cast<size_t>(h * S + begin + i)],
                      want.lse[static_cast<size_t>(h * n + i)], kExact);
        }
      }
      begin += n;
    }
  }
}

TEST(FlexReference, PrefixLmRowsSeeThePrefixAndTheirPast) {
  constexpr int64_t S = 23, H = 2, D = 8, kPrefix = 9;
  Inputs in = random_inputs(1, S, S, H, H, D);
  const Output out = flex_run(in, flex::PrefixLMMask{nullptr, kPrefix, 0}, flex::NoScoreMod{});
  for (int64_t i = 0; i < S; ++i) {
    // Row i attends, unmasked, to the first max(prefix, i + 1) keys.
    const int64_t n = std::max(kPrefix, i + 1);
    Inputs row;
    row.problem = in.problem;
    row.problem.seqlen_q = 1;
    row.problem.seqlen_k = n;
    row.q = rows(in.q, i, 1, H * D);
    row.k = rows(in.k, 0, n, H * D);
    row.v = rows(in.v, 0, n, H * D);
    const Output want = plain_run(row.params(), row);
    EXPECT_LE(max_diff(rows(out.o, i, 1, H * D), want.o), kExact) << "row " << i;
    for (int64_t h = 0; h < H; ++h)
      EXPECT_NEAR(out.lse[static_cast<size_t>(h * S + i)], want.lse[static_cast<size_t>(h)],
                  kExact);
  }
}

// softmax of the given scores against v, by hand, for one row.
Output one_row(const std::vector<double>& scores, const std::vector<double>& v, int64_t d,
               double sink = kNegInf) {
  double m = sink;
  for (double s : scores) m = std::max(m, s);
  double sum = sink == kNegInf ? 0.0 : std::exp(sink - m);
  for (double s : scores) sum += std::exp(s - m);
  Output out{std::vector<double>(static_cast<size_t>(d), 0.0), {m + std::log(sum)}};
  for (size_t j = 0; j < scores.size(); ++j)
    for (int64_t e = 0; e < d; ++e) out.o[e] += std::exp(scores[j] - m) / sum * v[j * d + e];
  return out;
}

TEST(FlexReference, AlibiByHand) {
  constexpr int64_t Sq = 5, Sk = 8, H = 2, D = 8;
  Inputs in = random_inputs(1, Sq, Sk, H, 1, D);
  in.problem.softmax_scale = 0.3;
  const std::vector<float> slopes = {0.5f, 0.125f};
  const Output out = flex_run(in, flex::NoMask{}, flex::AlibiScore{slopes.data(), 0});
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < Sq; ++i) {
      std::vector<double> scores;
      for (int64_t j = 0; j < Sk; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < D; ++e) dot += in.q[(i * H + h) * D + e] * in.k[j * D + e];
        scores.push_back(dot * 0.3 - slopes[h] * std::abs(i + Sk - Sq - j));
      }
      const Output want = one_row(scores, in.v, D);
      EXPECT_NEAR(out.lse[h * Sq + i], want.lse[0], kExact);
      for (int64_t e = 0; e < D; ++e) EXPECT_NEAR(out.o[(i * H + h) * D + e], want.o[e], kExact);
    }
  }
  // Under causal, the symmetric form is PyTorch's slope * (kv_idx - q_idx) (Sq == Sk).
  struct GymAlibi {
    const float* slopes;
    double operator()(double s, int, int h, int q, int kv) const {
      return s + slopes[h] * (kv - q);
    }
  };
  Inputs square = random_inputs(1, 12, 12, H, 1, D);
  expect_same(flex_run(square, flex::causal_mask(), flex::AlibiScore{slopes.data(), 0}),
              flex_run(square, flex::causal_mask(), GymAlibi{slopes.data()}), kExact, "gym alibi");
}

TEST(FlexReference, RelativeBiasShiftsAndMasks) {
  constexpr int64_t S = 14, H = 3, D = 8;
  Inputs in = random_inputs(2, S, S, H, 1, D);
  // -inf for every key after the query, 0 otherwise: exactly causal.
  std::vector<float> table(static_cast<size_t>(H * (2 * S - 1)), 0.f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 1; d < S; ++d) table[h * (2 * S - 1) + d + S - 1] = -INFINITY;
  AttentionParams causal = in.params();
  causal.causal = true;
  expect_same(flex_run(in, flex::NoMask{}, flex::relative_bias(table.data(), S)),
              plain_run(causal, in), kExact, "table as causal");
  // A constant c per head leaves O alone and adds c to LSE.
  const std::vector<float> constant = {0.5f, -2.f, 3.f};
  flex::RelativeBiasScore flat{constant.data(), /*max_distance=*/1, /*row_stride=*/1, 0};
  const Output shifted = flex_run(in, flex::NoMask{}, flat);
  const Output plain = plain_run(in.params(), in);
  EXPECT_LE(max_diff(shifted.o, plain.o), kExact);
  for (size_t r = 0; r < plain.lse.size(); ++r)
    EXPECT_NEAR(shifted.lse[r], plain.lse[r] + constant[(r / S) % H], kExact);
}

TEST(FlexReference, SinksJoinTheDenominatorOnly) {
  constexpr int64_t S = 11, H = 2, D = 8;
  Inputs in = random_inputs(1, S, S + 3, H, 1, D);
  const std::vector<float> logits = {1.5f, -0.5f};
  const Output plain = flex_run(in, flex::causal_mask(), flex::NoScoreMod{});
  in.problem.sinks = {logits.data()};
  const Output sunk = flex_run(in, flex::causal_mask(), flex::NoScoreMod{});
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < S; ++i) {
      const double lse = plain.lse[h * S + i], sink = logits[h];
      const double total = std::log(std::exp(lse) + std::exp(sink));
      EXPECT_NEAR(sunk.lse[h * S + i], total, kExact);
      for (int64_t e = 0; e < D; ++e) {
        const size_t at = static_cast<size_t>((i * H + h) * D + e);
        EXPECT_NEAR(sunk.o[at], plain.o[at] * std::exp(lse - total), kExact);
      }
    }
  }
  // A row that sees nothing: O = 0 and the denominator is the sink alone.
  Inputs tall = random_inputs(1, 6, 2, H, 1, D);
  tall.problem.sinks = {logits.data()};
  const Output masked = flex_run(tall, flex::causal_mask(), flex::NoScoreMod{});
  EXPECT_EQ(masked.lse[0], logits[0]);
  EXPECT_EQ(masked.lse[6], logits[1]);
  for (int e = 0; e < D; ++e) EXPECT_EQ(masked.o[e], 0.0);
}

// The backward reference's stored_o: D = dO . O from the O a forward stored is the same D as
// sum P dP when that O is the exact one (to 1e-12, with sinks, GQA and ALiBi), and an O off by a
// rounding moves dQ through D alone (dV never reads D). A stored O of the wrong size is refused.
TEST(FlexReference, BackwardTakesDFromAStoredO) {
  constexpr int64_t Sq = 9, Sk = 13, Hq = 4, Hkv = 2, D = 8;
  Inputs in = random_inputs(1, Sq, Sk, Hq, Hkv, D);
  const std::vector<float> logits = {0.5f, -1.f, 2.f, 0.f};
  const std::vector<float> slopes = {0.25f, 0.5f, 1.f, 2.f};
  in.problem.sinks = {logits.data()};
  flex::BuiltinScoreMod alibi;  // the built-in form: the backward has its derivative
  alibi.alibi = flex::AlibiScore{slopes.data()};
  const Output forward = flex_run(in, flex::causal_mask(), alibi);
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> normal;
  std::vector<double> d_o(in.q.size());
  for (double& x : d_o) x = normal(rng);
  auto backward = [&](const std::vector<double>* stored_o, std::vector<double>* dq,
                      std::vector<double>* dk, std::vector<double>* dv) {
    return reference::cpu_flex_attention_backward(in.problem, in.q, in.k, in.v, d_o,
                                                  flex::causal_mask(), alibi, dq, dk, dv,
                                                  /*row_sees_keys=*/nullptr, stored_o);
  };
  std::vector<double> dq, dk, dv, dq_o, dk_o, dv_o;
  ASSERT_TRUE(backward(nullptr, &dq, &dk, &dv).ok());
  ASSERT_TRUE(backward(&forward.o, &dq_o, &dk_o, &dv_o).ok());
  EXPECT_LE(max_diff(dq_o, dq), kExact);
  EXPECT_LE(max_diff(dk_o, dk), kExact);
  EXPECT_LE(max_diff(dv_o, dv), kExact);
  std::vector<double> rounded = forward.o;
  for (double& x : rounded) x *= 1.0 + 1.0 / 256;  // bf16's half ulp, everywhere
  ASSERT_TRUE(backward(&rounded, &dq_o, &dk_o, &dv_o).ok());
  EXPECT_GT(max_diff(dq_o, dq), kExact) << "D from the stored O must reach dQ";
  EXPECT_LE(max_diff(dv_o, dv), kExact) << "dV = P^T dO does not read D";
  rounded.pop_back();
  EXPECT_FALSE(backward(&rounded, &dq_o, &dk_o, &dv_o).ok());
}

TEST(FlexReference, RejectsInconsistentProblems) {
  Inputs in = random_inputs(1, 4, 4, 1, 1, 8);
  in.q.pop_back();
  std::vector<double> o, lse;
  EXPECT_FALSE(reference::cpu_flex_attention(in.problem, in.q, in.k, in.v, flex::NoMask{},
                                             flex::NoScoreMod{}, &o, &lse)
                   .ok());
}

}  // namespace
}  // namespace flashcore
