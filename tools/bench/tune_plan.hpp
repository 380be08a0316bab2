// The grid and kernel view of one tuner candidate on one problem: the library's plan()
// (src/sm90/sm90_fwd.cu) for the problems the tuner runs (no softcap, no split-KV), with the
// candidate's query tile and cluster size instead of the tile table's.
#pragma once

#include <cstddef>

#include "flashcore/attention.hpp"
#include "sm90/launch_args.hpp"
#include "tune_config.hpp"

namespace flashcore::bench {

// tile_counter: the dynamic schedule's counter (masked problems), zeroed by the caller before
// each launch.
sm90::LaunchArgs plan_candidate(const AttentionParams& params, const TuneConfig& config,
                                int sm_count, size_t l2_bytes, int* tile_counter);

}  // namespace flashcore::bench
