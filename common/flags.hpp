// The command-line flag parser both programs use: one set of spelling rules for every command.
//
//   --name VALUE, --name=VALUE, -n VALUE   a flag that takes a value
//   --name                                 a switch (FlagSpec::is_switch); --name=VALUE is an error
//   -h, --help                             sets Flags::help
//   anything not starting with '-' (and "-" itself) is positional
//
// A flag given twice keeps both values in order; get() returns the last, as kubectl does.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace erdma::common {

struct FlagSpec {
  std::string_view name;        // the long form, "--output"
  std::string_view alias = {};  // the short form, "-o", or empty
  bool is_switch = false;       // takes no value
};

struct Flags {
  std::vector<std::pair<std::string_view, std::string>> values;  // FlagSpec::name → value ("" for a switch)
  std::vector<std::string> positional;
  bool help = false;

  // The last value given for `name`, or nullptr when it was not given.
  [[nodiscard]] const std::string* get(std::string_view name) const;
  [[nodiscard]] std::string get_or(std::string_view name, std::string fallback) const;
  [[nodiscard]] bool has(std::string_view name) const { return get(name) != nullptr; }
};

// What to do with a flag that is not in `specs`.
enum class UnknownFlags {
  Refuse,       // an error naming the flag
  AsPositional  // kept in `positional`, for a command whose verbs take flags of their own
};

// Errors say which flag and what it needs, e.g. "flag --config needs a value".
[[nodiscard]] Result<Flags> parse_flags(const std::vector<std::string>& args, std::span<const FlagSpec> specs,
                                        UnknownFlags unknown = UnknownFlags::Refuse);

}  // namespace erdma::common
