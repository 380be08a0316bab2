// flashcore._flashcore: the Python binding. DLPack arrays come in zero-copy as nb::ndarray
// (dlpack_arrays.hpp: through an array type's C exchange API where one is registered), are
// checked here for what only the array objects know (device, dtype, rank, matching shapes), and
// become AttentionParams; flashcore::run checks the rest and launches on the caller's stream.
// Nothing here knows about torch, so any DLPack producer (torch, CuPy, JAX) works.
#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/backend_registry.hpp"
#include "api/flex_functors.hpp"
#include "backward_ext.hpp"
#include "common/launch_status.hpp"
#include "dlpack_arrays.hpp"
#include "ext_support.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/varlen.hpp"
#include "flex_args.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using flashcore_python::Array;
using flashcore_python::MutableArray;

std::string device_name(int device_type, int device_id) {
  switch (device_type) {
    case nb::device::cpu::value:
      return "cpu";
    case nb::device::cuda::value:
      return "cuda:" + std::to_string(device_id);
    case nb::device::cuda_managed::value:
      return "cuda:" + std::to_string(device_id) + " (managed)";
    case nb::device::cuda_host::value:
      return "pinned host memory";
    default:
      return "DLPack device type " + std::to_string(device_type);
  }
}

std::string dtype_name(nb::dlpack::dtype dtype) {
  const char* kind = "unknown";
  switch (static_cast<nb::dlpack::dtype_code>(dtype.code)) {
    case nb::dlpack::dtype_code::Int:
      kind = "int";
      break;
    case nb::dlpack::dtype_code::UInt:
      kind = "uint";
      break;
    case nb::dlpack::dtype_code::Float:
      kind = "float";
      break;
    case nb::dlpack::dtype_code::Bfloat:
      kind = "bfloat";
      break;
    case nb::dlpack::dtype_code::Complex:
      kind = "complex";
      break;
    case nb::dlpack::dtype_code::Bool:
      kind = "bool";
      break;
  }
  return kind + std::to_string(dtype.bits);
}

bool is_cuda(int device_type) {
  return device_type == nb::device::cuda::value || device_type == nb::device::cuda_managed::value;
}

bool is_dtype(nb::dlpack::dtype dtype, nb::dlpack::dtype_code code, int bits) {
  return dtype.code == static_cast<uint8_t>(code) && dtype.bits == bits && dtype.lanes == 1;
}

template <typename A>
std::string shape_string(const A& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

template <typename A>
void check_rank(const char* name, const A& a, size_t rank, const char* layout) {
  if (a.ndim() != rank) {
    throw nb::value_error((std::string(name) + " is " + std::to_string(a.ndim()) +
                           "-D; it must be " + std::to_string(rank) + "-D " + layout)
                              .c_str());
  }
}

// Checked after dtypes and shapes, so that host arrays (numpy in CI) exercise every other check.
template <typename A>
void check_device(const char* name, const A& a, int device) {
  if (!is_cuda(a.device_type())) {
    throw nb::value_error(
        (std::string(name) + " is on " + device_name(a.device_type(), a.device_id()) +
         "; flashcore runs on CUDA arrays: move it to the GPU (e.g. " + name + ".cuda())")
            .c_str());
  }
  if (a.device_id() != device) {
    throw nb::value_error((std::string(name) + " is on cuda:" + std::to_string(a.device_id()) +
                           " but q is on cuda:" + std::to_string(device) +
                           "; all arrays must be on one device")
                              .c_str());
  }
}

// flashcore::run checks this too, but only once a GPU is there; the binding can say it anywhere.
template <typename A>
void check_last_dim_contiguous(const char* name, const A& a) {
  if (a.shape(3) > 1 && a.stride(3) != 1) {
    throw nb::value_error((std::string(name) + " has last-dim stride " +
                           std::to_string(a.stride(3)) +
                           "; the head dim must be contiguous (stride 1): make it contiguous")
                              .c_str());
  }
}

template <typename A>
int64_t dim(const A& a, size_t i) {
  return static_cast<int64_t>(a.shape(i));
}

// Where q, k, v and out keep their sequence and head axes: BSHD (the library's order, which
// attention() takes), or BHSD (flex_attention's, as PyTorch's), taken as it is rather than through
// four transposed views, a microsecond or more of host time each.
struct Layout {
  size_t seq_axis;
  size_t head_axis;
  const char* rank_message;  // the expected order, for check_rank
  const char* kv_order;      // k and v's order, for a mismatch message
};

Layout layout_of(bool heads_major) {
  if (heads_major) {
    return {2, 1, "[batch, heads, seqlen, head_dim] (BHSD)",
            "[batch, heads_kv, seqlen_k, head_dim]"};
  }
  return {1, 2, "[batch, seqlen, heads, head_dim] (BSHD; pass BHSD through strides)",
          "[batch, seqlen_k, heads_kv, head_dim]"};
}

template <typename A>
flashcore::Strides strides_of(const A& a, const Layout& layout) {
  return {a.stride(0), a.stride(layout.seq_axis), a.stride(layout.head_axis), a.stride(3)};
}

std::vector<std::string> provider_names() {
  std::vector<std::string> names;
  for (flashcore::Backend backend : flashcore::backends())
    names.emplace_back(flashcore::backend_name(backend));
  return names;
}

flashcore::Backend backend_from(const std::string& name) {
  flashcore::Backend backend = flashcore::Backend::kAuto;
  if (flashcore::parse_backend(name, &backend)) return backend;
  std::string known = "'auto'";
  for (const std::string& provider : provider_names()) known += ", '" + provider + "'";
  throw nb::value_error(("backend '" + name + "' is unknown; use one of " + known).c_str());
}

flashcore::TileShape tile_from(const std::string& name) {
  flashcore::TileShape tile = flashcore::TileShape::kAuto;
  if (flashcore::parse_tile_shape(name, &tile)) return tile;
  throw nb::value_error(
      ("tile '" + name + "' is unknown; use 'auto', 'large', 'small', 'medium' or 'cta-pair'")
          .c_str());
}

// Returns the provider that ran. Raises TypeError for dtypes, ValueError for every other bad
// argument (before anything is launched) and RuntimeError for CUDA failures.
// Checks what only the array objects know and builds the params (device current = *device).
flashcore::AttentionParams make_params(const Array& q, const Array& k, const Array& v,
                                       const MutableArray& out,
                                       const std::optional<MutableArray>& lse, float softmax_scale,
                                       bool causal, int64_t window_left, int64_t window_right,
                                       float softcap, const std::string& backend,
                                       int64_t num_splits, const std::string& tile, bool enable_pdl,
                                       std::uintptr_t stream, bool heads_major, int* device_out) {
  const flashcore::Backend chosen = backend_from(backend);
  const flashcore::TileShape tile_shape = tile_from(tile);
  if (num_splits < 0 || num_splits > std::numeric_limits<int>::max()) {
    throw nb::value_error(("num_splits is " + std::to_string(num_splits) +
                           "; use 0 (heuristic), 1 (off) or a split count")
                              .c_str());
  }
  const Layout layout = layout_of(heads_major);
  check_rank("q", q, 4, layout.rank_message);
  check_rank("k", k, 4, layout.rank_message);
  check_rank("v", v, 4, layout.rank_message);
  check_rank("out", out, 4, layout.rank_message);

  const nb::dlpack::dtype dtype = q.dtype();
  const bool fp16 = is_dtype(dtype, nb::dlpack::dtype_code::Float, 16);
  if (!fp16 && !is_dtype(dtype, nb::dlpack::dtype_code::Bfloat, 16)) {
    throw nb::type_error(
        ("q has dtype " + dtype_name(dtype) +
         "; flashcore takes float16 or bfloat16 (cast with .half() or .bfloat16())")
            .c_str());
  }
  const std::pair<const char*, nb::dlpack::dtype> others[] = {
      {"k", k.dtype()}, {"v", v.dtype()}, {"out", out.dtype()}};
  for (const auto& [name, other] : others) {
    if (other != dtype) {
      throw nb::type_error((std::string(name) + " has dtype " + dtype_name(other) + " but q has " +
                            dtype_name(dtype) + "; q, k, v and out must share one dtype")
                               .c_str());
    }
  }

  const size_t seq = layout.seq_axis, head = layout.head_axis;
  const int64_t batch = dim(q, 0), seqlen_q = dim(q, seq), heads_q = dim(q, head);
  const int64_t head_dim = dim(q, 3), seqlen_k = dim(k, seq), heads_kv = dim(k, head);
  const auto mismatch = [](const std::string& what) { throw nb::value_error(what.c_str()); };
  if (dim(k, 0) != batch || dim(v, 0) != batch) {
    mismatch("batch sizes differ: q " + shape_string(q) + ", k " + shape_string(k) + ", v " +
             shape_string(v) + "; q, k and v must have the same batch");
  }
  if (dim(k, 3) != head_dim || dim(v, 3) != head_dim) {
    mismatch("head_dim differs: q " + shape_string(q) + ", k " + shape_string(k) + ", v " +
             shape_string(v) + "; q, k and v must have the same last dim");
  }
  if (dim(v, seq) != seqlen_k || dim(v, head) != heads_kv) {
    mismatch("k " + shape_string(k) + " and v " + shape_string(v) + " must have the same shape " +
             layout.kv_order);
  }
  if (heads_kv == 0 || heads_q % heads_kv != 0) {
    mismatch("q has " + std::to_string(heads_q) + " heads and k, v have " +
             std::to_string(heads_kv) +
             "; the heads of q must be a multiple of the heads of k and v (GQA/MQA)");
  }
  for (size_t i = 0; i < 4; ++i) {
    if (out.shape(i) != q.shape(i)) {
      mismatch("out has shape " + shape_string(out) + " but q has " + shape_string(q) +
               "; out must have the shape of q");
    }
  }
  check_last_dim_contiguous("q", q);
  check_last_dim_contiguous("k", k);
  check_last_dim_contiguous("v", v);
  check_last_dim_contiguous("out", out);
  if (lse) {
    const MutableArray& l = *lse;
    check_rank("lse", l, 3, "[batch, heads_q, seqlen_q]");
    if (!is_dtype(l.dtype(), nb::dlpack::dtype_code::Float, 32)) {
      throw nb::type_error(
          ("lse has dtype " + dtype_name(l.dtype()) + "; it must be float32").c_str());
    }
    if (dim(l, 0) != batch || dim(l, 1) != heads_q || dim(l, 2) != seqlen_q) {
      mismatch("lse has shape " + shape_string(l) + "; it must be (" + std::to_string(batch) +
               ", " + std::to_string(heads_q) + ", " + std::to_string(seqlen_q) +
               ") = [batch, heads_q, seqlen_q]");
    }
    const bool contiguous = (seqlen_q == 1 || l.stride(2) == 1) &&
                            (heads_q == 1 || l.stride(1) == seqlen_q) &&
                            (batch == 1 || l.stride(0) == heads_q * seqlen_q);
    if (!contiguous) mismatch("lse must be contiguous");
  }

  const int device = q.device_id();
  check_device("q", q, device);
  check_device("k", k, device);
  check_device("v", v, device);
  check_device("out", out, device);
  if (lse) check_device("lse", *lse, device);

  flashcore::AttentionParams params;
  params.batch = batch;
  params.seqlen_q = seqlen_q;
  params.seqlen_k = seqlen_k;
  params.heads_q = heads_q;
  params.heads_kv = heads_kv;
  params.head_dim = head_dim;
  const flashcore::DType type = fp16 ? flashcore::DType::kFloat16 : flashcore::DType::kBFloat16;
  params.q = {q.data(), type, strides_of(q, layout)};
  params.k = {k.data(), type, strides_of(k, layout)};
  params.v = {v.data(), type, strides_of(v, layout)};
  params.o = {out.data(), type, strides_of(out, layout)};
  params.lse = lse ? static_cast<float*>(lse->data()) : nullptr;
  params.softmax_scale = softmax_scale;
  params.causal = causal;
  params.window_left = window_left;
  params.window_right = window_right;
  params.softcap = softcap;
  params.backend = chosen;
  params.num_splits = static_cast<int>(num_splits);
  params.tile = tile_shape;
  params.enable_pdl = enable_pdl;
  params.stream = reinterpret_cast<cudaStream_t>(stream);
  *device_out = device;
  return params;
}

// Bytes of workspace the chosen backend needs (0 for the fused kernels without split-KV). The
// caller allocates it with its framework's caching allocator: run() would otherwise allocate it
// with cudaMallocAsync, whose pool returns the memory at every synchronization.
size_t workspace_size(const Array& q, const Array& k, const Array& v, const MutableArray& out,
                      std::optional<MutableArray> lse, float softmax_scale, bool causal,
                      int64_t window_left, int64_t window_right, float softcap,
                      const std::string& backend, int64_t num_splits, const std::string& tile,
                      bool enable_pdl, const std::optional<nb::dict>& flex) {
  int device = 0;
  flashcore::AttentionParams params =
      make_params(q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
                  backend, num_splits, tile, enable_pdl, 0, false, &device);
  if (flex) flashcore_python::apply_flex(*flex, device, &params);
  flashcore::Status status;
  size_t bytes = 0;
  {
    nb::gil_scoped_release release;
    flashcore_python::DeviceGuard guard(device);
    status = flashcore::can_implement(params);
    if (status.ok()) bytes = flashcore::workspace_size(params);
  }
  flashcore_python::raise_status(status);
  return bytes;
}

MutableArray workspace_array(const nb::handle& object, const char* what) {
  MutableArray array;
  if (!nb::try_cast(object, array)) {
    throw nb::type_error((std::string(what) + " is a " +
                          nb::cast<std::string>(nb::str(object.type().attr("__name__"))) +
                          "; pass a writable DLPack device array (or a callable returning one)")
                             .c_str());
  }
  return array;
}

// The call's workspace into params: `workspace` is None (run() then allocates what it needs
// stream-ordered), a device array, or a callable that takes a byte count and returns such an
// array. The callable is the framework's allocator (torch's caching allocator in flashcore's torch
// layer); it is called only when the chosen kernel needs scratch, so such a call is one crossing
// instead of workspace_size() and then attention(), and never a cudaMallocAsync. The returned
// array stays referenced in *keep until the launch is enqueued.
void bind_workspace(const nb::object& workspace, int device, flashcore::AttentionParams* params,
                    std::optional<MutableArray>* keep) {
  if (workspace.is_none()) return;
  if (PyCallable_Check(workspace.ptr())) {
    flashcore::Status status;
    size_t bytes = 0;
    {
      nb::gil_scoped_release release;
      flashcore_python::DeviceGuard guard(device);
      status = flashcore::can_implement(*params);
      if (status.ok()) bytes = flashcore::workspace_size(*params);
    }
    flashcore_python::raise_status(status);
    if (bytes == 0) return;
    *keep = workspace_array(workspace(bytes), "the workspace allocator's result");
    if ((*keep)->nbytes() < bytes) {
      throw nb::value_error(("the workspace allocator returned " +
                             std::to_string((*keep)->nbytes()) + " bytes for a request of " +
                             std::to_string(bytes))
                                .c_str());
    }
  } else {
    *keep = workspace_array(workspace, "workspace");
  }
  check_device("workspace", **keep, device);
  params->workspace = (*keep)->data();
  params->workspace_bytes = (*keep)->nbytes();
}

// Returns the provider that ran. Raises TypeError for dtypes, ValueError for every other bad
// argument (before anything is launched) and RuntimeError for CUDA failures.
std::string attention(const Array& q, const Array& k, const Array& v, const MutableArray& out,
                      std::optional<MutableArray> lse, float softmax_scale, bool causal,
                      int64_t window_left, int64_t window_right, float softcap,
                      const std::string& backend, int64_t num_splits, const std::string& tile,
                      bool enable_pdl, std::uintptr_t stream, const nb::object& workspace,
                      const std::optional<nb::dict>& flex, bool heads_major) {
  int device = 0;
  flashcore::AttentionParams params =
      make_params(q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
                  backend, num_splits, tile, enable_pdl, stream, heads_major, &device);
  // flashcore.flex_attention / attention_varlen: mods, BlockMask, sinks, cu_seqlens.
  if (flex) flashcore_python::apply_flex(*flex, device, &params);
  std::optional<MutableArray> workspace_array;
  bind_workspace(workspace, device, &params, &workspace_array);
  flashcore::RunInfo info;
  flashcore::Status status;
  {
    // run() only validates and enqueues (no synchronization), but it goes through the CUDA driver
    // and its locks; other Python threads need not wait for that.
    nb::gil_scoped_release release;
    flashcore_python::DeviceGuard guard(device);
    status = flashcore::run(params, &info);
  }
  flashcore_python::raise_status(status);
  return info.provider;
}

// flashcore.jit_score_mod / jit_mask_mod (python/flashcore/jit.py): the params as attention()
// makes them, with the flex fields but none of the parts the shared object replaces (its mask:
// no window or built-in mask; its score_mod: no built-in score_mod or softcap), checked by the
// library for the object's kernels (dtype, kernel head dim, its sm90 kernels:
// detail::JitHasSm90Fn's flags), which also picks the kernel (sm90 where it takes the problem, else
// sm80); then the object's entry point (detail::JitLaunchFn at `launch`) enqueues it with the
// captures' words. Returns the provider.
std::string jit_attention(std::uintptr_t launch, int sm90_kernels, bool replaces_mask,
                          bool replaces_score, bool fp16, int64_t kernel_head_dim,
                          const std::vector<uint64_t>& captures, const Array& q, const Array& k,
                          const Array& v, const MutableArray& out, std::optional<MutableArray> lse,
                          float softmax_scale, bool causal, int64_t window_left,
                          int64_t window_right, float softcap, const std::string& backend,
                          std::uintptr_t stream, const std::optional<nb::dict>& flex,
                          bool heads_major) {
  if (launch == 0) throw nb::value_error("jit_attention needs a shared object's entry point");
  int device = 0;
  flashcore::AttentionParams params =
      make_params(q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
                  backend, 0, "auto", true, stream, heads_major, &device);
  if (flex) flashcore_python::apply_flex(*flex, device, &params);
  const flashcore::DType dtype = fp16 ? flashcore::DType::kFloat16 : flashcore::DType::kBFloat16;
  struct Object {
    flashcore::detail::JitLaunchFn entry;
    const uint64_t* captures;
  };
  const Object object{reinterpret_cast<flashcore::detail::JitLaunchFn>(launch), captures.data()};
  flashcore::RunInfo info;
  flashcore::Status status;
  {
    nb::gil_scoped_release release;
    flashcore_python::DeviceGuard guard(device);
    flashcore::detail::FunctorFlex plan;
    status = flashcore::detail::prepare_functor_flex(
        params,
        {dtype, static_cast<int>(kernel_head_dim),
         (sm90_kernels & flashcore::detail::kJitSm90) != 0,
         (sm90_kernels & flashcore::detail::kJitSm90Paired) != 0},
        {replaces_mask, replaces_score}, &plan);
    if (status.ok()) {
      status = flashcore::detail::launch_functor_flex(
          &plan,
          [](const flashcore::detail::FunctorFlex* chosen, const void* context,
             cudaStream_t on) -> int {
            const Object& o = *static_cast<const Object*>(context);
            return o.entry(chosen, o.captures, on);
          },
          &object, &info);
    }
  }
  flashcore_python::raise_status(status);
  return info.provider;
}

// flashcore::check_cu_seqlens on a host copy of one array (flashcore.check_varlen copies it).
void check_cu_seqlens(const std::string& name, const std::vector<int32_t>& cu_seqlens,
                      int64_t total, int64_t max_seqlen) {
  if (cu_seqlens.size() < 2) {
    throw nb::value_error((name + " has " + std::to_string(cu_seqlens.size()) +
                           " entries; it needs batch + 1 (at least 2): 0, then each sequence's end")
                              .c_str());
  }
  flashcore_python::raise_status(
      flashcore::check_cu_seqlens(name.c_str(), cu_seqlens.data(),
                                  static_cast<int64_t>(cu_seqlens.size()) - 1, total, max_seqlen));
}

// Takes flashcore._unfused.backend()'s capsule; the name check keeps any other capsule out.
void plug_unfused(nb::capsule backend) {
  if (std::string(backend.name()) != "flashcore.BackendImpl") {
    throw nb::type_error("plug_unfused takes the capsule of flashcore._unfused.backend()");
  }
  flashcore::detail::plug_unfused(
      static_cast<const flashcore::detail::BackendImpl*>(backend.data()));
}

}  // namespace

NB_MODULE(_flashcore, m) {
  m.doc() = "flashcore native extension: fused attention over DLPack arrays";
  m.def("attention", &attention, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(), "softmax_scale"_a,
        "causal"_a, "window_left"_a, "window_right"_a, "softcap"_a, "backend"_a, "num_splits"_a,
        "tile"_a, "enable_pdl"_a, "stream"_a, "workspace"_a.none() = nb::none(),
        "flex"_a.none() = nb::none(), "heads_major"_a = false,
        "Runs attention into out (and lse) on the given CUDA stream; returns the provider. "
        "workspace: None, a device array, or a callable bytes -> device array (called only when "
        "the chosen kernel needs scratch). heads_major: q, k, v and out are BHSD, not BSHD.");
  m.def("workspace_size", &workspace_size, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(),
        "softmax_scale"_a, "causal"_a, "window_left"_a, "window_right"_a, "softcap"_a, "backend"_a,
        "num_splits"_a, "tile"_a, "enable_pdl"_a, "flex"_a.none() = nb::none(),
        "Bytes of device workspace attention() needs for these arguments.");
  m.def("jit_attention", &jit_attention, "launch"_a, "sm90_kernels"_a, "replaces_mask"_a,
        "replaces_score"_a, "fp16"_a, "kernel_head_dim"_a, "captures"_a, "q"_a, "k"_a, "v"_a,
        "out"_a, "lse"_a.none(), "softmax_scale"_a, "causal"_a, "window_left"_a, "window_right"_a,
        "softcap"_a, "backend"_a, "stream"_a, "flex"_a.none() = nb::none(), "heads_major"_a = false,
        "Runs the flex kernel of a jit mods' shared object (flashcore.jit); returns the "
        "provider that ran (sm90 or sm80). heads_major: q, k, v and out are BHSD.");
  m.def("check_cu_seqlens", &check_cu_seqlens, "name"_a, "cu_seqlens"_a, "total"_a, "max_seqlen"_a,
        "Raises ValueError where cu_seqlens (host ints) is not 0 first, nondecreasing, total last "
        "with no sequence above max_seqlen.");
  m.def("use_exchange_api", &flashcore_python::use_exchange_api, "type"_a,
        "Takes arrays of exactly this type through its DLPack C exchange API (DLPack 1.3) from now "
        "on; False, and nothing changed, where the type publishes no usable table.");
  m.def("providers", &provider_names, "Names of the backends compiled into this build.");
  m.def("plug_unfused", &plug_unfused, "backend"_a,
        "Plugs the unfused baseline (flashcore._unfused) into this module's registry.");
  flashcore_python::bind_flex(m);
  flashcore_python::bind_backward(m);
}
