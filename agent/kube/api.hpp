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
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace erdma::agent::kube {

struct ApiConfig {
  std::string server;      // "https://host:port"
  std::string token_file;  // bearer token; read again when the file changes (projected tokens rotate)
  std::string ca_file;     // PEM bundle that signs the API server's certificate
  std::chrono::milliseconds timeout{10000};  // per request: connect, send, answer
};

// The pod's own: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT and the files under
// /var/run/secrets/kubernetes.io/serviceaccount. FailedPrecondition naming what is missing when
// the agent does not run in a pod (or automountServiceAccountToken is off).
[[nodiscard]] Result<ApiConfig> in_cluster_config();

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
};

// The HTTPS client (Boost.Beast over OpenSSL, TLS 1.2+, the server's name or IP verified against
// the CA). One connection, kept alive and reopened when the server closes it; calls are
// serialized, so one client may be shared by threads.
[[nodiscard]] Result<std::unique_ptr<Api>> make_https_api(ApiConfig config);

}  // namespace erdma::agent::kube
