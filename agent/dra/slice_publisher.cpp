// The ResourceSlice publisher (see slice_publisher.hpp).
#include "agent/dra/slice_publisher.hpp"

#include <algorithm>

#include "agent/kube/api_paths.hpp"
#include "common/guarded.hpp"
#include "common/jitter.hpp"
#include "common/json_read.hpp"
#include "common/log.hpp"

namespace erdma::agent {
namespace {

namespace log = common::log;
using common::JsonAt;
using common::JsonKind;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kPublishHelp =
    "Time of one publish of the node's ResourceSlices (list, plan, create, update, delete; conflict rounds "
    "included), by result";

// metadata.name of one of the wanted slices (build_slices' own output: always there).
std::string wanted_name(const json& slice) {
  return JsonAt(slice, "ResourceSlice").path("metadata.name").if_string().value_or("");
}

}  // namespace

Result<bool> slice_event_needs_publish(const json& event, const std::vector<json>& wanted, std::string_view node_name,
                                       std::string_view driver) {
  const JsonAt at(event, "ResourceSlice watch event");
  ERDMA_TRY(at.expect(JsonKind::Object));
  ERDMA_TRY_ASSIGN(const std::string type, at.member("type").string());
  if (type != "ADDED" && type != "MODIFIED" && type != "DELETED") return false;  // BOOKMARK and others
  const JsonAt object = at.member("object");
  ERDMA_TRY(object.expect(JsonKind::Object));
  ERDMA_TRY_ASSIGN(const std::string name, object.path("metadata.name").string());
  const JsonAt spec = object.member("spec");
  ERDMA_TRY(spec.expect(JsonKind::Object));
  ERDMA_TRY_ASSIGN(const std::string node, spec.member("nodeName").string_or(""));
  ERDMA_TRY_ASSIGN(const std::string slice_driver, spec.member("driver").string_or(""));
  ERDMA_TRY(spec.member("devices").expect_optional(JsonKind::Array));
  const auto want = std::find_if(wanted.begin(), wanted.end(), [&](const json& w) { return wanted_name(w) == name; });
  if (type == "DELETED") return want != wanted.end();
  if (want != wanted.end()) return !slice_has_content(*want, *object.get());
  // Not one of ours by name: news only when it claims our node and driver (an extra slice).
  return node == node_name && slice_driver == driver;
}

SlicePublisher::SlicePublisher(kube::Api& api, WantedFn wanted, SlicePublisherOptions options,
                               common::metrics::Registry* metrics)
    : api_(api),
      wanted_fn_(std::move(wanted)),
      options_(std::move(options)),
      list_path_(kube::node_resource_slices_path(options_.node_name, options_.driver)) {
  if (metrics == nullptr) return;
  auto& r = *metrics;
  const auto buckets = dra_latency_buckets();
  publish_latency_.ok =
      &r.histogram("erdma_agent_dra_publish_duration_seconds", kPublishHelp, buckets, {{"result", "ok"}});
  publish_latency_.error =
      &r.histogram("erdma_agent_dra_publish_duration_seconds", kPublishHelp, buckets, {{"result", "error"}});
}

SlicePublisher::~SlicePublisher() { stop(); }

Result<PublishSummary> SlicePublisher::publish_once() {
  std::lock_guard<std::mutex> lock(publish_mu_);
  return publish_locked();
}

Result<PublishSummary> SlicePublisher::publish_locked() {
  const auto start = Clock::now();
  auto result = publish_rounds();
  publish_latency_.observe(result.ok(), start);
  return result;
}

Result<PublishSummary> SlicePublisher::publish_rounds() {
  ERDMA_TRY_ASSIGN(SliceSet wanted, wanted_fn_());
  PublishSummary summary;
  summary.notes = wanted.notes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_wanted_ = wanted.slices;  // the watch compares against this from now on
  }
  const std::string collection(kube::kResourceSlicesPath);
  for (int attempt = 1; attempt <= std::max(1, options_.max_attempts); ++attempt) {
    summary.attempts = attempt;
    ERDMA_TRY_ASSIGN(const json existing, api_.get(list_path_));
    ERDMA_TRY_ASSIGN(SlicePlan plan, plan_slices(wanted.slices, existing));
    if (attempt == 1) summary.notes.insert(summary.notes.end(), plan.notes.begin(), plan.notes.end());
    summary.generation = plan.generation;
    std::string conflict;  // the action that met one: list again and re-plan
    for (const auto& action : plan.actions) {
      const std::string path = kube::resource_slice_path(action.name);
      Status done;
      switch (action.op) {
        case SliceOp::Create:
        case SliceOp::Update: {
          const bool create = action.op == SliceOp::Create;
          auto r = create ? api_.create(collection, action.object) : api_.replace(path, action.object);
          if (r) {
            ++(create ? summary.created : summary.updated);
          } else {
            done = std::move(r).error();
          }
          break;
        }
        case SliceOp::Delete: {
          done = api_.remove(path, action.resource_version);
          if (done || done.error().code == ErrorCode::NotFound) {
            done = {};
            ++summary.deleted;  // gone either way
          }
          break;
        }
      }
      if (done) {
        log::info("resource slice written")
            .kv("op", to_string(action.op))
            .kv("slice", action.name)
            .kv("generation", plan.generation);
        continue;
      }
      const ErrorCode code = done.error().code;
      // A stale resourceVersion, a name taken meanwhile, a slice deleted under an update: the
      // list was out of date.
      if (code == ErrorCode::FailedPrecondition || code == ErrorCode::AlreadyExists ||
          (code == ErrorCode::NotFound && action.op == SliceOp::Update)) {
        conflict = std::string(to_string(action.op)) + " " + action.name + ": " + done.error().message;
        break;
      }
      return make_error(code, "publishing ResourceSlices of node " + options_.node_name + ": " +
                                  std::string(to_string(action.op)) + " " + action.name + ": " + done.error().message);
    }
    if (conflict.empty()) return summary;
    summary.notes.push_back("attempt " + std::to_string(attempt) + " met a conflict, listing again: " + conflict);
    log::info("resource slice conflict, listing again").kv("attempt", attempt).kv("detail", conflict);
  }
  return make_error(ErrorCode::FailedPrecondition,
                    "publishing ResourceSlices of node " + options_.node_name + ": still conflicting after " +
                        std::to_string(options_.max_attempts) +
                        " rounds (another writer keeps changing them: is a second agent running for this node "
                        "and driver?); " +
                        summary.notes.back());
}

void SlicePublisher::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  pending_ = true;  // publish at once
  pending_at_ = Clock::now();
  const common::RestartBackoff backoff{options_.backoff_initial, options_.backoff_max};
  const auto stopping = [this] { return stop_.stop_requested(); };
  // A failure that escapes a pass shows in the stats the readiness and metrics read.
  const auto record = [this](const std::string& error) {
    std::lock_guard<std::mutex> guard(mu_);
    ++stats_.publishes_failed;
    stats_.last_error = "unexpected: " + error;
  };
  loop_thread_ = std::thread([this, backoff, stopping, record] {
    common::run_restarting(
        "resource slice publisher", [this] { run_loop(); }, stopping, backoff, record);
  });
  if (api_.can_watch()) {
    watch_thread_ = std::thread([this, backoff, stopping] {
      common::run_restarting(
          "resource slice watch", [this] { run_watch(stop_.get_token()); }, stopping, backoff);
    });
  } else {
    log::warn("resource slices are not watched (the API client cannot); edits by others are repaired at the "
              "next resync")
        .kv("resync_ms", static_cast<int64_t>(options_.resync.count()));
  }
}

void SlicePublisher::stop() {
  stop_.request_stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++wakeups_;
  }
  wake_.notify_all();
  if (loop_thread_.joinable()) loop_thread_.join();
  if (watch_thread_.joinable()) watch_thread_.join();
}

void SlicePublisher::trigger() { request(std::chrono::milliseconds(0), /*repair=*/false); }

void SlicePublisher::request(std::chrono::milliseconds delay, bool repair) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto at = Clock::now() + delay;
    if (!pending_ || at < pending_at_) pending_at_ = at;
    pending_ = true;
    if (repair) repair_pending_ = true;
    ++wakeups_;
  }
  wake_.notify_all();
}

PublisherStats SlicePublisher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void SlicePublisher::run_loop() {
  const std::stop_token stop = stop_.get_token();
  auto backoff = options_.backoff_initial;
  Clock::time_point retry_at{};  // while failing: not before this
  bool failing = false;
  auto next_resync = Clock::now() + common::jittered(options_.resync, 0.1);
  common::RepeatFilter errors;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop.stop_requested()) {
    Clock::time_point due = next_resync;
    if (failing) {
      due = retry_at;
    } else if (pending_) {
      due = std::min(due, pending_at_);
    }
    if (Clock::now() < due) {
      const uint64_t seen = wakeups_;
      wake_.wait_until(lock, stop, due, [&] { return wakeups_ != seen; });
      continue;  // recompute: a trigger, a stop, or the time came
    }
    const bool repair = repair_pending_;
    pending_ = false;
    repair_pending_ = false;
    lock.unlock();
    Result<PublishSummary> result = [&] {
      std::lock_guard<std::mutex> publishing(publish_mu_);
      return publish_locked();
    }();
    lock.lock();
    if (repair) ++stats_.repairs;
    if (result) {
      ++stats_.publishes_ok;
      stats_.writes += result->writes();
      stats_.last_error.clear();
      if (errors.succeeded()) log::info("resource slices published again after failures");
      if (result->writes() > 0) {
        log::info("resource slices published")
            .kv("node", options_.node_name)
            .kv("created", static_cast<uint64_t>(result->created))
            .kv("updated", static_cast<uint64_t>(result->updated))
            .kv("deleted", static_cast<uint64_t>(result->deleted))
            .kv("generation", result->generation)
            .kv("attempts", result->attempts)
            .kv("repair", repair);
      }
      failing = false;
      backoff = options_.backoff_initial;
      next_resync = Clock::now() + common::jittered(options_.resync, 0.1);
    } else {
      ++stats_.publishes_failed;
      stats_.last_error = result.error().message;
      if (errors.failed(result.error().message)) {
        log::warn("resource slices not published")
            .kv("code", to_string(result.error().code))
            .kv("error", result.error().message)
            .kv("retry_ms", static_cast<int64_t>(backoff.count()));
      }
      failing = true;
      retry_at = Clock::now() + common::jittered(backoff);
      backoff = std::min(backoff * 2, options_.backoff_max);
    }
  }
}

void SlicePublisher::run_watch(std::stop_token stop) {
  const std::string path = list_path_ + "&watch=true&allowWatchBookmarks=true&timeoutSeconds=" +
                           std::to_string(options_.watch_timeout_seconds);
  auto backoff = options_.backoff_initial;
  common::RepeatFilter errors;
  bool first = true;
  std::mutex idle_mu;
  std::condition_variable_any idle;
  while (!stop.stop_requested()) {
    // A watch without resourceVersion starts with ADDED for every slice there: compared with
    // what is wanted, that covers the gap since the last watch, except slices deleted in it;
    // one publish after every restart covers those.
    if (!first) trigger();
    first = false;
    const auto started = Clock::now();
    const Status status = api_.watch(
        path,
        [&](const json& event) {
          Result<bool> news = false;
          bool publishing = false;
          {
            std::lock_guard<std::mutex> lock(mu_);
            publishing = !last_wanted_.empty();
            news = slice_event_needs_publish(event, last_wanted_, options_.node_name, options_.driver);
            if (!news) ++stats_.ignored_events;
          }
          if (!news) {
            // One odd event costs nothing but itself: the stream goes on, and the periodic resync
            // covers whatever it may have meant.
            log::warn("resource slice watch event ignored").kv("error", news.error().message);
            return true;
          }
          if (publishing && *news) {
            const JsonAt at(event, "");
            log::info("resource slice changed by someone else, repairing")
                .kv("event", at.member("type").if_string().value_or(""))
                .kv("slice", at.path("object.metadata.name").if_string().value_or(""));
            request(options_.repair_delay, /*repair=*/true);
          }
          return true;
        },
        stop);
    if (stop.stop_requested()) return;
    std::chrono::milliseconds wait{0};
    if (!status) {
      if (errors.failed(status.error().message)) {
        log::warn("resource slice watch failed").kv("error", status.error().message);
      }
      wait = common::jittered(backoff);
      backoff = std::min(backoff * 2, options_.backoff_max);
    } else {
      errors.succeeded();
      backoff = options_.backoff_initial;
      // A server that ends watches at once must not make this a busy loop.
      if (Clock::now() - started < std::chrono::seconds(1)) wait = options_.backoff_initial;
    }
    std::unique_lock<std::mutex> lock(idle_mu);
    idle.wait_for(lock, stop, wait, [] { return false; });
  }
}

}  // namespace erdma::agent
