// The backward (run_backward; each case on the sm80 backward and on the sm90 backward, head dims
// 64, 128 and 256) against the float64
// reference: dQ, dK and dV within the forward's parity tolerance (rel L2 5e-3 fp16, 1e-2 bf16),
// every element written (poisoned before, padding untouched after), NaN never passing, fully
// masked rows and unseen keys exactly zero, and deterministic mode bitwise identical run to run
// on both backwards. Where the sm90 backward implements a problem, kAuto must pick it.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/backward_problem.hpp"
#include "common/pruning.hpp"
#include "flashcore/backward.hpp"
#include "sm80/sm80_bwd.hpp"
#include "tests/support/backward_case.hpp"

namespace flashcore::testing {
namespace {

BackwardCase make_case(DType dtype, int64_t head_dim, int64_t sq, int64_t sk, int64_t hq,
                       int64_t hkv) {
  BackwardCase c;
  c.shape.dtype = dtype;
  c.shape.batch = 2;
  c.shape.seqlen_q = sq;
  c.shape.seqlen_k = sk;
  c.shape.heads_q = hq;
  c.shape.heads_kv = hkv;
  c.shape.head_dim = head_dim;
  return c;
}

// The gradients the backward wrote (on poisoned buffers) against the float64 reference.
void expect_matches_reference(const BackwardCase& c, BackwardData& data) {
  data.compute_reference();
  const Gradients out = data.read_gradients();
  const GradientErrors e = compare_gradients(c, out, data.reference());
  const double tol = tolerance(c.shape.dtype);
  EXPECT_EQ(e.nan_count, 0) << "NaN/inf (or unwritten poison) in the gradients";
  EXPECT_TRUE(out.padding_untouched) << "a write landed in the padding between rows";
  EXPECT_EQ(e.zero_errors, 0) << "fully masked rows / unseen keys must get exactly zero";
  EXPECT_LE(e.rel_l2_dq, tol) << "dQ";
  EXPECT_LE(e.rel_l2_dk, tol) << "dK";
  EXPECT_LE(e.rel_l2_dv, tol) << "dV";
}

// Runs the case's backward on poisoned gradients and checks them against the reference.
// Why this build has no kernel for the case ("" when it has): a build pruned by
// FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES has neither its forward nor its backward, so the tests
// skip (loudly) rather than fail on a kernel that was left out.
const char* pruned_for(const BackwardCase& c) {
  return detail::pruned_reason(c.shape.dtype, static_cast<int>(c.shape.head_dim));
}

void check_backward(const BackwardCase& c) {
  if (const char* pruned = pruned_for(c); pruned[0] != '\0')
    GTEST_SKIP() << "this build " << pruned;
  BackwardData data(c);
  SCOPED_TRACE("seed " + std::to_string(data.seed()));
  ASSERT_TRUE(data.forward_status().ok()) << "forward: " << data.forward_status().message;
  if (c.backend == Backend::kSm90) {
    if (!on_sm90()) GTEST_SKIP() << "the sm90 backward needs an sm_90 GPU";
    BackwardParams automatic = data.params();
    automatic.backend = Backend::kAuto;
    EXPECT_EQ(resolve_backward_backend(automatic), Backend::kSm90)
        << "kAuto must pick the sm90 backward where it implements the problem";
  }
  if (const Status why = can_implement_backward(data.params());
      why.message.find("shared memory") != std::string::npos) {
    GTEST_SKIP() << "this GPU has too little shared memory for the tile: " << why.message;
  }
  data.poison_gradients();
  const Status s = run_backward(data.params(), nullptr, 0, nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  expect_matches_reference(c, data);
}

class BackwardTest : public ::testing::TestWithParam<BackwardCase> {};

TEST_P(BackwardTest, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  check_backward(GetParam());
}

// The head dims each backward has: 64, 128 and 256 on both (the sm90 one's hd256 is a kernel of
// its own, bwd256_kernel.cuh).
std::vector<int64_t> head_dims_of(Backend /*backend*/) { return {64, 128, 256}; }

std::vector<BackwardCase> backward_cases_of(Backend backend) {
  std::vector<BackwardCase> cases;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t d : head_dims_of(backend)) {
      // Sq, Sk in {1, 7, 127, 1000} with Sq != Sk, GQA 1, 2, 4 and 8.
      cases.push_back(make_case(dtype, d, 1, 127, 8, 8));
      cases.push_back(make_case(dtype, d, 7, 1000, 8, 4));
      cases.push_back(make_case(dtype, d, 127, 7, 8, 2));
      cases.push_back(make_case(dtype, d, 1000, 127, 8, 1));
      // Causal, bottom-right: Sq > Sk leaves rows without keys (zero dQ).
      BackwardCase causal = make_case(dtype, d, 1000, 127, 4, 2);
      causal.shape.causal = true;
      cases.push_back(causal);
      BackwardCase causal_long = make_case(dtype, d, 127, 1000, 4, 1);
      causal_long.shape.causal = true;
      cases.push_back(causal_long);
      // Sliding window (keys no query sees when Sk > Sq) and a left-only window.
      BackwardCase window = make_case(dtype, d, 300, 1000, 4, 4);
      window.shape.window_left = 50;
      window.shape.window_right = 20;
      cases.push_back(window);
      BackwardCase left = make_case(dtype, d, 1000, 1000, 2, 1);
      left.shape.window_left = 100;
      left.shape.causal = true;
      cases.push_back(left);
      // Softcap low enough that its derivative matters, with a custom scale.
      BackwardCase softcap = make_case(dtype, d, 127, 1000, 4, 2);
      softcap.shape.softcap = 2.f;
      softcap.shape.softmax_scale = 0.2f;
      cases.push_back(softcap);
      BackwardCase softcap_causal = make_case(dtype, d, 1000, 1000, 2, 2);
      softcap_causal.shape.softcap = 5.f;
      softcap_causal.shape.causal = true;
      cases.push_back(softcap_causal);
      // Strides: BHSD and padded rows for every tensor, gradients included.
      BackwardCase bhsd = make_case(dtype, d, 127, 300, 4, 2);
      bhsd.shape.layout = Layout::kBHSD;
      bhsd.shape.causal = true;
      cases.push_back(bhsd);
      BackwardCase padded = make_case(dtype, d, 300, 127, 8, 2);
      padded.shape.layout = Layout::kPadded;
      cases.push_back(padded);
      // Deterministic mode against the reference too.
      BackwardCase det = make_case(dtype, d, 1000, 1000, 4, 2);
      det.shape.causal = true;
      det.deterministic = true;
      cases.push_back(det);
      // Many query blocks per key block, a ragged tail and GQA: the sm90 walk's ring and dQ
      // staging reused across steps and heads.
      BackwardCase long_gqa = make_case(dtype, d, 1531, 1531, 4, 2);
      cases.push_back(long_gqa);
      BackwardCase long_causal = long_gqa;
      long_causal.shape.causal = true;
      cases.push_back(long_causal);
      // More tiles than an H100 has SMs (33 or 65 key blocks x 4 kv heads x 2), so that the
      // persistent sm90 kernels' CTAs run several tiles each: K, V and the rings reused across
      // tiles.
      BackwardCase many_tiles = make_case(dtype, d, 127, 4097, 4, 4);
      many_tiles.shape.causal = true;
      cases.push_back(many_tiles);
      // The same in deterministic mode, with a window that leaves all but the last key blocks
      // without a query (tiles of no steps between those with some).
      BackwardCase sparse_tiles = make_case(dtype, d, 127, 4097, 4, 2);
      sparse_tiles.shape.window_left = 50;
      sparse_tiles.shape.window_right = 20;
      sparse_tiles.deterministic = true;
      cases.push_back(sparse_tiles);
      // Not causal, tiles of equal walks (a multiple of no SM count's waves: 330 or 650): the
      // sm90 kernels cut the last wave and a half into ranges of equal length
      // (src/sm90/bwd_tail_split.hpp), so whole tiles, tiles cut in two and their partial dK and
      // dV sums meet in one run; softcapped, the kernel of its own. long_gqa above cuts every one
      // of its 48 tiles (or 96 at hd256) into three or more pieces.
      BackwardCase tail_split = make_case(dtype, d, 300, 4097, 10, 5);
      tail_split.shape.softcap = 5.f;
      cases.push_back(tail_split);
    }
  }
  for (BackwardCase& c : cases) c.backend = backend;
  return cases;
}

std::vector<BackwardCase> backward_cases() {
  std::vector<BackwardCase> cases = backward_cases_of(Backend::kSm80);
  for (const BackwardCase& c : backward_cases_of(Backend::kSm90)) cases.push_back(c);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardTest, ::testing::ValuesIn(backward_cases()),
                         [](const ::testing::TestParamInfo<BackwardCase>& info) {
                           return info.param.name();
                         });

// The tiles an A100 (163 KiB of shared memory per block) runs where a bigger GPU runs larger ones:
// hd256's 32-row tile, which an H100 replaces by the 64-row one (bwd_kernel_traits.hpp). The bf16
// hd256 cases, through the sm80 backward's launch for a given shared-memory size.
class BackwardA100TileTest : public ::testing::TestWithParam<BackwardCase> {};

TEST_P(BackwardA100TileTest, MatchesFloat64Reference) {
  FLASHCORE_REQUIRE_GPU();
  const BackwardCase& c = GetParam();
  if (const char* pruned = pruned_for(c); pruned[0] != '\0')
    GTEST_SKIP() << "this build " << pruned;
  BackwardData data(c);
  SCOPED_TRACE("seed " + std::to_string(data.seed()));
  ASSERT_TRUE(data.forward_status().ok()) << "forward: " << data.forward_status().message;
  if (const Status why = can_implement_backward(data.params());
      why.message.find("shared memory") != std::string::npos) {
    GTEST_SKIP() << "this GPU has too little shared memory for the tile: " << why.message;
  }
  const detail::BackwardProblem problem = detail::make_backward_problem(data.params());
  DeviceBuffer workspace(detail::sm80_backward_workspace_bytes(problem));
  data.poison_gradients();
  const Status s =
      detail::launch_sm80_backward_tile(problem, workspace.get(), size_t{163} * 1024, nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  expect_matches_reference(c, data);
}

std::vector<BackwardCase> a100_tile_cases() {
  std::vector<BackwardCase> cases;
  for (const BackwardCase& c : backward_cases_of(Backend::kSm80)) {
    if (c.shape.head_dim == 256 && c.shape.dtype == DType::kBFloat16) cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardA100TileTest, ::testing::ValuesIn(a100_tile_cases()),
                         [](const ::testing::TestParamInfo<BackwardCase>& info) {
                           return info.param.name();
                         });

// Three runs of deterministic mode give the same bits, on each backward (head dims 64, 128 and
// 256), causal and not; up to 65 key blocks add to each query block (GQA 4:1), and the sm90
// kernels' CTAs run several tiles each (132 to 260 of them).
struct DeterministicCase {
  Backend backend;
  int64_t head_dim;
};

class BackwardDeterministic : public ::testing::TestWithParam<DeterministicCase> {};

TEST_P(BackwardDeterministic, BitwiseIdenticalAcrossRuns) {
  FLASHCORE_REQUIRE_GPU();
  const DeterministicCase& param = GetParam();
  if (param.backend == Backend::kSm90 && !on_sm90()) {
    GTEST_SKIP() << "the sm90 backward needs an sm_90 GPU";
  }
  int checked = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    if (const char* pruned = detail::pruned_reason(dtype, static_cast<int>(param.head_dim));
        pruned[0] != '\0') {
      std::printf("[  NOTE    ] not checked: this build %s\n", pruned);
      continue;
    }
    for (bool causal : {false, true}) {
      ++checked;
      BackwardCase c = make_case(dtype, param.head_dim, 2000, 4097, 8, 2);
      c.shape.causal = causal;
      c.deterministic = true;
      c.backend = param.backend;
      SCOPED_TRACE(c.name());
      BackwardData data(c);
      ASSERT_TRUE(data.forward_status().ok()) << data.forward_status().message;
      std::vector<uint16_t> first;
      for (int run = 0; run < 3; ++run) {
        data.poison_gradients();
        const Status s = run_backward(data.params(), nullptr, 0, nullptr);
        ASSERT_TRUE(s.ok()) << s.message;
        CUDA_ASSERT_OK(cudaDeviceSynchronize());
        const std::vector<uint16_t> bits = data.read_gradient_bits();
        if (run == 0) {
          first = bits;
        } else {
          EXPECT_TRUE(bits == first) << "run " << run << " differs from run 0";
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "this build has neither dtype's kernel of this head dim";
}

std::vector<DeterministicCase> deterministic_cases() {
  std::vector<DeterministicCase> cases;
  for (Backend backend : {Backend::kSm80, Backend::kSm90}) {
    for (int64_t d : head_dims_of(backend)) cases.push_back({backend, d});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(HeadDims, BackwardDeterministic,
                         ::testing::ValuesIn(deterministic_cases()),
                         [](const ::testing::TestParamInfo<DeterministicCase>& info) {
                           return std::string(info.param.backend == Backend::kSm90 ? "sm90"
                                                                                   : "sm80") +
                                  "_d" + std::to_string(info.param.head_dim);
                         });

// A caller's workspace of the queried size works, and a smaller one is refused before any launch.
TEST(BackwardWorkspace, CallerWorkspaceAndTooSmallOne) {
  FLASHCORE_REQUIRE_GPU();
  BackwardCase c = make_case(DType::kBFloat16, 128, 127, 300, 4, 2);
  if (const char* pruned = pruned_for(c); pruned[0] != '\0')
    GTEST_SKIP() << "this build " << pruned;
  BackwardData data(c);
  ASSERT_TRUE(data.forward_status().ok()) << data.forward_status().message;
  const BackwardParams p = data.params();
  const size_t bytes = backward_workspace_bytes(p);
  ASSERT_GT(bytes, 0u);
  DeviceBuffer workspace(bytes);
  const Status small = run_backward(p, workspace.get(), bytes - 1, nullptr);
  EXPECT_EQ(small.code, StatusCode::kInvalidArgument);
  EXPECT_NE(small.message.find("backward_workspace_bytes"), std::string::npos) << small.message;
  data.poison_gradients();
  const Status s = run_backward(p, workspace.get(), bytes, nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  data.compute_reference();
  const GradientErrors e = compare_gradients(c, data.read_gradients(), data.reference());
  EXPECT_EQ(e.nan_count, 0);
  EXPECT_LE(e.rel_l2_dq, tolerance(c.shape.dtype));
  EXPECT_LE(e.rel_l2_dk, tolerance(c.shape.dtype));
  EXPECT_LE(e.rel_l2_dv, tolerance(c.shape.dtype));
}

// Host pointers are refused by the device check, before anything is launched.
TEST(BackwardValidation, HostPointersAreRefused) {
  FLASHCORE_REQUIRE_GPU();
  BackwardCase c = make_case(DType::kFloat16, 64, 7, 7, 1, 1);
  BackwardData data(c);
  BackwardParams p = data.params();
  std::vector<float> host_lse(7 * 2);
  p.lse = host_lse.data();
  const Status s = can_implement_backward(p);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
  EXPECT_NE(s.message.find("lse"), std::string::npos) << s.message;
}

}  // namespace
}  // namespace flashcore::testing
