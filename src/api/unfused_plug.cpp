// Part of the flashcore_unfused target, linked whole-archive: its static initializer plugs the
// unfused baseline into the core registry, so programs that link the target need no setup call.
#include "api/backend_registry.hpp"
#include "baseline/unfused.hpp"

namespace flashcore::detail {
namespace {

[[maybe_unused]] const bool kPlugged = (plug_unfused(&unfused_backend()), true);

}  // namespace
}  // namespace flashcore::detail
