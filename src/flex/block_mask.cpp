// BlockMask validation (shape before any launch; contents on request) and the buffer layout that
// create_block_mask writes into.
#include "flashcore/flex/block_mask.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "common/status_message.hpp"

namespace flashcore::flex {
namespace {

using flashcore::detail::cat;
using flashcore::detail::invalid_argument;

// Each array starts 16-byte aligned in create_block_mask's buffer, so kernels may load them with
// vector loads.
constexpr size_t kArrayAlignBytes = 16;

size_t aligned_bytes(int64_t elements) {
  const size_t bytes = static_cast<size_t>(elements) * sizeof(int32_t);
  return (bytes + kArrayAlignBytes - 1) / kArrayAlignBytes * kArrayAlignBytes;
}

// Rows (b, h, q_block) of the BlockMask, or -1 on overflow.
int64_t row_count(const BlockMask& m) {
  int64_t rows = 0;
  if (__builtin_mul_overflow(m.batch, m.heads, &rows) ||
      __builtin_mul_overflow(rows, m.num_q_blocks(), &rows)) {
    return -1;
  }
  return rows;
}

}  // namespace

BlockMaskSizes block_mask_sizes(const BlockMask& mask) {
  const int64_t rows = row_count(mask);
  return {rows, rows * mask.num_kv_blocks()};
}

Status validate_block_mask_shape(const BlockMask& m) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"batch", m.batch}, {"heads", m.heads}, {"seqlen_q", m.seqlen_q}, {"seqlen_k", m.seqlen_k}};
  for (const auto& [name, value] : sizes) {
    if (value <= 0)
      return invalid_argument(cat("block_mask ", name, " is ", value, "; it must be positive"));
  }
  const std::pair<const char*, int64_t> block_sizes[] = {{"q_block_size", m.q_block_size},
                                                         {"kv_block_size", m.kv_block_size}};
  for (const auto& [name, value] : block_sizes) {
    if (value <= 0 || value % kBlockSizeMultiple != 0) {
      return invalid_argument(cat("block_mask ", name, " is ", value,
                                  "; use a positive multiple of ", kBlockSizeMultiple,
                                  " (64 or 128 as a rule)"));
    }
  }
  constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
  if (m.num_kv_blocks() > kMaxIndex || m.num_q_blocks() > kMaxIndex) {
    return invalid_argument(
        cat("block_mask has more than 2^31 - 1 blocks along a sequence; its "
            "indices are int32: use larger block sizes"));
  }
  const int64_t rows = row_count(m);
  int64_t indices = 0;
  if (rows < 0 || rows > kMaxIndex || __builtin_mul_overflow(rows, m.num_kv_blocks(), &indices)) {
    return invalid_argument(cat("block_mask batch * heads * num_q_blocks (", m.batch, " * ",
                                m.heads, " * ", m.num_q_blocks(),
                                ") exceeds 2^31 - 1 rows; use a larger q_block_size or "
                                "broadcast (batch or heads 1)"));
  }
  return Status::Ok();
}

size_t block_mask_bytes(const BlockMask& shape) {
  if (!validate_block_mask_shape(shape).ok()) return 0;
  const BlockMaskSizes n = block_mask_sizes(shape);
  return 2 * aligned_bytes(n.counts) + 2 * aligned_bytes(n.indices);
}

Status validate_block_mask(const BlockMask& m, int64_t batch, int64_t heads_q, int64_t seqlen_q,
                           int64_t seqlen_k) {
  if (Status s = validate_block_mask_shape(m); !s.ok()) return s;
  if (m.batch != 1 && m.batch != batch) {
    return invalid_argument(cat("block_mask batch is ", m.batch, " but the problem's batch is ",
                                batch, "; build the mask with batch ", batch,
                                " or 1 (one mask for every batch)"));
  }
  if (m.heads != 1 && m.heads != heads_q) {
    return invalid_argument(cat("block_mask heads is ", m.heads, " but heads_q is ", heads_q,
                                "; build the mask with ", heads_q,
                                " heads (query heads, also under GQA) or 1 (one for every head)"));
  }
  if (m.seqlen_q != seqlen_q || m.seqlen_k != seqlen_k) {
    return invalid_argument(cat("block_mask was built for seqlen_q x seqlen_k = ", m.seqlen_q,
                                " x ", m.seqlen_k, " but q and k have ", seqlen_q, " x ", seqlen_k,
                                "; rebuild it with create_block_mask for these lengths"));
  }
  if (m.kv_num_blocks == nullptr || m.kv_indices == nullptr) {
    return invalid_argument(
        "block_mask kv_num_blocks or kv_indices is null; both are required (full_* are optional)");
  }
  if ((m.full_kv_num_blocks == nullptr) != (m.full_kv_indices == nullptr)) {
    return invalid_argument(
        "block_mask has only one of full_kv_num_blocks and full_kv_indices; pass both or neither");
  }
  for (const auto& [name, data] :
       {std::pair<const char*, const int32_t*>{"kv_num_blocks", m.kv_num_blocks},
        {"kv_indices", m.kv_indices},
        {"full_kv_num_blocks", m.full_kv_num_blocks},
        {"full_kv_indices", m.full_kv_indices}}) {
    if (reinterpret_cast<uintptr_t>(data) % alignof(int32_t) != 0) {
      return invalid_argument(
          cat("block_mask ", name, " is not 4-byte aligned; pass int32 arrays"));
    }
  }
  return Status::Ok();
}

Status check_block_mask_contents(const BlockMask& m) {
  if (Status s = validate_block_mask(m, m.batch, m.heads, m.seqlen_q, m.seqlen_k); !s.ok()) {
    return s;
  }
  const int64_t mk = m.num_kv_blocks();
  const BlockMaskSizes n = block_mask_sizes(m);
  std::vector<int64_t> listed_in_row(static_cast<size_t>(mk), -1);  // last row that listed it
  for (int64_t row = 0; row < n.counts; ++row) {
    const std::pair<const char*, const int32_t*> lists[] = {
        {"kv", m.kv_num_blocks != nullptr ? m.kv_num_blocks + row : nullptr},
        {"full_kv", m.full_kv_num_blocks != nullptr ? m.full_kv_num_blocks + row : nullptr}};
    const int32_t* indices[] = {m.kv_indices, m.full_kv_indices};
    for (int list = 0; list < 2; ++list) {
      const auto& [name, count_ptr] = lists[list];
      if (count_ptr == nullptr) continue;
      const int32_t count = *count_ptr;
      if (count < 0 || count > mk) {
        return invalid_argument(cat("block_mask ", name, "_num_blocks of row ", row, " is ", count,
                                    "; it must be in [0, ", mk, "] (num_kv_blocks)"));
      }
      for (int32_t i = 0; i < count; ++i) {
        const int32_t block = indices[list][row * mk + i];
        if (block < 0 || block >= mk) {
          return invalid_argument(cat("block_mask ", name, "_indices of row ", row, " lists block ",
                                      block, "; KV block indices must be in [0, ", mk, ")"));
        }
        if (listed_in_row[static_cast<size_t>(block)] == row) {
          return invalid_argument(cat("block_mask row ", row, " lists KV block ", block,
                                      " more than once across kv_indices and full_kv_indices; "
                                      "list each block once, as partial or as full"));
        }
        listed_in_row[static_cast<size_t>(block)] = row;
      }
    }
  }
  return Status::Ok();
}

Status check_block_mask_contents_on_device(const BlockMask& device_mask, cudaStream_t stream) {
  if (Status s = validate_block_mask(device_mask, device_mask.batch, device_mask.heads,
                                     device_mask.seqlen_q, device_mask.seqlen_k);
      !s.ok()) {
    return s;
  }
  const BlockMaskSizes n = block_mask_sizes(device_mask);
  std::vector<int32_t> counts(static_cast<size_t>(n.counts)),
      indices(static_cast<size_t>(n.indices));
  std::vector<int32_t> full_counts, full_indices;
  BlockMask host = device_mask;
  struct Copy {
    std::vector<int32_t>* to;
    const int32_t* from;
    int64_t elements;
    const int32_t** host_pointer;
  };
  if (device_mask.has_full_blocks()) {
    full_counts.resize(counts.size());
    full_indices.resize(indices.size());
  }
  const Copy copies[] = {
      {&counts, device_mask.kv_num_blocks, n.counts, &host.kv_num_blocks},
      {&indices, device_mask.kv_indices, n.indices, &host.kv_indices},
      {&full_counts, device_mask.full_kv_num_blocks, n.counts, &host.full_kv_num_blocks},
      {&full_indices, device_mask.full_kv_indices, n.indices, &host.full_kv_indices}};
  for (const Copy& c : copies) {
    if (c.from == nullptr) continue;
    const cudaError_t err =
        cudaMemcpyAsync(c.to->data(), c.from, static_cast<size_t>(c.elements) * sizeof(int32_t),
                        cudaMemcpyDeviceToHost, stream);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return {StatusCode::kCudaError,
              cat("copying the block_mask to the host: ", cudaGetErrorString(err))};
    }
    *c.host_pointer = c.to->data();
  }
  if (const cudaError_t err = cudaStreamSynchronize(stream); err != cudaSuccess) {
    return {StatusCode::kCudaError,
            cat("copying the block_mask to the host: ", cudaGetErrorString(err))};
  }
  return check_block_mask_contents(host);
}

namespace detail {

Status prepare_block_mask(const BlockMask& shape, void* buffer, size_t buffer_bytes, BlockMask* out,
                          BlockMaskArrays* arrays) {
  if (out == nullptr || arrays == nullptr)
    return invalid_argument("create_block_mask: out is null");
  if (Status s = validate_block_mask_shape(shape); !s.ok()) return s;
  const size_t needed = block_mask_bytes(shape);
  if (buffer == nullptr || buffer_bytes < needed) {
    return invalid_argument(cat("create_block_mask needs a device buffer of ", needed,
                                " bytes (block_mask_bytes) but got ", buffer_bytes,
                                buffer == nullptr ? " at null" : "",
                                "; allocate block_mask_bytes(shape) with cudaMalloc"));
  }
  if (reinterpret_cast<uintptr_t>(buffer) % kArrayAlignBytes != 0) {
    return invalid_argument("create_block_mask buffer is not 16-byte aligned; use cudaMalloc");
  }
  const BlockMaskSizes n = block_mask_sizes(shape);
  auto* bytes = static_cast<char*>(buffer);
  int32_t** targets[] = {&arrays->kv_num_blocks, &arrays->kv_indices, &arrays->full_kv_num_blocks,
                         &arrays->full_kv_indices};
  const int64_t elements[] = {n.counts, n.indices, n.counts, n.indices};
  for (int i = 0; i < 4; ++i) {
    *targets[i] = reinterpret_cast<int32_t*>(bytes);
    bytes += aligned_bytes(elements[i]);
  }
  *out = shape;
  out->kv_num_blocks = arrays->kv_num_blocks;
  out->kv_indices = arrays->kv_indices;
  out->full_kv_num_blocks = arrays->full_kv_num_blocks;
  out->full_kv_indices = arrays->full_kv_indices;
  return Status::Ok();
}

}  // namespace detail
}  // namespace flashcore::flex
