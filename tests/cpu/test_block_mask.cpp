// BlockMask on the host: the builder's output (against brute force and against hand-derived
// answers), validation of the shape against a problem, of the contents, and of create_block_mask's
// buffer, each failure with a message that names the fix.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "flashcore/flashcore.h"
#include "flashcore/flex.hpp"

namespace flashcore::flex {
namespace {

void expect_same(const HostBlockMask& a, const HostBlockMask& b) {
  EXPECT_EQ(a.kv_num_blocks, b.kv_num_blocks);
  EXPECT_EQ(a.kv_indices, b.kv_indices);
  EXPECT_EQ(a.full_kv_num_blocks, b.full_kv_num_blocks);
  EXPECT_EQ(a.full_kv_indices, b.full_kv_indices);
}

TEST(HostBlockMask, CausalRowsListEarlierBlocksFullAndTheDiagonalPartial) {
  constexpr int64_t kBlock = 64, kSeqlen = 64 * 5 - 9;  // the last block is a tail
  const HostBlockMask m = build_block_mask_host(
      causal_mask(), block_mask_shape(1, 1, kSeqlen, kSeqlen, kBlock, kBlock));
  ASSERT_EQ(m.kv_num_blocks.size(), 5u);
  for (int32_t row = 0; row < 5; ++row) {
    EXPECT_EQ(m.full_kv_num_blocks[row], row) << row;
    for (int32_t i = 0; i < row; ++i) EXPECT_EQ(m.full_kv_indices[row * 5 + i], i);
    EXPECT_EQ(m.kv_num_blocks[row], 1) << row;
    EXPECT_EQ(m.kv_indices[row * 5], row);
  }
  EXPECT_TRUE(check_block_mask_contents(m.view()).ok());
}

TEST(HostBlockMask, SeparateBlockSizesAndBottomRightCausal) {
  // Sq 100 < Sk 300: query 0 stands at key 200. Query blocks of 64, key blocks of 128.
  const HostBlockMask m =
      build_block_mask_host(causal_mask(), block_mask_shape(1, 1, 100, 300, 64, 128));
  ASSERT_EQ(m.shape.num_q_blocks(), 2);
  ASSERT_EQ(m.shape.num_kv_blocks(), 3);
  // Rows 0..63 see keys up to 200..263: key block 0 (0..127) is full; block 1 (128..255) is
  // partial, as row 0 stops at 200; block 2 (256..299) is partial, as row 63 reaches 263.
  EXPECT_EQ(m.full_kv_num_blocks[0], 1);
  EXPECT_EQ(m.full_kv_indices[0], 0);
  EXPECT_EQ(m.kv_num_blocks[0], 2);
  EXPECT_EQ(m.kv_indices[0], 1);
  EXPECT_EQ(m.kv_indices[1], 2);
  // Rows 64..99 (a tail) see keys up to 264..299: blocks 0 and 1 full, block 2 partial.
  EXPECT_EQ(m.full_kv_num_blocks[1], 2);
  EXPECT_EQ(m.kv_num_blocks[1], 1);
  EXPECT_EQ(m.kv_indices[3], 2);
}

TEST(HostBlockMask, TailTileFullWhenEveryPairInsideTheSequencesIsVisible) {
  const HostBlockMask m = build_block_mask_host(NoMask{}, block_mask_shape(1, 1, 70, 130, 64, 64));
  // 2 x 3 tiles, the last row and column short: all full, none partial.
  for (int row = 0; row < 2; ++row) {
    EXPECT_EQ(m.full_kv_num_blocks[row], 3);
    EXPECT_EQ(m.kv_num_blocks[row], 0);
  }
}

TEST(HostBlockMask, BlockVisibilityBuildsWhatBruteForceBuilds) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> length(1, 300), doc_span(1, 40), side(-1, 90);
  const int64_t block_sizes[] = {16, 32, 64, 128};
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t sq = length(rng), sk = length(rng), batch = 2;
    const BlockMask shape =
        block_mask_shape(batch, 1, sq, sk, block_sizes[trial % 4], block_sizes[(trial / 4) % 4]);
    std::vector<int32_t> doc_q(static_cast<size_t>(batch * sq)),
        doc_k(static_cast<size_t>(batch * sk));
    for (auto* ids : {&doc_q, &doc_k}) {
      int32_t doc = 0;
      for (size_t i = 0; i < ids->size(); ++i) {
        if (static_cast<int>(i) % doc_span(rng) == 0) ++doc;
        (*ids)[i] = doc;
      }
    }
    BuiltinMask mask;
    mask.window = sliding_window_mask(side(rng), side(rng));
    if (trial % 2 == 0) mask.documents = {doc_q.data(), doc_k.data(), sq, sk};
    if (trial % 3 == 0) {
      mask.use_prefix_lm = true;
      mask.prefix_lm.prefix_length = side(rng);
      mask.window = sliding_window_mask(-1, -1);
    }
    const HostBlockMask fast = build_block_mask_host(mask, shape);
    const HostBlockMask exact =
        build_block_mask_host(mask, shape, TileClassification::kEveryElement);
    SCOPED_TRACE("trial " + std::to_string(trial) + " Sq " + std::to_string(sq) + " Sk " +
                 std::to_string(sk));
    expect_same(fast, exact);
    EXPECT_TRUE(check_block_mask_contents(fast.view()).ok());
  }
}

// A valid mask for a (2, 8, 100, 200) problem, to break one field at a time.
struct ShapeCase {
  const char* what;
  std::function<void(BlockMask&)> mutate;
  const char* message_names;
};

class BlockMaskShapeTest : public ::testing::TestWithParam<ShapeCase> {};

const std::vector<int32_t> kDummy(64, 0);

BlockMask valid_mask() {
  BlockMask m = block_mask_shape(2, 8, 100, 200, 64, 128);
  m.kv_num_blocks = kDummy.data();
  m.kv_indices = kDummy.data();
  return m;
}

TEST(BlockMaskValidation, ValidAndBroadcastMasksPass) {
  BlockMask m = valid_mask();
  EXPECT_TRUE(validate_block_mask(m, 2, 8, 100, 200).ok());
  m.batch = 1;
  m.heads = 1;
  const Status s = validate_block_mask(m, 2, 8, 100, 200);
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST_P(BlockMaskShapeTest, RejectsWithAMessageThatNamesTheFix) {
  BlockMask m = valid_mask();
  GetParam().mutate(m);
  const Status s = validate_block_mask(m, 2, 8, 100, 200);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << s.message;
  EXPECT_NE(s.message.find(GetParam().message_names), std::string::npos) << s.message;
}

const ShapeCase kShapeCases[] = {
    {"batch", [](BlockMask& m) { m.batch = 3; }, "build the mask with batch 2 or 1"},
    {"heads_kv_instead_of_heads_q", [](BlockMask& m) { m.heads = 2; }, "query heads"},
    {"seqlen", [](BlockMask& m) { m.seqlen_k = 256; }, "rebuild it with create_block_mask"},
    {"block_size", [](BlockMask& m) { m.q_block_size = 100; }, "multiple of 16"},
    {"zero_block_size", [](BlockMask& m) { m.kv_block_size = 0; }, "kv_block_size is 0"},
    {"null_indices", [](BlockMask& m) { m.kv_indices = nullptr; }, "kv_indices is null"},
    {"half_full", [](BlockMask& m) { m.full_kv_num_blocks = kDummy.data(); },
     "pass both or neither"},
    {"misaligned",
     [](BlockMask& m) {
       m.kv_indices =
           reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(kDummy.data()) + 2);
     },
     "4-byte aligned"},
    {"too_many_rows",
     [](BlockMask& m) {
       m.seqlen_q = int64_t{1} << 34;  // 2^30 query blocks, times batch 2 x heads 8
       m.q_block_size = 16;
     },
     "exceeds 2^31 - 1"},
};

INSTANTIATE_TEST_SUITE_P(BadShapes, BlockMaskShapeTest, ::testing::ValuesIn(kShapeCases),
                         [](const auto& info) { return std::string(info.param.what); });

TEST(BlockMaskContents, CatchesCountsIndicesAndDuplicates) {
  HostBlockMask good =
      build_block_mask_host(causal_mask(), block_mask_shape(1, 2, 256, 256, 64, 64));
  ASSERT_TRUE(check_block_mask_contents(good.view()).ok());
  struct Breakage {
    std::function<void(HostBlockMask&)> mutate;
    const char* message_names;
  };
  const Breakage breakages[] = {
      {[](HostBlockMask& m) { m.kv_num_blocks[1] = 5; }, "must be in [0, 4]"},
      {[](HostBlockMask& m) { m.full_kv_num_blocks[2] = -1; }, "full_kv_num_blocks of row 2 is -1"},
      {[](HostBlockMask& m) { m.kv_indices[0] = 4; }, "must be in [0, 4)"},
      {[](HostBlockMask& m) { m.kv_indices[3 * 4] = 0; }, "lists KV block 0 more than once"},
      {[](HostBlockMask& m) {
         m.kv_num_blocks[2] = 2;
         m.kv_indices[2 * 4 + 1] = 2;
       },
       "lists KV block 2 more than once"},
  };
  for (const Breakage& b : breakages) {
    HostBlockMask bad = good;
    b.mutate(bad);
    const Status s = check_block_mask_contents(bad.view());
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << b.message_names;
    EXPECT_NE(s.message.find(b.message_names), std::string::npos) << s.message;
  }
}

TEST(BlockMaskBuffer, ArraysAreDisjointAlignedAndInsideTheBuffer) {
  const BlockMask shape = block_mask_shape(3, 5, 1000, 4097, 64, 128);
  const size_t bytes = block_mask_bytes(shape);
  const int64_t rows = 3 * 5 * 16, mk = 33;
  EXPECT_GE(bytes, static_cast<size_t>(2 * rows * (1 + mk)) * sizeof(int32_t));
  alignas(16) static char buffer[1 << 20];
  ASSERT_LE(bytes, sizeof(buffer));
  BlockMask out;
  detail::BlockMaskArrays arrays;
  ASSERT_TRUE(detail::prepare_block_mask(shape, buffer, bytes, &out, &arrays).ok());
  const char* begin = buffer;
  const auto offset = [&](const int32_t* p) { return reinterpret_cast<const char*>(p) - begin; };
  EXPECT_EQ(offset(out.kv_num_blocks), 0);
  EXPECT_GE(offset(out.kv_indices), rows * 4);
  EXPECT_GE(offset(out.full_kv_num_blocks), offset(out.kv_indices) + rows * mk * 4);
  EXPECT_GE(offset(out.full_kv_indices), offset(out.full_kv_num_blocks) + rows * 4);
  EXPECT_LE(offset(out.full_kv_indices) + rows * mk * 4, static_cast<int64_t>(bytes));
  for (const int32_t* p :
       {out.kv_num_blocks, out.kv_indices, out.full_kv_num_blocks, out.full_kv_indices})
    EXPECT_EQ(offset(p) % 16, 0);
  EXPECT_EQ(arrays.kv_indices, out.kv_indices);

  const Status small = detail::prepare_block_mask(shape, buffer, bytes - 4, &out, &arrays);
  EXPECT_NE(small.message.find("block_mask_bytes"), std::string::npos) << small.message;
  const Status unaligned = detail::prepare_block_mask(shape, buffer + 4, bytes, &out, &arrays);
  EXPECT_NE(unaligned.message.find("16-byte aligned"), std::string::npos) << unaligned.message;
  EXPECT_EQ(block_mask_bytes(block_mask_shape(1, 1, 10, 10, 48 + 1, 64)), 0u);
}

TEST(BlockMaskCAbi, SizesAndErrorsBeforeAnyLaunch) {
  flashcore_mask_mod mask;
  flashcore_mask_mod_init(&mask);
  EXPECT_EQ(mask.window_left, -1);
  EXPECT_EQ(mask.window_right, -1);
  EXPECT_EQ(mask.doc_ids_q, nullptr);
  flashcore_block_mask shape{2, 4, 1000, 4097, 64, 128, nullptr, nullptr, nullptr, nullptr};
  EXPECT_EQ(flashcore_block_mask_bytes(&shape),
            block_mask_bytes(block_mask_shape(2, 4, 1000, 4097, 64, 128)));
  flashcore_block_mask out{};
  alignas(16) static char buffer[64];
  shape.kv_block_size = 50;
  EXPECT_EQ(flashcore_create_block_mask(&mask, &shape, buffer, sizeof(buffer), &out, nullptr),
            FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("multiple of 16"), std::string::npos)
      << flashcore_last_error();
  shape.kv_block_size = 128;
  mask.use_prefix_lm = 1;
  mask.window_right = 0;
  EXPECT_EQ(flashcore_create_block_mask(&mask, &shape, buffer, sizeof(buffer), &out, nullptr),
            FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("prefix-LM"), std::string::npos);
  mask.use_prefix_lm = 0;
  EXPECT_EQ(flashcore_create_block_mask(&mask, &shape, buffer, sizeof(buffer), &out, nullptr),
            FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("block_mask_bytes"), std::string::npos)
      << flashcore_last_error();
}

}  // namespace
}  // namespace flashcore::flex
