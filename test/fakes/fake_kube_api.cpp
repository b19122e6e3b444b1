// The in-memory API server (see fake_kube_api.hpp).
#include "test/fakes/fake_kube_api.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace erdma::agent::testing {
namespace {

using nlohmann::json;

// "/a/b?x=1" -> ("/a/b", "x=1")
std::pair<std::string, std::string> split_query(std::string_view path) {
  const auto q = path.find('?');
  if (q == std::string_view::npos) return {std::string(path), ""};
  return {std::string(path.substr(0, q)), std::string(path.substr(q + 1))};
}

std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) != 0 &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2])) != 0) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

std::map<std::string, std::string> query_params(const std::string& query) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= query.size() && !query.empty()) {
    const auto amp = query.find('&', start);
    const std::string part = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    const auto eq = part.find('=');
    if (eq == std::string::npos) {
      out[unescape(part)] = "";
    } else {
      out[unescape(part.substr(0, eq))] = unescape(part.substr(eq + 1));
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return out;
}

// "spec.nodeName=n1,spec.driver=d" -> {spec.nodeName: n1, spec.driver: d}; unsupported fields
// are refused as the server refuses them.
Result<std::map<std::string, std::string>> field_selector(const std::string& verb, std::string_view path,
                                                          const std::string& selector) {
  std::map<std::string, std::string> out;
  if (selector.empty()) return out;
  size_t start = 0;
  while (true) {
    const auto comma = selector.find(',', start);
    const std::string term = selector.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto eq = term.find('=');
    static const std::set<std::string> kSupported = {"metadata.name", "metadata.namespace", "spec.nodeName",
                                                     "spec.driver", "involvedObject.uid"};
    if (eq == std::string::npos || term.find("!=") != std::string::npos || kSupported.count(term.substr(0, eq)) == 0) {
      return kube::error_from_answer(
          verb, path, 400,
          json{{"kind", "Status"},
               {"reason", "BadRequest"},
               {"message", "unable to parse requested fieldSelector " + term + ": not supported"}}
              .dump());
    }
    out[term.substr(0, eq)] = term.substr(eq + 1);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

const json* field(const json& object, const std::string& dotted) {
  const json* at = &object;
  size_t start = 0;
  while (true) {
    const auto dot = dotted.find('.', start);
    const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
    if (dot == std::string::npos) return at;
    start = dot + 1;
  }
}

bool matches(const json& object, const std::map<std::string, std::string>& fields) {
  for (const auto& [key, want] : fields) {
    const json* have = field(object, key);
    const std::string value = have != nullptr && have->is_string() ? have->get<std::string>() : "";
    if (value != want) return false;
  }
  return true;
}

std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::string status(unsigned code, const std::string& reason, const std::string& message) {
  return json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"reason", reason}, {"message", message}, {"code", code}}
      .dump();
}

}  // namespace

std::optional<Error> FakeKubeApi::begin_call(const std::string& verb, std::string_view path) {
  calls_.push_back(Call{verb, std::string(path), false});
  for (auto& f : failures_) {
    if (f.count > 0 && (f.verb.empty() || f.verb == verb) && (f.path.empty() || f.path == path)) {
      if (f.count != kAlways) --f.count;
      return f.error;
    }
  }
  return std::nullopt;
}

void FakeKubeApi::finish_call(bool ok) {
  calls_.back().ok = ok;
  const std::string& verb = calls_.back().verb;
  if (ok && (verb == "POST" || verb == "PUT" || verb == "DELETE")) ++writes_;
}

void FakeKubeApi::notify(const std::string& type, const std::string& path, const json& object) {
  const std::string collection = parent_of(path);
  for (auto& w : watchers_) {
    if (!w.ended && w.collection == collection && matches(object, w.fields)) {
      w.events.push_back(json{{"type", type}, {"object", object}});
    }
  }
  changed_.notify_all();
}

Result<json> FakeKubeApi::get(std::string_view path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto injected = begin_call("GET", path)) return *injected;
  const auto [base, query] = split_query(path);
  if (auto it = store_.find(base); it != store_.end() && query.empty()) {
    finish_call(true);
    return it->second;
  }
  auto params = query_params(query);
  auto fields = field_selector("GET", path, params["fieldSelector"]);
  if (!fields) return fields.error();
  json items = json::array();
  for (const auto& [p, object] : store_) {
    if (parent_of(p) == base && matches(object, *fields)) items.push_back(object);
  }
  // A list: of a resource the DRA driver lists, or of a path that holds objects.
  static const std::set<std::string> kPlurals = {"resourceslices", "resourceclaims", "events", "nodes", "pods"};
  const bool is_collection = !items.empty() || kPlurals.count(base.substr(base.rfind('/') + 1)) != 0;
  if (!is_collection) {
    return kube::error_from_answer("GET", path, 404, status(404, "NotFound", base + " not found"));
  }
  finish_call(true);
  return json{{"kind", "List"},
              {"apiVersion", "v1"},
              {"metadata", {{"resourceVersion", std::to_string(version_)}}},
              {"items", std::move(items)}};
}

void FakeKubeApi::race(std::unique_lock<std::mutex>& lock) {
  auto write = std::exchange(before_write_, nullptr);
  if (!write) return;
  lock.unlock();
  write();
  lock.lock();
}

Result<json> FakeKubeApi::create(std::string_view path, const json& object) {
  std::unique_lock<std::mutex> lock(mu_);
  race(lock);
  if (auto injected = begin_call("POST", path)) return *injected;
  const std::string name = object.value("/metadata/name"_json_pointer, std::string());
  if (name.empty()) {
    return kube::error_from_answer("POST", path, 422, status(422, "Invalid", "metadata.name: Required value"));
  }
  const std::string at = std::string(path) + "/" + name;
  if (store_.count(at) != 0) {
    return kube::error_from_answer("POST", path, 409, status(409, "AlreadyExists", "\"" + name + "\" already exists"));
  }
  json stored = object;
  stored["metadata"]["resourceVersion"] = next_version();
  stored["metadata"]["uid"] = "uid-" + std::to_string(++uid_);
  store_[at] = stored;
  notify("ADDED", at, stored);
  finish_call(true);
  return stored;
}

Result<json> FakeKubeApi::replace(std::string_view path, const json& object) {
  std::unique_lock<std::mutex> lock(mu_);
  race(lock);
  if (auto injected = begin_call("PUT", path)) return *injected;
  // The status subresource: the object's precondition, and only its status changes.
  const bool status_only = path.ends_with("/status") && store_.count(parent_of(std::string(path))) != 0;
  const std::string at = status_only ? parent_of(std::string(path)) : std::string(path);
  auto it = store_.find(at);
  if (it == store_.end()) return kube::error_from_answer("PUT", path, 404, status(404, "NotFound", at + " not found"));
  const std::string rv = object.value("/metadata/resourceVersion"_json_pointer, std::string());
  if (!rv.empty() && rv != it->second["metadata"]["resourceVersion"].get<std::string>()) {
    return kube::error_from_answer(
        "PUT", path, 409,
        status(409, "Conflict",
               "Operation cannot be fulfilled on " + at +
                   ": the object has been modified; please apply your changes to the latest version "
                   "and try again"));
  }
  json stored = object;
  if (status_only) {
    stored = it->second;
    stored["status"] = object.is_object() && object.contains("status") ? object["status"] : json::object();
  }
  stored["metadata"]["resourceVersion"] = next_version();
  stored["metadata"]["uid"] = it->second["metadata"].value("uid", "");
  it->second = stored;
  notify("MODIFIED", at, stored);
  finish_call(true);
  return stored;
}

Status FakeKubeApi::remove(std::string_view path, std::string_view resource_version) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto injected = begin_call("DELETE", path)) return *injected;
  const std::string at(path);
  auto it = store_.find(at);
  if (it == store_.end()) {
    return kube::error_from_answer("DELETE", path, 404, status(404, "NotFound", at + " not found"));
  }
  if (!resource_version.empty() && resource_version != it->second["metadata"]["resourceVersion"].get<std::string>()) {
    return kube::error_from_answer("DELETE", path, 409,
                                   status(409, "Conflict",
                                          "Precondition failed: ResourceVersion in precondition: " +
                                              std::string(resource_version) + ", ResourceVersion in object meta: " +
                                              it->second["metadata"]["resourceVersion"].get<std::string>()));
  }
  json gone = it->second;
  store_.erase(it);
  gone["metadata"]["resourceVersion"] = next_version();
  notify("DELETED", at, gone);
  finish_call(true);
  return {};
}

Status FakeKubeApi::watch(std::string_view path, const kube::WatchHandler& on_event, std::stop_token stop) {
  if (!watchable_) return Api::watch(path, on_event, stop);
  std::unique_lock<std::mutex> lock(mu_);
  if (auto injected = begin_call("WATCH", path)) return *injected;
  const auto [base, query] = split_query(path);
  auto params = query_params(query);
  if (params["watch"] != "true" && params["watch"] != "1") {
    return make_error(ErrorCode::InvalidArgument, "WATCH " + std::string(path) + ": no watch=true");
  }
  auto fields = field_selector("GET", path, params["fieldSelector"]);
  if (!fields) return fields.error();
  finish_call(true);
  auto w = watchers_.insert(watchers_.end(), Watcher{base, *fields, {}, false});
  for (const auto& [p, object] : store_) {
    if (parent_of(p) == base && matches(object, *fields))
      w->events.push_back(json{{"type", "ADDED"}, {"object", object}});
  }
  ++open_watches_;
  changed_.notify_all();
  Status result;
  while (true) {
    changed_.wait(lock, stop, [&] { return !w->events.empty() || w->ended; });
    if (stop.stop_requested() || (w->events.empty() && w->ended)) break;
    json event = std::move(w->events.front());
    w->events.pop_front();
    if (event.is_object() && event.contains("type") && event["type"] == "ERROR") {
      result = kube::error_from_answer("WATCH", path, event["object"]["code"].get<unsigned>(), event["object"].dump());
      break;
    }
    lock.unlock();
    const bool more = on_event(event);
    lock.lock();
    if (!more) break;
  }
  watchers_.erase(w);
  --open_watches_;
  changed_.notify_all();
  return result;
}

void FakeKubeApi::fail_next(int count, Error error, std::string verb, std::string path) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.push_back(Failure{count, std::move(error), std::move(verb), std::move(path)});
}

void FakeKubeApi::put(const std::string& path, json object, bool keep_uid) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool existed = store_.count(path) != 0;
  object["metadata"]["resourceVersion"] = next_version();
  const bool has_uid = object["metadata"].contains("uid") && object["metadata"]["uid"].is_string();
  if (!existed && !(keep_uid && has_uid)) object["metadata"]["uid"] = "uid-" + std::to_string(++uid_);
  store_[path] = object;
  notify(existed ? "MODIFIED" : "ADDED", path, object);
}

void FakeKubeApi::put_for_test(const std::string& path, json object) { put(path, std::move(object), false); }

void FakeKubeApi::put_keeping_uid_for_test(const std::string& path, json object) { put(path, std::move(object), true); }

void FakeKubeApi::before_next_write(std::function<void()> write) {
  std::lock_guard<std::mutex> lock(mu_);
  before_write_ = std::move(write);
}

void FakeKubeApi::delete_for_test(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = store_.find(path);
  if (it == store_.end()) return;
  json gone = it->second;
  store_.erase(it);
  gone["metadata"]["resourceVersion"] = next_version();
  notify("DELETED", path, gone);
}

void FakeKubeApi::push_watch_error(unsigned http_status, const std::string& reason, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& w : watchers_) {
    w.events.push_back(json{{"type", "ERROR"}, {"object", json::parse(status(http_status, reason, message))}});
  }
  changed_.notify_all();
}

void FakeKubeApi::push_watch_event_for_test(const json& event) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& w : watchers_) {
    if (!w.ended) w.events.push_back(event);
  }
  changed_.notify_all();
}

void FakeKubeApi::end_watches() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& w : watchers_) w.ended = true;
  changed_.notify_all();
}

std::optional<json> FakeKubeApi::object(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = store_.find(path);
  if (it == store_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, json> FakeKubeApi::objects(const std::string& collection) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, json> out;
  for (const auto& [p, object] : store_) {
    if (parent_of(p) == collection) out[p.substr(collection.size() + 1)] = object;
  }
  return out;
}

std::vector<FakeKubeApi::Call> FakeKubeApi::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

size_t FakeKubeApi::calls_of(std::string_view verb) const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(
      std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) { return c.verb == verb; }));
}

size_t FakeKubeApi::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

void FakeKubeApi::clear_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.clear();
  writes_ = 0;
}

int FakeKubeApi::open_watches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_watches_;
}

}  // namespace erdma::agent::testing
