#include "flex_args.hpp"

#include <cuda_runtime_api.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/flex_functors.hpp"
#include "common/launch_status.hpp"
#include "dlpack_arrays.hpp"
#include "flashcore/flex/block_mask.hpp"
#include "flashcore/flex/block_mask_host.hpp"
#include "flashcore/flex/create_block_mask.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace flashcore_python {
namespace {

[[noreturn]] void fail(const std::string& message) { throw nb::value_error(message.c_str()); }

std::string shape_of(const Array& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + ")";
}

// The array under `key`, imported once: each import of a torch tensor runs its __dlpack__, and the
// Python layer may pass one-use DLPack capsules instead (flashcore/_core.py).
Array array_of(const nb::dict& flex, const char* key) { return nb::cast<Array>(flex[key]); }

// a (the array under `key`) as a contiguous array of `code`/32-bit elements of the given shape on
// `device`.
const void* array_arg(const Array& a, const char* key, nb::dlpack::dtype_code code,
                      const std::vector<int64_t>& shape, int device) {
  const char* type = code == nb::dlpack::dtype_code::Int ? "int32" : "float32";
  if (a.dtype().code != static_cast<uint8_t>(code) || a.dtype().bits != 32) {
    throw nb::type_error((std::string(key) + " must be " + type).c_str());
  }
  bool shape_ok = a.ndim() == shape.size();
  for (size_t i = 0; shape_ok && i < shape.size(); ++i) {
    shape_ok = shape[i] < 0 || static_cast<int64_t>(a.shape(i)) == shape[i];
  }
  if (!shape_ok) {
    std::string want = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
      want += (i ? ", " : "") + (shape[i] < 0 ? std::string("*") : std::to_string(shape[i]));
    }
    fail(std::string(key) + " has shape " + shape_of(a) + "; it must be " + want + ")");
  }
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) > 1 && a.stride(i) != expected) {
      fail(std::string(key) + " must be contiguous (call .contiguous())");
    }
    expected *= static_cast<int64_t>(a.shape(i));
  }
  if (a.device_type() != nb::device::cuda::value || a.device_id() != device) {
    fail(std::string(key) + " must be a CUDA array on q's device (cuda:" + std::to_string(device) +
         ")");
  }
  return a.data();
}

bool has(const nb::dict& flex, const char* key) {
  return flex.contains(key) && !flex[key].is_none();
}

}  // namespace

void apply_flex(const nb::dict& flex, int device, flashcore::AttentionParams* p) {
  using nb::dlpack::dtype_code;
  const int64_t hq = p->heads_q;
  if (has(flex, "cu_seqlens_q") || has(flex, "cu_seqlens_k")) {
    if (!has(flex, "cu_seqlens_q") || !has(flex, "cu_seqlens_k")) {
      fail("cu_seqlens_q and cu_seqlens_k go together (pass one tensor twice for self-attention)");
    }
    const Array cu_q = array_of(flex, "cu_seqlens_q");
    const int64_t entries = static_cast<int64_t>(cu_q.shape(0));
    if (entries < 2) fail("cu_seqlens_q must have batch + 1 >= 2 entries");
    p->cu_seqlens_q = static_cast<const int32_t*>(
        array_arg(cu_q, "cu_seqlens_q", dtype_code::Int, {entries}, device));
    p->cu_seqlens_k = static_cast<const int32_t*>(array_arg(
        array_of(flex, "cu_seqlens_k"), "cu_seqlens_k", dtype_code::Int, {entries}, device));
    p->batch = entries - 1;
    p->max_seqlen_q = nb::cast<int64_t>(flex["max_seqlen_q"]);
    p->max_seqlen_k = nb::cast<int64_t>(flex["max_seqlen_k"]);
  }
  const int64_t batch = p->batch;
  flashcore::flex::FlexOptions& f = p->flex;
  if (has(flex, "doc_ids_q")) {
    const Array ids_q = array_of(flex, "doc_ids_q");
    const bool own_k = has(flex, "doc_ids_k");
    f.mask.documents.doc_ids_q = static_cast<const int32_t*>(
        array_arg(ids_q, "doc_ids_q", dtype_code::Int, {batch, p->seqlen_q}, device));
    f.mask.documents.doc_ids_k = static_cast<const int32_t*>(
        array_arg(own_k ? array_of(flex, "doc_ids_k") : ids_q, own_k ? "doc_ids_k" : "doc_ids_q",
                  dtype_code::Int, {batch, p->seqlen_k}, device));
    f.mask.documents.batch_stride_q = p->seqlen_q;
    f.mask.documents.batch_stride_k = p->seqlen_k;
  }
  if (has(flex, "prefix_lengths") || has(flex, "prefix_length")) {
    f.mask.use_prefix_lm = true;
    if (has(flex, "prefix_lengths")) {
      f.mask.prefix_lm.prefix_lengths = static_cast<const int32_t*>(array_arg(
          array_of(flex, "prefix_lengths"), "prefix_lengths", dtype_code::Int, {batch}, device));
    } else {
      f.mask.prefix_lm.prefix_length = nb::cast<int64_t>(flex["prefix_length"]);
    }
  }
  if (has(flex, "alibi_slopes")) {
    f.score_mod.alibi.slopes = static_cast<const float*>(
        array_arg(array_of(flex, "alibi_slopes"), "alibi_slopes", dtype_code::Float, {hq}, device));
  }
  if (has(flex, "rel_bias")) {
    const Array table = array_of(flex, "rel_bias");
    const int64_t width = table.ndim() == 2 ? static_cast<int64_t>(table.shape(1)) : 0;
    if (width % 2 == 0) fail("rel_bias must be [heads_q, 2 * S - 1] (an odd width)");
    f.score_mod.bias = flashcore::flex::relative_bias(
        static_cast<const float*>(
            array_arg(table, "rel_bias", dtype_code::Float, {hq, width}, device)),
        (width + 1) / 2);
  }
  if (has(flex, "sinks")) {
    f.sinks.logits = static_cast<const float*>(
        array_arg(array_of(flex, "sinks"), "sinks", dtype_code::Float, {hq}, device));
  }
  if (has(flex, "block_mask")) {
    const nb::tuple t = nb::cast<nb::tuple>(flex["block_mask"]);
    if (t.size() != 6) fail("block_mask must be a 6-tuple (see flashcore/flex.py)");
    const Array counts = nb::cast<Array>(t[0]);
    const Array indices = nb::cast<Array>(t[1]);
    if (counts.ndim() != 3) fail("block_mask kv_num_blocks must be [B, H, num_q_blocks]");
    flashcore::flex::BlockMask& m = f.block_mask;
    m.batch = static_cast<int64_t>(counts.shape(0));
    m.heads = static_cast<int64_t>(counts.shape(1));
    m.seqlen_q = p->seqlen_q;
    m.seqlen_k = p->seqlen_k;
    m.q_block_size = nb::cast<int64_t>(t[4]);
    m.kv_block_size = nb::cast<int64_t>(t[5]);
    const std::vector<int64_t> count_shape{m.batch, m.heads, m.num_q_blocks()};
    const std::vector<int64_t> index_shape{m.batch, m.heads, m.num_q_blocks(), -1};
    m.kv_num_blocks = static_cast<const int32_t*>(
        array_arg(counts, "kv_num_blocks", dtype_code::Int, count_shape, device));
    m.kv_indices = static_cast<const int32_t*>(
        array_arg(indices, "kv_indices", dtype_code::Int, index_shape, device));
    if (indices.shape(3) != static_cast<size_t>(m.num_kv_blocks())) {
      fail("block_mask kv_indices has " + std::to_string(indices.shape(3)) +
           " KV blocks per row but seqlen_k needs " + std::to_string(m.num_kv_blocks()) +
           "; build the mask for these lengths");
    }
    if (!t[2].is_none()) {
      m.full_kv_num_blocks = static_cast<const int32_t*>(array_arg(
          nb::cast<Array>(t[2]), "full_kv_num_blocks", dtype_code::Int, count_shape, device));
      m.full_kv_indices = static_cast<const int32_t*>(
          array_arg(nb::cast<Array>(t[3]), "full_kv_indices", dtype_code::Int,
                    {m.batch, m.heads, m.num_q_blocks(), m.num_kv_blocks()}, device));
    }
  }
}

namespace {

// Builds the BlockMask of the built-in mask described by `mask` (window_left, window_right,
// doc_ids_q, doc_ids_k, prefix_lengths or prefix_length) into `buffer` (a CUDA byte array of
// flashcore_block_mask_bytes) on `stream`; returns the byte offsets of kv_num_blocks,
// kv_indices, full_kv_num_blocks and full_kv_indices in it. With `jit_entry` (the
// detail::JitBlockMaskFn of a jit_mask_mod's shared object, python/flashcore/jit.py) the mask is
// that object's, with `captures`: the library checks and places the mask, the object launches.
std::vector<int64_t> create_block_mask(MutableArray buffer, const nb::dict& mask, int64_t batch,
                                       int64_t heads, int64_t seqlen_q, int64_t seqlen_k,
                                       int64_t q_block_size, int64_t kv_block_size,
                                       std::uintptr_t stream, std::uintptr_t jit_entry,
                                       const std::vector<uint64_t>& captures) {
  using nb::dlpack::dtype_code;
  const int device = buffer.device_id();
  if (buffer.device_type() != nb::device::cuda::value) fail("buffer must be a CUDA array");
  flashcore::flex::BlockMask shape = flashcore::flex::block_mask_shape(
      batch, heads, seqlen_q, seqlen_k, q_block_size, kv_block_size);
  flashcore::flex::BuiltinMask m;
  m.window = flashcore::flex::sliding_window_mask(nb::cast<int64_t>(mask["window_left"]),
                                                  nb::cast<int64_t>(mask["window_right"]));
  if (has(mask, "doc_ids_q")) {
    const Array ids_q = array_of(mask, "doc_ids_q");
    const bool own_k = has(mask, "doc_ids_k");
    m.documents = {static_cast<const int32_t*>(
                       array_arg(ids_q, "doc_ids_q", dtype_code::Int, {-1, seqlen_q}, device)),
                   static_cast<const int32_t*>(array_arg(
                       own_k ? array_of(mask, "doc_ids_k") : ids_q,
                       own_k ? "doc_ids_k" : "doc_ids_q", dtype_code::Int, {-1, seqlen_k}, device)),
                   seqlen_q, seqlen_k};
  }
  if (has(mask, "prefix_lengths") || has(mask, "prefix_length")) {
    m.use_prefix_lm = true;
    if (has(mask, "prefix_lengths")) {
      m.prefix_lm.prefix_lengths = static_cast<const int32_t*>(array_arg(
          array_of(mask, "prefix_lengths"), "prefix_lengths", dtype_code::Int, {-1}, device));
    } else {
      m.prefix_lm.prefix_length = nb::cast<int64_t>(mask["prefix_length"]);
    }
  }
  flashcore::flex::BlockMask built;
  flashcore::Status status;
  {
    nb::gil_scoped_release release;
    int previous = 0;
    if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      status = {flashcore::StatusCode::kNoDevice, "cannot make the buffer's device current"};
    } else {
      const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
      if (jit_entry == 0) {
        status = flashcore::flex::create_block_mask(m, shape, buffer.data(), buffer.nbytes(),
                                                    &built, cuda_stream);
      } else {
        flashcore::flex::detail::BlockMaskArrays arrays;
        status = flashcore::flex::detail::prepare_block_mask(shape, buffer.data(), buffer.nbytes(),
                                                             &built, &arrays);
        if (status.ok()) {
          const auto entry = reinterpret_cast<flashcore::detail::JitBlockMaskFn>(jit_entry);
          status = flashcore::detail::launch_status(
              static_cast<cudaError_t>(entry(&built, &arrays, captures.data(), cuda_stream)),
              "create_block_mask (jit_mask_mod)");
        }
      }
      if (cudaSetDevice(previous) != cudaSuccess) cudaGetLastError();
    }
  }
  if (!status.ok()) fail(status.message);
  const char* base = static_cast<const char*>(buffer.data());
  auto offset = [&](const int32_t* array) {
    return static_cast<int64_t>(reinterpret_cast<const char*>(array) - base);
  };
  return {offset(built.kv_num_blocks), offset(built.kv_indices), offset(built.full_kv_num_blocks),
          offset(built.full_kv_indices)};
}

size_t block_mask_bytes(int64_t batch, int64_t heads, int64_t seqlen_q, int64_t seqlen_k,
                        int64_t q_block_size, int64_t kv_block_size) {
  const flashcore::flex::BlockMask shape = flashcore::flex::block_mask_shape(
      batch, heads, seqlen_q, seqlen_k, q_block_size, kv_block_size);
  if (const flashcore::Status s = flashcore::flex::validate_block_mask_shape(shape); !s.ok()) {
    fail(s.message);
  }
  return flashcore::flex::block_mask_bytes(shape);
}

}  // namespace

void bind_flex(nb::module_& m) {
  m.def("block_mask_bytes", &block_mask_bytes, "batch"_a, "heads"_a, "seqlen_q"_a, "seqlen_k"_a,
        "q_block_size"_a, "kv_block_size"_a,
        "Bytes of the buffer create_block_mask writes a BlockMask of this shape into.");
  m.def("create_block_mask", &create_block_mask, "buffer"_a, "mask"_a, "batch"_a, "heads"_a,
        "seqlen_q"_a, "seqlen_k"_a, "q_block_size"_a, "kv_block_size"_a, "stream"_a,
        "jit_entry"_a = 0, "captures"_a = std::vector<uint64_t>{},
        "Builds a built-in mask's (or a jit_mask_mod's) BlockMask into buffer in one launch; "
        "returns the arrays' byte "
        "offsets (kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices).");
}

}  // namespace flashcore_python
