// The agent's own Kubernetes API client: the few REST calls its DRA driver makes (ResourceSlices,
// ResourceClaims, Events, its Node), over HTTPS with the pod's service-account token and CA.
//
// `Api` is the seam: the DRA driver and the slice publisher take an `Api&`, the daemon gives them
// the HTTPS client (make_https_api), tests give them a fake. Paths are the API server's, with
// any query string: "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn1".
//
// Every answer that is not a 2xx becomes an Error whose message carries the verb, the path, the
// HTTP status and the Status object's reason and message as the server sent them:
//   400, 422 -> InvalidArgument          401, 403 -> PermissionDenied (RBAC or token: says which)
//   404, 410 -> NotFound                 409 AlreadyExists (POST) -> AlreadyExists
//   409 Conflict (stale resourceVersion) -> FailedPrecondition: list again and re-plan
//   429, 5xx, connection or TLS failure -> Unavailable (retry with backoff)
//   no answer within the timeout -> DeadlineExceeded
//   a 2xx body that is not a JSON object -> InvalidArgument (nothing of it is used)
//   an answer over kMaxAnswerBytes -> ResourceExhausted (nothing of it is used)
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace erdma::agent::kube {

struct ApiConfig {
  std::string server;                        // "https://host:port"
  std::string token_file;                    // bearer token; read again when the file changes (projected tokens rotate)
  std::string ca_file;                       // PEM bundle that signs the API server's certificate
  std::chrono::milliseconds timeout{10000};  // per request: connect, send, answer
  // A watch stream that brings nothing (not even a BOOKMARK) for this long is taken as dead and
  // ended with DeadlineExceeded; watch with timeoutSeconds below it (the server then ends it).
  std::chrono::milliseconds watch_idle_timeout{std::chrono::minutes(5)};
};

// The largest answer (or one watch event) the client reads; a bigger one is ResourceExhausted.
inline constexpr size_t kMaxAnswerBytes = size_t{64} << 20;

// The pod's own: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT and the files under
// /var/run/secrets/kubernetes.io/serviceaccount. FailedPrecondition naming what is missing when
// the agent does not run in a pod (or automountServiceAccountToken is off).
[[nodiscard]] Result<ApiConfig> in_cluster_config();
// The same, with the environment and the service-account directory given (tests): `getenv` looks
// a variable up (nullptr = unset), `account_dir` holds `token` and `ca.crt`.
[[nodiscard]] Result<ApiConfig> in_cluster_config_from(const std::function<const char*(const char*)>& getenv,
                                                       const std::string& account_dir);

// Percent-encodes a query value (a field or label selector, a name): everything but the
// unreserved characters A-Z a-z 0-9 - . _ ~ becomes %XX, so '=' ',' '!' '&' ' ' keep their meaning
// inside the value. "spec.nodeName=n1" -> "spec.nodeName%3Dn1".
[[nodiscard]] std::string url_query_escape(std::string_view value);

// The Error an answer that is not a 2xx becomes, as the table above says: `verb` ("GET", "POST",
// ...), `path`, the HTTP status and the body (a Status object, or anything). Pure; shared by the
// HTTPS client and the test fake so both word their errors alike.
[[nodiscard]] Error error_from_answer(std::string_view verb, std::string_view path, unsigned http_status,
                                      std::string_view body);

// One event of a watch stream: {"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK", "object": {...}}.
// Return false to end the watch.
using WatchHandler = std::function<bool(const nlohmann::json& event)>;

class Api {
 public:
  virtual ~Api() = default;
  // GET: the object or list.
  [[nodiscard]] virtual Result<nlohmann::json> get(std::string_view path) = 0;
  // POST: the created object as the server stored it.
  [[nodiscard]] virtual Result<nlohmann::json> create(std::string_view path, const nlohmann::json& object) = 0;
  // PUT: the replaced object; the object's metadata.resourceVersion is the precondition.
  [[nodiscard]] virtual Result<nlohmann::json> replace(std::string_view path, const nlohmann::json& object) = 0;
  // DELETE with preconditions.resourceVersion when `resource_version` is not empty. NotFound is
  // returned as an error; callers that want idempotence treat it as done.
  [[nodiscard]] virtual Status remove(std::string_view path, std::string_view resource_version) = 0;

  // Streams the changes of a collection: `path` is a list path with its query, which must carry
  // watch=true (and usually resourceVersion=<the list's> and timeoutSeconds). Calls `on_event`
  // for each event, in order, on the calling thread. Returns OK when the server ends the stream,
  // `on_event` returns false, or `stop` is requested (from any thread: the blocked read is
  // interrupted at once). An ERROR event ends it with the Error its Status maps to (410 Gone, the
  // resourceVersion is too old: NotFound; list again, then watch from the new list's version).
  // Errors before the stream as for get(); an event that is not JSON: InvalidArgument. Does not
  // wait for ordinary calls, nor they for it. The default says the client cannot watch
  // (FailedPrecondition), and can_watch() is false for it.
  [[nodiscard]] virtual Status watch(std::string_view path, const WatchHandler& on_event, std::stop_token stop) {
    (void)on_event;
    (void)stop;
    return make_error(ErrorCode::FailedPrecondition,
                      "WATCH " + std::string(path) + ": this API client cannot watch; poll with get() instead");
  }
  // True when watch() is implemented: callers that can do without it (polling) ask first.
  [[nodiscard]] virtual bool can_watch() const noexcept { return false; }
};

// The HTTPS client (Boost.Beast over OpenSSL, TLS 1.2+, the server's name or IP verified against
// the CA). One connection, kept alive and reopened when the server closes it; calls are
// serialized, so one client may be shared by threads. A request that fails on a reused
// connection before any answer arrived (the server closed it while idle) is sent once more on a
// new one; the preconditions make that safe for POST, PUT and DELETE (a repeat is AlreadyExists,
// Conflict or NotFound, which callers handle). Each watch has a connection of its own.
// Errors: FailedPrecondition when the server is not "https://host[:port]" or the CA file cannot
// be read; the token is read per request (a missing or empty one fails that request).
[[nodiscard]] Result<std::unique_ptr<Api>> make_https_api(ApiConfig config);

}  // namespace erdma::agent::kube
