// Programmatic dependent launch (AttentionParams::enable_pdl, sm_90+): a kernel launched that way
// may start while the kernel before it still runs, so it must not touch memory before
// griddepcontrol.wait. Here the kernel before flashcore lets its dependents start at once, sleeps,
// and only then writes V (which flashcore reads) and reads O's old contents (which flashcore
// overwrites). Reading V early would give NaN (V starts poisoned); writing O early would show in
// what that kernel read back. A control kernel without the wait, launched the same way, must see
// the poison: that proves the window is real, so a missing wait could not pass. The kernels that
// wait are the sm90 backend's small-grid tiles and its flex kernel; every other launch (the sm80
// backend's, split ones) must be plain, which the cases that ask for PDL there check the same way.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "flashcore/attention.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::testing {
namespace {

// Long against any launch latency; the test's kernels are a handful of CTAs.
constexpr unsigned kPrimarySleepNs = 200000;
constexpr int kCopyThreads = 256;

__device__ void launch_dependents_now() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The kernel before flashcore: lets dependents start, sleeps, then writes v_dst = v_src and
// reads o_watched into o_seen.
__global__ void late_copy(const uint16_t* v_src, uint16_t* v_dst, size_t v_count,
                          const uint16_t* o_watched, uint16_t* o_seen, size_t o_count,
                          unsigned sleep_ns) {
  launch_dependents_now();
  for (unsigned slept = 0; slept < sleep_ns; slept += 1000) __nanosleep(1000);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t i = first; i < v_count; i += stride) v_dst[i] = v_src[i];
  for (size_t i = first; i < o_count; i += stride) o_seen[i] = o_watched[i];
}

// The control: launched as a dependent, it reads without waiting.
__global__ void read_without_wait(const uint16_t* v_dst, uint16_t* seen) {
  if (threadIdx.x == 0) *seen = v_dst[0];
}

struct DependentCase {
  AttentionCase spec;
  Backend backend;
  TileShape tile;
  int num_splits;
  const char* what;
  // ALiBi with zero slopes: the sm90 flex kernel (any ALiBi makes a flex problem) on the dense
  // case's scores, so the dense reference still holds.
  bool flex_kernel = false;
};

std::vector<DependentCase> dependent_cases() {
  return {
      {{.batch = 1, .seqlen_q = 512, .seqlen_k = 512, .heads_q = 8, .heads_kv = 8, .head_dim = 64},
       Backend::kAuto,
       TileShape::kAuto,
       0,
       "canonical shape, auto (sm90's small tile)"},
      {{.dtype = DType::kBFloat16,
        .batch = 1,
        .seqlen_q = 300,
        .seqlen_k = 777,
        .heads_q = 4,
        .heads_kv = 2,
        .head_dim = 128,
        .causal = true},
       Backend::kSm90,
       TileShape::kSmall,
       0,
       "small tile, hd128"},
      {{.batch = 1,
        .seqlen_q = 512,
        .seqlen_k = 512,
        .heads_q = 12,
        .heads_kv = 12,
        .head_dim = 64},
       Backend::kSm90,
       TileShape::kMedium,
       0,
       "medium tile"},
      {{.batch = 1,
        .seqlen_q = 512,
        .seqlen_k = 512,
        .heads_q = 32,
        .heads_kv = 32,
        .head_dim = 64},
       Backend::kSm90,
       TileShape::kCtaPair,
       0,
       "cluster-pair tile"},
      {{.batch = 3, .seqlen_q = 1, .seqlen_k = 4097, .heads_q = 8, .heads_kv = 1, .head_dim = 128},
       Backend::kSm90,
       TileShape::kSmall,
       7,
       "decode with split-KV (launched plainly)"},
      // The sm80 backend's tiles have no wait and must be launched plainly even when PDL is asked
      // for: its small tile (the one sm90 launches dependently) and its large tile.
      {{.batch = 1, .seqlen_q = 512, .seqlen_k = 512, .heads_q = 8, .heads_kv = 8, .head_dim = 64},
       Backend::kSm80,
       TileShape::kSmall,
       0,
       "sm80 small tile (launched plainly)"},
      {{.batch = 2,
        .seqlen_q = 1000,
        .seqlen_k = 1000,
        .heads_q = 8,
        .heads_kv = 8,
        .head_dim = 256},
       Backend::kSm80,
       TileShape::kLarge,
       3,
       "sm80 large tile with split-KV"},
      // The sm90 flex kernel: dependent on the caller's kernel where its grid is one wave (no
      // tile counter, so the kernel is the call's first operation); after its counter's memset,
      // plainly, where it has more tiles than SMs (140 query heads of one tile each).
      {{.dtype = DType::kBFloat16,
        .batch = 1,
        .seqlen_q = 300,
        .seqlen_k = 777,
        .heads_q = 4,
        .heads_kv = 2,
        .head_dim = 128,
        .causal = true},
       Backend::kSm90,
       TileShape::kAuto,
       0,
       "sm90 flex kernel, one wave",
       true},
      {{.batch = 1,
        .seqlen_q = 128,
        .seqlen_k = 300,
        .heads_q = 140,
        .heads_kv = 4,
        .head_dim = 64},
       Backend::kSm90,
       TileShape::kAuto,
       0,
       "sm90 flex kernel, more tiles than SMs (launched plainly)",
       true},
  };
}

std::vector<uint16_t> read_u16(const void* device, size_t count) {
  std::vector<uint16_t> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), device, count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

class DependentLaunchTest : public ::testing::TestWithParam<DependentCase> {};

TEST_P(DependentLaunchTest, WaitsForThePreviousKernelBeforeAnyMemoryAccess) {
  FLASHCORE_REQUIRE_GPU();
  cudaDeviceProp device{};
  CUDA_ASSERT_OK(cudaGetDeviceProperties(&device, 0));
  if (device.major < 9) GTEST_SKIP() << "programmatic dependent launch needs sm_90 or newer";
  cudaFuncAttributes built{};
  CUDA_ASSERT_OK(cudaFuncGetAttributes(&built, late_copy));
  if (built.ptxVersion < 90) GTEST_SKIP() << "this build has no sm_90 code (griddepcontrol)";
  // scripts/sanitize.sh sets this: compute-sanitizer serializes launches, so the control below
  // (the dependent must start early) cannot hold there; the wait itself is still exercised.
  if (std::getenv("FLASHCORE_UNDER_SANITIZER") != nullptr) {
    GTEST_SKIP() << "under compute-sanitizer, which serializes launches: a dependent cannot start "
                    "early, so this test's control cannot hold";
  }
  const DependentCase& dc = GetParam();
  SCOPED_TRACE(dc.what);
  CaseData data(dc.spec);
  data.compute_reference();
  SCOPED_TRACE("seed " + std::to_string(data.seed()));

  const size_t v_count = data.v().elements;
  const size_t o_count = data.o().elements;
  DeviceBuffer v_dst(v_count * 2), o_seen(o_count * 2), control_seen(2);
  ASSERT_EQ(v_dst.status(), cudaSuccess);
  ASSERT_EQ(o_seen.status(), cudaSuccess);
  ASSERT_EQ(control_seen.status(), cudaSuccess);

  AttentionParams params = data.params(dc.backend);
  params.v.data = v_dst.get();
  params.tile = dc.tile;
  params.num_splits = dc.num_splits;
  params.enable_pdl = true;
  DeviceBuffer zero_slopes(static_cast<size_t>(dc.spec.heads_q) * sizeof(float));
  if (dc.flex_kernel) {
    CUDA_ASSERT_OK(cudaMemset(zero_slopes.get(), 0, zero_slopes.bytes()));
    params.flex.score_mod.alibi.slopes = static_cast<const float*>(zero_slopes.get());
  }
  const Status can = can_implement(params);
  if (!can.ok() && dc.backend == Backend::kSm90) {
    GTEST_SKIP() << "this build or GPU has no sm90 backend: " << can.message;
  }
  ASSERT_TRUE(can.ok()) << can.message;

  // Loads every kernel of the chain first: a kernel's first launch loads its module (lazy
  // loading), which can wait for the device to go idle and so close the window.
  late_copy<<<1, kCopyThreads>>>(nullptr, nullptr, 0, nullptr, nullptr, 0, 0);
  read_without_wait<<<1, 32>>>(static_cast<const uint16_t*>(v_dst.get()),
                               static_cast<uint16_t*>(control_seen.get()));
  ASSERT_TRUE(run(params, nullptr).ok());
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  CUDA_ASSERT_OK(cudaMemset(v_dst.get(), 0xff, v_count * 2));  // NaN in fp16 and bf16
  data.poison_outputs();
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  const std::vector<uint16_t> o_before = read_u16(data.o().device.get(), o_count);

  cudaStream_t stream = nullptr;
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  params.stream = stream;
  const int copy_ctas = 8;
  late_copy<<<copy_ctas, kCopyThreads, 0, stream>>>(
      static_cast<const uint16_t*>(data.v().device.get()), static_cast<uint16_t*>(v_dst.get()),
      v_count, static_cast<const uint16_t*>(data.o().device.get()),
      static_cast<uint16_t*>(o_seen.get()), o_count, kPrimarySleepNs);
  const Status status = run(params, nullptr);

  // The control, on V poisoned again: launched as a dependent of the same late copy.
  DeviceBuffer control_v(v_count * 2), scratch(o_count * 2);
  CUDA_ASSERT_OK(cudaMemsetAsync(control_v.get(), 0xff, v_count * 2, stream));
  late_copy<<<copy_ctas, kCopyThreads, 0, stream>>>(
      static_cast<const uint16_t*>(data.v().device.get()), static_cast<uint16_t*>(control_v.get()),
      v_count, static_cast<const uint16_t*>(data.o().device.get()),
      static_cast<uint16_t*>(scratch.get()), o_count, kPrimarySleepNs);
  cudaLaunchAttribute dependent{};
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(32);
  config.stream = stream;
  config.attrs = &dependent;
  config.numAttrs = 1;
  CUDA_ASSERT_OK(cudaLaunchKernelEx(&config, read_without_wait,
                                    static_cast<const uint16_t*>(control_v.get()),
                                    static_cast<uint16_t*>(control_seen.get())));
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
  CUDA_ASSERT_OK(cudaStreamDestroy(stream));
  ASSERT_TRUE(status.ok()) << status.message;

  EXPECT_EQ(read_u16(control_seen.get(), 1)[0], 0xffffu)
      << "the control kernel saw V already copied: the dependent did not start early, so this "
         "test could not catch a missing wait";
  EXPECT_TRUE(read_u16(o_seen.get(), o_count) == o_before)
      << "flashcore wrote O before the previous kernel had read it";
  bool padding_untouched = false;
  const std::vector<double> o = data.read_o(&padding_untouched);
  const std::vector<float> lse = data.read_lse();
  const Errors e = compare(dc.spec, o, data.ref_o(), &lse, data.ref_lse());
  EXPECT_EQ(e.nan_count, 0) << "NaN in O: flashcore read V before the previous kernel wrote it";
  EXPECT_TRUE(padding_untouched);
  EXPECT_LE(e.rel_l2, tolerance(dc.spec.dtype));
  EXPECT_LE(e.lse_max_abs, kLseTolerance);
}

INSTANTIATE_TEST_SUITE_P(Kernels, DependentLaunchTest, ::testing::ValuesIn(dependent_cases()),
                         [](const auto& info) {
                           return info.param.spec.name() + "_" + backend_name(info.param.backend) +
                                  "_tile" + std::to_string(static_cast<int>(info.param.tile)) +
                                  (info.param.flex_kernel ? "_flex" : "");
                         });

}  // namespace
}  // namespace flashcore::testing
