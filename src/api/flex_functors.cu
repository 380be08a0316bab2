// prepare_functor_flex (api/flex_functors.hpp): run_flex's and the JIT's checks, compiled once
// into the library. A .cu file because the flex tile's limits live in the sm80 kernel traits.
#include "api/flex_functors.hpp"
#include "api/validate.hpp"
#include "common/status_message.hpp"
#include "sm80/flex_view.hpp"

namespace flashcore::detail {

Status prepare_functor_flex(const AttentionParams& params, DType dtype, int head_dim,
                            FunctorMods mods, Problem* problem) {
  if (Status s = validate_arguments(params); !s.ok()) return s;
  if (params.q.dtype != dtype) {
    return invalid_argument("q's dtype is not the one the flex kernel was compiled for");
  }
  if (params.head_dim > head_dim) {
    return invalid_argument(cat("head_dim ", params.head_dim, " exceeds the ", head_dim,
                                " the kernel was compiled for"));
  }
  if (mods.mask && (params.causal || params.window_left >= 0 || params.window_right >= 0 ||
                    params.flex.has_mask_mod())) {
    return invalid_argument(
        "the mask_mod is a functor here: leave causal, the window and flex.mask off (AND a "
        "flex::WindowMod into the functor)");
  }
  if (mods.score && (params.softcap != 0.f || params.flex.has_score_mod())) {
    return invalid_argument(
        "the score_mod is a functor here: leave softcap and flex.score_mod off (compose a "
        "flex::SoftcapScore into the functor)");
  }
  const flex::BlockMask& m = params.flex.block_mask;
  if (params.flex.has_block_mask() && (m.q_block_size % sm80::kFlexQBlockMultiple != 0 ||
                                       m.kv_block_size % sm80::kFlexBlockKV != 0)) {
    return {StatusCode::kUnsupported,
            "the flex kernel runs BlockMasks whose block sizes are multiples of 64; rebuild the "
            "BlockMask with such block sizes"};
  }
  if (params.num_splits > 1 || params.tile == TileShape::kSmall) {
    return {
        StatusCode::kUnsupported,
        "the flex kernel runs one tile, unsplit: pass num_splits 0 or 1 and tile auto or large"};
  }
  cudaDeviceProp device{};
  if (Status s = validate_device(params, &device); !s.ok()) return s;
  *problem = make_problem(params);
  return {};
}

}  // namespace flashcore::detail
