// Split-KV of the sm80 flex kernel before any launch: how many splits a problem gets
// (sm80_flex_splits) and which problems auto leaves to it on an sm_90 GPU
// (sm90_flex_auto_declines). No GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "api/backend_registry.hpp"
#include "common/problem.hpp"
#include "common/pruning.hpp"
#include "flashcore/attention.hpp"
#include "sm80/flex_fwd.hpp"
#include "sm80/split_kv.hpp"
#include "sm90/flex_fwd.hpp"
#include "tests/cpu/flex_params_fixture.hpp"

namespace flashcore {
namespace {

using namespace flex_fixture;

// Split-KV of the sm80 flex kernel (flash-decoding). A decode grid, B2 x Hq4 query tiles of one
// row, is split until it fills the GPU's resident CTA slots once, with at least two KV tiles a
// split; a count the caller asks for is taken; a grid that fills the GPU, keys of one tile and a
// varlen batch are not split. heads_kv: 4 (one query head per kv head) or fewer (GQA).
AttentionParams decode_params(int64_t seqlen_k, int64_t heads_kv = 4) {
  AttentionParams p = flex_params();
  p.seqlen_q = 1;
  p.seqlen_k = seqlen_k;
  p.heads_kv = heads_kv;
  p.q.strides = p.o.strides = bshd_strides(1, 4, 128);
  p.k.strides = p.v.strides = bshd_strides(seqlen_k, heads_kv, 128);
  return p;
}

// The sm80 flex tile's keys per KV tile and resident CTAs per SM (sm80::kFlexBlockKV and
// FlexTileConfig<128>::kMinCtasPerSm, in device headers this host test cannot include).
constexpr int64_t kFlexKeyTile = 64, kFlexCtasPerSm = 2;

int splits_of(const AttentionParams& p) {
  return detail::sm80_flex_splits(detail::make_problem(p), hopper());
}
bool packs(const AttentionParams& p, bool builtin_mask = true) {
  return detail::sm80_flex_packs_heads(detail::make_problem(p), builtin_mask);
}

TEST(FlexSplitKv, Sm80SplitsTheKeysOfGridsThatLeaveSmsIdle) {
  if (const char* why = detail::pruned_reason(DType::kBFloat16, 128); why[0] != '\0') {
    GTEST_SKIP() << "sm80 flex split test skipped: " << why;
  }
  const AttentionParams decode = decode_params(8192);
  const int splits = splits_of(decode);
  const int64_t query_tiles = decode.batch * decode.heads_q;
  const int64_t key_tiles = 8192 / kFlexKeyTile;
  EXPECT_GT(splits, 1);
  EXPECT_LE(splits * query_tiles, kFlexCtasPerSm * 132);
  EXPECT_GE(key_tiles / splits, sm80::kMinBlocksPerSplit);
  EXPECT_STREQ(
      detail::find_backend(Backend::kSm80)->rejects(detail::make_problem(decode), hopper()), "");

  AttentionParams asked = decode;
  asked.num_splits = 3;
  EXPECT_EQ(splits_of(asked), 3);
  EXPECT_EQ(splits_of(decode_params(kFlexKeyTile)), 1);  // one key tile
  AttentionParams full = decode;
  full.batch = 64;  // 256 query tiles
  EXPECT_EQ(splits_of(full), 1);
  AttentionParams varlen = decode;
  varlen.cu_seqlens_q = varlen.cu_seqlens_k = reinterpret_cast<const int32_t*>(fake(10));
  varlen.max_seqlen_q = 1;
  varlen.max_seqlen_k = 8192;
  EXPECT_EQ(splits_of(varlen), 1);
}

// Auto leaves a decode grid (one query tile per (batch, head), under half as many as SMs) to the
// sm80 split; the sm90 flex kernel keeps longer queries, full grids and an unsplit request.
TEST(FlexSplitKv, AutoLeavesDecodeGridsToTheSm80Split) {
  if (!sm90_in_build()) GTEST_SKIP() << "sm90 flex test skipped: this build has no sm_90a";
  const auto declines = [](const AttentionParams& p) {
    return std::string(detail::sm90_flex_auto_declines(detail::make_problem(p), hopper()));
  };
  const AttentionParams decode = decode_params(8192);
  EXPECT_NE(declines(decode).find("sm80 flex kernel"), std::string::npos) << declines(decode);
  AttentionParams unsplit = decode;
  unsplit.num_splits = 1;
  AttentionParams full = decode;
  full.batch = 64;
  for (const AttentionParams& p : {flex_params(), unsplit, full, decode_params(64)}) {
    EXPECT_EQ(declines(p), "") << "B" << p.batch << " Sq" << p.seqlen_q << " Sk" << p.seqlen_k;
  }
}

// Decode under GQA: the sm80 flex kernel packs a kv head's query heads into one tile's rows
// (sm80/flex_view.hpp), so its grid is B x Hkv tiles and the split fills the GPU with those. Only
// where every packed row walks the same key blocks: one query row, the built-in mask, no BlockMask
// or one broadcast over heads, not varlen. Auto leaves every such problem to it, full grids too
// (the sm90 kernel reads K/V once per query head), unless one split is asked for.
TEST(FlexSplitKv, Sm80PacksTheQueryHeadsOfAGqaDecode) {
  if (const char* why = detail::pruned_reason(DType::kBFloat16, 128); why[0] != '\0') {
    GTEST_SKIP() << "sm80 flex packing test skipped: " << why;
  }
  const AttentionParams gqa = decode_params(8192, /*heads_kv=*/2);
  EXPECT_TRUE(packs(gqa));
  const int splits = splits_of(gqa);
  const int64_t packed_tiles = gqa.batch * gqa.heads_kv;
  EXPECT_GT(splits * packed_tiles, kFlexCtasPerSm * 132 / 2);  // counted as packed, not B x Hq
  EXPECT_LE(splits * packed_tiles, kFlexCtasPerSm * 132);
  AttentionParams broadcast = gqa;
  broadcast.flex.block_mask = block_mask_for(gqa);
  EXPECT_TRUE(packs(broadcast));

  EXPECT_FALSE(packs(decode_params(8192)));          // one query head per kv head
  EXPECT_FALSE(packs(gqa, /*builtin_mask=*/false));  // a mask_mod of one's own may read h
  AttentionParams per_head = broadcast;
  per_head.flex.block_mask.heads = gqa.heads_q;
  EXPECT_FALSE(packs(per_head));
  AttentionParams chunk = gqa;
  chunk.seqlen_q = 2;
  chunk.q.strides = chunk.o.strides = bshd_strides(2, 4, 128);
  EXPECT_FALSE(packs(chunk));
  AttentionParams varlen = gqa;
  varlen.cu_seqlens_q = varlen.cu_seqlens_k = reinterpret_cast<const int32_t*>(fake(10));
  varlen.max_seqlen_q = 1;
  varlen.max_seqlen_k = 8192;
  EXPECT_FALSE(packs(varlen));

  if (!sm90_in_build()) GTEST_SKIP() << "sm90 flex routing test skipped: this build has no sm_90a";
  const auto declines = [](const AttentionParams& p, bool builtin_mask = true) {
    return std::string(
        detail::sm90_flex_auto_declines(detail::make_problem(p), hopper(), builtin_mask));
  };
  AttentionParams full = gqa;
  full.batch = 256;  // 512 packed tiles, more than the SMs
  EXPECT_NE(declines(full).find("packs"), std::string::npos) << declines(full);
  EXPECT_EQ(declines(full, /*builtin_mask=*/false), "");
  AttentionParams unsplit = gqa;
  unsplit.num_splits = 1;
  EXPECT_EQ(declines(unsplit), "");
}

}  // namespace
}  // namespace flashcore
