// Argument and device validation: everything run() checks before it launches anything.
#include "api/validate.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "common/device_properties.hpp"
#include "common/problem.hpp"
#include "common/status_message.hpp"
#include "flashcore/varlen.hpp"

namespace flashcore::detail {
namespace {

// The fast kernels move 16-byte vectors, so base pointers and every row start must be 16-byte
// aligned: pointers on 16 bytes, strides in multiples of 8 two-byte elements.
constexpr int64_t kAlignBytes = 16;
constexpr int64_t kAlignElements = kAlignBytes / 2;

Status invalid(const std::string& message) { return invalid_argument(message); }

const char* dtype_name(DType dtype) { return dtype == DType::kFloat16 ? "fp16" : "bf16"; }

struct Extent {
  const char* name;
  int64_t size;
  int64_t stride;
};

// Largest element offset of a tensor, or -1 when computing it overflows int64.
int64_t max_offset(const std::array<Extent, 4>& dims) {
  int64_t total = 0;
  for (const Extent& e : dims) {
    int64_t term = 0;
    if (__builtin_mul_overflow(e.size - 1, e.stride, &term) ||
        __builtin_add_overflow(total, term, &total)) {
      return -1;
    }
  }
  return total;
}

// Distinct indices must map to distinct addresses, or two threads write one element. Sorted by
// stride, each dim's stride must clear the whole span of the dims below it.
bool strides_do_not_overlap(std::array<Extent, 4> dims) {
  std::sort(dims.begin(), dims.end(),
            [](const Extent& a, const Extent& b) { return a.stride < b.stride; });
  int64_t span = 1;  // elements covered by the dims seen so far
  for (const Extent& e : dims) {
    if (e.size == 1) continue;
    if (e.stride < span) return false;
    span = e.stride * e.size;
  }
  return true;
}

}  // namespace

Status check_tensor(const char* name, const void* data, DType dtype, DType expected_dtype,
                    const Strides& s, int64_t batch, int64_t seqlen, int64_t heads,
                    int64_t head_dim, bool is_output) {
  if (data == nullptr) return invalid(cat(name, " is null; pass a device pointer to its data"));
  if (dtype != expected_dtype) {
    return invalid(cat(name, " is ", dtype_name(dtype), " but q is ", dtype_name(expected_dtype),
                       "; q, k, v and o must share one dtype"));
  }
  if (s.dim != 1) {
    return invalid(cat(name, " has last-dim stride ", s.dim,
                       "; the head dim must be contiguous (stride 1): make the tensor contiguous"));
  }
  const std::array<Extent, 4> dims{{{"batch", batch, s.batch},
                                    {"seq", seqlen, s.seq},
                                    {"head", heads, s.head},
                                    {"dim", head_dim, 1}}};
  for (const Extent& e : dims) {
    if (e.stride < 0) {
      return invalid(
          cat(name, " has negative ", e.name, " stride ", e.stride, "; strides must be >= 0"));
    }
    // The head dim itself is the contiguous one (stride 1); every other dim starts a row.
    const bool starts_rows = &e != &dims.back();
    if (starts_rows && e.size > 1 && e.stride % kAlignElements != 0) {
      return invalid(cat(name, " ", e.name, " stride ", e.stride, " is not a multiple of ",
                         kAlignElements, " elements; every row must start 16-byte aligned"));
    }
  }
  if (reinterpret_cast<uintptr_t>(data) % kAlignBytes != 0) {
    return invalid(cat(name,
                       " pointer is not 16-byte aligned; allocate with cudaMalloc or offset by a "
                       "multiple of 8 elements"));
  }
  if (max_offset(dims) < 0) {
    return invalid(cat(name, " sizes and strides overflow a 64-bit offset"));
  }
  if (is_output && !strides_do_not_overlap(dims)) {
    return invalid(cat(name,
                       " strides make distinct elements overlap; the output needs a distinct "
                       "address per element"));
  }
  return Status::Ok();
}

Status check_device_pointer(const char* name, const void* data) {
  cudaPointerAttributes attributes{};
  const cudaError_t err = cudaPointerGetAttributes(&attributes, data);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later launches are unaffected
    return invalid(cat(name, " is not a pointer CUDA knows: ", cudaGetErrorString(err)));
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    return invalid(cat(name, " points to host memory; pass device memory (cudaMalloc)"));
  }
  return Status::Ok();
}

Status validate_arguments(const AttentionParams& p) {
  const std::array<std::pair<const char*, int64_t>, 6> sizes{{{"batch", p.batch},
                                                              {"seqlen_q", p.seqlen_q},
                                                              {"seqlen_k", p.seqlen_k},
                                                              {"heads_q", p.heads_q},
                                                              {"heads_kv", p.heads_kv},
                                                              {"head_dim", p.head_dim}}};
  for (const auto& [name, value] : sizes) {
    if (value <= 0) return invalid(cat(name, " is ", value, "; it must be positive"));
  }
  if (p.heads_q % p.heads_kv != 0) {
    return invalid(cat("heads_q (", p.heads_q, ") is not a multiple of heads_kv (", p.heads_kv,
                       "); GQA needs heads_q % heads_kv == 0"));
  }
  if (p.head_dim > kMaxHeadDim || p.head_dim % kHeadDimMultiple != 0) {
    return {StatusCode::kUnsupported,
            cat("head_dim ", p.head_dim, " is not supported; use a multiple of ", kHeadDimMultiple,
                " up to ", kMaxHeadDim, " (64, 128 and 256 run on every backend)")};
  }
  if (p.q.dtype != DType::kFloat16 && p.q.dtype != DType::kBFloat16) {
    return invalid("q dtype must be fp16 or bf16");
  }
  struct TensorCheck {
    const char* name;
    const void* data;
    DType dtype;
    Strides strides;
    int64_t seqlen, heads;
    bool is_output;
  };
  if (Status s = validate_varlen_arguments(p); !s.ok()) return s;
  // A varlen batch packs its sequences along seq: each tensor is one [total, H, D] slab.
  const int64_t tensor_batch = is_varlen(p) ? 1 : p.batch;
  const TensorCheck tensors[] = {
      {"q", p.q.data, p.q.dtype, p.q.strides, p.seqlen_q, p.heads_q, false},
      {"k", p.k.data, p.k.dtype, p.k.strides, p.seqlen_k, p.heads_kv, false},
      {"v", p.v.data, p.v.dtype, p.v.strides, p.seqlen_k, p.heads_kv, false},
      {"o", p.o.data, p.o.dtype, p.o.strides, p.seqlen_q, p.heads_q, true},
  };
  for (const TensorCheck& t : tensors) {
    if (Status s = check_tensor(t.name, t.data, t.dtype, p.q.dtype, t.strides, tensor_batch,
                                t.seqlen, t.heads, p.head_dim, t.is_output);
        !s.ok()) {
      return s;
    }
  }
  if (p.lse != nullptr && reinterpret_cast<uintptr_t>(p.lse) % alignof(float) != 0) {
    return invalid("lse pointer is not 4-byte aligned");
  }
  if (!(p.softmax_scale == p.softmax_scale) || std::isinf(p.softmax_scale)) {
    return invalid("softmax_scale is not finite; pass 0 for the default 1/sqrt(head_dim)");
  }
  if (!(p.softcap >= 0.f) || std::isinf(p.softcap)) {
    return invalid(cat("softcap is ", p.softcap, "; it must be finite and >= 0 (0 turns it off)"));
  }
  if (p.window_left < -1 || p.window_right < -1) {
    return invalid(cat("window (", p.window_left, ", ", p.window_right,
                       ") is out of range; each side must be >= 0, or -1 for unbounded"));
  }
  if (p.num_splits < 0) {
    return invalid(
        cat("num_splits is ", p.num_splits, "; use 0 (heuristic), 1 (off) or a split count"));
  }
  if (p.tile != TileShape::kAuto && p.tile != TileShape::kLarge && p.tile != TileShape::kSmall &&
      p.tile != TileShape::kMedium && p.tile != TileShape::kCtaPair) {
    return invalid(cat("tile is ", static_cast<int>(p.tile),
                       "; use TileShape::kAuto, kLarge, kSmall, kMedium or kCtaPair"));
  }
  if (p.causal && p.window_right > 0) {
    return invalid(cat("causal=true conflicts with window_right=", p.window_right,
                       "; causal means window_right=0: pass 0 or -1"));
  }
  return validate_flex_arguments(p);
}

Status validate_device(const AttentionParams& p, cudaDeviceProp* properties) {
  if (Status s = current_device_properties(properties); !s.ok()) return s;
  if (properties->major < 8) {
    return {StatusCode::kUnsupported, cat("GPU ", properties->name, " is sm_", properties->major,
                                          properties->minor, "; flashcore needs sm_80 or newer")};
  }
  for (const auto& [name, data] :
       {std::pair<const char*, const void*>{"q", p.q.data},
        {"k", p.k.data},
        {"v", p.v.data},
        {"o", p.o.data},
        {"lse", p.lse},
        {"cu_seqlens_q", p.cu_seqlens_q},
        {"cu_seqlens_k", p.cu_seqlens_k},
        {"flex.mask.documents.doc_ids_q", p.flex.mask.documents.doc_ids_q},
        {"flex.mask.documents.doc_ids_k", p.flex.mask.documents.doc_ids_k},
        {"flex.mask.prefix_lm.prefix_lengths", p.flex.mask.prefix_lm.prefix_lengths},
        {"flex.score_mod.alibi.slopes", p.flex.score_mod.alibi.slopes},
        {"flex.score_mod.bias.table", p.flex.score_mod.bias.table},
        {"flex.sinks.logits", p.flex.sinks.logits},
        {"flex.block_mask.kv_num_blocks", p.flex.block_mask.kv_num_blocks},
        {"flex.block_mask.kv_indices", p.flex.block_mask.kv_indices},
        {"flex.block_mask.full_kv_num_blocks", p.flex.block_mask.full_kv_num_blocks},
        {"flex.block_mask.full_kv_indices", p.flex.block_mask.full_kv_indices}}) {
    if (data == nullptr)
      continue;  // lse, cu_seqlens and flex are optional; the others were checked
    if (Status s = check_device_pointer(name, data); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace flashcore::detail
