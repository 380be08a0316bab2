// AttentionParams::flex before any launch: validation messages that name the fix, which problems
// need the flex kernels (a dense problem with no mods keeps the dense path), and each backend's
// reason (sm80 runs flex problems; the others point at it). No GPU needed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "api/backend_registry.hpp"
#include "api/flex_functors.hpp"
#include "api/validate.hpp"
#include "common/block_walk.hpp"
#include "common/feature_gates.hpp"
#include "common/problem.hpp"
#include "common/pruning.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/flashcore.h"
#include "flashcore/flex.hpp"
#include "sm90/flex_fwd.hpp"
#include "tests/cpu/flex_params_fixture.hpp"

namespace flashcore {
namespace {

using namespace flex_fixture;

TEST(FlexValidation, ValidFlexParamsPass) {
  AttentionParams p = flex_params();
  p.flex.block_mask = block_mask_for(p);
  p.flex.sinks.logits = reinterpret_cast<const float*>(fake(7));
  const Status s = detail::validate_arguments(p);
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST(FlexValidation, RejectsWithMessagesThatNameTheFix) {
  struct Bad {
    const char* what;
    std::function<void(AttentionParams&)> mutate;
    const char* message_names;
  };
  const int32_t* ids = reinterpret_cast<const int32_t*>(fake(8));
  const Bad cases[] = {
      {"window_in_mask", [](AttentionParams& p) { p.flex.mask.window = flex::causal_mask(); },
       "pass the window through causal / window_left / window_right"},
      {"softcap_in_score_mod", [](AttentionParams& p) { p.flex.score_mod.softcap.cap = 30.f; },
       "pass it as softcap"},
      {"one_document_array", [ids](AttentionParams& p) { p.flex.mask.documents.doc_ids_q = ids; },
       "set both"},
      {"document_stride",
       [ids](AttentionParams& p) {
         p.flex.mask.documents = {ids, ids, 100, 200};
       },
       "are below seqlen_q/k"},
      {"prefix_with_causal",
       [](AttentionParams& p) {
         p.flex.mask.use_prefix_lm = true;
         p.causal = true;
       },
       "prefix-LM is causal past the prefix already"},
      {"negative_prefix",
       [](AttentionParams& p) {
         p.flex.mask.use_prefix_lm = true;
         p.flex.mask.prefix_lm.prefix_length = -3;
       },
       "prefix_length is -3"},
      {"bias_table_shape",
       [](AttentionParams& p) {
         p.flex.score_mod.bias = flex::relative_bias(reinterpret_cast<const float*>(fake(9)), 0);
       },
       "build it with flex::relative_bias"},
      {"misaligned_sinks",
       [](AttentionParams& p) {
         p.flex.sinks.logits = reinterpret_cast<const float*>(fake(7) + 2);
       },
       "flex.sinks.logits is not 4-byte aligned"},
      {"block_mask_lengths",
       [](AttentionParams& p) {
         p.flex.block_mask = block_mask_for(p);
         p.flex.block_mask.seqlen_k = 256;
       },
       "rebuild it"},
      {"block_mask_heads",
       [](AttentionParams& p) {
         p.flex.block_mask = block_mask_for(p);
         p.flex.block_mask.heads = 2;
       },
       "flex.block_mask heads is 2 but heads_q is 4"},
      {"block_mask_without_counts",
       [](AttentionParams& p) {
         p.flex.block_mask.kv_indices = reinterpret_cast<const int32_t*>(fake(6));
       },
       "kv_num_blocks is null"},
      {"block_mask_with_varlen",
       [](AttentionParams& p) {
         p.flex.block_mask = block_mask_for(p);
         p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int32_t*>(fake(10));
         p.max_seqlen_q = 100;
         p.max_seqlen_k = 100;
       },
       "a BlockMask covers one dense [Sq, Sk] grid"},
      {"documents_with_varlen",
       [ids](AttentionParams& p) {
         p.flex.mask.documents = {ids, ids, 300, 200};
         p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int32_t*>(fake(10));
         p.max_seqlen_q = 100;
         p.max_seqlen_k = 100;
       },
       "already are the documents"},
  };
  for (const Bad& c : cases) {
    AttentionParams p = flex_params();
    c.mutate(p);
    const Status s = detail::validate_arguments(p);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << c.what << ": " << s.message;
    EXPECT_NE(s.message.find(c.message_names), std::string::npos) << c.what << ": " << s.message;
  }
}

TEST(FlexProblems, OnlyProblemsWithAFlexPartNeedTheFlexKernel) {
  AttentionParams dense = flex_params();
  dense.flex = {};
  dense.causal = true;
  dense.softcap = 20.f;  // the dense kernels' softcap and window: no flex kernel
  EXPECT_FALSE(detail::needs_flex_kernel(detail::make_problem(dense)));
  EXPECT_TRUE(detail::needs_flex_kernel(detail::make_problem(flex_params())));
  AttentionParams sinks = dense;
  sinks.flex.sinks.logits = reinterpret_cast<const float*>(fake(7));
  EXPECT_TRUE(detail::needs_flex_kernel(detail::make_problem(sinks)));
}

TEST(FlexBackends, Sm90AndSm80RunFlexAndEveryOtherBackendSaysWhere) {
  const detail::Problem problem = detail::make_problem(flex_params());
  size_t count = 0;
  const detail::BackendEntry* entries = detail::backend_entries(&count);
  for (size_t i = 0; i < count; ++i) {
    const std::string why = entries[i].rejects(problem, hopper());
    if (entries[i].backend == Backend::kSm80) {
      EXPECT_EQ(why, "");
    } else if (entries[i].backend == Backend::kSm90) {
      if (sm90_in_build()) EXPECT_EQ(why, "");
    } else if (why.find("not linked") == std::string::npos) {
      EXPECT_NE(why.find("flex mods run on the sm90 and sm80 backends"), std::string::npos)
          << entries[i].name << ": " << why;
    }
  }
}

// A flex problem that a backend cannot run, and a part of the reason it must give.
struct FlexRefusal {
  std::function<void(AttentionParams&)> mutate;
  const char* message_names;
};

// The refusals every flex backend shares (tiles), then the backend's own (head dims, split-KV).
// The params with another head dim (strides to match).
void set_head_dim(AttentionParams& p, int64_t head_dim) {
  p.head_dim = head_dim;
  p.q.strides = p.o.strides = bshd_strides(300, 4, head_dim);
  p.k.strides = p.v.strides = bshd_strides(200, 2, head_dim);
}

void expect_flex_refusals(Backend backend, std::vector<FlexRefusal> own) {
  std::vector<FlexRefusal> cases = {
      {[](AttentionParams& p) { p.tile = TileShape::kSmall; }, "one tile"},
  };
  cases.insert(cases.end(), own.begin(), own.end());
  const detail::BackendEntry* entry = detail::find_backend(backend);
  ASSERT_NE(entry, nullptr);
  for (const FlexRefusal& c : cases) {
    AttentionParams p = flex_params();
    c.mutate(p);
    const std::string why = entry->rejects(detail::make_problem(p), hopper());
    EXPECT_NE(why.find(c.message_names), std::string::npos) << why;
  }
}

TEST(FlexBackends, Sm90SaysWhichFlexProblemsItCannotRun) {
  if (!sm90_in_build()) GTEST_SKIP() << "sm90 flex test skipped: this build has no sm_90a";
  expect_flex_refusals(Backend::kSm90,
                       {{[](AttentionParams& p) { p.num_splits = 4; }, "unsplit"},
                        {[](AttentionParams& p) { set_head_dim(p, 264); }, "head_dim up to 256"},
                        {[](AttentionParams& p) {
                           p.flex.block_mask = block_mask_for(p);
                           p.flex.block_mask.q_block_size = 32;
                         },
                         "q_block_size is a multiple of 64"},
                        {[](AttentionParams& p) {
                           p.flex.block_mask = block_mask_for(p);
                           p.flex.block_mask.kv_block_size = 192;
                         },
                         "kv_block_size 64 or a multiple of 128"},
                        {[](AttentionParams& p) {
                           set_head_dim(p, 256);
                           p.flex.block_mask = block_mask_for(p);
                           p.flex.block_mask.kv_block_size = 96;
                         },
                         "multiples of 64 above"}});
}

// The hd256 flex kernel's tiles have 64 keys, so it takes KV blocks of any multiple of 64 there
// (192 included, which the 128-key tiles below refuse), at every head dim from 136 to 256.
TEST(FlexBackends, Sm90RunsHeadDimsUpTo256OnTheHd256Kernel) {
  if (!sm90_in_build()) GTEST_SKIP() << "sm90 flex test skipped: this build has no sm_90a";
  const detail::BackendEntry* sm90 = detail::find_backend(Backend::kSm90);
  ASSERT_NE(sm90, nullptr);
  const bool built = detail::kernel_built(DType::kBFloat16, 256);
  for (const int64_t head_dim : {136, 192, 256}) {
    for (const int64_t kv_block : {64, 128, 192}) {
      AttentionParams p = flex_params();
      set_head_dim(p, head_dim);
      p.flex.block_mask = block_mask_for(p);
      p.flex.block_mask.kv_block_size = kv_block;
      const std::string why = sm90->rejects(detail::make_problem(p), hopper());
      if (built) {
        EXPECT_EQ(why, "") << "head_dim " << head_dim << ", kv_block_size " << kv_block;
      } else {
        EXPECT_NE(why.find("FLASHCORE_HEAD_DIMS left 256 out"), std::string::npos) << why;
      }
    }
  }
}

TEST(FlexBackends, Sm80SaysWhichFlexProblemsItCannotRun) {
  // sm80 splits a flex problem's keys (test_flex_split.cpp), but not a varlen batch's.
  expect_flex_refusals(Backend::kSm80,
                       {{[](AttentionParams& p) {
                           p.cu_seqlens_q = p.cu_seqlens_k =
                               reinterpret_cast<const int32_t*>(fake(10));
                           p.max_seqlen_q = p.max_seqlen_k = 100;
                           p.num_splits = 4;
                         },
                         "varlen batches unsplit"},
                        {[](AttentionParams& p) { set_head_dim(p, 264); }, "head_dim up to 256"},
                        {[](AttentionParams& p) {
                           p.flex.block_mask = block_mask_for(p);
                           p.flex.block_mask.q_block_size = 32;
                         },
                         "multiples of 64"}});
}

// sm80 runs flex problems of every head dim up to 256, those above 128 on the hd256 kernel, whose
// 64-row tile takes 96 KiB of shared memory: it fits the H100, A100 (163 KiB) and sm_86/89 (99 KiB
// a block may opt into); a GPU that gives a block less refuses it with the shared-memory reason.
// A build without the hd256 kernel says so instead.
TEST(FlexBackends, Sm80RunsHeadDimsUpTo256WhereTheTileFits) {
  const detail::BackendEntry* sm80 = detail::find_backend(Backend::kSm80);
  ASSERT_NE(sm80, nullptr);
  cudaDeviceProp a100 = hopper(), sm86 = hopper(), small = hopper();
  a100.major = sm86.major = small.major = 8;
  sm86.minor = 6;
  a100.sharedMemPerBlockOptin = 163 * 1024;
  sm86.sharedMemPerBlockOptin = 99 * 1024;
  small.sharedMemPerBlockOptin = 96 * 1024 - 1;
  const bool built = detail::kernel_built(DType::kBFloat16, 256);
  for (const int64_t head_dim : {136, 160, 192, 248, 256}) {
    AttentionParams p = flex_params();
    set_head_dim(p, head_dim);
    const detail::Problem problem = detail::make_problem(p);
    for (const cudaDeviceProp& device : {hopper(), a100, sm86}) {
      const std::string why = sm80->rejects(problem, device);
      if (built) {
        EXPECT_EQ(why, "") << "head_dim " << head_dim << ", sm_" << device.major << device.minor;
      } else {
        EXPECT_NE(why.find("FLASHCORE_HEAD_DIMS left 256 out"), std::string::npos) << why;
      }
    }
    if (built) {
      const std::string why = sm80->rejects(problem, small);
      EXPECT_NE(why.find("more shared memory"), std::string::npos) << head_dim << ": " << why;
    }
  }
}

// The C ABI's flex fields reach validation: a BlockMask of the wrong length fails there, before
// any device is asked for.
TEST(FlexCAbi, FieldsReachValidation) {
  flashcore_attention_params c;
  flashcore_attention_params_init(&c);
  EXPECT_EQ(c.mask_mod.window_left, -1);
  EXPECT_EQ(c.block_mask.kv_num_blocks, nullptr);
  const AttentionParams p = flex_params();
  c.dtype = FLASHCORE_BFLOAT16;
  c.batch = p.batch;
  c.seqlen_q = p.seqlen_q;
  c.seqlen_k = p.seqlen_k;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.head_dim = p.head_dim;
  c.q = p.q.data;
  c.k = p.k.data;
  c.v = p.v.data;
  c.o = p.o.data;
  c.q_strides = {p.q.strides.batch, p.q.strides.seq, p.q.strides.head};
  c.k_strides = c.v_strides = {p.k.strides.batch, p.k.strides.seq, p.k.strides.head};
  c.o_strides = c.q_strides;
  c.alibi_slopes = p.flex.score_mod.alibi.slopes;
  const flex::BlockMask m = block_mask_for(p);
  c.block_mask = {m.batch,         m.heads,         m.seqlen_q,   m.seqlen_k + 1, m.q_block_size,
                  m.kv_block_size, m.kv_num_blocks, m.kv_indices, nullptr,        nullptr};
  EXPECT_EQ(flashcore_attention(&c, nullptr), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("flex.block_mask was built for"),
            std::string::npos)
      << flashcore_last_error();
  c.block_mask.kv_num_blocks = nullptr;
  c.mask_mod.window_right = 0;  // the window belongs in causal / window_right
  EXPECT_EQ(flashcore_attention(&c, nullptr), FLASHCORE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashcore_last_error()).find("flex.mask.window is set"), std::string::npos)
      << flashcore_last_error();
}

// The block walk on the host: a BlockMask's lists cut into kernel tiles, tails past the keys
// skipped; the dense walk's classification from the window.
TEST(FlexBlockWalk, ListsBecomeKernelTilesAndTheWindowClassifiesDenseTiles) {
  flex::BlockMask m = flex::block_mask_shape(1, 1, 256, 300, 128, 128);
  const int32_t counts[] = {1, 0}, indices[] = {2, 0, 0, 1, 0, 0};
  const int32_t full_counts[] = {1, 2}, full_indices[] = {0, 0, 0, 2, 1, 0};
  m.kv_num_blocks = counts;
  m.kv_indices = indices;
  m.full_kv_num_blocks = full_counts;
  m.full_kv_indices = full_indices;
  const flex::NoMask none;
  const auto walk = detail::kv_tile_walk<64>(m, none, 0, 0, 0, 64, 300);
  ASSERT_EQ(walk.count(), 4);  // partial block 2, full block 0: two 64-key tiles each
  EXPECT_EQ(walk.at(0, none, 0, 0, 0, 64, 300).index, 4);
  EXPECT_EQ(walk.at(0, none, 0, 0, 0, 64, 300).masking, detail::TileMasking::kPartial);
  // Keys 320.. are past seqlen_k 300: the second tile of block 2 has nothing to see.
  EXPECT_EQ(walk.at(1, none, 0, 0, 0, 64, 300).masking, detail::TileMasking::kSkip);
  EXPECT_EQ(walk.at(2, none, 0, 0, 0, 64, 300).index, 0);
  EXPECT_EQ(walk.at(3, none, 0, 0, 0, 64, 300).masking, detail::TileMasking::kFull);
  // Rows 128..: the second query block's lists (no partial, blocks 2 and 1 full).
  const auto second = detail::kv_tile_walk<64>(m, none, 0, 0, 128, 192, 300);
  ASSERT_EQ(second.count(), 4);
  EXPECT_EQ(second.tile_index(0), 4);
  EXPECT_EQ(second.tile_index(2), 2);

  EXPECT_EQ(second.at(0, none, 0, 0, 128, 192, 300).rows_begin, 0);
  EXPECT_EQ(second.at(0, none, 0, 0, 128, 192, 300).rows_end, 64);  // the tile's every row

  // Dense: causal rows 64..127 of 256 x 256 see tiles 0 (full) and 1 (the diagonal: partial).
  flex::BuiltinMask causal;
  causal.window = flex::WindowMod{256, 256, -1, 0};
  const flex::BlockMask none_listed{};
  const auto dense = detail::kv_tile_walk<64>(none_listed, causal, 0, 0, 64, 128, 256);
  ASSERT_EQ(dense.count(), 2);
  EXPECT_EQ(dense.at(0, causal, 0, 0, 64, 128, 256).masking, detail::TileMasking::kFull);
  EXPECT_EQ(dense.at(1, causal, 0, 0, 64, 128, 256).masking, detail::TileMasking::kPartial);
}

// A 128-row query tile over 64-row query blocks spans two block rows: the walk visits the first
// block's lists, then the second's, and each step is for its own block's 64 rows only.
TEST(FlexBlockWalk, ATileOverTwoQueryBlocksWalksBothBlocksListsForTheirOwnRows) {
  flex::BlockMask m = flex::block_mask_shape(1, 1, 256, 256, 64, 128);  // 4 x 2 blocks
  const int32_t counts[] = {1, 0, 1, 1}, indices[] = {1, 0, 0, 0, 0, 0, 1, 0};
  const int32_t full_counts[] = {0, 1, 1, 0}, full_indices[] = {0, 0, 0, 0, 1, 0, 0, 0};
  m.kv_num_blocks = counts;
  m.kv_indices = indices;
  m.full_kv_num_blocks = full_counts;
  m.full_kv_indices = full_indices;
  const flex::NoMask none;
  // Rows 0..127: block row 0 (partial KV block 1), then block row 1 (full KV block 0).
  const auto first = detail::kv_tile_walk<64>(m, none, 0, 0, 0, 128, 256);
  ASSERT_EQ(first.count(), 4);
  const detail::KvTile a = first.at(1, none, 0, 0, 0, 128, 256);
  EXPECT_EQ(a.index, 3);
  EXPECT_EQ(a.masking, detail::TileMasking::kPartial);
  EXPECT_EQ(a.rows_begin, 0);
  EXPECT_EQ(a.rows_end, 64);
  const detail::KvTile b = first.at(2, none, 0, 0, 0, 128, 256);
  EXPECT_EQ(b.index, 0);
  EXPECT_EQ(b.masking, detail::TileMasking::kFull);
  EXPECT_EQ(b.rows_begin, 64);
  EXPECT_EQ(b.rows_end, 128);
  // Rows 128..255: block row 2 (partial 0, full 1), then block row 3 (partial 1).
  const auto second = detail::kv_tile_walk<64>(m, none, 0, 0, 128, 256, 256);
  ASSERT_EQ(second.count(), 6);
  EXPECT_EQ(second.tile_index(2), 2);
  EXPECT_EQ(second.at(3, none, 0, 0, 128, 256, 256).masking, detail::TileMasking::kFull);
  EXPECT_EQ(second.at(3, none, 0, 0, 128, 256, 256).rows_end, 64);
  const detail::KvTile c = second.at(5, none, 0, 0, 128, 256, 256);
  EXPECT_EQ(c.index, 3);
  EXPECT_EQ(c.masking, detail::TileMasking::kPartial);
  EXPECT_EQ(c.rows_begin, 64);
  EXPECT_EQ(c.rows_end, 128);
  // A short last tile (rows 128..159 of 160) lies in one block: one list, every row.
  const auto tail = detail::kv_tile_walk<64>(m, none, 0, 0, 128, 160, 256);
  ASSERT_EQ(tail.count(), 4);
  EXPECT_EQ(tail.at(3, none, 0, 0, 128, 160, 256).rows_end, 32);
}

// prepare_functor_flex, what run_flex and flashcore.jit_score_mod check before a launch: the
// params' fields that the functors replace must be off, the kernel must fit (dtype, head dim,
// block sizes, one tile, a varlen batch unsplit). What passes these reaches the device check.
TEST(FlexFunctors, PrepareRejectsTheFieldsTheFunctorsReplace) {
  const detail::FunctorMods both{true, true}, score_only{false, true};
  struct Case {
    const char* what;
    std::function<void(AttentionParams&)> mutate;
    detail::FunctorMods mods;
    DType dtype;
    int head_dim;
    const char* message;  // nullptr: passes these checks
  };
  const auto none = [](AttentionParams&) {};
  const Case cases[] = {
      {"a built-in score_mod", none, both, DType::kBFloat16, 128, "the score_mod is a functor"},
      {"softcap",
       [](AttentionParams& p) {
         p.flex.score_mod.alibi.slopes = nullptr;
         p.softcap = 5.f;
       },
       score_only, DType::kBFloat16, 128, "leave softcap and flex.score_mod off"},
      {"causal",
       [](AttentionParams& p) {
         p.flex.score_mod.alibi.slopes = nullptr;
         p.causal = true;
       },
       both, DType::kBFloat16, 128, "the mask_mod is a functor"},
      {"causal, score functor only",
       [](AttentionParams& p) {
         p.flex.score_mod.alibi.slopes = nullptr;
         p.causal = true;
       },
       score_only, DType::kBFloat16, 128, nullptr},
      {"dtype", none, {false, false}, DType::kFloat16, 128, "q's dtype is not the one"},
      {"head dim", none, {false, false}, DType::kBFloat16, 64, "head_dim 128 exceeds the 64"},
      {"block size",
       [](AttentionParams& p) {
         p.flex.block_mask = flex::block_mask_shape(p.batch, 1, p.seqlen_q, p.seqlen_k, 80, 128);
         p.flex.block_mask.kv_num_blocks = reinterpret_cast<const int32_t*>(fake(5));
         p.flex.block_mask.kv_indices = reinterpret_cast<const int32_t*>(fake(6));
       },
       {false, false},
       DType::kBFloat16,
       128,
       "multiples of 64"},
      {"a split",
       [](AttentionParams& p) { p.num_splits = 2; },
       {false, false},
       DType::kBFloat16,
       128,
       nullptr},
      {"a split varlen batch",
       [](AttentionParams& p) {
         p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int32_t*>(fake(10));
         p.max_seqlen_q = p.max_seqlen_k = 100;
         p.num_splits = 2;
       },
       {false, false},
       DType::kBFloat16,
       128,
       "varlen batches unsplit"},
      {"a backend without flex kernels",
       [](AttentionParams& p) { p.backend = Backend::kWmma; },
       {false, false},
       DType::kBFloat16,
       128,
       "pass backend auto, sm90 or sm80"},
  };
  for (const Case& c : cases) {
    AttentionParams p = flex_params();
    c.mutate(p);
    detail::FunctorFlex plan;
    const Status s = detail::prepare_functor_flex(p, {c.dtype, c.head_dim, true}, c.mods, &plan);
    if (c.message) {
      EXPECT_EQ(s.code == StatusCode::kInvalidArgument || s.code == StatusCode::kUnsupported, true)
          << c.what << ": " << s.message;
      EXPECT_NE(s.message.find(c.message), std::string::npos) << c.what << ": " << s.message;
    } else {
      // Fake pointers: with a GPU the device check refuses them, without one there is none.
      EXPECT_TRUE(s.code == StatusCode::kNoDevice ||
                  s.message.find("pointer CUDA knows") != std::string::npos ||
                  s.message.find("host memory") != std::string::npos)
          << c.what << ": " << s.message;
    }
  }
}

// Which flex kernel runs functors of one's own (functor_sm90_rejects): sm90 exactly where the
// built-in mods would run on it, given that the caller compiled the sm90 kernel for them.
TEST(FlexFunctors, Sm90RunsFunctorsWhereItTakesTheProblem) {
  const detail::Problem problem = detail::make_problem(flex_params());
  const detail::FunctorKernels sm90{DType::kBFloat16, 128, true, true};
  EXPECT_STREQ(detail::functor_sm90_rejects(problem, hopper(), sm90), "");
  struct Case {
    const char* what;
    std::function<void(AttentionParams&, cudaDeviceProp&, detail::FunctorKernels&)> mutate;
    const char* message;
  };
  const Case cases[] = {
      {"no sm90 kernel compiled",
       [](AttentionParams&, cudaDeviceProp&, detail::FunctorKernels& k) { k.sm90 = false; },
       "compile them for sm_90a"},
      {"an A100", [](AttentionParams&, cudaDeviceProp& d, detail::FunctorKernels&) { d.major = 8; },
       "needs an sm_90 GPU"},
      {"a newer GPU",
       [](AttentionParams&, cudaDeviceProp& d, detail::FunctorKernels&) { d.major = 10; },
       "needs an sm_90 GPU"},
      {"a head dim 96 kernel",
       [](AttentionParams&, cudaDeviceProp&, detail::FunctorKernels& k) { k.head_dim = 96; },
       "head dim 64, 128 or 256"},
      {"a BlockMask of 64-key blocks without the paired kernel",
       [](AttentionParams& p, cudaDeviceProp&, detail::FunctorKernels& k) {
         k.sm90_paired = false;
         p.flex.block_mask = block_mask_for(p);
         p.flex.block_mask.kv_block_size = 64;
       },
       "the paired kernel for 64-key blocks is not compiled"},
      {"a BlockMask of 192-key blocks on a 128-key tile",
       [](AttentionParams& p, cudaDeviceProp&, detail::FunctorKernels&) {
         p.flex.block_mask = block_mask_for(p);
         p.flex.block_mask.kv_block_size = 192;
       },
       "kv_block_size 64 or a multiple of 128"},
      {"a BlockMask of 96-key blocks on the head dim 256 kernel",
       [](AttentionParams& p, cudaDeviceProp&, detail::FunctorKernels& k) {
         k.head_dim = 256;
         p.flex.block_mask = block_mask_for(p);
         p.flex.block_mask.kv_block_size = 96;
       },
       "multiples of 64 above"},
      {"a split",
       [](AttentionParams& p, cudaDeviceProp&, detail::FunctorKernels&) { p.num_splits = 2; },
       "unsplit"},
  };
  for (const Case& c : cases) {
    AttentionParams p = flex_params();
    cudaDeviceProp device = hopper();
    detail::FunctorKernels kernels = sm90;
    c.mutate(p, device, kernels);
    const std::string why = detail::functor_sm90_rejects(detail::make_problem(p), device, kernels);
    EXPECT_NE(why.find(c.message), std::string::npos) << c.what << ": " << why;
  }
  // A BlockMask of 128-key blocks (and 64-row query blocks) is the sm90 kernel's, and one of 64-key
  // blocks its paired twin's, at head dims 64 and 128.
  AttentionParams blocks = flex_params();
  blocks.flex.block_mask = block_mask_for(blocks);
  blocks.flex.block_mask.q_block_size = 64;
  EXPECT_STREQ(detail::functor_sm90_rejects(detail::make_problem(blocks), hopper(), sm90), "");
  for (const int kernel_head_dim : {64, 128}) {
    AttentionParams paired = blocks;
    paired.head_dim = kernel_head_dim;
    paired.flex.block_mask.kv_block_size = 64;
    detail::FunctorKernels kernels = sm90;
    kernels.head_dim = kernel_head_dim;
    EXPECT_STREQ(detail::functor_sm90_rejects(detail::make_problem(paired), hopper(), kernels), "")
        << "head dim " << kernel_head_dim;
  }
  // A head dim 256 kernel's tiles have 64 keys: it takes blocks of any multiple of 64, at its head
  // dim and for a narrower problem (this head dim 128 one) alike.
  const detail::FunctorKernels hd256{DType::kBFloat16, 256, true, false};
  for (const int64_t kv_block : {64, 128, 192}) {
    blocks.flex.block_mask.kv_block_size = kv_block;
    EXPECT_STREQ(detail::functor_sm90_rejects(detail::make_problem(blocks), hopper(), hd256), "")
        << "kv_block_size " << kv_block;
  }
}

// The sm90 flex kernel's scratch follows the tile of the kernel that runs the problem, not the
// problem's head dim: a head dim 256 kernel's merged walks count 64-key steps, twice the steps of
// the head dim 128 kernel's over the same BlockMask.
TEST(FlexFunctors, Sm90ScratchFollowsTheKernelsTile) {
  AttentionParams p = flex_params();
  p.flex.block_mask = block_mask_for(p);
  const detail::Problem problem = detail::make_problem(p);
  const size_t at128 = detail::sm90_flex_workspace_bytes(problem, 128);
  const size_t at256 = detail::sm90_flex_workspace_bytes(problem, 256);
  EXPECT_EQ(at128, detail::sm90_flex_workspace_bytes(
                       problem, detail::sm90_flex_kernel_head_dim(p.head_dim)));
  EXPECT_GT(at256, at128);
}

}  // namespace
}  // namespace flashcore
