// Building Status messages: cat("seqlen_q is ", 7, "; ...") joins strings and numbers.
//
// Without iostreams on purpose: inside a host process that loads another libstdc++ (torch, through
// the Python binding), formatting numbers with std::ostream crashed in the locale facets.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "flashcore/attention.hpp"

namespace flashcore::detail {

inline std::string message_text(const char* part) { return part; }
inline std::string message_text(const std::string& part) { return part; }
inline std::string message_text(int64_t part) { return std::to_string(part); }
inline std::string message_text(int part) { return std::to_string(part); }
inline std::string message_text(size_t part) { return std::to_string(part); }
inline std::string message_text(double part) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", part);
  return buffer;
}

template <typename... Parts>
std::string cat(const Parts&... parts) {
  return (std::string() + ... + message_text(parts));
}

inline Status invalid_argument(const std::string& message) {
  return {StatusCode::kInvalidArgument, message};
}

}  // namespace flashcore::detail
