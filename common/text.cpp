// Implementations of the text codecs declared in text.hpp.
#include "common/text.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

namespace erdma::common {
namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> make_b64_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kB64[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr auto kB64Rev = make_b64_table();

// True if any of the 8 bytes of `w` must be escaped in a JSON string: a control character
// (below 0x20), '"' or '\\'. Exact as a yes/no answer (the classic "has a byte less than n" and
// "has a zero byte" tests; bytes of 0x80 and above never count).
bool word_needs_escape(uint64_t w) noexcept {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHighs = 0x8080808080808080ULL;
  const uint64_t quote = w ^ (kOnes * '"');
  const uint64_t backslash = w ^ (kOnes * '\\');
  const uint64_t control = (w - kOnes * 0x20) & ~w;
  const uint64_t quotes = (quote - kOnes) & ~quote;
  const uint64_t backslashes = (backslash - kOnes) & ~backslash;
  return ((control | quotes | backslashes) & kHighs) != 0;
}

bool byte_needs_escape(unsigned char c) noexcept { return c < 0x20 || c == '"' || c == '\\'; }

void append_escape(std::string& out, unsigned char c) {
  switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
  }
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  // Runs of bytes that need no escape are copied whole; they are found 8 bytes at a time.
  const char* p = s.data();
  const size_t n = s.size();
  size_t run_start = 0;
  size_t i = 0;
  while (i < n) {
    if (n - i >= 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (!word_needs_escape(w)) {
        i += 8;
        continue;
      }
    }
    const size_t stop = std::min(n, i + 8);
    for (; i < stop; ++i) {
      const auto c = static_cast<unsigned char>(p[i]);
      if (!byte_needs_escape(c)) continue;
      out.append(p + run_start, i - run_start);
      run_start = i + 1;
      append_escape(out, c);
    }
  }
  out.append(p + run_start, n - run_start);
  out += '"';
}

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_json_string(out, s);
  return out;
}

bool is_valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    size_t n = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (static_cast<size_t>(end - p) <= n) return false;
    for (size_t i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

namespace {

// Every 12-bit value as its two base64 characters: one lookup per two output characters.
constexpr std::array<std::array<char, 2>, 4096> make_b64_pairs() {
  std::array<std::array<char, 2>, 4096> t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = {kB64[i >> 6], kB64[i & 63]};
  return t;
}
constexpr auto kB64Pairs = make_b64_pairs();

}  // namespace

void append_base64(std::string& out, std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  const size_t start = out.size();
  out.resize(start + (n + 2) / 3 * 4);
  char* o = out.data() + start;  // written through a pointer: per-char push_back is slow here
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    std::memcpy(o, kB64Pairs[v >> 12].data(), 2);
    std::memcpy(o + 2, kB64Pairs[v & 0xFFF].data(), 2);
    o += 4;
  }
  if (n - i == 1) {
    const uint32_t v = uint32_t{p[i]} << 16;
    *o++ = kB64[(v >> 18) & 63];
    *o++ = kB64[(v >> 12) & 63];
    *o++ = '=';
    *o++ = '=';
  } else if (n - i == 2) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8);
    *o++ = kB64[(v >> 18) & 63];
    *o++ = kB64[(v >> 12) & 63];
    *o++ = kB64[(v >> 6) & 63];
    *o++ = '=';
  }
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  append_base64(out, bytes);
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + static_cast<size_t>(k)];
      if (c == '=') {
        // Padding only in the last quantum, only in the last two places, and only trailing.
        if (!last || k < 2) return std::nullopt;
        ++pad;
        v[k] = 0;
        continue;
      }
      if (pad > 0) return std::nullopt;
      v[k] = kB64Rev[static_cast<unsigned char>(c)];
      if (v[k] < 0) return std::nullopt;
    }
    const uint32_t bits = (static_cast<uint32_t>(v[0]) << 18) | (static_cast<uint32_t>(v[1]) << 12) |
                          (static_cast<uint32_t>(v[2]) << 6) | static_cast<uint32_t>(v[3]);
    out += static_cast<char>((bits >> 16) & 0xFF);
    if (pad < 2) out += static_cast<char>((bits >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(bits & 0xFF);
    // Canonical form: the bits hidden by padding must be zero.
    if ((pad == 1 && (bits & 0xFF) != 0) || (pad == 2 && (bits & 0xFFFF) != 0)) return std::nullopt;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i != 0) out += sep;
    out += parts[i];
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view utf8_prefix(std::string_view s, size_t max) noexcept {
  if (s.size() <= max) return s;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

std::string cut_for_message(std::string_view s, size_t max) {
  const auto kept = utf8_prefix(s, max);
  std::string out(kept);
  if (kept.size() < s.size()) out += "...";
  return out;
}

}  // namespace erdma::common
