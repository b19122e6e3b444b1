// Current<T>: the one value of something that is replaced at run time (the TLS context, the
// config), shared by readers that each take a reference for as long as they use it. A reader keeps
// the value it took even after a swap: an open connection finishes on the certificate it started
// with, a request on the config it started with.
#pragma once

#include <atomic>
#include <memory>
#include <utility>

namespace erdma::webhook::server {

template <class T>
class Current {
 public:
  explicit Current(std::shared_ptr<T> initial = nullptr) : v_(std::move(initial)) {}
  Current(const Current&) = delete;
  Current& operator=(const Current&) = delete;

  // Thread-safe; the returned pointer keeps the value alive.
  [[nodiscard]] std::shared_ptr<T> get() const noexcept { return v_.load(std::memory_order_acquire); }
  void set(std::shared_ptr<T> v) noexcept { v_.store(std::move(v), std::memory_order_release); }

 private:
  std::atomic<std::shared_ptr<T>> v_;
};

}  // namespace erdma::webhook::server
