// Attention sinks after a forward that ran without them (flashcore/flex/sinks.hpp): a row's sink
// only adds exp(sink[h]) to its softmax denominator, so from the finished row's O and natural-log
// LSE
//
//   LSE' = log(exp(LSE) + exp(sink[h])),   O' = O * exp(LSE - LSE'),
//
// and a row that saw no key (LSE = -inf, O = 0) gets LSE' = sink[h]. One read and write of O: the
// sm90 backend runs sinks this way wherever the persistent kernel's sinks variant does not (decode,
// whose O is a few rows per head while the kernels read the whole KV cache; the small-grid tiles;
// head dims without the variant; softcap). O is rounded to its dtype twice (by the forward, then
// here): at most one more rounding of each element.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashcore/attention.hpp"

namespace flashcore::sm80 {

struct SinkRescaleArgs {
  void* o;  // fp16 or bf16 [batch, seqlen, heads, head_dim] through strides (elements), as
            // validated (16-byte aligned rows, head dim contiguous and a multiple of 8)
  bool bf16;
  Strides o_strides;
  int64_t batch, seqlen, heads, head_dim;  // a varlen batch: batch 1, seqlen the packed total
  const float* lse_in;                     // [batch, heads, seqlen]: the forward's, without sinks
  float* lse_out;                          // the same layout (may be lse_in), or null
  const float* sink_logits;                // fp32 [heads]
};

cudaError_t launch_sink_rescale(const SinkRescaleArgs& args, cudaStream_t stream);

}  // namespace flashcore::sm80
