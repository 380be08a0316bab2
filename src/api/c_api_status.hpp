// The C ABI's error reporting, shared by its translation units: each failed call keeps its message
// for flashcore_last_error() (per thread), each success clears it.
#pragma once

#include <string>

#include "flashcore/attention.hpp"
#include "flashcore/flashcore.h"

namespace flashcore::detail {

flashcore_status c_api_fail(flashcore_status code, std::string message);
// FLASHCORE_OK and a cleared message for an ok status, else its code and message.
flashcore_status c_api_result(const Status& status);
const char* c_api_last_error();

}  // namespace flashcore::detail
