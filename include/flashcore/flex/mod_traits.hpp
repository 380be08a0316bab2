// What the runners ask of a mask_mod or score_mod beyond calling it: binding it to a sequence's
// lengths and classifying whole tiles. Both are optional members, detected here, so a user's mod
// that has neither still works (flashcore/flex/mask_mods.hpp describes them).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "flashcore/mask.hpp"

namespace flashcore::flex {

namespace detail {

template <typename Mod, typename = void>
struct HasWithSeqlens : std::false_type {};
template <typename Mod>
struct HasWithSeqlens<
    Mod, std::void_t<decltype(std::declval<const Mod&>().with_seqlens(int64_t{}, int64_t{}))>>
    : std::true_type {};

template <typename Mask, typename = void>
struct HasBlockVisibility : std::false_type {};
template <typename Mask>
struct HasBlockVisibility<Mask, std::void_t<decltype(std::declval<const Mask&>().block_visibility(
                                    0, 0, int64_t{}, int64_t{}, int64_t{}, int64_t{}))>>
    : std::true_type {};

}  // namespace detail

// mod bound to one sequence's lengths; a mod without with_seqlens does not depend on them.
template <typename Mod>
FLASHCORE_HOST_DEVICE Mod bind_seqlens(const Mod& mod, int64_t seqlen_q, int64_t seqlen_k) {
  if constexpr (detail::HasWithSeqlens<Mod>::value) {
    return mod.with_seqlens(seqlen_q, seqlen_k);
  } else {
    (void)seqlen_q;
    (void)seqlen_k;
    return mod;
  }
}

// The tile's visibility from the mask's own block_visibility, or kUnknown when it has none.
template <typename Mask>
FLASHCORE_HOST_DEVICE BlockVisibility block_visibility(const Mask& mask, int b, int h,
                                                       int64_t q_begin, int64_t q_end,
                                                       int64_t kv_begin, int64_t kv_end) {
  if constexpr (detail::HasBlockVisibility<Mask>::value) {
    return mask.block_visibility(b, h, q_begin, q_end, kv_begin, kv_end);
  } else {
    (void)mask, (void)b, (void)h, (void)q_begin, (void)q_end, (void)kv_begin, (void)kv_end;
    return BlockVisibility::kUnknown;
  }
}

}  // namespace flashcore::flex
