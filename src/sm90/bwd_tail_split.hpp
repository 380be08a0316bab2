// The last tiles of a persistent sm90 backward (bwd_kernel.cuh, bwd256_kernel.cuh) cut into
// ranges of equal length (CUTLASS's "data-parallel waves, then one stream-K wave").
//
// Why: when every tile walks the same number of steps (no causal mask, no window, not varlen),
// T tiles on P CTAs end in a wave of T mod P tiles while the other CTAs idle. B4 H16 S4096 hd128
// and B2 H16 S8192 have 2048 tiles, 15.5 waves on an H100's 132 SMs: the last wave is half empty
// for one tile's time, 3% of the kernel (ncu: SMs active 97% of the cycles), and cuDNN's main
// kernel was 3-5% faster on exactly those shapes. Here the first T - (T mod P) - P tiles run whole
// as before, and the steps of the remaining T mod P + P tiles, laid end to end, are cut into P
// ranges of equal length, one unit of work each: every CTA ends within a step or two of the others.
//
// A range covers pieces: the tail of one tile, whole tiles, the head of another. A piece that is a
// whole tile stores its dK and dV as before. The pieces of a split tile each add their partial dK
// and dV to the tile's fp32 slot in the workspace and count themselves in its arrival counter; the
// piece that arrives last loads the sums and stores them (bwd_key_grad_fixup.hpp). Deterministic
// mode never splits: its dQ turns need each tile's walk in one CTA, in order.
//
// Piece numbers (what the producer hands the other roles): a whole tile before the split is its
// tile number; a piece of the split tiles is whole_tiles + its first step, counted over the split
// tiles' steps laid end to end; whole_tiles + split_steps ends the schedule.
#pragma once

#include <cstdint>

#include "flashcore/mask.hpp"  // FLASHCORE_HOST_DEVICE

namespace flashcore::sm90 {

struct BwdPiece {
  int tile;        // bwd_tile_order.hpp's tile number
  int first_step;  // the first step of the tile's walk it runs
  int steps;       // how many; kWholeWalk: all of the tile's walk
  int pieces;      // how many pieces the tile is cut into (1: it is whole)
  int slot;        // a cut tile's slot of partial sums and arrival counter

  static constexpr int kWholeWalk = -1;
};

struct BwdTailSplit {
  // Ranges shorter than this are not worth their fixup: a cut tile's partial dK and dV go out to
  // L2 and come back (2 x 128 keys x 128 dims of fp32 each way at hd128), about one step's time.
  static constexpr int kMinRangeSteps = 8;

  int whole_tiles;  // units [0, whole_tiles) are tiles [0, whole_tiles), each run whole
  int tile_steps;   // the walk length every tile shares (when split_steps > 0)
  int range_steps;  // steps per range (the last range may be shorter)
  int split_steps;  // the split tiles' steps end to end; 0: nothing is split

  // num_tiles tiles on ctas CTAs; tile_steps: every tile's walk length, or 0 when tiles differ.
  FLASHCORE_HOST_DEVICE static BwdTailSplit of(int num_tiles, int tile_steps, int ctas) {
    const BwdTailSplit whole{num_tiles, tile_steps, 0, 0};
    if (tile_steps <= 0 || ctas <= 1 || num_tiles % ctas == 0) return whole;
    // The partly full last wave and the full wave before it (there is none below P tiles).
    const int split_tiles = num_tiles % ctas + (num_tiles >= ctas ? ctas : 0);
    const int64_t steps = int64_t{split_tiles} * tile_steps;
    const int64_t range = (steps + ctas - 1) / ctas;
    // Piece numbers are ints (whole_tiles + split_steps ends them).
    if (range < kMinRangeSteps || steps + num_tiles > INT32_MAX) return whole;
    return {num_tiles - split_tiles, tile_steps, static_cast<int>(range), static_cast<int>(steps)};
  }

  // The tiles it schedules, whole or cut (the tile order's count: the launch checks them equal).
  FLASHCORE_HOST_DEVICE int num_tiles() const {
    return whole_tiles + (split_steps == 0 ? 0 : split_steps / tile_steps);
  }
  FLASHCORE_HOST_DEVICE int ranges() const {
    return split_steps == 0 ? 0 : (split_steps + range_steps - 1) / range_steps;
  }
  // Units of work a CTA takes from the counter: whole tiles, then ranges.
  FLASHCORE_HOST_DEVICE int num_units() const { return whole_tiles + ranges(); }
  // Slots of partial sums (and arrival counters) the workspace needs: a cut tile's slot is the
  // range its first step lies in, and no two cut tiles start in the same range (a tile that starts
  // in a range before another one does ends in that range too, uncut).
  FLASHCORE_HOST_DEVICE int slots() const { return ranges(); }
  FLASHCORE_HOST_DEVICE int end_piece() const { return whole_tiles + split_steps; }

  // The pieces of unit (0 past the last unit) and the number of its k-th piece, in walk order.
  FLASHCORE_HOST_DEVICE int pieces_of_unit(int unit) const {
    if (unit < whole_tiles) return 1;
    const int range = unit - whole_tiles;
    if (range >= ranges()) return 0;
    const int begin = range * range_steps;
    const int end = range_end(begin);
    return (end - 1) / tile_steps - begin / tile_steps + 1;
  }
  FLASHCORE_HOST_DEVICE int piece_of_unit(int unit, int k) const {
    if (unit < whole_tiles) return unit;
    const int begin = (unit - whole_tiles) * range_steps;
    return whole_tiles + (k == 0 ? begin : (begin / tile_steps + k) * tile_steps);
  }

  // Piece number id (< end_piece()).
  FLASHCORE_HOST_DEVICE BwdPiece piece(int id) const {
    if (id < whole_tiles) return {id, 0, BwdPiece::kWholeWalk, 1, 0};
    const int first = id - whole_tiles;
    const int tile = first / tile_steps;
    const int tile_begin = tile * tile_steps;
    const int tile_end = tile_begin + tile_steps;
    const int end = range_end(first) < tile_end ? range_end(first) : tile_end;
    // Range boundaries strictly inside the tile cut it.
    const int cuts = (tile_end - 1) / range_steps - tile_begin / range_steps;
    return {whole_tiles + tile, first - tile_begin, end - first, cuts + 1,
            tile_begin / range_steps};
  }

 private:
  // The end of the range that step (of the split steps) lies in.
  FLASHCORE_HOST_DEVICE int range_end(int step) const {
    const int end = (step / range_steps + 1) * range_steps;
    return end < split_steps ? end : split_steps;
  }
};

// A launch's split and where its cut tiles' slots lie in the workspace (zeroed with the dQ
// accumulators; null when nothing is cut).
struct BwdTail {
  BwdTailSplit split;
  float* key_grad_partials;  // per slot, the fp32 partial sums of a cut tile's dK and dV
  int* key_grad_arrivals;    // per slot, how many of the tile's pieces have added theirs
};

}  // namespace flashcore::sm90
