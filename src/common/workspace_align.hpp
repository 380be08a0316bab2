// The boundary every workspace array starts on (16-byte cp.async, float4 and TMA bulk copies need
// 16; 256 keeps arrays on separate cache lines), and the rounding up to it. Shared by the
// workspaces of the backward, the flex merged walks and the varlen tile lists.
#pragma once

#include <cstddef>

namespace flashcore::detail {

inline constexpr size_t kWorkspaceAlign = 256;

inline size_t align_up(size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

}  // namespace flashcore::detail
