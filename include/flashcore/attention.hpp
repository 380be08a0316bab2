// flashcore public C++ API: one params struct, can_implement() and run().
//
// Layout "BSHD": Q [B, Sq, Hq, D], K and V [B, Sk, Hkv, D], O [B, Sq, Hq, D]. Every tensor carries
// element strides for its batch, sequence and head dims; the last dim is contiguous. A BHSD tensor
// is passed by swapping the sequence and head strides, with no copy. LSE is [B, Hq, Sq] fp32,
// natural log, contiguous. Variable-length batches pack the sequences instead (cu_seqlens below).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flashcore {

enum class DType { kFloat16, kBFloat16 };

// head_dim limits of every backend: rows are 16-byte aligned, so head_dim is a multiple of
// kHeadDimMultiple fp16/bf16 elements, and no kernel tiles more than kMaxHeadDim.
inline constexpr int64_t kHeadDimMultiple = 8;
inline constexpr int64_t kMaxHeadDim = 256;

// Which kernel computes the attention. kAuto picks the fastest one that implements the problem on
// the current device; a named backend is used as asked or fails with kUnsupported.
enum class Backend {
  kAuto,
  kUnfused,  // cuBLAS QK^T, a scale/mask/softmax kernel, cuBLAS PV; needs a workspace
  kScalar,   // one fused kernel, online softmax on CUDA cores (no tensor cores)
  kWmma,     // fused, nvcuda::wmma 16x16x16 tensor cores: the lab's "tensor cores, first try"
  kSm80,     // FlashAttention-2 class: mma.sync m16n8k16, ldmatrix, cp.async pipeline (sm80+)
  // FlashAttention-3 class, Hopper (sm_90) only: TMA loads, wgmma, warp-specialized persistent
  // CTAs with pingpong and intra-warpgroup overlap; every head dim that is a multiple of 8 up to
  // 256. kAuto picks it on sm_90 except for grids of at most one 128-row query tile per two SMs
  // (short sequences at small batch x heads), where sm80's small-grid tiles and split-KV win.
  kSm90,
};

// CTA tile of the tensor-core kernel (sm80 backend; the others have one tile and ignore this).
// kAuto takes the large tile unless its grid leaves SMs idle. Forcing one is for tests, the lab
// and tuning; a forced tile the device cannot hold fails with kUnsupported.
enum class TileShape {
  kAuto,
  kLarge,  // 128-row CTAs (64 at hd256), every warp sees every key: grids that fill the GPU
  kSmall,  // 32-row CTAs whose warps split each K/V tile by keys: small batch x heads x seqlen
  // The small-grid schedule on Hopper: 64-row CTAs whose key groups are warpgroups issuing wgmma
  // (sm_90a; head_dim 64). kAuto takes it on sm_90 instead of kSmall once kSmall's grid is past
  // one wave.
  kWarpgroup,
  // Hopper, head_dim 64: one-warpgroup CTAs (wgmma) in clusters of two that split each 64-row
  // query tile's keys and merge through distributed shared memory. kAuto takes it instead of
  // kWarpgroup once kWarpgroup's grid is past one wave. Splits the keys itself: num_splits 0 or 1.
  kWarpgroupPair,
};
// The names parse_tile_shape() accepts, in TileShape order (the lab's --tile, Python's tile=).
inline constexpr const char* kTileShapeNames[] = {"auto", "large", "small", "warpgroup",
                                                  "warpgroup-pair"};

enum class StatusCode {
  kOk,
  kInvalidArgument,  // the caller passed something that is never valid
  kUnsupported,      // valid in general, but no (chosen) backend implements it on this device
  kNoDevice,         // no CUDA device, or the device could not be queried
  kCudaError,        // a CUDA or cuBLAS call failed while running
};

struct Status {
  StatusCode code = StatusCode::kOk;
  std::string message;  // names the argument and the fix when code != kOk

  bool ok() const { return code == StatusCode::kOk; }
  static Status Ok() { return {}; }
};

// Element strides of a rank-4 tensor. 64-bit, so tensors beyond 2^31 elements index correctly.
// The last dim must be contiguous (dim == 1); it is spelled out so that a caller holding a
// non-contiguous view gets a clear error instead of wrong answers.
struct Strides {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t head = 0;
  int64_t dim = 1;
};

// Strides of a contiguous BSHD tensor [B, S, H, D].
inline Strides bshd_strides(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return {seqlen * heads * head_dim, heads * head_dim, head_dim, 1};
}

// Strides of a contiguous BHSD tensor [B, H, S, D], seen through the BSHD index order.
inline Strides bhsd_strides(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return {seqlen * heads * head_dim, head_dim, seqlen * head_dim, 1};
}

// A tensor argument: device pointer, element type and strides.
struct InputTensor {
  const void* data = nullptr;
  DType dtype = DType::kFloat16;
  Strides strides;
};
struct OutputTensor {
  void* data = nullptr;
  DType dtype = DType::kFloat16;
  Strides strides;
};

// Window sizes meaning "no limit on this side".
inline constexpr int64_t kUnboundedWindow = -1;

struct AttentionParams {
  int64_t batch = 0;
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t heads_q = 0;
  int64_t heads_kv =
      0;  // heads_q % heads_kv == 0 (GQA/MQA); query head h reads kv head h / (heads_q / heads_kv)
  int64_t head_dim = 0;

  // Q, K, V and O share one dtype, fp16 or bf16; accumulation is always fp32.
  InputTensor q, k, v;
  OutputTensor o;
  float* lse = nullptr;  // optional [B, Hq, Sq] ([Hq, total_q] varlen); fully masked rows get -inf

  float softmax_scale = 0.f;  // 0 means 1/sqrt(head_dim)
  // Query i sees key j when i + Sk - Sq - window_left <= j <= i + Sk - Sq + window_right
  // (bottom-right aligned, as FlashAttention >= 2.1). -1 leaves that side unbounded. causal forces
  // window_right = 0.
  bool causal = false;
  int64_t window_left = kUnboundedWindow;
  int64_t window_right = kUnboundedWindow;
  float softcap = 0.f;  // s = softcap * tanh(s / softcap) on the scaled score; 0 turns it off

  // Variable-length batches, as FlashAttention's flash_attn_varlen_func: set both cu_seqlens to
  // pack `batch` sequences of different lengths with no padding (flashcore/varlen.hpp checks their
  // contents). Then seqlen_q and seqlen_k are the totals over the batch, q and o are
  // [total_q, Hq, D] and k and v [total_k, Hkv, D] (the batch strides are ignored), sequence b is
  // rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 of q and o and likewise of k and v, and LSE is
  // [Hq, total_q]. Each cu_seqlens is int32 [batch + 1] in device memory: 0 first, nondecreasing,
  // the total last (a sequence may be empty). max_seqlen_q and max_seqlen_k bound the sequences'
  // lengths (they size the grid). causal, window and softcap apply within each sequence, bottom-
  // right aligned to its own lengths. run() reads the arrays only on the device, so it neither
  // synchronizes nor checks their contents: a wrong array gives wrong results, not an error.
  // No backend runs varlen yet; each says so in its reason.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int64_t max_seqlen_q = 0;
  int64_t max_seqlen_k = 0;

  Backend backend = Backend::kAuto;
  // Split-KV (flash-decoding) for backends that support it: 0 lets a heuristic choose from the SM
  // count and sizes, 1 disables splitting, n > 1 splits Sk across n CTAs per query tile.
  int num_splits = 0;
  TileShape tile = TileShape::kAuto;
  // Programmatic dependent launch (sm_90+; the sm80 backend's small-grid tiles, unsplit): the
  // kernel may be scheduled while the previous kernel in the stream still runs, and waits for it
  // to finish before its first memory access, so its launch and setup overlap that kernel's tail.
  // It also lets the next kernel, if that one is launched this way, start while this one runs.
  // Results are the same either way; false launches plainly. No effect elsewhere.
  bool enable_pdl = true;
  cudaStream_t stream = nullptr;

  // Scratch for backends that need it (see workspace_size). When null, run() allocates it on the
  // stream with cudaMallocAsync and frees it after the launch, stream-ordered.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Which backend ran, and its name as the lab reports it ("provider").
struct RunInfo {
  Backend backend = Backend::kAuto;
  const char* provider = "";
};

// Checks every argument and the device without launching anything.
Status can_implement(const AttentionParams& params);

// Bytes of workspace that run() needs for these params on the current device: split-KV partials,
// the sm90 kernel's tile counter for masked problems, the unfused baseline's scores; 0 otherwise.
// Returns 0 when the params are invalid; can_implement() says why.
size_t workspace_size(const AttentionParams& params);

// Validates (as can_implement), then launches on params.stream. Writes nothing when it fails
// validation. Does not synchronize.
Status run(const AttentionParams& params, RunInfo* info = nullptr);

// The backend that kAuto resolves to for these params on the current device.
Backend resolve_backend(const AttentionParams& params);

// Every backend this build registers (kAuto excluded), fastest first.
std::vector<Backend> backends();
const char* backend_name(Backend backend);
// Parses a backend_name(); returns false for an unknown name.
bool parse_backend(const std::string& name, Backend* backend);
// Parses one of kTileShapeNames; returns false for any other name.
bool parse_tile_shape(const std::string& name, TileShape* tile);

}  // namespace flashcore
