// tflops.svg: TFLOP/s vs sequence length, one line per provider (and mask), one panel per head
// dim, for square problems (Sq = Sk; decode is left to report.md). Drawn directly as SVG so the
// lab needs no plotting stack.
#pragma once

#include <string>
#include <vector>

#include "model.hpp"

namespace flashcore::bench {

std::string render_svg(const std::vector<Result>& results);

}  // namespace flashcore::bench
