// flashcore._unfused: the cuBLAS baseline in a module of its own, so that importing flashcore loads
// no cuBLAS. It only hands its entry points to flashcore._flashcore (plug_unfused), which Python
// does the first time backend="unfused" is asked for (flashcore/_core.py).
#include <nanobind/nanobind.h>

#include "baseline/unfused.hpp"

namespace nb = nanobind;

NB_MODULE(_unfused, m) {
  m.doc() = "flashcore's unfused cuBLAS baseline, plugged into flashcore._flashcore on demand";
  m.def(
      "backend",
      [] { return nb::capsule(&flashcore::detail::unfused_backend(), "flashcore.BackendImpl"); },
      "The baseline's entry points, for flashcore._flashcore.plug_unfused.");
}
