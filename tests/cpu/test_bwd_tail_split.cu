// The sm90 backwards' tail split (src/sm90/bwd_tail_split.hpp): every step of every tile run by
// exactly one piece, pieces in walk order within their unit, ranges of equal length, a distinct
// slot for each cut tile, and no split where it would not pay.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/backward_problem.hpp"
#include "flashcore/backward.hpp"
#include "sm80/bwd_workspace.hpp"
#include "sm90/bwd_tail_split.hpp"
#include "sm90/bwd_tile_order.hpp"
#include "sm90/sm90_bwd.hpp"

namespace flashcore {
namespace {

using sm90::BwdPiece;
using sm90::BwdTailSplit;

// Expands every unit into its pieces, as the producer warp does, and checks the schedule's
// promises.
void expect_split_covers(const BwdTailSplit& split, int num_tiles, int tile_steps, int ctas) {
  SCOPED_TRACE(std::to_string(num_tiles) + " tiles of " + std::to_string(tile_steps) +
               " steps on " + std::to_string(ctas) + " CTAs");
  ASSERT_GE(split.whole_tiles, 0);
  ASSERT_GT(split.split_steps, 0);
  EXPECT_EQ(split.num_tiles(), num_tiles) << "the launch checks it against the tile order's";
  EXPECT_EQ(split.whole_tiles % ctas, 0) << "whole tiles fill whole waves";
  EXPECT_EQ(split.split_steps, (num_tiles - split.whole_tiles) * tile_steps);
  EXPECT_LE(split.ranges(), ctas) << "one range per CTA at most";
  EXPECT_GE(split.range_steps, BwdTailSplit::kMinRangeSteps);
  std::vector<std::vector<int>> covered(static_cast<size_t>(num_tiles));  // per tile, per step
  for (auto& steps : covered) steps.assign(static_cast<size_t>(tile_steps), 0);
  std::map<int, int> pieces_seen;  // per cut tile
  std::map<int, int> pieces_said;
  std::map<int, int> slot_of;
  std::set<int> slots;
  for (int unit = 0; unit < split.num_units(); ++unit) {
    const int pieces = split.pieces_of_unit(unit);
    ASSERT_GE(pieces, 1) << "unit " << unit;
    int unit_steps = 0;
    for (int k = 0; k < pieces; ++k) {
      const int id = split.piece_of_unit(unit, k);
      ASSERT_LT(id, split.end_piece());
      const BwdPiece piece = split.piece(id);
      ASSERT_GE(piece.tile, 0);
      ASSERT_LT(piece.tile, num_tiles);
      if (unit < split.whole_tiles) {
        EXPECT_EQ(piece.tile, unit);
        EXPECT_EQ(piece.steps, BwdPiece::kWholeWalk);
        EXPECT_EQ(piece.pieces, 1);
        for (int& seen : covered[static_cast<size_t>(piece.tile)]) ++seen;
        continue;
      }
      EXPECT_GE(piece.tile, split.whole_tiles);
      ASSERT_GT(piece.steps, 0) << "piece " << id;
      ASSERT_LE(piece.first_step + piece.steps, tile_steps) << "piece " << id;
      if (k > 0) {
        EXPECT_EQ(piece.first_step, 0) << "a unit's later pieces start their tile";
      }
      if (k + 1 < pieces) {
        EXPECT_EQ(piece.first_step + piece.steps, tile_steps) << "and its earlier ones end theirs";
      }
      unit_steps += piece.steps;
      for (int s = piece.first_step; s < piece.first_step + piece.steps; ++s) {
        ++covered[static_cast<size_t>(piece.tile)][static_cast<size_t>(s)];
      }
      if (piece.pieces > 1) {
        ++pieces_seen[piece.tile];
        pieces_said[piece.tile] = piece.pieces;
        if (slot_of.count(piece.tile) == 0) {
          slot_of[piece.tile] = piece.slot;
          EXPECT_TRUE(slots.insert(piece.slot).second) << "slot " << piece.slot << " shared";
        }
        EXPECT_EQ(slot_of[piece.tile], piece.slot) << "a cut tile's pieces share one slot";
        EXPECT_GE(piece.slot, 0);
        EXPECT_LT(piece.slot, split.slots());
      } else {
        EXPECT_EQ(piece.steps, tile_steps) << "an uncut piece is its whole tile";
      }
    }
    if (unit >= split.whole_tiles) {
      // Every range has range_steps steps but the last, which has the rest.
      if (unit + 1 < split.num_units()) {
        EXPECT_EQ(unit_steps, split.range_steps) << "unit " << unit;
      } else {
        EXPECT_LE(unit_steps, split.range_steps);
      }
    }
  }
  EXPECT_EQ(split.pieces_of_unit(split.num_units()), 0) << "past the last unit";
  for (int tile = 0; tile < num_tiles; ++tile) {
    for (int s = 0; s < tile_steps; ++s) {
      ASSERT_EQ(covered[static_cast<size_t>(tile)][static_cast<size_t>(s)], 1)
          << "tile " << tile << " step " << s;
    }
  }
  for (const auto& [tile, seen] : pieces_seen) {
    EXPECT_EQ(seen, pieces_said[tile]) << "tile " << tile << "'s arrivals";
  }
}

TEST(BwdTailSplit, CutsTheLastWaveAndAHalfIntoEqualRanges) {
  // B4 H16 S4096 hd128 (and B2 S8192): 2048 tiles of 64 query blocks on 132 SMs.
  const BwdTailSplit split = BwdTailSplit::of(2048, 64, 132);
  EXPECT_EQ(split.whole_tiles, 2048 - (2048 % 132) - 132);
  EXPECT_EQ(split.ranges(), 132);
  expect_split_covers(split, 2048, 64, 132);
  // GQA walks (several query heads a tile), odd counts, fewer tiles than CTAs (pieces of many
  // cuts per tile), a last range shorter than the others.
  const int cases[][3] = {{165, 32, 132}, {48, 32, 132},  {7, 200, 132}, {300, 17, 114},
                          {133, 9, 132},  {1, 2000, 132}, {5, 1000, 7}};
  for (const auto& c : cases) {
    const BwdTailSplit s = BwdTailSplit::of(c[0], c[1], c[2]);
    expect_split_covers(s, c[0], c[1], c[2]);
  }
}

TEST(BwdTailSplit, LeavesWholeWhatWouldNotPay) {
  // Tiles of unequal walks (causal, windows, varlen: the host passes 0 steps).
  BwdTailSplit split = BwdTailSplit::of(2048, 0, 132);
  EXPECT_EQ(split.num_units(), 2048);
  EXPECT_EQ(split.num_tiles(), 2048);
  EXPECT_EQ(split.slots(), 0);
  // Whole waves already.
  split = BwdTailSplit::of(264, 64, 132);
  EXPECT_EQ(split.num_units(), 264);
  EXPECT_EQ(split.end_piece(), 264);
  // Ranges shorter than kMinRangeSteps.
  split = BwdTailSplit::of(200, 2, 132);
  EXPECT_EQ(split.num_units(), 200);
  EXPECT_EQ(split.slots(), 0);
  // Uncut: every unit is its tile, whole.
  for (int unit = 0; unit < split.num_units(); ++unit) {
    EXPECT_EQ(split.pieces_of_unit(unit), 1);
    const BwdPiece piece = split.piece(split.piece_of_unit(unit, 0));
    EXPECT_EQ(piece.tile, unit);
    EXPECT_EQ(piece.steps, BwdPiece::kWholeWalk);
  }
  EXPECT_EQ(split.pieces_of_unit(split.num_units()), 0);
}

// The host's plan (sm90_bwd.cu) counts the tiles the kernel's tile order walks, for dense and
// varlen problems alike (a plan from a varlen batch's packed length named tiles past the order's
// and faulted on the H100), and cuts only problems of equal walks.
TEST(BwdTailSplit, HostPlanCountsTheTileOrdersTiles) {
  struct Case {
    const char* name;
    int64_t batch, seqlen, heads_q, heads_kv, head_dim;
    bool causal, deterministic, varlen;
    bool cut;  // on 132 CTAs
  };
  const Case cases[] = {
      {"hd128 B4 H16 S4096", 4, 4096, 16, 16, 128, false, false, false, true},
      {"hd128 B4 H16 S4096 causal", 4, 4096, 16, 16, 128, true, false, false, false},
      {"hd128 deterministic", 4, 4096, 16, 16, 128, false, true, false, false},
      {"hd64 B2 H32 S8192", 2, 8192, 32, 32, 64, false, false, false, true},
      {"hd256 GQA", 2, 4097, 10, 5, 256, false, false, false, true},
      {"hd128 B1 H4 S4224: 132 tiles, one whole wave", 1, 4224, 4, 4, 128, false, false, false,
       false},
      {"varlen hd128", 3, 1000, 8, 2, 128, false, false, true, false},
      {"varlen hd64 causal", 5, 4097, 4, 4, 64, true, false, true, false},
  };
  // Varlen: lengths 600, 7000, 100 (and more sequences of 1 for the larger batch): the packed
  // total is far above the longest sequence, whose key blocks the order counts.
  const int32_t cu_seqlens[] = {0, 600, 7600, 7700, 7701, 7702};
  char workspace[1];  // the kernel view only offsets the pointer
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    BackwardParams b;
    b.batch = c.batch;
    b.heads_q = c.heads_q;
    b.heads_kv = c.heads_kv;
    b.head_dim = c.head_dim;
    b.q.dtype = DType::kBFloat16;
    b.causal = c.causal;
    b.deterministic = c.deterministic;
    b.seqlen_q = b.seqlen_k = c.seqlen;
    if (c.varlen) {
      b.cu_seqlens_q = b.cu_seqlens_k = cu_seqlens;
      b.seqlen_q = b.seqlen_k = cu_seqlens[c.batch];
      b.max_seqlen_q = b.max_seqlen_k = 7000;
    }
    const detail::BackwardProblem problem = detail::make_backward_problem(b);
    const int head_dim = static_cast<int>(c.head_dim);
    const sm80::BwdParams view = detail::backward_kernel_view(
        problem, workspace, sm90::bwd_block_m(head_dim), sm90::bwd_block_n(head_dim));
    const sm90::BwdTileOrder order = sm90::BwdTileOrder::of(view, head_dim, 2);
    for (int ctas : {1, 114, 132}) {
      const BwdTailSplit split = detail::sm90_backward_tail_split(problem, ctas);
      EXPECT_EQ(split.num_tiles(), order.num_tiles()) << ctas << " CTAs";
    }
    EXPECT_EQ(detail::sm90_backward_tail_split(problem, 132).slots() > 0, c.cut);
  }
}

}  // namespace
}  // namespace flashcore
