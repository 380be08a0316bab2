// Float64 CPU reference attention: every feature of AttentionParams, computed the obvious way
// (scores, softcap, mask, two-pass softmax, PV) with the production mask and softcap functors.
#pragma once

#include <vector>

#include "flashcore/attention.hpp"

namespace flashcore::reference {

// Sizes and options come from params (its pointers and strides are ignored). q, k and v are host
// arrays in contiguous BSHD order; o is written [B, Sq, Hq, D] and lse [B, Hq, Sq]. A fully masked
// row gets o = 0 and lse = -inf.
void cpu_attention(const AttentionParams& params, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v,
                   std::vector<double>* o, std::vector<double>* lse);

}  // namespace flashcore::reference
