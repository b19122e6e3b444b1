// Accounting for a byte budget shared by many requests (the admission server's request bodies),
// with a part of it that large requests cannot take, so small ones still fit while large ones
// hold the rest. Pure: no lock, no clock, no allocation. The server holds it under a mutex of
// its own and answers 429 when a reservation is refused.
#pragma once

#include <cstddef>

namespace erdma::common {

class ByteBudget {
 public:
  struct Limits {
    size_t total = 32u << 20;   // all reservations together never exceed this
    size_t reserve = 8u << 20;  // of `total`, kept for small requests: a large one may not take it
    size_t small = 64u << 10;   // a request holding at most this many bytes is small
  };

  // `limits.reserve` must not exceed `limits.total` (checked at start-up by the caller).
  explicit ByteBudget(Limits limits) noexcept : limits_(limits) {}

  // Grows one request's reservation from `held` bytes (0 for a new one) to `want` (> held).
  // The request counts as small when `want` <= small: it may use the whole budget. A larger one
  // may grow only while everything reserved stays within total - reserve. Returns false and
  // changes nothing when the growth does not fit now; the request keeps its `held` bytes.
  [[nodiscard]] bool grow(size_t held, size_t want) noexcept;

  // Gives back a request's whole reservation (what its successful grow() calls reached).
  void release(size_t held) noexcept;

  // The largest reservation that can ever succeed (in an otherwise empty budget).
  [[nodiscard]] size_t largest() const noexcept { return limits_.total - limits_.reserve; }
  [[nodiscard]] size_t used() const noexcept { return used_; }
  [[nodiscard]] const Limits& limits() const noexcept { return limits_; }

 private:
  Limits limits_;
  size_t used_ = 0;
};

}  // namespace erdma::common
