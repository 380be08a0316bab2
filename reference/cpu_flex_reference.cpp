// The non-template parts of the float64 flex reference: validation, sequence spans, the BlockMask
// row lookup and the thread pool.
#include "reference/cpu_flex_reference.hpp"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include "flashcore/varlen.hpp"

namespace flashcore::reference::detail {
namespace {

Status invalid(const std::string& message) { return {StatusCode::kInvalidArgument, message}; }

}  // namespace

SequenceSpan sequence_span(const FlexReferenceProblem& p, int64_t b) {
  if (p.cu_seqlens_q == nullptr) return {b * p.seqlen_q, p.seqlen_q, b * p.seqlen_k, p.seqlen_k};
  return {p.cu_seqlens_q[b], p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b], p.cu_seqlens_k[b],
          p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b]};
}

Status validate_flex_reference(const FlexReferenceProblem& p, size_t q_size, size_t k_size,
                               size_t v_size) {
  if (p.batch <= 0 || p.seqlen_q <= 0 || p.seqlen_k <= 0 || p.heads_q <= 0 || p.heads_kv <= 0 ||
      p.head_dim <= 0) {
    return invalid("flex reference: every size must be positive");
  }
  if (p.heads_q % p.heads_kv != 0) return invalid("flex reference: heads_q % heads_kv != 0");
  const bool varlen = p.cu_seqlens_q != nullptr;
  if (varlen != (p.cu_seqlens_k != nullptr)) {
    return invalid("flex reference: pass both cu_seqlens_q and cu_seqlens_k, or neither");
  }
  if (varlen) {
    // Host arrays here, so their contents are checked too; max_seqlen bounds nothing in the
    // reference, so the totals stand in for it.
    if (Status s =
            check_cu_seqlens("cu_seqlens_q", p.cu_seqlens_q, p.batch, p.seqlen_q, p.seqlen_q);
        !s.ok()) {
      return s;
    }
    if (Status s =
            check_cu_seqlens("cu_seqlens_k", p.cu_seqlens_k, p.batch, p.seqlen_k, p.seqlen_k);
        !s.ok()) {
      return s;
    }
    if (p.block_mask != nullptr) {
      return invalid(
          "flex reference: a BlockMask with varlen is not defined; use one or the other");
    }
  }
  const int64_t rows = varlen ? 1 : p.batch;
  if (q_size != static_cast<size_t>(rows * p.seqlen_q * p.heads_q * p.head_dim) ||
      k_size != static_cast<size_t>(rows * p.seqlen_k * p.heads_kv * p.head_dim) ||
      v_size != k_size) {
    return invalid("flex reference: q, k or v has the wrong number of elements for the sizes");
  }
  if (p.block_mask != nullptr) {
    if (Status s =
            flex::validate_block_mask(*p.block_mask, p.batch, p.heads_q, p.seqlen_q, p.seqlen_k);
        !s.ok()) {
      return s;
    }
    if (Status s = flex::check_block_mask_contents(*p.block_mask); !s.ok()) return s;
  }
  return Status::Ok();
}

void block_row_states(const flex::BlockMask& mask, int64_t b, int64_t h, int64_t q_block,
                      std::vector<ListedAs>* states) {
  const int64_t mk = mask.num_kv_blocks();
  const int64_t row = mask.row(b, h, q_block);
  states->assign(static_cast<size_t>(mk), ListedAs::kNone);
  for (int32_t i = 0; i < mask.kv_num_blocks[row]; ++i) {
    (*states)[static_cast<size_t>(mask.kv_indices[row * mk + i])] = ListedAs::kPartial;
  }
  if (!mask.has_full_blocks()) return;
  for (int32_t i = 0; i < mask.full_kv_num_blocks[row]; ++i) {
    (*states)[static_cast<size_t>(mask.full_kv_indices[row * mk + i])] = ListedAs::kFull;
  }
}

void for_each_head(int64_t batch, int64_t heads,
                   const std::function<void(int64_t, int64_t)>& work) {
  std::atomic<int64_t> next_pair{0};
  const int64_t pairs = batch * heads;
  auto worker = [&] {
    for (int64_t pair = next_pair++; pair < pairs; pair = next_pair++)
      work(pair / heads, pair % heads);
  };
  const int64_t threads =
      std::min<int64_t>(pairs, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace flashcore::reference::detail
