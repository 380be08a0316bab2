// The library's compiled create_block_mask: the template of flashcore/flex/create_block_mask.cuh
// instantiated once, for the runtime-selected built-in masks.
#include "flashcore/flex/create_block_mask.cuh"
#include "flashcore/flex/create_block_mask.hpp"

namespace flashcore::flex {

Status create_block_mask(const BuiltinMask& mask, const BlockMask& shape, void* buffer,
                         size_t buffer_bytes, BlockMask* out, cudaStream_t stream) {
  return create_block_mask<BuiltinMask>(mask, shape, buffer, buffer_bytes, out, stream);
}

}  // namespace flashcore::flex
