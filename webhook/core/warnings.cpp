#include "webhook/core/warnings.hpp"

#include <algorithm>
#include <unordered_set>

#include "common/text.hpp"

namespace erdma::webhook {
namespace {

// Copies `s` for one line of the warnings annotation: control characters become blanks, and a
// line longer than kMaxWarningLineBytes is cut at a UTF-8 character boundary and marked.
std::string annotation_line(std::string_view s) {
  std::string out;
  out.reserve(std::min(s.size(), kMaxWarningLineBytes));
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    out += (u < 0x20 || u == 0x7f) ? ' ' : ch;
  }
  if (out.size() <= kMaxWarningLineBytes) return out;
  return common::cut_for_message(out, kMaxWarningLineBytes - 3);  // "..." included
}

}  // namespace

std::string_view to_string(WarningKind k) noexcept {
  switch (k) {
    case WarningKind::InjectAnnotationValue: return "inject_annotation_value";
    case WarningKind::SmcrAnnotationValue: return "smcr_annotation_value";
    case WarningKind::EnvFromPrecedence: return "envfrom_precedence";
    case WarningKind::LdPreloadValueFrom: return "ld_preload_value_from";
    case WarningKind::LdPreloadOtherCopy: return "ld_preload_other_copy";
    case WarningKind::ResourceAdded: return "resource_added";
    case WarningKind::ResourceZero: return "resource_zero";
    case WarningKind::AddResourceOff: return "add_resource_off";
    case WarningKind::WindowsPod: return "windows_pod";
    case WarningKind::RequestsWithoutLimits: return "requests_without_limits";
    case WarningKind::SmcrNotAllowed: return "smcr_not_allowed";
    case WarningKind::Count: break;
  }
  return "unknown";
}

std::string warnings_annotation_value(std::optional<std::string_view> existing,
                                      const std::vector<std::string>& warnings, bool more) {
  std::vector<std::string> lines;
  std::unordered_set<std::string> seen;  // the lines above, for a single pass over the new ones
  bool left_out = more;
  if (existing) {
    std::string_view rest = *existing;
    while (!rest.empty()) {
      const auto nl = rest.find('\n');
      const std::string_view line = rest.substr(0, nl);
      if (line == kWarningsLeftOut) {
        left_out = true;
      } else if (!line.empty()) {
        lines.emplace_back(line);
        seen.emplace(line);
      }
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
  }
  for (const auto& w : warnings) {
    std::string line = annotation_line(w);
    if (!line.empty() && seen.insert(line).second) lines.push_back(std::move(line));
  }
  // A line is taken if the left-out note would still fit after it, or if it is the last line and
  // no note is needed. Deterministic, so a second pass over the result reproduces it.
  std::string value;
  size_t kept = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t bytes = value.size() + (value.empty() ? 0 : 1) + lines[i].size();
    const bool with_note =
        bytes + 1 + kWarningsLeftOut.size() <= kMaxWarningsAnnotationBytes && kept + 2 <= kMaxWarnings;
    const bool alone =
        i + 1 == lines.size() && !left_out && bytes <= kMaxWarningsAnnotationBytes && kept + 1 <= kMaxWarnings;
    if (!with_note && !alone) {
      left_out = true;
      break;
    }
    if (!value.empty()) value += '\n';
    value += lines[i];
    ++kept;
  }
  if (left_out) {
    if (!value.empty()) value += '\n';
    value += kWarningsLeftOut;
  }
  return value;
}

void Warnings::add(WarningKind kind, std::string text) {
  ++counts_[static_cast<size_t>(kind)];
  ++total_;
  if (texts_.size() < kKept) texts_.push_back(std::move(text));
}

std::string Warnings::annotation(std::optional<std::string_view> existing) const {
  return warnings_annotation_value(existing, texts_, total_ > texts_.size());
}

std::vector<std::string> Warnings::take_for_response() {
  if (total_ > kMaxWarnings) {
    const size_t dropped = total_ - (kMaxWarnings - 1);
    texts_.resize(kMaxWarnings - 1);
    texts_.push_back("... and " + std::to_string(dropped) + " more warnings");
  }
  return std::move(texts_);
}

}  // namespace erdma::webhook
