// report.md: per-chapter comparison tables, the FlashCore-style journey table at each chapter's
// canonical (first) case, and the expectations verdict.
#pragma once

#include <string>

#include "report_json.hpp"

namespace flashcore::bench {

std::string render_markdown(const RunRecord& record);

}  // namespace flashcore::bench
