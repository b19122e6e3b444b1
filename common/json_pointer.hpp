// RFC 6901 JSON Pointer helpers for the patch paths we write by hand.
#pragma once

#include <string>
#include <string_view>

namespace erdma::common {

// Appends one reference token to `out`, escaped: '~' becomes "~0" and '/' becomes "~1" (in that
// order of precedence, so "~1" in a key round-trips). Does not add the leading '/'.
inline void append_pointer_token(std::string& out, std::string_view token) {
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
}

// Returns `token` escaped as a single JSON Pointer reference token.
[[nodiscard]] inline std::string escape_pointer_token(std::string_view token) {
  std::string out;
  out.reserve(token.size() + 4);
  append_pointer_token(out, token);
  return out;
}

}  // namespace erdma::common
