// One number as text, for the lab's reports and messages (written once here: each report file
// had its own copy, which a unity build of the lab's library turns into redefinitions).
#pragma once

#include <cstdio>
#include <string>

namespace flashcore::bench {

// printf's formatting of one number: format_number("%.2f us", 1.5) is "1.50 us".
inline std::string format_number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// The number with `digits` significant digits (printf's %g).
inline std::string significant_digits(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*g", digits, value);
  return text;
}

}  // namespace flashcore::bench
