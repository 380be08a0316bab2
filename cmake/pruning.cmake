# Pruning: build the tensor-core kernels (sm80, sm90) for some head dims and dtypes only, as
# FlashAttention's FLASH_ATTENTION_DISABLE_* do, to cut compile time and binary size. Each head dim
# or dtype left out becomes FLASHCORE_DISABLE_HDIM<D> / FLASHCORE_DISABLE_FP16 / _BF16, which
# src/common/pruning.hpp reads for the instantiation lists and the backends' rejects(): a problem
# that needs a left-out kernel is rejected with a reason that says so, and auto picks another
# backend. sm80 and sm90 instantiate all eight head dims, each in translation units of its own (a
# head dim that is another multiple of 8 runs on the next multiple of 32 up, src/common/head_dim.hpp,
# so leaving out 96 also leaves out 72, 80 and 88). The scalar and WMMA kernels are small and
# always built.
set(FLASHCORE_ALL_HEAD_DIMS 32 64 96 128 160 192 224 256)
set(FLASHCORE_HEAD_DIMS "${FLASHCORE_ALL_HEAD_DIMS}" CACHE STRING
    "Head dims to build sm80/sm90 kernels for (a subset of ${FLASHCORE_ALL_HEAD_DIMS})")
set(FLASHCORE_DTYPES "fp16;bf16" CACHE STRING "Dtypes to build sm80/sm90 kernels for (fp16, bf16)")

foreach(head_dim IN LISTS FLASHCORE_HEAD_DIMS)
  if(NOT head_dim IN_LIST FLASHCORE_ALL_HEAD_DIMS)
    message(FATAL_ERROR "FLASHCORE_HEAD_DIMS has ${head_dim}; valid: ${FLASHCORE_ALL_HEAD_DIMS}")
  endif()
endforeach()
foreach(dtype IN LISTS FLASHCORE_DTYPES)
  if(NOT dtype MATCHES "^(fp16|bf16)$")
    message(FATAL_ERROR "FLASHCORE_DTYPES has ${dtype}; valid: fp16, bf16")
  endif()
endforeach()
if(NOT FLASHCORE_HEAD_DIMS OR NOT FLASHCORE_DTYPES)
  message(FATAL_ERROR "FLASHCORE_HEAD_DIMS and FLASHCORE_DTYPES need at least one entry each")
endif()

# Every target that compiles an instantiation list or a rejects() links this, so that all see
# the same list.
add_library(flashcore_pruning INTERFACE)
set(pruned)
foreach(head_dim IN LISTS FLASHCORE_ALL_HEAD_DIMS)
  if(NOT head_dim IN_LIST FLASHCORE_HEAD_DIMS)
    target_compile_definitions(flashcore_pruning INTERFACE FLASHCORE_DISABLE_HDIM${head_dim})
    list(APPEND pruned "hd${head_dim}")
  endif()
endforeach()
foreach(dtype IN ITEMS fp16 bf16)
  if(NOT dtype IN_LIST FLASHCORE_DTYPES)
    string(TOUPPER ${dtype} upper)
    target_compile_definitions(flashcore_pruning INTERFACE FLASHCORE_DISABLE_${upper})
    list(APPEND pruned ${dtype})
  endif()
endforeach()
if(pruned)
  list(JOIN pruned ", " pruned)
  message(STATUS "flashcore: pruned build, no sm80/sm90 kernels for ${pruned}")
endif()
