// UEID validation, following the kernel's rules so that an accepted value is never refused later.
#include "agent/core/ueid.hpp"

namespace erdma::agent {
namespace {

bool is_upper_or_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); }

std::string shown(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

Result<Ueid> Ueid::parse(std::string_view text) {
  size_t e = text.size();
  while (e > 0 && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\n')) --e;
  std::string_view t = text.substr(0, e);
  const std::string what = "UEID " + shown(text) + ": ";
  if (t.empty()) return make_error(ErrorCode::InvalidArgument, what + "must not be empty");
  if (t.size() > kUeidLen) {
    return make_error(ErrorCode::InvalidArgument, what + "exceeds " + std::to_string(kUeidLen) + " chars");
  }
  if (!is_upper_or_digit(t.front())) {
    if (t.front() >= 'a' && t.front() <= 'z') {
      return make_error(ErrorCode::InvalidArgument, what + "lower-case letters are not allowed; use upper case");
    }
    return make_error(ErrorCode::InvalidArgument, what + "must start with an upper-case letter or a digit");
  }
  for (char c : t) {
    if (is_upper_or_digit(c) || c == '.' || c == '-') continue;
    if (c >= 'a' && c <= 'z') {
      return make_error(ErrorCode::InvalidArgument, what + "lower-case letters are not allowed; use upper case");
    }
    return make_error(ErrorCode::InvalidArgument, what + "only A-Z, 0-9, '.' and '-' are allowed");
  }
  return Ueid(std::string(t));
}

std::string Ueid::padded() const {
  std::string out = value_;
  out.resize(kUeidLen, ' ');
  return out;
}

}  // namespace erdma::agent
