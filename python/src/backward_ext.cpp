// The backward's binding: DLPack arrays in (the forward's q, k, v, out and lse, the incoming dO,
// the dq, dk and dv to write; the forward's flex fields for flex_attention and attention_varlen),
// flashcore::run_backward on the caller's stream. The arrays come from
// flashcore's own custom op (python/flashcore/_ops.py), which made out and lse itself, so this
// checks only what BackwardParams cannot say (rank, dtype, device); run_backward validates the
// rest.
#include "backward_ext.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>

#include "dlpack_arrays.hpp"
#include "ext_support.hpp"
#include "flashcore/backward.hpp"
#include "flex_args.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace flashcore_python {
namespace {

flashcore::DType dtype_of(const char* name, nb::dlpack::dtype dtype) {
  if (dtype.lanes == 1 && dtype.bits == 16) {
    if (dtype.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float)) {
      return flashcore::DType::kFloat16;
    }
    if (dtype.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat)) {
      return flashcore::DType::kBFloat16;
    }
  }
  throw nb::type_error((std::string(name) + " must be float16 or bfloat16").c_str());
}

template <typename A>
flashcore::Strides strides_of(const char* name, const A& a) {
  if (a.ndim() != 4) {
    throw nb::value_error(
        (std::string(name) + " must be 4-D [batch, seqlen, heads, head_dim]").c_str());
  }
  return {a.stride(0), a.stride(1), a.stride(2), a.stride(3)};
}

struct Tensors {
  const Array& q;
  const Array& k;
  const Array& v;
  const Array& out;
  const Array& lse;
  const Array& d_o;
  const MutableArray& dq;
  const MutableArray& dk;
  const MutableArray& dv;
};

// flex: flashcore.flex_attention / attention_varlen's fields (python/src/flex_args.hpp), the
// forward's, or None.
flashcore::BackwardParams make_params(const Tensors& t, float softmax_scale, bool causal,
                                      int64_t window_left, int64_t window_right, float softcap,
                                      bool deterministic, const std::optional<nb::dict>& flex,
                                      int* device) {
  flashcore::BackwardParams p;
  auto input = [&](const char* name, const Array& a) {
    return flashcore::InputTensor{a.data(), dtype_of(name, a.dtype()), strides_of(name, a)};
  };
  auto output = [&](const char* name, const MutableArray& a) {
    return flashcore::OutputTensor{a.data(), dtype_of(name, a.dtype()), strides_of(name, a)};
  };
  p.q = input("q", t.q);
  p.k = input("k", t.k);
  p.v = input("v", t.v);
  p.o = input("out", t.out);
  p.d_o = input("d_o", t.d_o);
  p.dq = output("dq", t.dq);
  p.dk = output("dk", t.dk);
  p.dv = output("dv", t.dv);
  if (t.lse.ndim() != 3 || t.lse.dtype() != nb::dtype<float>()) {
    throw nb::value_error("lse must be the forward's float32 [batch, heads_q, seqlen_q]");
  }
  p.lse = static_cast<const float*>(t.lse.data());
  p.batch = static_cast<int64_t>(t.q.shape(0));
  p.seqlen_q = static_cast<int64_t>(t.q.shape(1));
  p.heads_q = static_cast<int64_t>(t.q.shape(2));
  p.head_dim = static_cast<int64_t>(t.q.shape(3));
  p.seqlen_k = static_cast<int64_t>(t.k.shape(1));
  p.heads_kv = static_cast<int64_t>(t.k.shape(2));
  p.softmax_scale = softmax_scale;
  p.causal = causal;
  p.window_left = window_left;
  p.window_right = window_right;
  p.softcap = softcap;
  p.deterministic = deterministic;
  *device = t.q.device_id();
  if (flex) {
    // The forward's parser, on the forward's params, so that the two read the fields alike; its
    // varlen and flex results are the backward's fields of the same names.
    flashcore::AttentionParams forward;
    forward.batch = p.batch;
    forward.seqlen_q = p.seqlen_q;
    forward.seqlen_k = p.seqlen_k;
    forward.heads_q = p.heads_q;
    forward.heads_kv = p.heads_kv;
    forward.head_dim = p.head_dim;
    flashcore_python::apply_flex(*flex, *device, &forward);
    p.batch = forward.batch;
    p.cu_seqlens_q = forward.cu_seqlens_q;
    p.cu_seqlens_k = forward.cu_seqlens_k;
    p.max_seqlen_q = forward.max_seqlen_q;
    p.max_seqlen_k = forward.max_seqlen_k;
    p.flex = forward.flex;
  }
  return p;
}

size_t backward_workspace_size(const Array& q, const Array& k, const Array& v, const Array& out,
                               const Array& lse, const Array& d_o, const MutableArray& dq,
                               const MutableArray& dk, const MutableArray& dv, float softmax_scale,
                               bool causal, int64_t window_left, int64_t window_right,
                               float softcap, bool deterministic,
                               const std::optional<nb::dict>& flex) {
  int device = 0;
  const flashcore::BackwardParams p =
      make_params({q, k, v, out, lse, d_o, dq, dk, dv}, softmax_scale, causal, window_left,
                  window_right, softcap, deterministic, flex, &device);
  flashcore::Status status;
  size_t bytes = 0;
  {
    nb::gil_scoped_release release;
    DeviceGuard guard(device);
    status = flashcore::can_implement_backward(p);
    if (status.ok()) bytes = flashcore::backward_workspace_bytes(p);
  }
  raise_status(status);
  return bytes;
}

void attention_backward(const Array& q, const Array& k, const Array& v, const Array& out,
                        const Array& lse, const Array& d_o, const MutableArray& dq,
                        const MutableArray& dk, const MutableArray& dv, float softmax_scale,
                        bool causal, int64_t window_left, int64_t window_right, float softcap,
                        bool deterministic, std::uintptr_t stream,
                        std::optional<MutableArray> workspace, const std::optional<nb::dict>& flex,
                        std::optional<MutableArray> d_sinks) {
  int device = 0;
  flashcore::BackwardParams p =
      make_params({q, k, v, out, lse, d_o, dq, dk, dv}, softmax_scale, causal, window_left,
                  window_right, softcap, deterministic, flex, &device);
  if (d_sinks) {
    // The op's own fp32 [Hq] buffer; run_backward checks that the forward had sinks.
    if (d_sinks->ndim() != 1 || static_cast<int64_t>(d_sinks->shape(0)) != p.heads_q ||
        d_sinks->dtype() != nb::dtype<float>() || d_sinks->device_id() != device) {
      throw nb::value_error("d_sinks must be float32 [heads_q] on q's device");
    }
    p.d_sinks = static_cast<float*>(d_sinks->data());
  }
  flashcore::Status status;
  {
    nb::gil_scoped_release release;
    DeviceGuard guard(device);
    status = flashcore::run_backward(p, workspace ? workspace->data() : nullptr,
                                     workspace ? workspace->nbytes() : 0,
                                     reinterpret_cast<cudaStream_t>(stream));
  }
  raise_status(status);
}

}  // namespace

void bind_backward(nb::module_& m) {
  m.def("attention_backward", &attention_backward, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "d_o"_a,
        "dq"_a, "dk"_a, "dv"_a, "softmax_scale"_a, "causal"_a, "window_left"_a, "window_right"_a,
        "softcap"_a, "deterministic"_a, "stream"_a, "workspace"_a.none() = nb::none(),
        "flex"_a.none() = nb::none(), "d_sinks"_a.none() = nb::none(),
        "Writes dq, dk and dv of the forward that made out and lse, on the given CUDA stream; "
        "flex: the forward's flex and varlen fields; d_sinks: float32 [heads_q] that gets the "
        "sink logits' gradient (with flex['sinks']).");
  m.def("backward_workspace_size", &backward_workspace_size, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a,
        "d_o"_a, "dq"_a, "dk"_a, "dv"_a, "softmax_scale"_a, "causal"_a, "window_left"_a,
        "window_right"_a, "softcap"_a, "deterministic"_a, "flex"_a.none() = nb::none(),
        "Bytes of device workspace attention_backward() needs for these arguments.");
}

}  // namespace flashcore_python
