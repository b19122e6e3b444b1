#include "common/flags.hpp"

#include <algorithm>

namespace erdma::common {

const std::string* Flags::get(std::string_view name) const {
  for (auto it = values.rbegin(); it != values.rend(); ++it) {
    if (it->first == name) return &it->second;
  }
  return nullptr;
}

std::string Flags::get_or(std::string_view name, std::string fallback) const {
  const std::string* v = get(name);
  return v != nullptr ? *v : std::move(fallback);
}

Result<Flags> parse_flags(const std::vector<std::string>& args, std::span<const FlagSpec> specs, UnknownFlags unknown) {
  Flags out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      out.positional.push_back(arg);
      continue;
    }
    std::string_view name = arg;
    std::string value;
    bool inline_value = false;
    if (const auto eq = name.find('='); name.starts_with("--") && eq != std::string_view::npos) {
      value = std::string(name.substr(eq + 1));
      name = name.substr(0, eq);
      inline_value = true;
    }
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const FlagSpec& s) {
      return name == s.name || (!s.alias.empty() && name == s.alias);
    });
    if (spec == specs.end()) {
      if (unknown == UnknownFlags::AsPositional) {
        out.positional.push_back(arg);
        continue;
      }
      return make_error(ErrorCode::InvalidArgument, "unknown flag " + std::string(name.substr(0, 64)));
    }
    if (spec->is_switch) {
      if (inline_value) {
        return make_error(ErrorCode::InvalidArgument, "flag " + std::string(spec->name) + " takes no value");
      }
    } else if (!inline_value) {
      if (i + 1 >= args.size()) {
        return make_error(ErrorCode::InvalidArgument, "flag " + std::string(name) + " needs a value");
      }
      value = args[++i];
    }
    out.values.emplace_back(spec->name, std::move(value));
  }
  return out;
}

}  // namespace erdma::common
