// Result<T>: a value or an Error, for every failure a caller can recover from (untrusted input,
// kernel and library return codes, missing devices). Exceptions stay at process edges.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace erdma {

enum class ErrorCode {
  InvalidArgument,     // the input is malformed or breaks a rule; fix the input
  NotFound,            // the named thing does not exist
  AlreadyExists,       // the thing to create is there already
  PermissionDenied,    // missing capability or access
  Unavailable,         // a dependency (kernel module, socket, device) is not there right now
  FailedPrecondition,  // the system is not in a state that allows the operation
  ResourceExhausted,   // a size or count limit was hit
  DeadlineExceeded,    // a bounded wait ran out
  Internal,            // a bug or an impossible state; report it
};

[[nodiscard]] constexpr std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::NotFound: return "NotFound";
    case ErrorCode::AlreadyExists: return "AlreadyExists";
    case ErrorCode::PermissionDenied: return "PermissionDenied";
    case ErrorCode::Unavailable: return "Unavailable";
    case ErrorCode::FailedPrecondition: return "FailedPrecondition";
    case ErrorCode::ResourceExhausted: return "ResourceExhausted";
    case ErrorCode::DeadlineExceeded: return "DeadlineExceeded";
    case ErrorCode::Internal: return "Internal";
  }
  return "Unknown";
}

// A failure with a message that names the object, the rule broken and, where possible, the fix.
struct Error {
  ErrorCode code = ErrorCode::Internal;
  std::string message;

  friend bool operator==(const Error&, const Error&) = default;
};

[[nodiscard]] inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

// Holds either a T or an Error. Accessing the wrong alternative is a bug (asserted).
template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Error>, "Result<Error> is ambiguous");

 public:
  Result(const T& value) : v_(std::in_place_index<0>, value) {}          // NOLINT: implicit by design
  Result(T&& value) : v_(std::in_place_index<0>, std::move(value)) {}    // NOLINT
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT
  template <class U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::remove_cvref_t<U>, T> &&
           !std::is_same_v<std::remove_cvref_t<U>, Error> && !std::is_same_v<std::remove_cvref_t<U>, Result>)
      Result(U&& value)
      : v_(std::in_place_index<0>, std::forward<U>(value)) {}  // NOLINT

  [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  [[nodiscard]] T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  [[nodiscard]] const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  [[nodiscard]] T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  [[nodiscard]] const Error& error() const& {
    assert(!ok());
    return std::get<1>(v_);
  }
  [[nodiscard]] Error&& error() && {
    assert(!ok());
    return std::get<1>(std::move(v_));
  }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  [[nodiscard]] bool ok() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] const Error& error() const& {
    assert(!ok());
    return *error_;
  }
  [[nodiscard]] Error&& error() && {
    assert(!ok());
    return std::move(*error_);
  }

 private:
  std::optional<Error> error_;  // empty on success: constructing an OK status allocates nothing
};

using Status = Result<void>;

}  // namespace erdma

// Error propagation, for functions that return a Result or a Status.
//
// ERDMA_TRY(expr): evaluates a Result or Status; on failure returns its Error from the caller.
//   ERDMA_TRY(table.flush());
// ERDMA_TRY_ASSIGN(lhs, expr): evaluates a Result; on failure returns its Error, else moves the
// value into lhs, which may declare a variable.
//   ERDMA_TRY_ASSIGN(auto text, common::read_file(path, kMaxBytes));
// Both are statements. expr may contain commas (a lambda, a template argument list).
#define ERDMA_TRY_CONCAT_INNER_(a, b) a##b
#define ERDMA_TRY_CONCAT_(a, b) ERDMA_TRY_CONCAT_INNER_(a, b)
// __COUNTER__ gives each expansion its own name, so a TRY inside a lambda inside a TRY shadows
// nothing.
#define ERDMA_TRY_IMPL_(tmp, ...)                                      \
  do {                                                                 \
    if (auto tmp = (__VA_ARGS__); !tmp) return std::move(tmp).error(); \
  } while (false)
#define ERDMA_TRY(...) ERDMA_TRY_IMPL_(ERDMA_TRY_CONCAT_(erdma_try_, __COUNTER__), __VA_ARGS__)
#define ERDMA_TRY_ASSIGN_IMPL_(tmp, lhs, ...) \
  auto tmp = (__VA_ARGS__);                   \
  if (!tmp) return std::move(tmp).error();    \
  lhs = std::move(tmp).value()
#define ERDMA_TRY_ASSIGN(lhs, ...) ERDMA_TRY_ASSIGN_IMPL_(ERDMA_TRY_CONCAT_(erdma_try_, __COUNTER__), lhs, __VA_ARGS__)
