// Small text codecs shared by the webhook and the agent: JSON string quoting, UTF-8 validation,
// base64, join, case-insensitive comparison. Pure functions, no allocation beyond the output string.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace erdma::common {

// Appends `s` to `out` as a quoted JSON string (RFC 8259): '"', '\\' and control characters are
// escaped; other bytes are copied, so `s` must already be valid UTF-8 for the result to be valid.
void append_json_string(std::string& out, std::string_view s);

// Returns `s` as a quoted JSON string (see append_json_string).
[[nodiscard]] std::string json_quote(std::string_view s);

// True if `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
[[nodiscard]] bool is_valid_utf8(std::string_view s) noexcept;

// The longest prefix of `s` of at most `max` bytes that does not end inside a UTF-8 character.
[[nodiscard]] std::string_view utf8_prefix(std::string_view s, size_t max) noexcept;

// `s` cut to utf8_prefix(s, max) and marked with "..." where it was cut: for a user's string in a
// message.
[[nodiscard]] std::string cut_for_message(std::string_view s, size_t max);

// Standard base64 (RFC 4648 section 4) with '=' padding.
void append_base64(std::string& out, std::string_view bytes);
[[nodiscard]] std::string base64_encode(std::string_view bytes);

// Decodes standard padded base64; returns nullopt for any malformed input (bad character, bad
// length or padding, non-zero trailing bits).
[[nodiscard]] std::optional<std::string> base64_decode(std::string_view text);

// The parts with `sep` between them ("" for no parts).
[[nodiscard]] std::string join(const std::vector<std::string>& parts, std::string_view sep);

// ASCII case-insensitive equality (HTTP header names and tokens).
[[nodiscard]] bool iequals(std::string_view a, std::string_view b) noexcept;

}  // namespace erdma::common
