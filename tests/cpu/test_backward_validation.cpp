// The backward's validation: every class of bad argument is refused before any launch, with a
// message that names it; the sm80 backward's own refusals (head dims it has no kernel for); the
// C ABI. Runs without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "api/validate_backward.hpp"
#include "common/backward_problem.hpp"
#include "common/device_properties.hpp"
#include "common/pruning.hpp"
#include "common/workspace_align.hpp"
#include "flashcore/backward.hpp"
#include "flashcore/flashcore.h"
#include "flashcore/flex.hpp"
#include "sm80/sm80_bwd.hpp"
#include "sm90/sm90_bwd.hpp"

namespace flashcore {
namespace {

// The persistent hd256 backward's tile counter: one slot after the dQ accumulators, of
// detail::kWorkspaceAlign bytes.
constexpr size_t kTileCounterBytes = detail::kWorkspaceAlign;

// Fake, 16-byte aligned device addresses, 64 MiB apart: argument validation never dereferences
// them.
BackwardParams valid_params() {
  BackwardParams p;
  p.batch = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 200;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 128;
  auto* base = reinterpret_cast<char*>(uintptr_t{1} << 40);
  auto at = [&](int i) { return base + (int64_t{i} << 26); };
  const DType bf16 = DType::kBFloat16;
  p.q = {at(0), bf16, bshd_strides(100, 8, 128)};
  p.k = {at(1), bf16, bshd_strides(200, 2, 128)};
  p.v = {at(2), bf16, bhsd_strides(200, 2, 128)};
  p.o = {at(3), bf16, bshd_strides(100, 8, 128)};
  p.d_o = {at(4), bf16, bshd_strides(100, 8, 128)};
  p.lse = reinterpret_cast<const float*>(at(5));
  p.dq = {at(6), bf16, bshd_strides(100, 8, 128)};
  p.dk = {at(7), bf16, bshd_strides(200, 2, 128)};
  p.dv = {at(8), bf16, bshd_strides(200, 2, 128)};
  return p;
}

struct BadCase {
  const char* what;
  std::function<void(BackwardParams&)> mutate;
  StatusCode code;
  const char* message_names;  // the message must mention this
};

class BackwardValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST(BackwardValidation, ValidParamsPass) {
  const Status s = detail::validate_backward_arguments(valid_params());
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST_P(BackwardValidationTest, RejectsWithClearMessage) {
  BackwardParams p = valid_params();
  GetParam().mutate(p);
  const Status s = detail::validate_backward_arguments(p);
  EXPECT_EQ(s.code, GetParam().code) << s.message;
  EXPECT_NE(s.message.find(GetParam().message_names), std::string::npos) << s.message;
}

const BadCase kBadCases[] = {
    {"null_d_o", [](BackwardParams& p) { p.d_o.data = nullptr; }, StatusCode::kInvalidArgument,
     "d_o is null"},
    {"null_dq", [](BackwardParams& p) { p.dq.data = nullptr; }, StatusCode::kInvalidArgument,
     "dq is null"},
    {"null_lse", [](BackwardParams& p) { p.lse = nullptr; }, StatusCode::kInvalidArgument,
     "lse is null"},
    {"misaligned_lse",
     [](BackwardParams& p) { p.lse = reinterpret_cast<const float*>(uintptr_t{1} << 40 | 2); },
     StatusCode::kInvalidArgument, "lse pointer"},
    {"dk_dtype", [](BackwardParams& p) { p.dk.dtype = DType::kFloat16; },
     StatusCode::kInvalidArgument, "dk is fp16"},
    {"o_dtype", [](BackwardParams& p) { p.o.dtype = DType::kFloat16; },
     StatusCode::kInvalidArgument, "o is fp16"},
    {"dv_last_stride", [](BackwardParams& p) { p.dv.strides.dim = 2; },
     StatusCode::kInvalidArgument, "dv has last-dim stride"},
    {"d_o_misaligned_stride", [](BackwardParams& p) { p.d_o.strides.seq = 1028; },
     StatusCode::kInvalidArgument, "d_o seq stride"},
    {"dq_overlapping_rows", [](BackwardParams& p) { p.dq.strides.seq = 64; },
     StatusCode::kInvalidArgument, "dq strides make distinct elements overlap"},
    {"dk_dv_share_memory", [](BackwardParams& p) { p.dv.data = p.dk.data; },
     StatusCode::kInvalidArgument, "dk and dv overlap"},
    {"dq_inside_dk", [](BackwardParams& p) { p.dq.data = static_cast<char*>(p.dk.data) + 4096; },
     StatusCode::kInvalidArgument, "dq and dk overlap"},
    {"gqa_heads", [](BackwardParams& p) { p.heads_kv = 3; }, StatusCode::kInvalidArgument,
     "heads_q"},
    {"zero_seqlen", [](BackwardParams& p) { p.seqlen_k = 0; }, StatusCode::kInvalidArgument,
     "seqlen_k is 0"},
    {"head_dim_not_multiple_of_8", [](BackwardParams& p) { p.head_dim = 100; },
     StatusCode::kUnsupported, "head_dim 100"},
    {"causal_with_right_window",
     [](BackwardParams& p) {
       p.causal = true;
       p.window_right = 4;
     },
     StatusCode::kInvalidArgument, "causal=true conflicts"},
    {"window_out_of_range", [](BackwardParams& p) { p.window_left = -2; },
     StatusCode::kInvalidArgument, "window"},
    {"softcap_nan", [](BackwardParams& p) { p.softcap = std::nanf(""); },
     StatusCode::kInvalidArgument, "softcap"},
    // The sinks' gradient needs the forward's sinks, and fp32 alignment.
    {"d_sinks_without_sinks",
     [](BackwardParams& p) { p.d_sinks = reinterpret_cast<float*>(uintptr_t{1} << 41); },
     StatusCode::kInvalidArgument, "d_sinks is set but flex.sinks.logits is null"},
    {"d_sinks_misaligned",
     [](BackwardParams& p) {
       p.flex.sinks.logits = p.lse;
       p.d_sinks = reinterpret_cast<float*>(uintptr_t{1} << 41 | 2);
     },
     StatusCode::kInvalidArgument, "d_sinks is not 4-byte aligned"},
    // The varlen and flex fields get the forward's checks (one spelling, one validation).
    {"varlen_one_array",
     [](BackwardParams& p) { p.cu_seqlens_q = reinterpret_cast<const int32_t*>(p.lse); },
     StatusCode::kInvalidArgument, "cu_seqlens_k"},
    {"max_seqlen_without_varlen", [](BackwardParams& p) { p.max_seqlen_q = 10; },
     StatusCode::kInvalidArgument, "max_seqlen"},
    {"flex_softcap_twice", [](BackwardParams& p) { p.flex.score_mod.softcap.cap = 3.f; },
     StatusCode::kInvalidArgument, "softcap"},
    {"flex_bias_distance",
     [](BackwardParams& p) {
       p.flex.score_mod.bias.table = p.lse;
       p.flex.score_mod.bias.max_distance = 0;
     },
     StatusCode::kInvalidArgument, "flex.score_mod.bias"},
    {"block_mask_wrong_shape",
     [](BackwardParams& p) {
       p.flex.block_mask = flex::block_mask_shape(2, 8, 100, 300, 128, 128);
       p.flex.block_mask.kv_num_blocks = reinterpret_cast<const int32_t*>(p.lse);
       p.flex.block_mask.kv_indices = reinterpret_cast<const int32_t*>(p.lse);
     },
     StatusCode::kInvalidArgument, "flex.block_mask"},
};

INSTANTIATE_TEST_SUITE_P(BadArguments, BackwardValidationTest, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return std::string(info.param.what);
                         });

// The sm80 backward's own refusals, against a described device (no GPU needed).
TEST(BackwardValidation, Sm80BackwardSaysWhichHeadDimsItHas) {
  cudaDeviceProp h100{};
  h100.major = 9;
  h100.sharedMemPerBlockOptin = 227 * 1024;
  BackwardParams p = valid_params();
  EXPECT_STREQ(detail::sm80_backward_rejects(detail::make_backward_problem(p), h100), "");
  for (int64_t head_dim : {32, 96, 160, 224}) {
    p.head_dim = head_dim;
    const std::string why = detail::sm80_backward_rejects(detail::make_backward_problem(p), h100);
    EXPECT_NE(why.find("head_dim 64, 128 and 256"), std::string::npos) << why;
  }
  // A100 (163 KiB per block) fits the hd128 tile (160.5 KiB); a GPU with 99 KiB (sm_86) does not.
  p.head_dim = 128;
  cudaDeviceProp a100 = h100;
  a100.major = 8;
  a100.sharedMemPerBlockOptin = 163 * 1024;
  EXPECT_STREQ(detail::sm80_backward_rejects(detail::make_backward_problem(p), a100), "");
  cudaDeviceProp small = h100;
  small.major = 8;
  small.sharedMemPerBlockOptin = 99 * 1024;
  const std::string why = detail::sm80_backward_rejects(detail::make_backward_problem(p), small);
  EXPECT_NE(why.find("shared memory"), std::string::npos) << why;
  cudaDeviceProp turing = h100;
  turing.major = 7;
  EXPECT_NE(std::string(detail::sm80_backward_rejects(detail::make_backward_problem(p), turing)),
            "");
}

// hd256 (fp16 and bf16): its 32-row tile (136.5 KiB) fits the A100, the 64-row one (208.5 KiB) the
// H100, neither sm_86/89's 99 KiB.
TEST(BackwardValidation, Sm80BackwardHeadDim256FitsA100NotSm86) {
  cudaDeviceProp h100{};
  h100.major = 9;
  h100.sharedMemPerBlockOptin = 227 * 1024;
  cudaDeviceProp a100 = h100;
  a100.major = 8;
  a100.sharedMemPerBlockOptin = 163 * 1024;
  cudaDeviceProp small = a100;
  small.sharedMemPerBlockOptin = 99 * 1024;
  auto rejects = [](const BackwardParams& p, const cudaDeviceProp& device) {
    return std::string(detail::sm80_backward_rejects(detail::make_backward_problem(p), device));
  };
  int checked = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    BackwardParams p = valid_params();
    p.head_dim = 256;
    for (InputTensor* t : {&p.q, &p.k, &p.v, &p.o, &p.d_o}) t->dtype = dtype;
    for (OutputTensor* t : {&p.dq, &p.dk, &p.dv}) t->dtype = dtype;
    // A build pruned by FLASHCORE_HEAD_DIMS or FLASHCORE_DTYPES has no kernel to size.
    if (const char* pruned = detail::pruned_reason(dtype, 256); pruned[0] != '\0') {
      std::printf("[  NOTE    ] not checked: this build %s\n", pruned);
      continue;
    }
    ++checked;
    EXPECT_EQ(rejects(p, h100), "");
    EXPECT_EQ(rejects(p, a100), "");
    EXPECT_NE(rejects(p, small).find("needs more shared memory per block"), std::string::npos)
        << rejects(p, small);
    // The workspace is the larger tile's (the query does not know the device): at Sq = 96 the
    // 64-row tile pads to 128 rows where the 32-row one needs 96.
    p.seqlen_q = 96;
    EXPECT_EQ(detail::sm80_backward_workspace_bytes(detail::make_backward_problem(p)),
              size_t{2} * 8 * 128 * (256 + 2) * 4 + kTileCounterBytes);
  }
  if (checked == 0) GTEST_SKIP() << "this build has no hd256 kernel of either dtype";
}

// The sm90 backward's refusals: each feature it leaves to the sm80 backward, named. A build without
// 90a refuses everything as "not in this build".
TEST(BackwardValidation, Sm90BackwardSaysWhatItLeavesToSm80) {
  cudaDeviceProp h100{};
  h100.major = 9;
  h100.sharedMemPerBlockOptin = 227 * 1024;
  auto rejects = [&](const BackwardParams& p, const cudaDeviceProp& device) {
    return std::string(detail::sm90_backward_rejects(detail::make_backward_problem(p), device));
  };
  const BackwardParams plain = valid_params();
  const std::string plain_why = rejects(plain, h100);
  if (plain_why.find("not in this build") != std::string::npos) {
    GTEST_SKIP() << "this build has no sm90 kernels: " << plain_why;
  }
  EXPECT_EQ(plain_why, "");
  BackwardParams p = plain;
  p.softcap = 5.f;  // implemented: dS through the cap's derivative
  EXPECT_EQ(rejects(p, h100), "");
  p = plain;
  p.deterministic = true;  // implemented: the dQ writer's semaphores
  EXPECT_EQ(rejects(p, h100), "");
  p = plain;
  p.head_dim = 256;  // implemented (bwd256_kernel.cuh) where the build has the head dim
  EXPECT_EQ(rejects(p, h100), detail::pruned_reason(p.q.dtype, 256));
  p.head_dim = 96;
  EXPECT_NE(rejects(p, h100).find("head_dim 64, 128 and 256"), std::string::npos)
      << rejects(p, h100);
  cudaDeviceProp a100 = h100;
  a100.major = 8;
  EXPECT_NE(rejects(plain, a100).find("sm_90"), std::string::npos) << rejects(plain, a100);
}

TEST(BackwardValidation, WorkspaceGrowsLinearlyInSeqlenQ) {
  BackwardParams p = valid_params();
  p.seqlen_q = 4096;
  const size_t one = detail::sm80_backward_workspace_bytes(detail::make_backward_problem(p));
  p.seqlen_q = 8192;
  const size_t two = detail::sm80_backward_workspace_bytes(detail::make_backward_problem(p));
  // fp32 dQ plus two floats per row: B * Hq * Sq * (D + 2) * 4 bytes, up to alignment, and the
  // tile counter.
  EXPECT_EQ(one, size_t{2} * 8 * 4096 * (128 + 2) * 4 + kTileCounterBytes);
  EXPECT_EQ(two - kTileCounterBytes, 2 * (one - kTileCounterBytes));
  p.deterministic = true;  // plus one semaphore per 64-row query block
  EXPECT_GT(detail::sm80_backward_workspace_bytes(detail::make_backward_problem(p)), two);
  // The sm90 backward's rows are padded to its query block (64 at hd128): the same bytes here,
  // semaphores included, where its schedule cuts no tile. With a GPU present it cuts the last
  // tiles over the device's SMs (sm90/bwd_tail_split.hpp), whose partial sums come on top.
  cudaDeviceProp device{};
  const int ctas = detail::current_device_properties(&device).ok() ? device.multiProcessorCount : 1;
  const auto sm90_bytes_vs = [&](size_t sm80_bytes) {
    const detail::BackwardProblem problem = detail::make_backward_problem(p);
    const size_t bytes = detail::sm90_backward_workspace_bytes(problem);
    if (detail::sm90_backward_tail_split(problem, ctas).slots() > 0) {
      EXPECT_GT(bytes, sm80_bytes) << "cut tiles on " << ctas << " SMs";
    } else {
      EXPECT_EQ(bytes, sm80_bytes);
    }
  };
  sm90_bytes_vs(detail::sm80_backward_workspace_bytes(detail::make_backward_problem(p)));
  p.deterministic = false;
  sm90_bytes_vs(two);
}

// A varlen batch: packed [total, H, D] tensors, batch counting the sequences.
BackwardParams varlen_params() {
  BackwardParams p = valid_params();
  p.batch = 3;
  p.seqlen_q = 300;  // totals
  p.seqlen_k = 500;
  for (auto* t : {&p.q, &p.o, &p.d_o}) t->strides = bshd_strides(300, 8, 128);
  p.dq.strides = bshd_strides(300, 8, 128);
  for (auto* t : {&p.k, &p.v}) t->strides = bshd_strides(500, 2, 128);
  for (auto* t : {&p.dk, &p.dv}) t->strides = bshd_strides(500, 2, 128);
  auto* base = reinterpret_cast<const char*>(p.lse);
  p.cu_seqlens_q = reinterpret_cast<const int32_t*>(base + 4096);
  p.cu_seqlens_k = reinterpret_cast<const int32_t*>(base + 8192);
  p.max_seqlen_q = 200;
  p.max_seqlen_k = 400;
  return p;
}

// The sm90 backward's varlen workspace adds the list of its key tiles (sm90/bwd_key_tiles.hpp)
// where a sequence has fewer keys than max_seqlen_k, and nothing where every one has that many.
TEST(BackwardValidation, Sm90VarlenWorkspaceHoldsTheKeyTileListWhereSequencesDiffer) {
  cudaDeviceProp h100{};
  h100.major = 9;
  h100.sharedMemPerBlockOptin = 227 * 1024;
  BackwardParams p = varlen_params();  // 3 sequences, 500 keys, max_seqlen_k 400
  const std::string why = detail::sm90_backward_rejects(detail::make_backward_problem(p), h100);
  if (why.find("not in this build") != std::string::npos) {
    GTEST_SKIP() << "this build has no sm90 kernels: " << why;
  }
  ASSERT_EQ(why, "");
  const auto bytes = [](const BackwardParams& params) {
    return std::pair{detail::sm80_backward_workspace_bytes(detail::make_backward_problem(params)),
                     detail::sm90_backward_workspace_bytes(detail::make_backward_problem(params))};
  };
  // 2 kv heads x 3 sequences x 4 key blocks of 128: the count and 24 tiles, each region from an
  // aligned boundary (the selection's scratch too, where a device answers cub's size query).
  const auto [sm80_listed, sm90_listed] = bytes(p);
  EXPECT_GE(sm90_listed, sm80_listed + 2 * detail::kWorkspaceAlign);
  // Three sequences of 400 keys each: no tile past a sequence's keys, no list.
  p.seqlen_k = 1200;
  for (auto* t : {&p.k, &p.v}) t->strides = bshd_strides(1200, 2, 128);
  for (auto* t : {&p.dk, &p.dv}) t->strides = bshd_strides(1200, 2, 128);
  const auto [sm80_plain, sm90_plain] = bytes(p);
  EXPECT_EQ(sm90_plain, sm80_plain);
}

TEST(BackwardValidation, VarlenAndFlexParamsPass) {
  BackwardParams p = varlen_params();
  Status s = detail::validate_backward_arguments(p);
  EXPECT_TRUE(s.ok()) << s.message;
  p.flex.score_mod.alibi.slopes = p.lse;
  p.flex.sinks.logits = p.lse;
  p.causal = true;
  s = detail::validate_backward_arguments(p);
  EXPECT_TRUE(s.ok()) << s.message;
  p.d_sinks = reinterpret_cast<float*>(uintptr_t{1} << 41);
  s = detail::validate_backward_arguments(p);
  EXPECT_TRUE(s.ok()) << s.message;
  // The packed tensors' batch strides are ignored.
  p.dq.strides.batch = 0;
  s = detail::validate_backward_arguments(p);
  EXPECT_TRUE(s.ok()) << s.message;
}

// What the flex backward leaves out is refused with the fix; the sm90 backward runs varlen batches
// and sinks, and leaves the flex mods and BlockMasks to sm80 (kAuto then runs sm80).
TEST(BackwardValidation, FlexBackwardSaysWhatItRuns) {
  cudaDeviceProp h100{};
  h100.major = 9;
  h100.sharedMemPerBlockOptin = 227 * 1024;
  auto sm80 = [&](const BackwardParams& p) {
    return std::string(detail::sm80_backward_rejects(detail::make_backward_problem(p), h100));
  };
  // Varlen, deterministic mode included, at every head dim the backward has.
  BackwardParams p = varlen_params();
  EXPECT_EQ(sm80(p), "");
  p.deterministic = true;
  EXPECT_EQ(sm80(p), "");
  p.head_dim = 256;
  EXPECT_EQ(sm80(p), "");
  p.head_dim = 96;
  EXPECT_NE(sm80(p), "");

  p = valid_params();
  p.flex.block_mask = flex::block_mask_shape(2, 8, 100, 200, 128, 64);
  p.flex.block_mask.kv_num_blocks = reinterpret_cast<const int32_t*>(p.lse);
  p.flex.block_mask.kv_indices = reinterpret_cast<const int32_t*>(p.lse);
  EXPECT_NE(sm80(p).find("multiple of 128"), std::string::npos) << sm80(p);
  p.flex.block_mask.kv_block_size = 128;
  p.flex.block_mask.q_block_size = 64;
  EXPECT_EQ(sm80(p), "");
  // Deterministic mode with a BlockMask: the CTAs ahead counted from the lists.
  p.deterministic = true;
  EXPECT_EQ(sm80(p), "");

  auto sm90 = [&](const BackwardParams& params) {
    return std::string(detail::sm90_backward_rejects(detail::make_backward_problem(params), h100));
  };
  if (sm90(varlen_params()).find("not in this build") == std::string::npos) {
    EXPECT_EQ(sm90(varlen_params()), "");
    p = varlen_params();
    p.causal = true;
    p.softcap = 5.f;
    // The packed tensors' batch strides are ignored (the TMA sees one batch entry).
    for (auto* t : {&p.q, &p.k, &p.v, &p.d_o}) t->strides.batch = 0;
    EXPECT_EQ(sm90(p), "");
    p.deterministic = true;  // each sequence's own turns (sm80::dq_turn under its mask)
    EXPECT_EQ(sm90(p), "");
    p = varlen_params();
    p.head_dim = 256;
    EXPECT_NE(sm90(p), "");
    BackwardParams alibi = valid_params();
    alibi.flex.score_mod.alibi.slopes = alibi.lse;
    EXPECT_NE(sm90(alibi).find("flex"), std::string::npos) << sm90(alibi);
    alibi = varlen_params();
    alibi.flex.score_mod.alibi.slopes = alibi.lse;
    EXPECT_NE(sm90(alibi).find("flex"), std::string::npos) << sm90(alibi);
    // Sinks alone run here, dense and varlen (the forward's LSE holds them); with a mod they stay
    // on sm80.
    BackwardParams sinks = valid_params();
    sinks.flex.sinks.logits = sinks.lse;
    EXPECT_EQ(sm90(sinks), "");
    sinks = varlen_params();
    sinks.flex.sinks.logits = sinks.lse;
    sinks.causal = true;
    EXPECT_EQ(sm90(sinks), "");
    sinks.flex.score_mod.alibi.slopes = sinks.lse;
    EXPECT_NE(sm90(sinks).find("flex"), std::string::npos) << sm90(sinks);
  }
}

// Varlen workspace rows: every sequence padded to whole 64-row blocks,
// Hq * round_up(total_q + batch * 64, 64) rows of D + 2 floats, and the tile counter.
TEST(BackwardValidation, VarlenWorkspacePadsEverySequence) {
  const BackwardParams p = varlen_params();
  const size_t rows = size_t{8} * ((300 + 3 * 64 + 63) / 64 * 64);
  EXPECT_EQ(detail::sm80_backward_workspace_bytes(detail::make_backward_problem(p)),
            rows * (128 + 2) * 4 + kTileCounterBytes);
}

TEST(BackwardCApi, ReportsErrorsWithMessages) {
  EXPECT_EQ(flashcore_attention_backward(nullptr), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_STREQ(flashcore_last_error(), "params is null");
  flashcore_backward_params c;
  flashcore_backward_params_init(&c);
  EXPECT_EQ(c.window_left, -1);
  EXPECT_EQ(c.deterministic, 0);
  EXPECT_EQ(c.cu_seqlens_q, nullptr);  // not varlen, no flex part
  EXPECT_EQ(c.mask_mod.window_left, -1);
  EXPECT_EQ(c.mask_mod.window_right, -1);
  EXPECT_EQ(c.block_mask.kv_num_blocks, nullptr);
  EXPECT_EQ(c.d_sink_logits, nullptr);  // no sinks' gradient
  c.dtype = static_cast<flashcore_dtype>(7);
  EXPECT_EQ(flashcore_attention_backward(&c), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("dtype"), std::string::npos);
  c.dtype = FLASHCORE_BFLOAT16;  // sizes still zero
  EXPECT_EQ(flashcore_attention_backward(&c), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("batch is 0"), std::string::npos)
      << flashcore_last_error();
  EXPECT_EQ(flashcore_backward_workspace_bytes(&c), 0u);
  EXPECT_NE(std::string(flashcore_last_error()).find("batch is 0"), std::string::npos);
  EXPECT_EQ(c.backend, nullptr);  // auto
  c.backend = "sm91";
  EXPECT_EQ(flashcore_attention_backward(&c), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("unknown backend 'sm91'"), std::string::npos)
      << flashcore_last_error();
}

// The C struct's d_sink_logits reaches BackwardParams::d_sinks: set without sink_logits, it is
// refused by name before anything runs.
TEST(BackwardCApi, PassesTheSinksGradient) {
  const BackwardParams p = valid_params();
  flashcore_backward_params c;
  flashcore_backward_params_init(&c);
  c.dtype = FLASHCORE_BFLOAT16;
  c.batch = p.batch, c.seqlen_q = p.seqlen_q, c.seqlen_k = p.seqlen_k;
  c.heads_q = p.heads_q, c.heads_kv = p.heads_kv, c.head_dim = p.head_dim;
  auto strides = [](const Strides& s) { return flashcore_strides{s.batch, s.seq, s.head}; };
  c.q = p.q.data, c.q_strides = strides(p.q.strides);
  c.k = p.k.data, c.k_strides = strides(p.k.strides);
  c.v = p.v.data, c.v_strides = strides(p.v.strides);
  c.o = p.o.data, c.o_strides = strides(p.o.strides);
  c.d_o = p.d_o.data, c.do_strides = strides(p.d_o.strides);
  c.dq = p.dq.data, c.dq_strides = strides(p.dq.strides);
  c.dk = p.dk.data, c.dk_strides = strides(p.dk.strides);
  c.dv = p.dv.data, c.dv_strides = strides(p.dv.strides);
  c.lse = p.lse;
  c.d_sink_logits = reinterpret_cast<float*>(uintptr_t{1} << 41);
  // The workspace query validates the arguments only (no device needed).
  EXPECT_EQ(flashcore_backward_workspace_bytes(&c), 0u);
  EXPECT_NE(std::string(flashcore_last_error()).find("d_sinks is set but flex.sinks.logits"),
            std::string::npos)
      << flashcore_last_error();
}

}  // namespace
}  // namespace flashcore
