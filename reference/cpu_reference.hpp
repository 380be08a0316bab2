// Float64 CPU reference attention: every feature of AttentionParams, computed the obvious way
// (scores, softcap, mask, two-pass softmax, PV) with the production mask and softcap functors.
// FlexAttention (mods, BlockMask, sinks): reference/cpu_flex_reference.hpp.
#pragma once

#include <vector>

#include "flashcore/attention.hpp"

namespace flashcore::reference {

// Sizes and options come from params; its tensor pointers and strides are ignored. q, k and v are
// host arrays in contiguous BSHD order; o is written [B, Sq, Hq, D] and lse [B, Hq, Sq]. A fully
// masked row gets o = 0 and lse = -inf. Varlen (params.cu_seqlens_q/k set, and then HOST arrays
// here): q, k, v and o are packed [total, H, D] and lse is [Hq, total_q]; their contents are
// checked and a bad array fails with kInvalidArgument. Dense problems always succeed.
Status cpu_attention(const AttentionParams& params, const std::vector<double>& q,
                     const std::vector<double>& k, const std::vector<double>& v,
                     std::vector<double>* o, std::vector<double>* lse);

}  // namespace flashcore::reference
