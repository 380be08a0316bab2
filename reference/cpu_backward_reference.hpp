// Float64 CPU reference of the backward pass: dQ, dK and dV of the forward reference
// (cpu_reference.hpp), computed the obvious way with the production mask and softcap functors.
// For each query row i and visible key j, with s = scale * q_i . k_j, t = softcap(s) and
// P = softmax_j(t):
//   dV_j += P_ij dO_i,  dP_ij = dO_i . v_j,  D_i = sum_j P_ij dP_ij (= dO_i . O_i),
//   dT_ij = P_ij (dP_ij - D_i),  dS_ij = dT_ij * (1 - tanh^2(s / cap)) (1 without softcap),
//   dQ_i += scale dS_ij k_j,  dK_j += scale dS_ij q_i.
// dK and dV of a kv head sum over the query heads of its group. A fully masked row has P = 0, so
// it contributes nothing and its dQ is zero.
#pragma once

#include <vector>

#include "flashcore/backward.hpp"

namespace flashcore::reference {

// Sizes and options come from params; its pointers and strides are ignored. q, k, v and d_o are
// host arrays in contiguous BSHD order; dq is written [B, Sq, Hq, D] and dk, dv [B, Sk, Hkv, D].
// The softmax is recomputed here in float64 (the forward's O and LSE are not inputs).
void cpu_attention_backward(const BackwardParams& params, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v,
                            const std::vector<double>& d_o, std::vector<double>* dq,
                            std::vector<double>* dk, std::vector<double>* dv);

}  // namespace flashcore::reference
