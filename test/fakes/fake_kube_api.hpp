// An in-memory Kubernetes API server behind the kube::Api seam, for the DRA suites: objects by
// path, one resourceVersion counter, the server's optimistic concurrency (409 on a stale PUT or
// DELETE precondition, AlreadyExists on a second create), collection lists with the field
// selectors ResourceSlices and Events need, watches that see every change, injected failures
// and a call log. Thread-safe. Errors are worded by kube::error_from_answer, as the real client's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
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

  // The next `count` calls (of `verb` only, when given) fail with `error`, touching nothing.
  void fail_next(int count, Error error, std::string verb = "");
  // Someone else's writes: stored at `path` (created or replaced, with a new resourceVersion) or
  // deleted; watchers see them.
  void put_for_test(const std::string& path, nlohmann::json object);
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
  };
  std::vector<Failure> failures_;
  std::list<Watcher> watchers_;
  int open_watches_ = 0;
  std::atomic<bool> watchable_{true};
};

}  // namespace erdma::agent::testing
