// The flex kernels' shared case list (tests/gpu/test_flex_sm80.cpp and test_flex_sm90.cpp run
// every case on their backend): every built-in mod and combinations, BlockMasks (built from the
// mask, and random ones with empty rows and unsorted lists), partial tail blocks, document
// boundaries inside blocks, fully masked rows, sinks, GQA, head dims 64 / 128 / 256 and rounded
// ones, varlen batches with lengths 0, 1, 7 and long sequences, grids of more tiles than SMs, and
// decode grids whose keys the sm80 kernel splits.
#include <string>
#include <utility>
#include <vector>

#include "tests/support/flex_case.hpp"

namespace flashcore::testing {

FlexCase make_flex_case(std::string name, void (*edit)(FlexCase&)) {
  FlexCase c;
  c.name = std::move(name);
  edit(c);
  return c;
}

std::vector<FlexCase> flex_cases() {
  std::vector<FlexCase> cases = {
      make_flex_case("sinks_only_fp16",
                     [](FlexCase& c) { c.dtype = DType::kFloat16, c.sinks = true; }),
      make_flex_case("sinks_causal_gqa",
                     [](FlexCase& c) {
                       c.sinks = true, c.causal = true, c.heads_q = 4, c.heads_kv = 1,
                       c.seqlen_q = 200;
                       c.seqlen_k = 200;
                     }),
      make_flex_case("documents",
                     [](FlexCase& c) { c.doc_span = 40, c.seqlen_q = c.seqlen_k = 300; }),
      make_flex_case("documents_causal_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.doc_span = 40, c.causal = true, c.batch = 2;
                       c.seqlen_q = c.seqlen_k = 257;
                     }),
      // Documents longer than a tile: most partial tiles (the causal diagonal) lie inside one
      // document, where the kernels skip the per-column id compares (flex_builtin.hpp's
      // one_document), and the others straddle a boundary.
      make_flex_case("documents_longer_than_tiles_causal",
                     [](FlexCase& c) {
                       c.doc_span = 300, c.causal = true, c.batch = 2;
                       c.seqlen_q = c.seqlen_k = 1000, c.block_mask = BlockMaskKind::kFromMask;
                     }),
      // Ids that recur in documents apart: a tile whose rows and keys lie in different documents
      // of one id is all visible (the mask compares ids), with and without a BlockMask.
      make_flex_case(
          "documents_recurring_ids",
          [](FlexCase& c) { c.doc_span = 150, c.doc_id_cycle = 2, c.seqlen_q = c.seqlen_k = 777; }),
      make_flex_case("documents_recurring_ids_cross_gqa_hd64",
                     [](FlexCase& c) {
                       c.doc_span = 200, c.doc_id_cycle = 3, c.seqlen_q = 500, c.seqlen_k = 900;
                       c.head_dim = 64, c.heads_q = 4, c.heads_kv = 2;
                       c.block_mask = BlockMaskKind::kFromMask, c.q_block = c.kv_block = 64;
                     }),
      // Separate q and k documents: queries whose document has no key are fully masked rows.
      make_flex_case("documents_cross_masked_rows",
                     [](FlexCase& c) { c.doc_span = 20, c.seqlen_q = 150, c.seqlen_k = 190; }),
      make_flex_case("prefix_lm",
                     [](FlexCase& c) { c.prefix = 150, c.seqlen_q = c.seqlen_k = 300; }),
      make_flex_case("alibi_causal_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.alibi = true, c.causal = true, c.heads_q = 4;
                       c.heads_kv = 2, c.seqlen_q = 100, c.seqlen_k = 260;
                     }),
      make_flex_case("relative_bias",
                     [](FlexCase& c) { c.bias_distance = 300, c.seqlen_q = c.seqlen_k = 300; }),
      make_flex_case("relative_bias_clipped",
                     [](FlexCase& c) { c.bias_distance = 17, c.seqlen_k = 333; }),
      make_flex_case("alibi_softcap_window",
                     [](FlexCase& c) {
                       c.alibi = true, c.softcap = 5.f, c.window_left = 70, c.window_right = 10;
                       c.seqlen_q = c.seqlen_k = 320;
                     }),
      make_flex_case("everything_hd64",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.doc_span = 60, c.causal = true, c.alibi = true,
                       c.bias_distance = 64;
                       c.softcap = 8.f, c.sinks = true, c.seqlen_q = c.seqlen_k = 300,
                       c.heads_q = 4;
                     }),
      make_flex_case("rounded_hd40_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.head_dim = 40, c.alibi = true, c.seqlen_q = 90;
                       c.seqlen_k = 150;
                     }),
      make_flex_case("rounded_hd96",
                     [](FlexCase& c) { c.head_dim = 96, c.prefix = 40, c.seqlen_q = 130; }),
      // BlockMasks: from the mask (tails partial or full, 64/128 blocks), and random lists.
      make_flex_case("block_mask_causal_documents_128",
                     [](FlexCase& c) {
                       c.doc_span = 50, c.causal = true, c.block_mask = BlockMaskKind::kFromMask;
                       c.seqlen_q = c.seqlen_k = 300;
                     }),
      make_flex_case("block_mask_documents_64_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.doc_span = 30,
                       c.block_mask = BlockMaskKind::kFromMask;
                       c.q_block = c.kv_block = 64, c.seqlen_q = 250, c.seqlen_k = 250, c.batch = 2;
                     }),
      make_flex_case("block_mask_q64_kv128_window",
                     [](FlexCase& c) {
                       c.window_left = 100, c.window_right = 0,
                       c.block_mask = BlockMaskKind::kFromMask;
                       c.q_block = 64, c.kv_block = 128, c.seqlen_q = 200, c.seqlen_k = 333;
                     }),
      make_flex_case("block_mask_random_empty_rows",
                     [](FlexCase& c) {
                       c.block_mask = BlockMaskKind::kRandom, c.q_block = 64, c.kv_block = 64;
                       c.seqlen_q = 300, c.seqlen_k = 270, c.doc_span = 25;
                     }),
      make_flex_case("block_mask_random_sinks_gqa_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.block_mask = BlockMaskKind::kRandom,
                       c.sinks = true;
                       c.heads_q = 4, c.heads_kv = 2, c.seqlen_q = 260, c.seqlen_k = 400,
                       c.alibi = true;
                     }),
      // Varlen: lengths 0, 1, 7 and a long sequence, k lengths of their own (one empty).
      make_flex_case("varlen",
                     [](FlexCase& c) {
                       c.lengths_q = {0, 1, 7, 700}, c.lengths_k = {5, 1, 7, 650};
                     }),
      make_flex_case(
          "varlen_causal_gqa_softcap_fp16",
          [](FlexCase& c) {
            c.dtype = DType::kFloat16, c.causal = true, c.softcap = 10.f, c.heads_q = 6;
            c.heads_kv = 2, c.lengths_q = {7, 0, 1, 513, 64}, c.lengths_k = {7, 3, 0, 513, 200};
          }),
      make_flex_case("varlen_window_alibi_sinks_hd64",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.window_left = 50, c.window_right = 0, c.alibi = true,
                       c.sinks = true;
                       c.lengths_q = {1, 7, 300, 0}, c.lengths_k = {1, 9, 300, 4};
                     }),
      make_flex_case("varlen_prefix_lm",
                     [](FlexCase& c) {
                       c.prefix = 100, c.lengths_q = {200, 7, 1}, c.lengths_k = {200, 7, 1};
                     }),
      // Many tiles per CTA (more tiles than SMs: the persistent kernels' tile rings and the
      // dynamic schedule wrap around), documents with boundaries inside blocks, a causal
      // BlockMask with tail blocks.
      make_flex_case("many_tiles_causal_documents_hd64",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.batch = 3, c.heads_q = 16, c.heads_kv = 4;
                       c.seqlen_q = c.seqlen_k = 520, c.doc_span = 90, c.causal = true;
                       c.block_mask = BlockMaskKind::kFromMask;
                     }),
      make_flex_case("many_tiles_varlen_causal",
                     [](FlexCase& c) {
                       c.causal = true, c.heads_q = 8, c.heads_kv = 8;
                       c.lengths_q = {0, 1, 7, 1100, 130, 0, 900, 250, 129, 128, 64, 1000, 3};
                       c.lengths_k = c.lengths_q;
                     }),
      // The same batch with mods (the flex kernel): more tiles than SMs, most sequences shorter
      // than the longest, so sm90's producer takes its tiles from the varlen tile list through the
      // dynamic counter (src/sm90/varlen_tiles.hpp).
      make_flex_case("many_tiles_varlen_causal_alibi_gqa",
                     [](FlexCase& c) {
                       c.causal = true, c.alibi = true, c.heads_q = 8, c.heads_kv = 2;
                       c.lengths_q = {0, 1, 7, 1100, 130, 0, 900, 250, 129, 128, 64, 1000, 3};
                       c.lengths_k = c.lengths_q;
                     }),
      // Head dims above 128: the hd256 kernels (sm80's 64-row tiles, sm90's 64-key tiles), on
      // which 160 and 192 run zero-filled. BlockMasks of 64 and of 128 query rows (a tile then
      // lies inside a block), tails.
      make_flex_case("hd256_varlen_causal_gqa_softcap",
                     [](FlexCase& c) {
                       c.head_dim = 256, c.causal = true, c.softcap = 10.f, c.heads_q = 4;
                       c.heads_kv = 2, c.lengths_q = {0, 1, 7, 700}, c.lengths_k = {5, 1, 7, 650};
                     }),
      make_flex_case("hd256_block_mask_causal_documents_64",
                     [](FlexCase& c) {
                       c.head_dim = 256, c.doc_span = 50, c.causal = true;
                       c.block_mask = BlockMaskKind::kFromMask, c.q_block = c.kv_block = 64;
                       c.seqlen_q = c.seqlen_k = 300, c.batch = 2;
                     }),
      make_flex_case("hd256_block_mask_random_q128_kv64_alibi_sinks_gqa",
                     [](FlexCase& c) {
                       c.head_dim = 256, c.block_mask = BlockMaskKind::kRandom, c.q_block = 128;
                       c.kv_block = 64, c.alibi = true, c.sinks = true, c.heads_q = 4;
                       c.heads_kv = 1, c.seqlen_q = 260, c.seqlen_k = 400;
                     }),
      make_flex_case("hd192_block_mask_documents_alibi_softcap_gqa",
                     [](FlexCase& c) {
                       c.head_dim = 192, c.doc_span = 40, c.alibi = true, c.softcap = 5.f;
                       c.block_mask = BlockMaskKind::kFromMask, c.heads_q = 4, c.heads_kv = 2;
                       c.seqlen_q = c.seqlen_k = 300;
                     }),
      make_flex_case("hd160_varlen_window_sinks",
                     [](FlexCase& c) {
                       c.head_dim = 160, c.window_left = 50, c.window_right = 0, c.sinks = true;
                       c.lengths_q = {1, 7, 300, 0}, c.lengths_k = {1, 9, 300, 4};
                     }),
      // Decode and short chunks: one query tile per (batch, head) over long keys, which the sm80
      // kernel splits (flash-decoding) and combines, the sink added once there. Random BlockMasks
      // leave some splits no block; documents leave some rows no key.
      make_flex_case("decode_sinks_window_gqa",
                     [](FlexCase& c) {
                       c.seqlen_q = 1, c.seqlen_k = 4097, c.heads_q = 8, c.heads_kv = 2;
                       c.causal = true, c.window_left = 1000, c.window_right = 0, c.sinks = true;
                     }),
      make_flex_case("decode_documents_alibi_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.seqlen_q = 7, c.seqlen_k = 3000, c.batch = 2;
                       c.doc_span = 400, c.alibi = true;
                     }),
      make_flex_case("decode_block_mask_random_sinks_hd64",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.seqlen_q = 1, c.seqlen_k = 5000, c.sinks = true;
                       c.block_mask = BlockMaskKind::kRandom, c.q_block = 128, c.kv_block = 128;
                     }),
      make_flex_case("chunk_prefix_lm_softcap",
                     [](FlexCase& c) {
                       c.seqlen_q = 127, c.seqlen_k = 1000, c.prefix = 600, c.softcap = 10.f;
                       c.heads_q = 4, c.heads_kv = 1;
                     }),
      make_flex_case("decode_five_splits_hd256_alibi",
                     [](FlexCase& c) {
                       c.head_dim = 256, c.seqlen_q = 3, c.seqlen_k = 1000, c.alibi = true;
                       c.sinks = true, c.num_splits = 5;
                     }),
      // Decode under GQA, which the sm80 kernel packs (a kv head's query heads as a tile's rows):
      // per-head slopes, bias rows and sinks on the packed rows, groups of 3 to 32 heads (two
      // warps' rows, a quarter of the hd256 tile's), a BlockMask broadcast over heads.
      make_flex_case("decode_gqa_alibi_bias_sinks",
                     [](FlexCase& c) {
                       c.seqlen_q = 1, c.seqlen_k = 3001, c.batch = 2, c.heads_q = 8,
                       c.heads_kv = 2;
                       c.causal = true, c.alibi = true, c.bias_distance = 300, c.sinks = true;
                     }),
      make_flex_case("decode_gqa_documents_prefix_broadcast_block_mask_fp16",
                     [](FlexCase& c) {
                       c.dtype = DType::kFloat16, c.seqlen_q = 1, c.seqlen_k = 2500, c.batch = 2;
                       c.heads_q = 12, c.heads_kv = 3, c.doc_span = 300, c.prefix = 100;
                       c.block_mask = BlockMaskKind::kFromMask, c.block_mask_broadcast = true;
                     }),
      make_flex_case("decode_gqa16_hd256_softcap_window_sinks",
                     [](FlexCase& c) {
                       c.head_dim = 256, c.seqlen_q = 1, c.seqlen_k = 1500, c.heads_q = 32;
                       c.heads_kv = 2, c.softcap = 20.f, c.causal = true, c.window_left = 700;
                       c.window_right = 0, c.sinks = true;
                     }),
      make_flex_case("decode_gqa3_hd64_random_broadcast_block_mask",
                     [](FlexCase& c) {
                       c.head_dim = 64, c.seqlen_q = 1, c.seqlen_k = 4097, c.heads_q = 6;
                       c.heads_kv = 2, c.block_mask = BlockMaskKind::kRandom, c.kv_block = 64;
                       c.block_mask_broadcast = true, c.alibi = true, c.num_splits = 3;
                     }),
      make_flex_case("decode_gqa32_alibi_sinks",
                     [](FlexCase& c) {
                       c.seqlen_q = 1, c.seqlen_k = 777, c.heads_q = 64, c.heads_kv = 2;
                       c.alibi = true, c.sinks = true;
                     }),
  };
  return cases;
}

}  // namespace flashcore::testing
