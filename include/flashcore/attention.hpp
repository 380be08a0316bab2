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

#include "flashcore/flex/options.hpp"

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
  // Hopper (sm_90) only. FlashAttention-3 class: TMA loads, wgmma, warp-specialized persistent
  // CTAs with pingpong and intra-warpgroup overlap; every head dim that is a multiple of 8 up to
  // 256. Grids too small for that kernel (short sequences at small batch x heads, decode) run
  // small-grid tiles instead: the sm80 schedule with wgmma, cluster pairs and programmatic
  // dependent launch (head dims 64, 128, 256). kAuto picks it on sm_90 except for the few small
  // grids where the sm80 backend's large tile was measured faster.
  kSm90,
};

// CTA tile of the tensor-core backends (sm80, sm90; the others have one tile and ignore this),
// named by its shape and how it splits the work, whatever instructions a backend runs it with.
// kAuto lets the backend pick: the large tile unless its grid leaves SMs idle. Forcing one is for
// tests, the lab and tuning. A backend without the forced tile, or a device that cannot hold it,
// fails with kUnsupported; with Backend::kAuto the first backend (fastest first) that has it runs.
// The values are the C ABI's `tile` (flashcore.h): new shapes are appended, never renumbered.
enum class TileShape {
  kAuto,
  // The backend's tile for grids that fill the GPU. sm80: 128-row CTAs (64 at hd256) whose warps
  // each see every key. sm90: its persistent warp-specialized kernel (128- or 192-row tiles).
  kLarge,
  // 32-row CTAs whose warps split each K/V tile by keys (four key groups; two at hd256), merged
  // in shared memory: small batch x heads x seqlen. sm80, and sm90 (launched dependently).
  kSmall,
  // 64-row CTAs whose four key groups (of four warps each) split each K/V tile by keys: twice the
  // rows of kSmall per CTA, for small grids past one wave of kSmall. sm90 only, head_dim 64.
  kMedium,
  // 64-row query tiles whose keys are split in halves between the two CTAs of a cluster, which
  // merge their softmax states through distributed shared memory: small grids past one wave of
  // kMedium. sm90 only, head_dim 64; it splits the keys itself, so num_splits 0 or 1.
  kCtaPair,
  // Deprecated names of kMedium and kCtaPair, from when the sm80 backend ran them (wgmma
  // warpgroups); the same values, so code and C callers that use them keep working.
  kWarpgroup [[deprecated("use TileShape::kMedium")]] = kMedium,
  kWarpgroupPair [[deprecated("use TileShape::kCtaPair")]] = kCtaPair,
};
// The names parse_tile_shape() accepts, in TileShape order (the lab's --tile, Python's tile=).
inline constexpr const char* kTileShapeNames[] = {"auto", "large", "small", "medium", "cta-pair"};
// Deprecated names parse_tile_shape() also accepts, and the shape each stands for: the names of
// kMedium and kCtaPair before they moved to the sm90 backend, so existing scripts keep working.
struct TileShapeAlias {
  const char* name;
  TileShape tile;
};
inline constexpr TileShapeAlias kDeprecatedTileShapeNames[] = {
    {"warpgroup", TileShape::kMedium}, {"warpgroup-pair", TileShape::kCtaPair}};

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
  // The sm80 backend runs varlen batches (with the flex kernels below); the others say why not.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int64_t max_seqlen_q = 0;
  int64_t max_seqlen_k = 0;

  // FlexAttention (docs/flex.md): built-in mask_mod / score_mod, a BlockMask and attention sinks.
  // Off by default. With any part on (or varlen) the sm80 backend's flex kernels run it: no
  // split-KV, head_dim up to 128; the others reject it with a reason.
  flex::FlexOptions flex;

  Backend backend = Backend::kAuto;
  // Split-KV (flash-decoding) for backends that support it: 0 lets a heuristic choose from the SM
  // count and sizes, 1 disables splitting, n > 1 splits Sk across n CTAs per query tile.
  int num_splits = 0;
  TileShape tile = TileShape::kAuto;
  // Programmatic dependent launch (the sm90 backend's small-grid tiles, unsplit, and its flex
  // kernel on a grid of one wave without a BlockMask or a varlen tile list): the kernel may be
  // scheduled while the previous kernel in the stream still runs, and waits for it to finish
  // before its first memory access, so its launch and setup overlap that kernel's tail. It also
  // lets the next kernel, if that one is launched this way, start while this one runs. Results
  // are the same either way; false launches plainly. No effect elsewhere.
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
// Parses one of kTileShapeNames, or a deprecated one of kDeprecatedTileShapeNames; returns false
// for any other name.
bool parse_tile_shape(const std::string& name, TileShape* tile);

}  // namespace flashcore
