// The built-in mods' fast paths (src/common/flex_builtin.hpp), which the flex kernels run instead
// of calling the functors per element, against the functors themselves: every element of random
// fragments under random masks and score mods must agree, or a kernel would show or hide keys (or
// bias scores) differently from the float64 reference, which calls the functors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/flex_builtin.hpp"

namespace flashcore::detail {
namespace {

// Every element of the thread's fragment: bit (half * kNTiles + nt) * 2 + e of word mt is tile row
// row0 + mt * 16 + lane / 4 + 8 * half (query row at.query_of(row) of head at.head_of(row)), key
// key0 + nt * 8 + 2 * (lane % 4) + e.
template <int kMTiles, int kNTiles>
void expect_bits_match(const flex::BuiltinMask& mask, const FragmentPlace& at) {
  uint32_t bits[kMTiles];
  builtin_visibility<kMTiles, kNTiles>(mask, at, bits);
  for (int mt = 0; mt < kMTiles; ++mt) {
    for (int half = 0; half < 2; ++half) {
      for (int nt = 0; nt < kNTiles; ++nt) {
        for (int e = 0; e < 2; ++e) {
          const int row = at.row0 + mt * 16 + at.lane / 4 + 8 * half;
          const int q = at.query_of(row);
          const int kv = at.key0 + nt * 8 + 2 * (at.lane % 4) + e;
          const bool expected = row < at.rows() && q < at.seqlen_q && kv < at.seqlen_k &&
                                mask(at.b, at.head_of(row), q, kv);
          const bool got = (bits[mt] >> ((half * kNTiles + nt) * 2 + e)) & 1u;
          ASSERT_EQ(got, expected)
              << "row " << row << " q " << q << " kv " << kv << " packed heads " << at.packed_heads
              << " b " << at.b << " seqlens " << at.seqlen_q << "/" << at.seqlen_k << " window "
              << mask.window.left << "/" << mask.window.right << " prefix " << mask.use_prefix_lm
              << " documents " << (mask.documents.doc_ids_q != nullptr);
        }
      }
    }
  }
}

// Spans: span s's words are the single-span bits of the keys kNTiles * 8 * s further on.
template <int kMTiles, int kNTiles, int kSpans>
void expect_spans_match(const flex::BuiltinMask& mask, const FragmentPlace& at) {
  uint32_t spans[kSpans][kMTiles];
  builtin_visibility_spans<kMTiles, kNTiles, kSpans>(mask, at, spans);
  for (int span = 0; span < kSpans; ++span) {
    FragmentPlace shifted = at;
    shifted.key0 += span * kNTiles * 8;
    uint32_t bits[kMTiles];
    builtin_visibility<kMTiles, kNTiles>(mask, shifted, bits);
    for (int mt = 0; mt < kMTiles; ++mt) {
      ASSERT_EQ(spans[span][mt], bits[mt]) << "span " << span << " of " << kSpans;
    }
  }
}

TEST(FlexBuiltin, VisibilityMatchesTheMaskOnEveryElement) {
  std::mt19937 rng(18);
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<>(lo, hi)(rng); };
  int checked_masks = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int seqlen_q = uniform(1, 300), seqlen_k = uniform(1, 300);
    flex::BuiltinMask mask;
    const int window = uniform(0, 3);  // off, causal, sliding, two-sided
    if (window == 1) mask.window = flex::causal_mask();
    if (window == 2) mask.window = flex::sliding_window_mask(uniform(0, 90), 0);
    if (window == 3) mask.window = flex::sliding_window_mask(uniform(-1, 60), uniform(-1, 60));
    // Two batches of document ids: sorted runs or scattered, so ranges are not assumed.
    std::vector<int32_t> ids_q(2 * seqlen_q), ids_k(2 * seqlen_k);
    const bool scattered = uniform(0, 1) == 1;
    const int span = uniform(1, 64);
    for (size_t i = 0; i < ids_q.size(); ++i) {
      ids_q[i] = scattered ? uniform(0, 3) : static_cast<int>(i % seqlen_q) / span;
    }
    for (size_t i = 0; i < ids_k.size(); ++i) {
      ids_k[i] = scattered ? uniform(0, 3) : static_cast<int>(i % seqlen_k) / span;
    }
    if (uniform(0, 1) == 1) mask.documents = {ids_q.data(), ids_k.data(), seqlen_q, seqlen_k};
    const std::vector<int32_t> prefixes = {uniform(0, seqlen_k), uniform(0, seqlen_k)};
    if (uniform(0, 2) == 0) {
      mask.use_prefix_lm = true;
      mask.prefix_lm = uniform(0, 1) == 1 ? flex::PrefixLMMask{prefixes.data(), 0, 0}
                                          : flex::PrefixLMMask{nullptr, uniform(0, seqlen_k), 0};
    }
    const flex::BuiltinMask bound = mask.with_seqlens(seqlen_q, seqlen_k);
    for (int place = 0; place < 6; ++place) {
      const int b = uniform(0, 1);
      const int row0 = 16 * uniform(0, (seqlen_q + 31) / 16);
      const int key0 = 8 * uniform(0, (seqlen_k + 63) / 8);
      for (int lane = 0; lane < 32; ++lane) {
        const FragmentPlace at{b, 0, row0, key0, seqlen_q, seqlen_k, lane};
        expect_bits_match<1, 8>(bound, at);      // sm90: a warpgroup's 64-key half
        expect_bits_match<2, 8>(bound, at);      // sm80: a warp's two m16 tiles
        expect_bits_match<2, 4>(bound, at);      // a 32-key tile: runs end inside the word
        expect_spans_match<1, 8, 2>(bound, at);  // sm90: a 128-key step as its two halves
        if (HasFatalFailure()) return;
      }
    }
    // A packed decode tile (sm80/flex_view.hpp): one query row, the rows a group's heads.
    const flex::BuiltinMask decode = mask.with_seqlens(1, seqlen_k);
    for (int place = 0; place < 4; ++place) {
      const int b = uniform(0, 1), group = uniform(2, 40);
      const int row0 = 16 * uniform(0, 3);
      const int key0 = 8 * uniform(0, (seqlen_k + 63) / 8);
      for (int lane = 0; lane < 32; ++lane) {
        const FragmentPlace at{b, 4 * group, row0, key0, 1, seqlen_k, lane, group};
        expect_bits_match<1, 8>(decode, at);
        expect_bits_match<2, 8>(decode, at);
        if (HasFatalFailure()) return;
      }
    }
    ++checked_masks;
  }
  EXPECT_EQ(checked_masks, 300);
}

TEST(FlexBuiltin, ScoreTermsMatchTheScoreMod) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> score(-40.f, 40.f);
  const std::vector<float> slopes = {0.5f, 0.0625f, 0.25f};
  const int max_distance = 37;  // shorter than the sequences: distances are clipped
  std::vector<float> table(3 * (2 * max_distance - 1));
  for (float& x : table) x = score(rng) / 8.f;
  int checked = 0;
  for (int parts = 1; parts < 8; ++parts) {  // every combination of alibi, bias, softcap
    flex::BuiltinScoreMod mod;
    if (parts & 1) mod.alibi.slopes = slopes.data();
    if (parts & 2) mod.bias = flex::relative_bias(table.data(), max_distance);
    if (parts & 4) mod.softcap.cap = 20.f;
    const flex::BuiltinScoreMod bound = mod.with_seqlens(/*seqlen_q=*/90, /*seqlen_k=*/130);
    for (int h = 0; h < 3; ++h) {
      const BuiltinScoreTerms terms = BuiltinScoreTerms::bind(bound, h);
      for (int i = 0; i < 200; ++i) {
        const int q = static_cast<int>(rng() % 90), kv = static_cast<int>(rng() % 130);
        const float s = score(rng);
        float x = s;
        terms.apply([&](auto&& fn) { fn(x, q, kv); });
        const float expected = bound(s, 0, h, q, kv);
        ASSERT_NEAR(x, expected, 1e-5f * (1.f + std::fabs(expected)))
            << "parts " << parts << " h " << h << " q " << q << " kv " << kv;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 7 * 3 * 200);
}

}  // namespace
}  // namespace flashcore::detail
