// The C ABI's flex structs as the C++ API's (src/api/c_api_flex.cpp).
#pragma once

#include "flashcore/attention.hpp"
#include "flashcore/flashcore.h"

namespace flashcore::detail {

flex::BlockMask to_block_mask(const flashcore_block_mask& c);
// doc_ids_k NULL with doc_ids_q set means self-attention over doc_ids_q.
flex::BuiltinMask to_builtin_mask(const flashcore_mask_mod& c);
// The flex fields of flashcore_attention_params, and the same fields of the backward's params.
flex::FlexOptions to_flex_options(const flashcore_attention_params& c);
flex::FlexOptions to_flex_options(const flashcore_backward_params& c);

}  // namespace flashcore::detail
