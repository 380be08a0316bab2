// The flex functors on the host: their element answers, their tile answers (block_visibility must
// agree with evaluating every element, or a kernel that trusts it drops or adds keys), binding to
// sequence lengths, and the score mods' values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "flashcore/flex.hpp"

namespace flashcore::flex {
namespace {

TEST(FlexMasks, CausalIsBottomRightAndBoundToTheLengths) {
  const WindowMod causal = bind_seqlens(causal_mask(), /*seqlen_q=*/2, /*seqlen_k=*/5);
  EXPECT_TRUE(causal(0, 0, 0, 3));  // query 0 stands at key position 3
  EXPECT_FALSE(causal(0, 0, 0, 4));
  EXPECT_TRUE(causal(0, 0, 1, 4));
  const WindowMod window = bind_seqlens(sliding_window_mask(2, 0), 10, 10);
  EXPECT_FALSE(window(0, 0, 5, 2));
  EXPECT_TRUE(window(0, 0, 5, 3));
  EXPECT_FALSE(window(0, 0, 5, 6));
}

TEST(FlexMasks, DocumentsSeeOnlyTheirOwnDocument) {
  const std::vector<int32_t> ids = {0, 0, 1, 1, 1, 2,   // batch 0
                                    5, 5, 5, 5, 5, 5};  // batch 1: one document
  const DocumentMask docs = document_mask(ids.data(), 6);
  EXPECT_TRUE(docs(0, 0, 1, 0));
  EXPECT_FALSE(docs(0, 0, 2, 1));  // the boundary between documents 0 and 1
  EXPECT_TRUE(docs(0, 7, 4, 2));   // heads do not matter
  EXPECT_FALSE(docs(0, 0, 5, 4));
  EXPECT_TRUE(docs(1, 0, 5, 0));
  const auto causal_docs = bind_seqlens(and_masks(causal_mask(), docs), 6, 6);
  EXPECT_TRUE(causal_docs(0, 0, 4, 2));
  EXPECT_FALSE(causal_docs(0, 0, 2, 3));  // same document, but a future key
}

TEST(FlexMasks, PrefixLmIsBidirectionalInThePrefixOnly) {
  const std::vector<int32_t> prefixes = {3, 0};
  const PrefixLMMask per_batch = bind_seqlens(PrefixLMMask{prefixes.data(), 0, 0}, 8, 8);
  EXPECT_TRUE(per_batch(0, 0, 0, 2));   // in the prefix: sees a later prefix key
  EXPECT_FALSE(per_batch(0, 0, 0, 3));  // past the prefix: causal
  EXPECT_TRUE(per_batch(0, 0, 5, 5));
  EXPECT_FALSE(per_batch(1, 0, 0, 1));  // batch 1 has no prefix
  const PrefixLMMask fixed = bind_seqlens(PrefixLMMask{nullptr, 4, 0}, 8, 8);
  EXPECT_TRUE(fixed(1, 0, 0, 3));
  EXPECT_FALSE(fixed(1, 0, 0, 4));
}

TEST(FlexMasks, CombinatorsAreAndAndOr) {
  struct Even {
    bool operator()(int, int, int, int kv) const { return kv % 2 == 0; }
  };
  struct Low {
    bool operator()(int, int, int, int kv) const { return kv < 4; }
  };
  const auto both = and_masks(Even{}, Low{});
  const auto either = or_masks(Even{}, Low{});
  const auto three = and_masks(Even{}, Low{}, NoMask{});
  for (int kv = 0; kv < 8; ++kv) {
    EXPECT_EQ(both(0, 0, 0, kv), kv % 2 == 0 && kv < 4) << kv;
    EXPECT_EQ(either(0, 0, 0, kv), kv % 2 == 0 || kv < 4) << kv;
    EXPECT_EQ(three(0, 0, 0, kv), both(0, 0, 0, kv)) << kv;
  }
}

// Every tile of random shapes and tile sizes: the O(1) answer must equal the elements' answer
// exactly (kUnknown allowed: the builder then evaluates the elements).
template <typename MakeMask>
void expect_block_visibility_exact(MakeMask make_mask, int trials) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> size(1, 200), tile(1, 48);
  for (int trial = 0; trial < trials; ++trial) {
    const int64_t sq = size(rng), sk = size(rng), rows = tile(rng), keys = tile(rng);
    const auto mask = bind_seqlens(make_mask(rng), sq, sk);
    for (int64_t q0 = 0; q0 < sq; q0 += rows) {
      const int64_t q1 = std::min(q0 + rows, sq);
      for (int64_t k0 = 0; k0 < sk; k0 += keys) {
        const int64_t k1 = std::min(k0 + keys, sk);
        const BlockVisibility fast = block_visibility(mask, 0, 0, q0, q1, k0, k1);
        if (fast == BlockVisibility::kUnknown) continue;
        const BlockVisibility exact =
            classify_tile(mask, 0, 0, q0, q1, k0, k1, TileClassification::kEveryElement);
        ASSERT_EQ(static_cast<int>(fast), static_cast<int>(exact))
            << "trial " << trial << " Sq " << sq << " Sk " << sk << " rows [" << q0 << ", " << q1
            << ") keys [" << k0 << ", " << k1 << ")";
      }
    }
  }
}

TEST(FlexBlockVisibility, WindowIsExact) {
  std::uniform_int_distribution<int> side(-1, 60);
  expect_block_visibility_exact(
      [&](std::mt19937& rng) { return sliding_window_mask(side(rng), side(rng)); }, 300);
}

TEST(FlexBlockVisibility, PrefixLmIsExact) {
  std::uniform_int_distribution<int> prefix(0, 220);
  expect_block_visibility_exact(
      [&](std::mt19937& rng) {
        return PrefixLMMask{nullptr, prefix(rng), 0};
      },
      300);
}

TEST(FlexBlockVisibility, CombinationsAreExact) {
  std::uniform_int_distribution<int> side(-1, 60), prefix(0, 220);
  expect_block_visibility_exact(
      [&](std::mt19937& rng) {
        return and_masks(
            sliding_window_mask(side(rng), side(rng)),
            or_masks(PrefixLMMask{nullptr, prefix(rng), 0}, sliding_window_mask(side(rng), -1)));
      },
      200);
  expect_block_visibility_exact(
      [&](std::mt19937& rng) {
        BuiltinMask m;
        m.window = sliding_window_mask(side(rng), side(rng));
        m.use_prefix_lm = true;
        m.prefix_lm.prefix_length = prefix(rng);
        return m;
      },
      200);
}

TEST(FlexBlockVisibility, DocumentsAreLeftToTheElements) {
  const std::vector<int32_t> ids(64, 0);
  BuiltinMask m;
  m.documents = document_mask(ids.data(), 64);
  EXPECT_EQ(block_visibility(bind_seqlens(m, 64, 64), 0, 0, 0, 16, 16, 32),
            BlockVisibility::kUnknown);
  m.window = sliding_window_mask(-1, 0);  // causal rules the tile above the diagonal out at once
  EXPECT_EQ(block_visibility(bind_seqlens(m, 64, 64), 0, 0, 0, 16, 16, 32),
            BlockVisibility::kEmpty);
}

TEST(FlexScoreMods, SoftcapMatchesTheLibrarysSoftcap) {
  const SoftcapScore cap{30.f};
  EXPECT_DOUBLE_EQ(cap(0.3, 0, 0, 0, 0), Softcap{30.f}(0.3));
  EXPECT_FLOAT_EQ(cap(5.f, 0, 0, 0, 0), Softcap{30.f}(5.f));
  EXPECT_NEAR(cap(1e6, 0, 0, 0, 0), 30.0, 1e-9);
}

TEST(FlexScoreMods, AlibiSubtractsSlopeTimesDistance) {
  const std::vector<float> slopes = {0.5f, 0.25f};
  const AlibiScore alibi =
      bind_seqlens(AlibiScore{slopes.data(), 0}, /*seqlen_q=*/4, /*seqlen_k=*/10);
  // Query 1 stands at key position 7: key 3 is 4 back, key 9 two ahead.
  EXPECT_DOUBLE_EQ(alibi(1.0, 0, 1, 1, 3), 1.0 - 0.25 * 4);
  EXPECT_DOUBLE_EQ(alibi(1.0, 0, 0, 1, 9), 1.0 - 0.5 * 2);
  EXPECT_DOUBLE_EQ(alibi(1.0, 0, 0, 1, 7), 1.0);
}

TEST(FlexScoreMods, RelativeBiasIndexesAndClampsTheTable) {
  constexpr int64_t kMaxDistance = 3;                   // distances -2 .. 2, 5 entries per head
  const std::vector<float> table = {-2, -1, 0,  1,  2,  // head 0: the distance itself
                                    10, 11, 12, 13, 14};
  const RelativeBiasScore bias = bind_seqlens(relative_bias(table.data(), kMaxDistance), 6, 6);
  EXPECT_DOUBLE_EQ(bias(0.0, 0, 0, 3, 4), 1.0);
  EXPECT_DOUBLE_EQ(bias(0.0, 0, 0, 3, 2), -1.0);
  EXPECT_DOUBLE_EQ(bias(0.0, 0, 0, 5, 0), -2.0) << "distance -5 clamps to -2";
  EXPECT_DOUBLE_EQ(bias(0.0, 0, 0, 0, 5), 2.0) << "distance 5 clamps to 2";
  EXPECT_DOUBLE_EQ(bias(0.5, 0, 1, 2, 2), 12.5);
}

TEST(FlexScoreMods, ComposedAndBuiltinApplyInOrder) {
  const std::vector<float> slopes = {1.f};
  const AlibiScore alibi{slopes.data(), 0};
  const SoftcapScore cap{2.f};
  const auto composed = compose_score_mods(alibi, cap);
  BuiltinScoreMod builtin;
  builtin.alibi = alibi;
  builtin.softcap = cap;
  // ALiBi first (3 - 1 * 2 = 1), then the cap: 2 tanh(1 / 2).
  EXPECT_DOUBLE_EQ(composed(3.0, 0, 0, 4, 2), 2.0 * std::tanh(0.5));
  EXPECT_DOUBLE_EQ(builtin(3.0, 0, 0, 4, 2), composed(3.0, 0, 0, 4, 2));
  EXPECT_DOUBLE_EQ(BuiltinScoreMod{}(3.0, 0, 0, 4, 2), 3.0) << "everything off";
}

TEST(FlexSinks, OffWithoutLogits) {
  const std::vector<float> logits = {0.5f, -1.f};
  EXPECT_FALSE(AttentionSinks{}.enabled());
  const AttentionSinks sinks{logits.data()};
  EXPECT_TRUE(sinks.enabled());
  EXPECT_EQ(sinks.logit(1), -1.f);
}

}  // namespace
}  // namespace flashcore::flex
