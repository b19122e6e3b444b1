// An in-memory Kubernetes API server behind the kube::Api seam, for the DRA suites: objects by
// path, one resourceVersion counter, the server's optimistic concurrency (409 on a stale PUT or
// DELETE precondition, AlreadyExists on a second create), the status subresource (PUT
// <object>/status), collection lists with the field selectors ResourceSlices and Events need,
// watches that see every change, injected failures, someone else's write just before ours, and
// a call log. Thread-safe. Errors are worded by kube::error_from_answer, as the real client's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/kube/api.hpp"

namespace erdma::agent::testing {

class FakeKubeApi final : public kube::Api {
 public:
  struct Call {
    std::string verb;  // GET, POST, PUT, DELETE, WATCH
    std::string path;  // as given, with its query
    bool ok = false;   // false: an error was returned (injected or the store's)
  };

  FakeKubeApi() = default;

  // kube::Api
  Result<nlohmann::json> get(std::string_view path) override;
  Result<nlohmann::json> create(std::string_view path, const nlohmann::json& object) override;
  Result<nlohmann::json> replace(std::string_view path, const nlohmann::json& object) override;
  Status remove(std::string_view path, std::string_view resource_version) override;
  // Sees ADDED for every matching object first (a watch without resourceVersion does), then each
  // change and each pushed event; ends when stopped, on end_watches(), or when the handler says so.
  Status watch(std::string_view path, const kube::WatchHandler& on_event, std::stop_token stop) override;
  bool can_watch() const noexcept override { return watchable_; }

  // Behave as a client without watch (can_watch false; watch() refused).
  void set_watchable_for_test(bool on) { watchable_ = on; }

  // The next `count` calls (of `verb` only, when given; to `path` only, when given, query
  // included) fail with `error`, touching nothing. kAlways: every such call, e.g. a path whose
  // server is down.
  static constexpr int kAlways = std::numeric_limits<int>::max();
  void fail_next(int count, Error error, std::string verb = "", std::string path = "");
  // Someone else's writes: stored at `path` (created or replaced, with a new resourceVersion) or
  // deleted; watchers see them. A created object gets a uid of the store's own, so a test can
  // tell the store's uid from one it made up.
  void put_for_test(const std::string& path, nlohmann::json object);
  // The same, keeping the object's metadata.uid when it has one: objects whose uid the caller
  // names (a ResourceClaim the kubelet refers to by uid).
  void put_keeping_uid_for_test(const std::string& path, nlohmann::json object);
  // Runs `write` once, just before the next POST or PUT is looked at (outside the lock, so it may
  // call this fake): someone else's write that lands between a caller's read and its write.
  void before_next_write(std::function<void()> write);
  void delete_for_test(const std::string& path);
  // Every open watch gets an ERROR event with this HTTP code and ends.
  void push_watch_error(unsigned http_status, const std::string& reason, const std::string& message);
  // The server ends every open watch (as timeoutSeconds does).
  void end_watches();
  // Every open watch gets `event` as it is, whatever its shape (a server or proxy gone wrong).
  void push_watch_event_for_test(const nlohmann::json& event);

  [[nodiscard]] std::optional<nlohmann::json> object(const std::string& path) const;
  // Objects directly under a collection path, by name.
  [[nodiscard]] std::map<std::string, nlohmann::json> objects(const std::string& collection) const;
  [[nodiscard]] std::vector<Call> calls() const;
  // Calls of one verb so far, failed ones included.
  [[nodiscard]] size_t calls_of(std::string_view verb) const;
  // Successful POST, PUT and DELETE calls so far.
  [[nodiscard]] size_t writes() const;
  void clear_calls();
  [[nodiscard]] int open_watches() const;

 private:
  struct Watcher {
    std::string collection;
    std::map<std::string, std::string> fields;
    std::deque<nlohmann::json> events;
    bool ended = false;
  };

  // Returns the injected failure for this call, if any; logs the call.
  std::optional<Error> begin_call(const std::string& verb, std::string_view path);
  void finish_call(bool ok);
  void notify(const std::string& type, const std::string& path, const nlohmann::json& object);
  void put(const std::string& path, nlohmann::json object, bool keep_uid);
  // Runs and forgets the before_next_write hook, if any; takes and gives back the lock.
  void race(std::unique_lock<std::mutex>& lock);
  std::string next_version() { return std::to_string(++version_); }

  mutable std::mutex mu_;
  std::condition_variable_any changed_;
  std::map<std::string, nlohmann::json> store_;  // by object path
  uint64_t version_ = 100;
  uint64_t uid_ = 0;
  std::vector<Call> calls_;
  size_t writes_ = 0;
  struct Failure {
    int count = 0;
    Error error;
    std::string verb;
    std::string path;
  };
  std::vector<Failure> failures_;
  std::function<void()> before_write_;
  std::list<Watcher> watchers_;
  int open_watches_ = 0;
  std::atomic<bool> watchable_{true};
};

}  // namespace erdma::agent::testing
