// Varlen checks: the host-side ones that validate_arguments runs before any launch, and the
// content checks of flashcore/varlen.hpp.
#include "flashcore/varlen.hpp"

#include <cuda_runtime_api.h>

#include <vector>

#include "api/validate.hpp"
#include "common/status_message.hpp"

namespace flashcore {

using detail::cat;
using detail::invalid_argument;

Status check_cu_seqlens(const char* name, const int32_t* cu, int64_t batch, int64_t total,
                        int64_t max_seqlen) {
  if (cu == nullptr) return invalid_argument(cat(name, " is null"));
  if (cu[0] != 0) {
    return invalid_argument(cat(name, "[0] is ", cu[0], "; it must be 0 (cumulative lengths)"));
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t length = int64_t{cu[b + 1]} - cu[b];
    if (length < 0) {
      return invalid_argument(cat(name, " is not sorted: entry ", b + 1, " (", cu[b + 1],
                                  ") is below entry ", b, " (", cu[b],
                                  "); pass cumulative sequence lengths, nondecreasing"));
    }
    if (length > max_seqlen) {
      return invalid_argument(cat(name, " makes sequence ", b, " ", length,
                                  " long, above max_seqlen ", max_seqlen,
                                  "; pass the longest sequence's length"));
    }
  }
  if (cu[batch] != total) {
    return invalid_argument(cat(name, "[batch] is ", cu[batch], " but the packed tensors hold ",
                                total, " rows (seqlen); the last entry must be the total"));
  }
  return Status::Ok();
}

Status check_varlen_on_device(const AttentionParams& p) {
  if (Status s = detail::validate_varlen_arguments(p); !s.ok()) return s;
  if (!is_varlen(p)) return invalid_argument("cu_seqlens_q and cu_seqlens_k are null: not varlen");
  const size_t entries = static_cast<size_t>(p.batch) + 1;
  std::vector<int32_t> cu_q(entries), cu_k(entries);
  for (const auto& [to, from] : {std::pair{&cu_q, p.cu_seqlens_q}, {&cu_k, p.cu_seqlens_k}}) {
    const cudaError_t err = cudaMemcpyAsync(to->data(), from, entries * sizeof(int32_t),
                                            cudaMemcpyDeviceToHost, p.stream);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return {StatusCode::kCudaError,
              cat("copying cu_seqlens to the host: ", cudaGetErrorString(err))};
    }
  }
  if (const cudaError_t err = cudaStreamSynchronize(p.stream); err != cudaSuccess) {
    return {StatusCode::kCudaError,
            cat("copying cu_seqlens to the host: ", cudaGetErrorString(err))};
  }
  if (Status s = check_cu_seqlens("cu_seqlens_q", cu_q.data(), p.batch, p.seqlen_q, p.max_seqlen_q);
      !s.ok()) {
    return s;
  }
  return check_cu_seqlens("cu_seqlens_k", cu_k.data(), p.batch, p.seqlen_k, p.max_seqlen_k);
}

namespace detail {

Status validate_varlen_arguments(const AttentionParams& p) {
  if (!is_varlen(p)) {
    if (p.max_seqlen_q != 0 || p.max_seqlen_k != 0) {
      return invalid_argument(cat("max_seqlen_q/k are ", p.max_seqlen_q, "/", p.max_seqlen_k,
                                  " but cu_seqlens_q and cu_seqlens_k are null; set the "
                                  "cu_seqlens for a varlen batch, or leave max_seqlen at 0"));
    }
    return Status::Ok();
  }
  if (p.cu_seqlens_q == nullptr || p.cu_seqlens_k == nullptr) {
    return invalid_argument(cat(p.cu_seqlens_q == nullptr ? "cu_seqlens_q" : "cu_seqlens_k",
                                " is null but the other is set; a varlen batch needs both (pass "
                                "one array twice when q and k share lengths)"));
  }
  for (const auto& [name, data] :
       {std::pair{"cu_seqlens_q", p.cu_seqlens_q}, std::pair{"cu_seqlens_k", p.cu_seqlens_k}}) {
    if (reinterpret_cast<uintptr_t>(data) % alignof(int32_t) != 0) {
      return invalid_argument(cat(name, " is not 4-byte aligned; pass an int32 array"));
    }
  }
  const std::pair<const char*, int64_t> bounds[] = {{"q", p.seqlen_q}, {"k", p.seqlen_k}};
  const int64_t maxima[] = {p.max_seqlen_q, p.max_seqlen_k};
  for (int i = 0; i < 2; ++i) {
    const auto& [side, total] = bounds[i];
    if (maxima[i] <= 0 || maxima[i] > total) {
      return invalid_argument(cat("max_seqlen_", side, " is ", maxima[i],
                                  "; with cu_seqlens it must be the longest ", side,
                                  " sequence's length, in [1, seqlen_", side, " = ", total,
                                  "] (seqlen_", side, " is the packed total)"));
    }
  }
  return Status::Ok();
}

}  // namespace detail
}  // namespace flashcore
