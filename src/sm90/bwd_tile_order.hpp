// The order in which the persistent sm90 backwards (bwd_kernel.cuh, bwd256_kernel.cuh) take their
// tiles, a tile being one key block of one (kv head, batch) pair, numbered 0 .. num_tiles - 1 in
// the order they start.
//
// Why an order of its own: under a causal mask key block n of a head sees about
// (num_n_blocks - n) query blocks, so key block 0 walks every query block and the last key block
// one. In the grid order the kernels had before they were persistent (key blocks fastest, then
// heads) the last head's key block 0 starts less than a walk before everything else ends: a tail of
// about 3% of the kernel at B4 H16 S4096 hd256 (a list-scheduling model of 132 SMs). Here key
// blocks run slowest across a section of pairs, so each section's heaviest key blocks start first
// and its lightest fill the gaps at the end (longest-processing-time-first, with the CTAs taking
// tiles from a counter as they free up). A section is the largest power of two of pairs whose Q, dO
// and dQ accumulators (what the CTAs of one pair share through L2) take at most kSectionBytes
// together, so that the CTAs running at once still hit L2 as the grid order's 2 to 4 pairs in
// flight do.
//
// Deterministic mode walks each pair's key blocks last first (sm80::key_block_of_cta's reason: at
// each query block a key block waits for the adds of the key blocks after it). Every key block a
// tile waits for then has a smaller tile number, so it was taken before it, by a CTA that runs its
// tiles in the order taken: the smallest unfinished tile always progresses.
#pragma once

#include <cstdint>

#include "sm80/bwd_params.hpp"

namespace flashcore::sm90 {

struct BwdTileOrder {
  // The L2 share a section's pairs may take (of the H100's 50 MiB).
  static constexpr int64_t kSectionBytes = int64_t{40} << 20;

  int heads_kv;
  int pairs;          // heads_kv * batch
  int section_pairs;  // pairs per section (the last one may have fewer)
  int num_n_blocks;
  bool reversed;  // deterministic mode: key blocks last first

  struct Tile {
    int n_block, kv_head, batch;
  };

  // element_bytes: the size of Q's and dO's element.
  FLASHCORE_HOST_DEVICE static BwdTileOrder of(const sm80::BwdParams& p, int head_dim,
                                               int element_bytes) {
    const int64_t pair_bytes = int64_t{p.kv_group} * p.seqlen_q_rounded * head_dim *
                               (2 * element_bytes + static_cast<int>(sizeof(float)));
    int section = 1;
    while (2 * section * pair_bytes <= kSectionBytes) section *= 2;
    return {p.heads_kv, p.heads_kv * p.batch, section, p.num_n_blocks, p.dq_semaphore != nullptr};
  }

  FLASHCORE_HOST_DEVICE int num_tiles() const { return pairs * num_n_blocks; }

  // Tile index (< num_tiles()): within its section, key blocks slowest and pairs fastest.
  FLASHCORE_HOST_DEVICE Tile tile(int index) const {
    const int first = index / (section_pairs * num_n_blocks) * section_pairs;
    const int width = section_pairs < pairs - first ? section_pairs : pairs - first;
    const int local = index - first * num_n_blocks;
    const int order = local / width;
    const int pair = first + (local - order * width);
    return {reversed ? num_n_blocks - 1 - order : order, pair % heads_kv, pair / heads_kv};
  }
};

}  // namespace flashcore::sm90
