// Quantity grammar (k8s.io/apimachinery resource.Quantity):
//   quantity  ::= [+-]? number suffix
//   number    ::= digits | digits '.' digits? | '.' digits
//   suffix    ::= '' | binarySI | decimalSI | ('e' | 'E') [+-]? digits
//   binarySI  ::= Ki | Mi | Gi | Ti | Pi | Ei        decimalSI ::= n | u | m | k | M | G | T | P | E
#include "webhook/core/quantity.hpp"

#include <string>

namespace erdma::webhook {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool valid_suffix(std::string_view s) {
  if (s.empty()) return true;
  if (s.size() == 2 && s[1] == 'i')
    return s[0] == 'K' || s[0] == 'M' || s[0] == 'G' || s[0] == 'T' || s[0] == 'P' || s[0] == 'E';
  if (s.size() == 1) {
    return s[0] == 'n' || s[0] == 'u' || s[0] == 'm' || s[0] == 'k' || s[0] == 'M' || s[0] == 'G' || s[0] == 'T' ||
           s[0] == 'P' || s[0] == 'E';
  }
  if (s[0] == 'e' || s[0] == 'E') {
    s.remove_prefix(1);
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
    if (s.empty()) return false;
    for (char c : s) {
      if (!is_digit(c)) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

Result<QuantitySign> quantity_sign(std::string_view text) {
  auto bad = [&] {
    std::string shown(text.substr(0, 64));
    return make_error(ErrorCode::InvalidArgument, "\"" + shown + "\" is not a valid quantity");
  };
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  size_t i = 0;
  size_t digits = 0;
  bool nonzero = false;
  bool dot = false;
  for (; i < s.size(); ++i) {
    if (is_digit(s[i])) {
      ++digits;
      nonzero = nonzero || s[i] != '0';
    } else if (s[i] == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0 || !valid_suffix(s.substr(i))) return bad();
  if (!nonzero) return QuantitySign::Zero;
  return negative ? QuantitySign::Negative : QuantitySign::Positive;
}

}  // namespace erdma::webhook
