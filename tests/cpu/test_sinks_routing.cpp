// Where sm90 runs attention sinks with no other flex part (sm90_fwd.cu): the persistent kernel's
// sinks variant, or the dense kernels without them plus the rescale; with any other flex part, the
// flex kernel. No GPU needed: the routing reads a fake sm_90 device's properties.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "api/backend_registry.hpp"
#include "common/head_dim.hpp"
#include "common/problem.hpp"
#include "common/pruning.hpp"
#include "flashcore/attention.hpp"
#include "sm90/sm90_fwd.hpp"
#include "tests/cpu/flex_params_fixture.hpp"

namespace flashcore {
namespace {

using namespace flex_fixture;

// Attention sinks with no other flex part run on sm90's dense kernels: on the persistent kernel's
// sinks variant where it has one (a dense or varlen batch at head dim 64 or 128, instantiated, no
// softcap, a grid it runs unsplit with one query head per row), else without them and rescaled
// after (decode grids, small grids, other head dims, softcap, forced splits or tiles). With any
// other flex part they stay on the flex kernel.
TEST(FlexBackends, Sm90RunsSinksAloneOnTheDenseKernels) {
  if (!sm90_in_build()) GTEST_SKIP() << "sm90 routing test skipped: this build has no sm_90a";
  auto sinks_alone = [](int64_t batch, int64_t seqlen_q, int64_t heads_q, int64_t head_dim) {
    AttentionParams p = flex_params();
    p.flex.score_mod.alibi.slopes = nullptr;
    p.flex.sinks.logits = reinterpret_cast<const float*>(fake(7));
    p.batch = batch, p.seqlen_q = seqlen_q, p.seqlen_k = 1000;
    p.heads_q = heads_q, p.heads_kv = 8, p.head_dim = head_dim, p.causal = true;
    p.q.strides = p.o.strides = bshd_strides(seqlen_q, heads_q, head_dim);
    p.k.strides = p.v.strides = bshd_strides(1000, 8, head_dim);
    return p;
  };
  auto dense = [](const AttentionParams& p) {
    return detail::sm90_dense_kernel_runs_sinks(detail::make_problem(p), hopper());
  };
  // Taken: hd64 (192-row tiles: 32 heads x 6 blocks >= 132 SMs) and hd128, fp16 too, head dims
  // rounded up to them, and no mask (which would run in clusters without sinks).
  struct Taken {
    const char* what;
    AttentionParams p;
  };
  std::vector<Taken> taken = {{"hd64 causal", sinks_alone(1, 1000, 32, 64)},
                              {"hd128 causal", sinks_alone(1, 1000, 32, 128)},
                              {"hd120", sinks_alone(1, 1000, 32, 120)},
                              {"hd56", sinks_alone(1, 1000, 32, 56)}};
  // A varlen batch, however small its grid: the persistent kernel runs every varlen batch.
  taken.push_back({"varlen hd64", sinks_alone(1, 1000, 32, 64)});
  taken.back().p.cu_seqlens_q = taken.back().p.cu_seqlens_k =
      reinterpret_cast<const int32_t*>(fake(10));
  taken.back().p.max_seqlen_q = taken.back().p.max_seqlen_k = 100;
  taken.push_back({"hd128 fp16 no mask", sinks_alone(1, 1000, 32, 128)});
  taken.back().p.q.dtype = taken.back().p.k.dtype = taken.back().p.v.dtype =
      taken.back().p.o.dtype = DType::kFloat16;
  taken.back().p.causal = false;
  for (const Taken& t : taken) {
    const bool built =
        detail::kernel_built(t.p.q.dtype, detail::instantiated_head_dim(t.p.head_dim));
    EXPECT_EQ(dense(t.p), built) << t.what;
    EXPECT_FALSE(detail::sm90_needs_flex_kernel(detail::make_problem(t.p))) << t.what;
  }
  struct Edit {
    const char* what;
    std::function<void(AttentionParams&)> edit;
  };
  // The flex kernel's.
  const Edit flex_parts[] = {
      {"with ALiBi",
       [](AttentionParams& p) {
         p.flex.score_mod.alibi.slopes = reinterpret_cast<const float*>(fake(4));
       }},
      {"with a BlockMask", [](AttentionParams& p) { p.flex.block_mask = block_mask_for(p); }},
  };
  for (const Edit& e : flex_parts) {
    AttentionParams p = sinks_alone(1, 1000, 32, 128);
    e.edit(p);
    EXPECT_FALSE(dense(p)) << e.what;
    EXPECT_TRUE(detail::sm90_needs_flex_kernel(detail::make_problem(p))) << e.what;
  }
  // The dense kernels' without the variant: rescaled after.
  const Edit rescaled[] = {
      {"with softcap", [](AttentionParams& p) { p.softcap = 30.f; }},
      {"a forced split", [](AttentionParams& p) { p.num_splits = 2; }},
      {"a forced small tile", [](AttentionParams& p) { p.tile = TileShape::kSmall; }},
      {"head dim 96 (no sinks variant)",
       [](AttentionParams& p) {
         p.head_dim = 96;
         p.q.strides = p.o.strides = bshd_strides(p.seqlen_q, p.heads_q, 96);
         p.k.strides = p.v.strides = bshd_strides(p.seqlen_k, p.heads_kv, 96);
       }},
      {"a grid too small for the persistent kernel",
       [](AttentionParams& p) {
         p.seqlen_q = 128, p.heads_q = 8;
         p.q.strides = p.o.strides = bshd_strides(128, 8, p.head_dim);
       }},
      {"decode under GQA (query heads packed into rows)",
       [](AttentionParams& p) {
         p.batch = 200, p.seqlen_q = 1;
         p.q.strides = p.o.strides = bshd_strides(1, p.heads_q, p.head_dim);
       }},
  };
  const detail::BackendEntry* sm90 = detail::find_backend(Backend::kSm90);
  for (const Edit& e : rescaled) {
    AttentionParams p = sinks_alone(1, 1000, 32, 128);
    e.edit(p);
    EXPECT_FALSE(dense(p)) << e.what;
    const detail::Problem problem = detail::make_problem(p);
    EXPECT_FALSE(detail::sm90_needs_flex_kernel(problem)) << e.what;
    // The dense kernels' checks, not the flex kernel's (which refuses head dims above 128).
    AttentionParams hd256 = p;
    hd256.head_dim = 256;
    hd256.q.strides = hd256.o.strides = bshd_strides(p.seqlen_q, p.heads_q, 256);
    hd256.k.strides = hd256.v.strides = bshd_strides(p.seqlen_k, p.heads_kv, 256);
    if (p.tile == TileShape::kAuto && detail::kernel_built(p.q.dtype, 256)) {
      EXPECT_STREQ(sm90->rejects(detail::make_problem(hd256), hopper()), "") << e.what;
    }
  }
  AttentionParams no_sinks = sinks_alone(1, 1000, 32, 128);
  no_sinks.flex.sinks.logits = nullptr;
  EXPECT_FALSE(dense(no_sinks)) << "no sinks: the plain dense path, not the sinks variant";
}

}  // namespace
}  // namespace flashcore
