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
// varlen batch are not split.
AttentionParams decode_params(int64_t seqlen_k) {
  AttentionParams p = flex_params();
  p.seqlen_q = 1;
  p.seqlen_k = seqlen_k;
  p.q.strides = p.o.strides = bshd_strides(1, 4, 128);
  p.k.strides = p.v.strides = bshd_strides(seqlen_k, 2, 128);
  return p;
}

// The sm80 flex tile's keys per KV tile and resident CTAs per SM (sm80::kFlexBlockKV and
// FlexTileConfig<128>::kMinCtasPerSm, in device headers this host test cannot include).
constexpr int64_t kFlexKeyTile = 64, kFlexCtasPerSm = 2;

int splits_of(const AttentionParams& p) {
  return detail::sm80_flex_splits(detail::make_problem(p), hopper());
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

}  // namespace
}  // namespace flashcore
