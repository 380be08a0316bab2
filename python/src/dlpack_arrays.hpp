// The binding's array arguments. A DLPack array comes in zero-copy either way; what differs is
// the host time. nanobind imports an array through its `__dlpack__()`, which for a torch tensor is
// Python code (flashcore passes torch.utils.dlpack.to_dlpack's capsule instead, made in C), and a
// flex call passes up to 16 arrays. DLPack 1.3's C exchange API lets an array type publish C
// functions that describe one of its objects with no Python call and no capsule; torch.Tensor does
// since torch 2.10. For the types registered here (flashcore/__init__.py registers torch.Tensor
// where it publishes the table) the arguments are described through it; every other object goes
// through nanobind's import as before.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <utility>

namespace flashcore_python {

namespace nb = nanobind;

// DLPack's `DLPackExchangeAPI` (dlpack.h 1.3): a type publishes it as the PyCapsule
// `__dlpack_c_exchange_api__`, named "dlpack_exchange_api", valid for the process's lifetime.
// Declared here from the spec; only the stable header and the non-owning export are used. The
// export fills a DLTensor, laid out as nanobind's dlpack::dltensor, valid until control returns to
// the producer; it does no stream synchronization (the kernels run on the caller's stream anyway).
struct DLPackExchangeApi {
  struct {
    uint32_t major;
    uint32_t minor;
  } version;
  const void* prev_api;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, nb::dlpack::dltensor* out);
  void* current_work_stream;
};

// The one registered type and its table. Exact type only: a subclass (a Parameter, a tensor
// subclass with its own __dlpack__) goes through nanobind's import as before. Set under the GIL,
// read by the casters, which run under it.
struct ExchangeRegistry {
  PyTypeObject* type = nullptr;  // holds a reference, so its address is never reused
  const DLPackExchangeApi* api = nullptr;
};

inline ExchangeRegistry& exchange_registry() {
  static ExchangeRegistry registry;
  return registry;
}

// Registers `type`'s exchange table for the array arguments; false (nothing registered) where the
// type publishes none, or one older than DLPack 1.3 or without the non-owning export.
inline bool use_exchange_api(const nb::handle& type) {
  if (!PyType_Check(type.ptr())) throw nb::type_error("use_exchange_api takes a type");
  constexpr const char* kCapsuleName = "dlpack_exchange_api";
  if (!nb::hasattr(type, "__dlpack_c_exchange_api__")) return false;
  const nb::object capsule = type.attr("__dlpack_c_exchange_api__");
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) return false;
  const auto* api =
      static_cast<const DLPackExchangeApi*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  if (api == nullptr || api->version.major != 1 || api->version.minor < 3 ||
      api->dltensor_from_py_object_no_sync == nullptr) {
    return false;
  }
  ExchangeRegistry& registry = exchange_registry();
  PyTypeObject* previous = registry.type;
  registry.type = reinterpret_cast<PyTypeObject*>(type.inc_ref().ptr());
  registry.api = api;
  Py_XDECREF(previous);
  return true;
}

// The widest array a call takes (q, k, v and O are rank 4); a wider one takes nanobind's import,
// which reports the rank error as before.
inline constexpr int kMaxExchangeRank = 8;

// An array argument: a nanobind ndarray (Base: nb::ndarray<nb::ro> or nb::ndarray<>) that the
// caster below fills through the exchange table where it can.
template <typename Base>
struct DLPackArray : Base {
  DLPackArray() = default;
  explicit DLPackArray(Base base) : Base(std::move(base)) {}
};

using Array = DLPackArray<nb::ndarray<nb::ro>>;  // inputs may be read-only views
using MutableArray = DLPackArray<nb::ndarray<>>;

// Describes `src` through the registered table; false where it is not of the registered type or
// the producer declines (the fallback then gives the producer's own error, if any).
template <typename Base>
bool from_exchange_api(nb::handle src, DLPackArray<Base>* out) noexcept {
  const ExchangeRegistry& registry = exchange_registry();
  if (registry.api == nullptr || Py_TYPE(src.ptr()) != registry.type) return false;
  nb::dlpack::dltensor tensor;
  if (registry.api->dltensor_from_py_object_no_sync(src.ptr(), &tensor) != 0) {
    PyErr_Clear();
    return false;
  }
  if (tensor.ndim < 0 || tensor.ndim > kMaxExchangeRank) return false;
  size_t shape[kMaxExchangeRank];  // DLPack's sizes are int64, nanobind's size_t; none negative
  for (int i = 0; i < tensor.ndim; ++i) shape[i] = static_cast<size_t>(tensor.shape[i]);
  try {
    // The ndarray copies the shape and strides and keeps a reference to src, the data's owner.
    *out =
        DLPackArray<Base>(Base(static_cast<char*>(tensor.data) + tensor.byte_offset,
                               static_cast<size_t>(tensor.ndim), shape, src, tensor.strides,
                               tensor.dtype, tensor.device.device_type, tensor.device.device_id));
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace flashcore_python

namespace nanobind::detail {

template <typename Base>
struct type_caster<flashcore_python::DLPackArray<Base>> {
  NB_TYPE_CASTER(flashcore_python::DLPackArray<Base>, make_caster<Base>::Name)

  // Flags is uint8_t in nanobind 2 and uint32_t in nanobind 3.
  template <typename Flags>
  bool from_python(handle src, Flags flags, cleanup_list* cleanup) noexcept {
    if (flashcore_python::from_exchange_api(src, &value)) return true;
    make_caster<Base> fallback;
    if (!fallback.from_python(src, flags, cleanup)) return false;
    value = flashcore_python::DLPackArray<Base>(std::move(fallback.value));
    return true;
  }

  static handle from_cpp(const Value& array, rv_policy policy, cleanup_list* cleanup) noexcept {
    return make_caster<Base>::from_cpp(array, policy, cleanup);
  }
};

}  // namespace nanobind::detail
