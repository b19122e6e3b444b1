// The two scalar policies of the YAML loader (see yaml_scalars.hpp).
#include "common/yaml_scalars.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace erdma::common {
namespace {

using nlohmann::json;

// --- YamlSchema::Core: the YAML 1.2 core schema ----------------------------------------------------

bool all_of(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}
bool is_dec(char c) { return c >= '0' && c <= '9'; }
bool is_oct(char c) { return c >= '0' && c <= '7'; }
bool is_hex(char c) { return is_dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Integer per the YAML 1.2 core schema; nullopt if `s` is not one or does not fit in int64.
std::optional<json> yaml_int(std::string_view s) {
  std::string_view digits = s;
  bool neg = false;
  int base = 10;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
    neg = digits[0] == '-';
    digits.remove_prefix(1);
    if (!all_of(digits, is_dec)) return std::nullopt;
  } else if (digits.starts_with("0o")) {
    digits.remove_prefix(2);
    base = 8;
    if (!all_of(digits, is_oct)) return std::nullopt;
  } else if (digits.starts_with("0x")) {
    digits.remove_prefix(2);
    base = 16;
    if (!all_of(digits, is_hex)) return std::nullopt;
  } else if (!all_of(digits, is_dec)) {
    return std::nullopt;
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  if (neg) {
    if (v > uint64_t{1} << 63) return std::nullopt;
    return json(v == uint64_t{1} << 63 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(v));
  }
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return json(static_cast<int64_t>(v));
  return json(v);
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool yaml_style_float(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_dec(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_dec(s[i])) ++i, ++frac_digits;
    if (int_digits == 0 && frac_digits == 0) return false;
  } else if (int_digits == 0) {
    return false;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && is_dec(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

std::optional<json> parse_float(std::string_view s) {
  const std::string copy(s);
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || errno == ERANGE || !std::isfinite(d)) return std::nullopt;
  return json(d);
}

// A float per the core schema: the same syntax, and no .inf or .nan (JSON has no form for them).
std::optional<json> yaml_float(std::string_view s) {
  if (is_yaml_inf_or_nan(s) || !yaml_style_float(s)) return std::nullopt;
  return parse_float(s);
}

json resolve_core(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (auto i = yaml_int(s)) return *i;
  if (auto f = yaml_float(s)) return *f;
  return std::string(s);
}

// --- YamlSchema::Kubectl: go-yaml v2's YAML 1.1 resolution ------------------------------------------

// Go's strconv.ParseUint(s, 0, 64) digits after the sign: 0x / 0o / 0b prefixes, a leading 0
// for octal, else decimal. nullopt if not an unsigned integer that fits.
std::optional<uint64_t> go_base0_unsigned(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    base = 8;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    base = 2;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

json resolve_kubectl(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  for (std::string_view t : {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}) {
    if (s == t) return true;
  }
  for (std::string_view f : {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}) {
    if (s == f) return false;
  }
  const char c = s.front();
  if (c == '.') {
    // Go's ParseFloat on the text as written.
    if (yaml_style_float(s)) {
      if (auto f = parse_float(s)) return *f;
    }
    return std::string(s);
  }
  if (!(is_dec(c) || c == '+' || c == '-')) return std::string(s);
  std::string plain;
  for (char ch : s) {
    if (ch != '_') plain += ch;
  }
  std::string_view digits = plain;
  const bool neg = !digits.empty() && digits.front() == '-';
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
  if (auto u = go_base0_unsigned(digits)) {
    if (neg) {
      if (*u <= uint64_t{1} << 63) {
        return json(*u == uint64_t{1} << 63 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(*u));
      }
    } else if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return json(static_cast<int64_t>(*u));
    } else if (plain.front() != '+') {
      return json(*u);  // ParseUint takes no sign
    }
  }
  if (yaml_style_float(plain)) {
    if (auto f = parse_float(plain)) return *f;
  }
  return std::string(s);
}

}  // namespace

bool is_yaml_inf_or_nan(std::string_view s) {
  for (std::string_view t :
       {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN"}) {
    if (s == t) return true;
  }
  return false;
}

json resolve_plain_scalar(std::string_view s, YamlSchema schema) {
  return schema == YamlSchema::Core ? resolve_core(s) : resolve_kubectl(s);
}

// The string a resolved map key becomes (sigs.k8s.io/yaml turns bool and integer keys back into
// text); nullopt for keys it refuses or that the preview cannot reproduce exactly (floats).
std::optional<std::string> kubectl_key_text(const json& k) {
  if (k.is_string()) return k.get<std::string>();
  if (k.is_boolean()) return k.get<bool>() ? "true" : "false";
  if (k.is_number_unsigned()) return std::to_string(k.get<uint64_t>());
  if (k.is_number_integer()) return std::to_string(k.get<int64_t>());
  return std::nullopt;
}

}  // namespace erdma::common
