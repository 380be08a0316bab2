// flashcore._flashcore's backward functions (backward_ext.cpp), bound next to attention().
#pragma once

#include <nanobind/nanobind.h>

namespace flashcore_python {

void bind_backward(nanobind::module_& m);

}  // namespace flashcore_python
