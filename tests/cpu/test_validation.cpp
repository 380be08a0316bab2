// Every class of bad argument is caught before any launch, with a message that names it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iterator>
#include <limits>

#include "api/validate.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/flashcore.h"

namespace flashcore {
namespace {

// Fake, 16-byte aligned device addresses: argument validation never dereferences them.
AttentionParams valid_params() {
  AttentionParams p;
  p.batch = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 200;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 128;
  auto* base = reinterpret_cast<char*>(uintptr_t{1} << 40);
  p.q = {base, DType::kBFloat16, bshd_strides(100, 8, 128)};
  p.k = {base + (1 << 26), DType::kBFloat16, bshd_strides(200, 2, 128)};
  p.v = {base + (2 << 26), DType::kBFloat16, bhsd_strides(200, 2, 128)};
  p.o = {base + (3 << 26), DType::kBFloat16, bshd_strides(100, 8, 128)};
  return p;
}

struct BadCase {
  const char* what;
  std::function<void(AttentionParams&)> mutate;
  StatusCode code;
  const char* message_names;  // the message must mention this
};

class ValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST(Validation, ValidParamsPass) {
  const Status s = detail::validate_arguments(valid_params());
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST_P(ValidationTest, RejectsWithClearMessage) {
  AttentionParams p = valid_params();
  GetParam().mutate(p);
  const Status s = detail::validate_arguments(p);
  EXPECT_EQ(s.code, GetParam().code) << s.message;
  EXPECT_NE(s.message.find(GetParam().message_names), std::string::npos) << s.message;
}

const BadCase kBadCases[] = {
    {"null_q", [](AttentionParams& p) { p.q.data = nullptr; }, StatusCode::kInvalidArgument,
     "q is null"},
    {"null_o", [](AttentionParams& p) { p.o.data = nullptr; }, StatusCode::kInvalidArgument,
     "o is null"},
    {"dtype_mismatch", [](AttentionParams& p) { p.v.dtype = DType::kFloat16; },
     StatusCode::kInvalidArgument, "v is fp16"},
    {"head_dim_unsupported", [](AttentionParams& p) { p.head_dim = 100; }, StatusCode::kUnsupported,
     "head_dim 100"},
    {"head_dim_too_big", [](AttentionParams& p) { p.head_dim = 512; }, StatusCode::kUnsupported,
     "head_dim 512"},
    {"gqa_ratio", [](AttentionParams& p) { p.heads_kv = 3; }, StatusCode::kInvalidArgument,
     "heads_kv"},
    {"zero_batch", [](AttentionParams& p) { p.batch = 0; }, StatusCode::kInvalidArgument,
     "batch is 0"},
    {"negative_seqlen", [](AttentionParams& p) { p.seqlen_k = -4; }, StatusCode::kInvalidArgument,
     "seqlen_k is -4"},
    {"zero_heads", [](AttentionParams& p) { p.heads_q = 0; }, StatusCode::kInvalidArgument,
     "heads_q is 0"},
    {"last_stride", [](AttentionParams& p) { p.k.strides.dim = 2; }, StatusCode::kInvalidArgument,
     "k has last-dim stride 2"},
    {"misaligned_pointer",
     [](AttentionParams& p) { p.q.data = static_cast<const char*>(p.q.data) + 2; },
     StatusCode::kInvalidArgument, "q pointer is not 16-byte aligned"},
    {"misaligned_stride", [](AttentionParams& p) { p.o.strides.seq += 2; },
     StatusCode::kInvalidArgument, "o seq stride"},
    {"unit_seq_stride", [](AttentionParams& p) { p.k.strides.seq = 1; },
     StatusCode::kInvalidArgument, "k seq stride 1"},
    {"negative_stride", [](AttentionParams& p) { p.q.strides.head = -128; },
     StatusCode::kInvalidArgument, "negative head stride"},
    {"overlapping_output", [](AttentionParams& p) { p.o.strides.seq = 8; },
     StatusCode::kInvalidArgument, "overlap"},
    {"window_out_of_range", [](AttentionParams& p) { p.window_left = -2; },
     StatusCode::kInvalidArgument, "window"},
    {"causal_with_right_window",
     [](AttentionParams& p) {
       p.causal = true;
       p.window_right = 5;
     },
     StatusCode::kInvalidArgument, "causal"},
    {"negative_softcap", [](AttentionParams& p) { p.softcap = -1.f; }, StatusCode::kInvalidArgument,
     "softcap"},
    {"nan_scale",
     [](AttentionParams& p) { p.softmax_scale = std::numeric_limits<float>::quiet_NaN(); },
     StatusCode::kInvalidArgument, "softmax_scale"},
    {"negative_splits", [](AttentionParams& p) { p.num_splits = -1; }, StatusCode::kInvalidArgument,
     "num_splits"},
    {"unknown_tile", [](AttentionParams& p) { p.tile = static_cast<TileShape>(7); },
     StatusCode::kInvalidArgument, "tile"},
    {"offset_overflow", [](AttentionParams& p) { p.k.strides.seq = int64_t{1} << 62; },
     StatusCode::kInvalidArgument, "overflow"},
    {"misaligned_lse",
     [](AttentionParams& p) { p.lse = reinterpret_cast<float*>(uintptr_t{(1ull << 40) + 2}); },
     StatusCode::kInvalidArgument, "lse"},
};

INSTANTIATE_TEST_SUITE_P(BadArguments, ValidationTest, ::testing::ValuesIn(kBadCases),
                         [](const auto& info) { return std::string(info.param.what); });

TEST(Validation, OffsetsBeyond32BitsAreAccepted) {
  AttentionParams p = valid_params();
  p.k.strides.batch = (int64_t{1} << 31) + 1024;  // second batch starts past 2^31 elements
  EXPECT_TRUE(detail::validate_arguments(p).ok());
}

TEST(Validation, DeviceCheckReportsMissingGpuOrForeignPointers) {
  const Status s = can_implement(valid_params());
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    EXPECT_EQ(s.code, StatusCode::kNoDevice) << s.message;
    EXPECT_NE(s.message.find("no CUDA device"), std::string::npos) << s.message;
  } else {
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << "fake pointers must not pass: " << s.message;
  }
}

TEST(Backends, NamesRoundTrip) {
  for (Backend b : backends()) {
    Backend parsed = Backend::kAuto;
    ASSERT_TRUE(parse_backend(backend_name(b), &parsed)) << backend_name(b);
    EXPECT_EQ(parsed, b);
  }
  Backend parsed;
  EXPECT_FALSE(parse_backend("fastest-please", &parsed));
}

TEST(TileShapes, NamesParse) {
  TileShape tile = TileShape::kAuto;
  ASSERT_TRUE(parse_tile_shape("small", &tile));
  EXPECT_EQ(tile, TileShape::kSmall);
  ASSERT_TRUE(parse_tile_shape("large", &tile));
  EXPECT_EQ(tile, TileShape::kLarge);
  ASSERT_TRUE(parse_tile_shape("medium", &tile));
  EXPECT_EQ(tile, TileShape::kMedium);
  ASSERT_TRUE(parse_tile_shape("cta-pair", &tile));
  EXPECT_EQ(tile, TileShape::kCtaPair);
  ASSERT_TRUE(parse_tile_shape("auto", &tile));
  EXPECT_EQ(tile, TileShape::kAuto);
  // The names before the move to the sm90 backend stay accepted, for existing scripts.
  ASSERT_TRUE(parse_tile_shape("warpgroup", &tile));
  EXPECT_EQ(tile, TileShape::kMedium);
  ASSERT_TRUE(parse_tile_shape("warpgroup-pair", &tile));
  EXPECT_EQ(tile, TileShape::kCtaPair);
  tile = TileShape::kAuto;
  EXPECT_FALSE(parse_tile_shape("huge", &tile));
  EXPECT_EQ(tile, TileShape::kAuto) << "a failed parse leaves the value alone";
}

// The C ABI's `tile` is the enum's value: renaming a shape must not renumber it.
TEST(TileShapes, ValuesAreTheCAbis) {
  EXPECT_EQ(static_cast<int>(TileShape::kAuto), 0);
  EXPECT_EQ(static_cast<int>(TileShape::kLarge), 1);
  EXPECT_EQ(static_cast<int>(TileShape::kSmall), 2);
  EXPECT_EQ(static_cast<int>(TileShape::kMedium), 3);
  EXPECT_EQ(static_cast<int>(TileShape::kCtaPair), 4);
  for (size_t i = 0; i < std::size(kTileShapeNames); ++i) {
    TileShape tile = TileShape::kAuto;
    ASSERT_TRUE(parse_tile_shape(kTileShapeNames[i], &tile));
    EXPECT_EQ(static_cast<size_t>(tile), i) << kTileShapeNames[i];
  }
}

TEST(CApi, ReportsErrorsWithMessages) {
  EXPECT_EQ(flashcore_attention(nullptr, nullptr), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_STRNE(flashcore_last_error(), "");
  flashcore_attention_params p;
  flashcore_attention_params_init(&p);
  EXPECT_EQ(p.window_left, -1);
  EXPECT_EQ(p.enable_pdl, 1)
      << "init turns programmatic dependent launch on, as AttentionParams does";
  EXPECT_TRUE(AttentionParams{}.enable_pdl);
  p.backend = "fastest-please";
  EXPECT_EQ(flashcore_attention(&p, nullptr), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("scalar"), std::string::npos)
      << "the message lists the valid backends: " << flashcore_last_error();
  p.backend = nullptr;
  EXPECT_EQ(flashcore_attention(&p, nullptr), FLASHCORE_INVALID_ARGUMENT);  // sizes are 0
  EXPECT_NE(std::string(flashcore_last_error()).find("batch is 0"), std::string::npos)
      << flashcore_last_error();
}

}  // namespace
}  // namespace flashcore
