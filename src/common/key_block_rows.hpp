// The backward walks the mask from the keys' side: which query rows see at least one key of a
// key block. Under a WindowMask row i sees [i + Sk - Sq - left, i + Sk - Sq + right] within
// [0, Sk), an interval that moves right with i, so the rows seeing any key of [key_begin, key_end)
// are one contiguous range, and each of them has a visible key in the block (never a fully masked
// row). tests/cpu/test_key_block_rows.cpp checks both against every element.
#pragma once

#include "flashcore/mask.hpp"

namespace flashcore {

template <typename Index>
struct RowRange {
  Index begin, end;  // empty when begin == end
};

// 0 <= key_begin < key_end <= seqlen_k.
template <typename Index>
FLASHCORE_HOST_DEVICE RowRange<Index> rows_seeing_keys(const WindowMask<Index>& mask,
                                                       Index key_begin, Index key_end) {
  const Index offset = mask.seqlen_k - mask.seqlen_q;
  // end_key(i) > key_begin  <=>  i + offset + right + 1 > key_begin.
  Index begin = mask.right < 0 ? 0 : key_begin - offset - mask.right;
  // first_key(i) < key_end  <=>  i + offset - left < key_end.
  Index end = mask.left < 0 ? mask.seqlen_q : key_end - offset + mask.left;
  begin = begin > 0 ? begin : 0;
  end = end < mask.seqlen_q ? end : mask.seqlen_q;
  return {begin, end > begin ? end : begin};
}

}  // namespace flashcore
