// create_block_mask for the built-in masks, compiled into the library: callable from any C++
// compiler, the C ABI and Python. Masks of your own functors: flashcore/flex/create_block_mask.cuh.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "flashcore/flex/block_mask.hpp"
#include "flashcore/flex/builtin_mods.hpp"

namespace flashcore::flex {

// As the template in create_block_mask.cuh: builds the BlockMask of mask for shape into buffer
// (device memory of block_mask_bytes(shape)) in one launch on stream; *out points into buffer.
// The mask's document ids and prefix lengths must be device memory. Does not synchronize.
Status create_block_mask(const BuiltinMask& mask, const BlockMask& shape, void* buffer,
                         size_t buffer_bytes, BlockMask* out, cudaStream_t stream);

}  // namespace flashcore::flex
