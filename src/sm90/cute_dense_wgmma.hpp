// CuTe's extended wgmma shapes without its extended *sparse* ones, for the translation units that
// src/CMakeLists.txt compiles with CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (and includes this into
// first, with nvcc's --pre-include).
//
// That define gives CuTe's selectors the wgmma N outside {8, 16, 32, 64, 96, 128, 192, 256} (80,
// 160, 224, ...; wgmma.hpp, kWholeWgmmaN), and with them the sparse wgmma atoms of every extended
// shape. flashcore never issues a sparse wgmma, and that one header is most of the define's compile
// time: about 7 of the 12 s that cicc spends reading headers for sm90_fwd_hd256.cu, paid again by
// cudafe++ (nvcc --fdevice-time-trace).
//
// Each of CuTe's four gmma headers (arch and atom, dense and sparse) includes its extended part as
// its last line, under the define, and every one of them is `#pragma once`. So this parses the
// atom headers (which include the arch ones) with the define unset, then the extended parts with it
// set, all but the sparse atoms' (mma_traits_sm90_gmma_sparse_ext.hpp). The extended sparse *arch*
// header stays: it is quick to read, and the selectors name its instructions
// (cute/arch/mma_sm90.hpp, which the dense atoms' extended part includes, here with the define
// set). Included after some other CuTe header this would change nothing: the headers it names
// would already have been parsed.
#pragma once

#if defined(CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED)
#undef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#include <cute/atom/mma_traits_sm90_gmma_sparse.hpp>
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#include <cute/arch/mma_sm90_gmma_ext.hpp>
#include <cute/arch/mma_sm90_gmma_sparse_ext.hpp>
#include <cute/atom/mma_traits_sm90_gmma_ext.hpp>
#endif
