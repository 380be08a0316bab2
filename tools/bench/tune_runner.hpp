// `flashcore-bench tune` on the GPU: candidates built by nvcc in parallel into shared objects,
// loaded with dlopen, gated and timed on the lab's inputs and references (case_data.hpp) with the
// lab's timer; the search itself is tune_search.cpp.
#pragma once

#include <string>

#include "cli.hpp"

namespace flashcore::bench {

// Returns the process exit code (0 ok, 1 failed, 2 usage, 4 no device) after printing the
// summary; `commit` is the code the candidates are built from.
int run_tune(const Options& options, const std::string& default_source_root,
             const std::string& commit, const std::string& command_line);

}  // namespace flashcore::bench
