// Waiting on an event in tests: poll a condition until it holds or a deadline passes, instead of
// sleeping a fixed time and hoping (a loaded 2-core CI machine is slower than any guess).
#pragma once

#include <chrono>
#include <thread>

namespace erdma::testing {

// Polls `pred` every 5 ms until it holds or `timeout` passes; returns its last value.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace erdma::testing
