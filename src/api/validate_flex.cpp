// Validation of AttentionParams::flex (flashcore/flex/options.hpp): shapes, pointers and the
// combinations that have no meaning, before any launch and without reading a device array.
#include <cstdint>
#include <string>

#include "api/validate.hpp"
#include "common/status_message.hpp"
#include "flashcore/flex/block_mask.hpp"
#include "flashcore/varlen.hpp"

namespace flashcore::detail {
namespace {

bool misaligned(const void* data, size_t alignment) {
  return reinterpret_cast<uintptr_t>(data) % alignment != 0;
}

Status check_documents(const AttentionParams& p) {
  const flex::DocumentMask& d = p.flex.mask.documents;
  if (d.doc_ids_q == nullptr && d.doc_ids_k == nullptr) return Status::Ok();
  if (d.doc_ids_q == nullptr || d.doc_ids_k == nullptr) {
    return invalid_argument(
        "flex.mask.documents has one of doc_ids_q / doc_ids_k set; set both (the same array for "
        "self-attention, e.g. flex::document_mask(ids, seqlen))");
  }
  if (is_varlen(p)) {
    return invalid_argument(
        "flex.mask.documents is set on a varlen batch; the sequences of cu_seqlens already are "
        "the documents: drop the document mask, or pack the documents into one dense row");
  }
  if (misaligned(d.doc_ids_q, alignof(int32_t)) || misaligned(d.doc_ids_k, alignof(int32_t))) {
    return invalid_argument("flex.mask.documents ids are not 4-byte aligned; pass int32 arrays");
  }
  if (p.batch > 1 && (d.batch_stride_q < p.seqlen_q || d.batch_stride_k < p.seqlen_k)) {
    return invalid_argument(cat("flex.mask.documents batch strides (", d.batch_stride_q, ", ",
                                d.batch_stride_k, ") are below seqlen_q/k (", p.seqlen_q, ", ",
                                p.seqlen_k, "); ids are [B, S] rows, stride S when contiguous"));
  }
  return Status::Ok();
}

Status check_mods(const AttentionParams& p) {
  const flex::FlexOptions& f = p.flex;
  if (f.mask.window.left != kUnboundedWindow || f.mask.window.right != kUnboundedWindow) {
    return invalid_argument(
        "flex.mask.window is set; pass the window through causal / window_left / window_right, "
        "which the flex kernels AND into the mask_mod (and dense problems run as before)");
  }
  if (f.score_mod.softcap.cap != 0.f) {
    return invalid_argument(
        "flex.score_mod.softcap is set; pass it as softcap, which the flex kernels apply last in "
        "the score_mod (after ALiBi and the relative bias)");
  }
  if (Status s = check_documents(p); !s.ok()) return s;
  if (f.mask.use_prefix_lm) {
    if (f.mask.prefix_lm.prefix_length < 0) {
      return invalid_argument(cat("flex.mask.prefix_lm.prefix_length is ",
                                  f.mask.prefix_lm.prefix_length, "; it must be >= 0"));
    }
    if (p.causal || p.window_left != kUnboundedWindow || p.window_right != kUnboundedWindow) {
      return invalid_argument(
          "prefix-LM with causal or a window: prefix-LM is causal past the prefix already; "
          "leave causal false and the window unbounded");
    }
    if (misaligned(f.mask.prefix_lm.prefix_lengths, alignof(int32_t))) {
      return invalid_argument("flex.mask.prefix_lm.prefix_lengths is not 4-byte aligned");
    }
  }
  if (misaligned(f.score_mod.alibi.slopes, alignof(float))) {
    return invalid_argument("flex.score_mod.alibi.slopes is not 4-byte aligned; pass fp32 [Hq]");
  }
  const flex::RelativeBiasScore& bias = f.score_mod.bias;
  if (bias.table != nullptr) {
    if (bias.max_distance <= 0 || bias.row_stride < 2 * bias.max_distance - 1) {
      return invalid_argument(cat("flex.score_mod.bias has max_distance ", bias.max_distance,
                                  " and row_stride ", bias.row_stride,
                                  "; the table is fp32 [Hq, 2 * S - 1] with S >= 1: build it with "
                                  "flex::relative_bias(table, S)"));
    }
    if (misaligned(bias.table, alignof(float))) {
      return invalid_argument("flex.score_mod.bias.table is not 4-byte aligned");
    }
  }
  if (misaligned(f.sinks.logits, alignof(float))) {
    return invalid_argument("flex.sinks.logits is not 4-byte aligned; pass fp32 [Hq]");
  }
  return Status::Ok();
}

}  // namespace

Status validate_flex_arguments(const AttentionParams& p) {
  if (Status s = check_mods(p); !s.ok()) return s;
  const flex::BlockMask& m = p.flex.block_mask;
  if (!p.flex.has_block_mask()) {
    if (m.kv_indices != nullptr || m.full_kv_num_blocks != nullptr ||
        m.full_kv_indices != nullptr) {
      return invalid_argument(
          "flex.block_mask has arrays but kv_num_blocks is null; pass the whole BlockMask (or "
          "none)");
    }
    return Status::Ok();
  }
  if (is_varlen(p)) {
    return invalid_argument(
        "flex.block_mask is set on a varlen batch; a BlockMask covers one dense [Sq, Sk] grid: "
        "drop it (the sequences need no mask), or run the batch dense");
  }
  if (Status s = flex::validate_block_mask(m, p.batch, p.heads_q, p.seqlen_q, p.seqlen_k);
      !s.ok()) {
    return {s.code, "flex." + s.message};
  }
  return Status::Ok();
}

}  // namespace flashcore::detail
