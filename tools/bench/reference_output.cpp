#include "reference_output.hpp"

#include "reference/cpu_reference.hpp"
#include "reference/gpu_oracle.hpp"

namespace flashcore::bench {
namespace {

bool cuda_ok(cudaError_t err, const std::string& what, std::string* error) {
  if (err == cudaSuccess) return true;
  *error = what + ": " + cudaGetErrorString(err);
  cudaGetLastError();
  return false;
}

}  // namespace

AttentionParams case_params(const Case& c, const void* q, const void* k, const void* v, void* o) {
  const DType dtype = c.dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  AttentionParams p;
  p.batch = c.batch;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = c.head_dim;
  p.q = {q, dtype, bshd_strides(c.seqlen_q, c.heads_q, c.head_dim)};
  p.k = {k, dtype, bshd_strides(c.seqlen_k, c.heads_kv, c.head_dim)};
  p.v = {v, dtype, bshd_strides(c.seqlen_k, c.heads_kv, c.head_dim)};
  p.o = {o, dtype, bshd_strides(c.seqlen_q, c.heads_q, c.head_dim)};
  p.causal = c.causal;
  p.window_left = c.window_left;
  return p;
}

bool reference_output(const AttentionParams& p, const HostValues* host, cudaStream_t stream,
                      std::vector<double>* out, std::string* kind, std::string* error) {
  if (host != nullptr) {
    *kind = "cpu-fp64";
    std::vector<double> lse;
    reference::cpu_attention(p, *host->q, *host->k, *host->v, out, &lse);
    return true;
  }
  *kind = "gpu-fp32";
  const size_t o_elems = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
  const size_t lse_elems = static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q);
  float *o32 = nullptr, *lse32 = nullptr;
  bool ok = cuda_ok(cudaMalloc(reinterpret_cast<void**>(&o32), 4 * o_elems),
                    "cudaMalloc oracle output", error) &&
            cuda_ok(cudaMalloc(reinterpret_cast<void**>(&lse32), 4 * lse_elems),
                    "cudaMalloc oracle lse", error);
  if (ok) {
    const Status status = reference::gpu_oracle(p, o32, lse32, stream);
    if (!status.ok()) {
      *error = "GPU oracle: " + status.message;
      ok = false;
    }
  }
  std::vector<float> host_out(ok ? o_elems : 0);
  if (ok) {
    ok = cuda_ok(cudaMemcpyAsync(host_out.data(), o32, 4 * o_elems, cudaMemcpyDeviceToHost, stream),
                 "download oracle output", error) &&
         cuda_ok(cudaStreamSynchronize(stream), "GPU oracle", error);
  }
  cudaFree(o32);
  cudaFree(lse32);
  if (!ok) return false;
  out->assign(host_out.begin(), host_out.end());
  return true;
}

}  // namespace flashcore::bench
