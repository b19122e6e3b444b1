// The one reader for JSON the programs did not write themselves (API server answers, watch
// events, the checkpoint file): typed access that never throws, whatever the document holds, and
// errors that name the document and the member's path. nlohmann's own accessors (`value(key, T)`,
// `at`, `get<T>`, `operator[]` on a const document) throw or assert on a missing member or a
// wrong type; code that reads untrusted input goes through JsonAt instead. Pure.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace erdma::common {

enum class JsonKind { String, Integer, Boolean, Object, Array };

// A position in a parsed document: the value there, if any, and the path that led to it. Steps
// into members and elements never fail: stepping into what is not an object (or array), or past
// its end, gives a missing position whose reads report the path. Cheap to copy; refers to the
// document, which must outlive it. Not thread-safe to share while the document changes.
//
// Three kinds of read, by what a missing or mistyped value means to the caller:
//   required  string(), int64(), ...       missing, null or another type: InvalidArgument;
//   optional  string_or(fallback), ...     missing or null: the fallback; another type: InvalidArgument;
//   probe     if_string(), ...             the value when it has the type, else nullopt; no error.
// Messages read "<subject>: <path>: expected a string, got number 5" and "<subject>: <path> is
// missing", e.g. `ResourceClaim ns/db (1f0c…): status.allocation.devices.results[2].pool is missing`.
class JsonAt {
 public:
  // `subject` names the document in messages ("watch event", "ResourceSlice list").
  JsonAt(const nlohmann::json& root, std::string subject);

  // A member / an element; missing when this is not an object / array or has no such one.
  [[nodiscard]] JsonAt member(std::string_view key) const;
  [[nodiscard]] JsonAt element(size_t index) const;
  // Members one after another: path("status.allocation") = member("status").member("allocation").
  // For keys without '.'; other keys go through member().
  [[nodiscard]] JsonAt path(std::string_view dotted) const;

  [[nodiscard]] const nlohmann::json* get() const noexcept { return value_; }  // nullptr: missing
  [[nodiscard]] bool is_missing() const noexcept { return value_ == nullptr || value_->is_null(); }
  [[nodiscard]] bool is(JsonKind kind) const noexcept;
  // Elements of an array, members of an object; 0 for anything else.
  [[nodiscard]] size_t size() const noexcept;
  // "<subject>: <path>", or the subject alone at the root.
  [[nodiscard]] std::string where() const;
  // InvalidArgument "<where> <problem>": the caller words the problem ("is not a UID").
  [[nodiscard]] Error error(std::string_view problem) const;

  // Required reads.
  [[nodiscard]] Result<std::string> string() const;
  // An integer (never a fraction) within [min, max]; JSON's unsigned values above INT64_MAX are
  // out of range here.
  [[nodiscard]] Result<int64_t> int64(int64_t min = std::numeric_limits<int64_t>::min(),
                                      int64_t max = std::numeric_limits<int64_t>::max()) const;
  [[nodiscard]] Result<uint64_t> uint64(uint64_t max = std::numeric_limits<uint64_t>::max()) const;
  [[nodiscard]] Result<bool> boolean() const;
  // OK when the value is of `kind` (for objects and arrays, which are then stepped into).
  [[nodiscard]] Status expect(JsonKind kind) const;

  // Optional reads.
  [[nodiscard]] Result<std::string> string_or(std::string fallback) const;
  [[nodiscard]] Result<int64_t> int64_or(int64_t fallback, int64_t min = std::numeric_limits<int64_t>::min(),
                                         int64_t max = std::numeric_limits<int64_t>::max()) const;
  [[nodiscard]] Result<bool> boolean_or(bool fallback) const;
  // OK when missing, null or of `kind`.
  [[nodiscard]] Status expect_optional(JsonKind kind) const;

  // Probes.
  [[nodiscard]] std::optional<std::string> if_string() const;
  [[nodiscard]] std::optional<int64_t> if_int64() const;
  [[nodiscard]] std::optional<bool> if_boolean() const;

 private:
  JsonAt(const nlohmann::json* value, std::shared_ptr<const std::string> subject, std::string path)
      : value_(value), subject_(std::move(subject)), path_(std::move(path)) {}
  [[nodiscard]] Error wrong_type(std::string_view want) const;

  const nlohmann::json* value_;                 // nullptr: missing
  std::shared_ptr<const std::string> subject_;  // shared by every step from one root
  std::string path_;                            // "status.devices[2].pool"; "" at the root
};

// "a string", "an integer", "a boolean", "an object", "an array".
[[nodiscard]] std::string_view json_kind_name(JsonKind kind) noexcept;

}  // namespace erdma::common
