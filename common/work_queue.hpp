// A bounded queue of jobs run by a fixed number of worker threads, in arrival order. Nothing
// submitted is lost: a job is either refused at submit (the caller still holds it and answers it
// itself) or handed to `run` exactly once, also the jobs still queued when stop() is called (with
// `stopping` set, so they are answered quickly instead of worked on).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/guarded.hpp"

namespace erdma::common {

template <class Job>
class WorkQueue {
 public:
  using Run = std::function<void(Job&& job, bool stopping)>;
  // Called with the number of jobs queued or running whenever it changes (under the queue's lock:
  // keep it short, e.g. a gauge).
  using OnPending = std::function<void(size_t pending)>;

  enum class Refusal { Full, Stopping };

  WorkQueue(size_t workers, size_t capacity, Run run, OnPending on_pending = {})
      : capacity_(capacity), run_(std::move(run)), on_pending_(std::move(on_pending)) {
    workers = std::max<size_t>(workers, 1);
    workers_.reserve(workers);
    for (size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~WorkQueue() { stop(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `job` (moved from) and returns nothing, or leaves it with the caller and says why not.
  [[nodiscard]] std::optional<Refusal> submit(Job& job) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return Refusal::Stopping;
      if (queue_.size() >= capacity_) return Refusal::Full;
      queue_.push_back(std::move(job));
      changed();
    }
    work_cv_.notify_one();
    return std::nullopt;
  }

  // No more submissions; every queued job still goes to `run` (stopping = true); returns when the
  // workers have finished. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& w : workers_) {
      if (w.joinable()) w.join();
    }
  }

  // stop() has begun: submissions are refused from now on.
  [[nodiscard]] bool stopping() const {
    std::lock_guard lock(mu_);
    return stopping_;
  }

  // Jobs queued or running.
  [[nodiscard]] size_t pending() const {
    std::lock_guard lock(mu_);
    return queue_.size() + running_;
  }

  // Waits until nothing is queued or running; false when `timeout` passed first.
  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return idle_cv_.wait_for(lock, timeout, [this] { return queue_.empty() && running_ == 0; });
  }

  // For tests: refuse past `n` queued jobs from now on.
  void set_capacity(size_t n) {
    std::lock_guard lock(mu_);
    capacity_ = n;
  }

 private:
  void changed() {  // with mu_ held
    if (on_pending_) on_pending_(queue_.size() + running_);
  }

  void loop() {
    for (;;) {
      Job job;
      bool stopping = false;
      {
        std::unique_lock lock(mu_);
        work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left
        job = std::move(queue_.front());
        queue_.pop_front();
        ++running_;
        stopping = stopping_;
      }
      // One job's exception costs that job only: the worker, and the jobs after it, go on.
      run_guarded("work queue job", [&] { run_(std::move(job), stopping); });
      {
        std::lock_guard lock(mu_);
        --running_;
        changed();
      }
      idle_cv_.notify_all();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a job queued, or stopping
  std::condition_variable idle_cv_;  // a job finished
  std::deque<Job> queue_;
  size_t running_ = 0;
  size_t capacity_;
  bool stopping_ = false;
  Run run_;
  OnPending on_pending_;
  std::vector<std::thread> workers_;  // last: started once everything above exists
};

}  // namespace erdma::common
