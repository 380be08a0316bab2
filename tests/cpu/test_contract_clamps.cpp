// The clamps that keep device arrays which break their contract inside the tensors, on the host
// (they are host-device functions, so CI without a GPU runs them): detail::packed_rows and
// flex_sequence (cu_seqlens into the packed totals), sm80::bwd_sequence, workspace_row0 and
// workspace_row_owner (the backward's grid and workspace), detail::listed_blocks (BlockMask counts
// into their rows) and KvTileWalk::at (listed tiles outside the keys skipped). The kernels' side,
// with guard bytes around every output, is tests/gpu/test_contract_bounds.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "common/block_walk.hpp"
#include "common/flex_sequence.hpp"
#include "flashcore/flex/block_mask_host.hpp"
#include "flashcore/flex/mask_mods.hpp"
#include "sm80/bwd_params.hpp"

namespace flashcore {
namespace {

constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax = std::numeric_limits<int32_t>::max();

TEST(ContractClamps, ValidCuSeqlensPassUnchanged) {
  const std::vector<int32_t> cu{0, 3, 3, 10};
  for (int b = 0; b + 1 < static_cast<int>(cu.size()); ++b) {
    const detail::PackedRows rows = detail::packed_rows(cu.data(), b, 10);
    EXPECT_EQ(rows.start, cu[b]) << "sequence " << b;
    EXPECT_EQ(rows.length, cu[b + 1] - cu[b]) << "sequence " << b;
  }
  const detail::FlexSequence dense = detail::flex_sequence(nullptr, nullptr, 2, 17, 33);
  EXPECT_EQ(dense.q_start, 0);
  EXPECT_EQ(dense.k_start, 0);
  EXPECT_EQ(dense.seqlen_q, 17);
  EXPECT_EQ(dense.seqlen_k, 33);
}

TEST(ContractClamps, HostileCuSeqlensStayInsideThePackedRows) {
  constexpr int kTotal = 300;
  const std::vector<int32_t> cu{-150, 50, 5000, 20, 300, kMax, kMin, 299, 301};
  for (int b = 0; b + 1 < static_cast<int>(cu.size()); ++b) {
    const detail::PackedRows rows = detail::packed_rows(cu.data(), b, kTotal);
    EXPECT_GE(rows.start, 0) << "sequence " << b;
    EXPECT_GE(rows.length, 0) << "sequence " << b;
    EXPECT_LE(rows.start + rows.length, kTotal) << "sequence " << b;
  }
  // Negative: from row 0. Past the total: empty at the total. Decreasing: empty.
  EXPECT_EQ(detail::packed_rows(cu.data(), 0, kTotal).start, 0);
  EXPECT_EQ(detail::packed_rows(cu.data(), 0, kTotal).length, 50);
  EXPECT_EQ(detail::packed_rows(cu.data(), 1, kTotal).length, 250);
  EXPECT_EQ(detail::packed_rows(cu.data(), 2, kTotal).start, kTotal);
  EXPECT_EQ(detail::packed_rows(cu.data(), 2, kTotal).length, 0);
  EXPECT_EQ(detail::packed_rows(cu.data(), 3, kTotal).length, 280);
  EXPECT_EQ(detail::packed_rows(cu.data(), 7, kTotal).length, 1);
}

// A varlen backward's view of three sequences over 300 query and 320 key rows, max_seqlen 64,
// padded to 64-row blocks.
sm80::BwdParams varlen_backward(const int32_t* cu_q, const int32_t* cu_k, int batch) {
  sm80::BwdParams p{};
  p.cu_seqlens_q = cu_q;
  p.cu_seqlens_k = cu_k;
  p.batch = batch;
  p.heads_q = 2;
  p.seqlen_q = 300;
  p.seqlen_k = 320;
  p.max_seqlen_q = p.max_seqlen_k = 64;
  p.block_m = 64;
  p.seqlen_q_rounded = (p.seqlen_q + batch * p.block_m + p.block_m - 1) / p.block_m * p.block_m;
  return p;
}

TEST(ContractClamps, BackwardSequencesStayInsideItsGridAndWorkspace) {
  // Sequence 1 is longer than max_seqlen on both sides, sequence 2 starts past the totals.
  const std::vector<int32_t> cu_q{0, 10, 290, 5000}, cu_k{0, 20, 310, 9000};
  const sm80::BwdParams p = varlen_backward(cu_q.data(), cu_k.data(), 3);
  for (int b = 0; b < p.batch; ++b) {
    const detail::FlexSequence s = sm80::bwd_sequence(p, b);
    EXPECT_LE(s.seqlen_q, p.max_seqlen_q) << "sequence " << b;
    EXPECT_LE(s.seqlen_k, p.max_seqlen_k) << "sequence " << b;
    EXPECT_LE(s.q_start + s.seqlen_q, p.seqlen_q) << "sequence " << b;
    EXPECT_LE(s.k_start + s.seqlen_k, p.seqlen_k) << "sequence " << b;
    // Its workspace rows, whole blocks, lie inside the head's seqlen_q_rounded rows.
    const int64_t blocks = (s.seqlen_q + p.block_m - 1) / p.block_m;
    for (int head = 0; head < p.heads_q; ++head) {
      const int64_t row0 = sm80::workspace_row0(p, b, head);
      EXPECT_GE(row0, int64_t{head} * p.seqlen_q_rounded) << "sequence " << b;
      EXPECT_LE(row0 + blocks * p.block_m, int64_t{head + 1} * p.seqlen_q_rounded)
          << "sequence " << b << ", head " << head;
    }
  }
  EXPECT_EQ(sm80::bwd_sequence(p, 0).seqlen_q, 10);  // valid sequences are untouched
  EXPECT_EQ(sm80::bwd_sequence(p, 0).seqlen_k, 20);
  // A dense backward keeps its lengths, whatever the max_seqlen fields hold.
  sm80::BwdParams dense = p;
  dense.cu_seqlens_q = dense.cu_seqlens_k = nullptr;
  dense.max_seqlen_q = dense.max_seqlen_k = 0;
  EXPECT_EQ(sm80::bwd_sequence(dense, 1).seqlen_q, 300);
  EXPECT_EQ(sm80::bwd_sequence(dense, 1).seqlen_k, 320);
}

// The preprocess and convert kernels run a varlen batch over its workspace rows
// (sm80::workspace_row_owner): every padded row of every sequence maps back to that sequence and
// its row, and every other row of the head to none.
TEST(WorkspaceRowOwner, EachSequencesPaddedRowsAndNoOthers) {
  // Empty sequences, whole and partial blocks, one past max_seqlen_q (clamped to 64 rows).
  const std::vector<int32_t> cu_q{0, 0, 64, 65, 65, 130, 200, 300}, cu_k{0, 1, 2, 3, 4, 5, 6, 7};
  sm80::BwdParams p = varlen_backward(cu_q.data(), cu_k.data(), 7);
  p.max_seqlen_q = 70;
  std::vector<int> owner_of(static_cast<size_t>(p.seqlen_q_rounded), -1);
  std::vector<int> row_of(owner_of.size(), 0);
  for (int b = 0; b < p.batch; ++b) {
    const int64_t start = sm80::workspace_row0(p, b, 0);
    const int64_t padded =
        (int64_t{sm80::bwd_sequence(p, b).seqlen_q} + p.block_m - 1) / p.block_m * p.block_m;
    for (int64_t r = 0; r < padded; ++r) {
      ASSERT_LT(start + r, p.seqlen_q_rounded);
      ASSERT_EQ(owner_of[static_cast<size_t>(start + r)], -1) << "rows of two sequences meet";
      owner_of[static_cast<size_t>(start + r)] = b;
      row_of[static_cast<size_t>(start + r)] = static_cast<int>(r);
    }
  }
  int owned = 0;
  for (int64_t w = 0; w < p.seqlen_q_rounded; ++w) {
    const sm80::WorkspaceRowOwner owner = sm80::workspace_row_owner(p, w);
    EXPECT_EQ(owner.batch, owner_of[static_cast<size_t>(w)]) << "workspace row " << w;
    if (owner.batch >= 0) {
      ++owned;
      EXPECT_EQ(owner.row, row_of[static_cast<size_t>(w)]) << "workspace row " << w;
    }
  }
  EXPECT_EQ(owned, 64 + 64 + 128 + 128 + 128)
      << "sequences 1, 2, 4, 5 and 6 (100 rows, clamped to 70)";
}

TEST(WorkspaceRowOwner, HostileCuSeqlensOwnOnlyTheirOwnRows) {
  // Decreasing, negative and past the total: a row found is inside its sequence's padded rows,
  // which lie inside the head's workspace rows.
  const std::vector<int32_t> cu_q{0, 250, -40, 5000, 100, 100}, cu_k{0, 1, 2, 3, 4, 5};
  const sm80::BwdParams p = varlen_backward(cu_q.data(), cu_k.data(), 5);
  for (int64_t w = 0; w < p.seqlen_q_rounded; ++w) {
    const sm80::WorkspaceRowOwner owner = sm80::workspace_row_owner(p, w);
    if (owner.batch < 0) continue;
    ASSERT_LT(owner.batch, p.batch);
    const int64_t padded = (int64_t{sm80::bwd_sequence(p, owner.batch).seqlen_q} + p.block_m - 1) /
                           p.block_m * p.block_m;
    EXPECT_GE(owner.row, 0) << "workspace row " << w;
    EXPECT_LT(owner.row, padded) << "workspace row " << w;
    EXPECT_EQ(sm80::workspace_row0(p, owner.batch, 0) + owner.row, w) << "workspace row " << w;
  }
}

TEST(ContractClamps, BlockMaskCountsStayInsideTheirRows) {
  EXPECT_EQ(detail::listed_blocks(-5, 4), 0);
  EXPECT_EQ(detail::listed_blocks(0, 4), 0);
  EXPECT_EQ(detail::listed_blocks(3, 4), 3);
  EXPECT_EQ(detail::listed_blocks(4, 4), 4);
  EXPECT_EQ(detail::listed_blocks(1 << 24, 4), 4);
  EXPECT_EQ(detail::listed_blocks(kMin, 4), 0);
  // The walk of a row whose count is past the row: the row's entries, no more.
  flex::BlockMask m = flex::block_mask_shape(1, 1, 128, 256, 128, 128);
  const int32_t counts[] = {1 << 24}, indices[] = {0, 1};
  m.kv_num_blocks = counts;
  m.kv_indices = indices;
  const auto walk = detail::kv_tile_walk<64>(m, flex::NoMask{}, 0, 0, 0, 128, 256);
  EXPECT_EQ(walk.count(), 4);  // two 128-key blocks, two 64-key tiles each
}

TEST(ContractClamps, ListedTilesOutsideTheKeysAreSkipped) {
  // One query block over 256 keys in 128-key blocks (Mk 2), every entry partial: block -1, then
  // block 1, as a BlockMask that breaks its contract might list them.
  flex::BlockMask m = flex::block_mask_shape(1, 1, 128, 256, 128, 128);
  const int32_t counts[] = {2}, indices[] = {-1, 1};
  m.kv_num_blocks = counts;
  m.kv_indices = indices;
  const flex::NoMask none;
  const auto walk = detail::kv_tile_walk<64>(m, none, 0, 0, 0, 128, 256);
  ASSERT_EQ(walk.count(), 4);
  for (int i = 0; i < 2; ++i) {  // block -1: tiles -2 and -1
    EXPECT_LT(walk.tile_index(i), 0);
    EXPECT_EQ(walk.at(i, none, 0, 0, 0, 128, 256).masking, detail::TileMasking::kSkip) << i;
  }
  for (int i = 2; i < 4; ++i) {  // block 1: tiles 2 and 3, inside the keys
    EXPECT_EQ(walk.at(i, none, 0, 0, 0, 128, 256).masking, detail::TileMasking::kPartial) << i;
  }
  for (int32_t index : {2, 1 << 20}) {  // Mk and far past it
    const int32_t past[] = {index, 0};
    m.kv_indices = past;
    const auto walk_past = detail::kv_tile_walk<64>(m, none, 0, 0, 0, 128, 256);
    EXPECT_EQ(walk_past.at(0, none, 0, 0, 0, 128, 256).masking, detail::TileMasking::kSkip)
        << "block " << index;
    EXPECT_EQ(walk_past.at(2, none, 0, 0, 0, 128, 256).masking, detail::TileMasking::kPartial)
        << "block 0 after block " << index;
  }
}

}  // namespace
}  // namespace flashcore
