// The pod's own API server address and service-account files (see in_cluster_config in api.hpp).
#include "agent/kube/api.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "agent/kube/server_address.hpp"

namespace erdma::agent::kube {
namespace {

constexpr const char* kAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

}  // namespace

Result<ApiConfig> in_cluster_config_from(const std::function<const char*(const char*)>& getenv,
                                         const std::string& account_dir) {
  const char* host = getenv("KUBERNETES_SERVICE_HOST");
  const char* port = getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return make_error(ErrorCode::FailedPrecondition,
                      "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set: the agent does not "
                      "run in a pod, or its pod has enableServiceLinks off and no such variables");
  }
  ApiConfig config;
  const std::string h = host;
  config.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  ERDMA_TRY(https::parse_server(config.server));
  config.token_file = account_dir + "/token";
  config.ca_file = account_dir + "/ca.crt";
  for (const auto* file : {&config.token_file, &config.ca_file}) {
    struct stat st {};
    if (::stat(file->c_str(), &st) != 0) {
      return make_error(ErrorCode::FailedPrecondition,
                        *file + ": " + std::strerror(errno) +
                            " (no service-account token mounted: set automountServiceAccountToken: true on the "
                            "agent's pod or service account)");
    }
  }
  return config;
}

Result<ApiConfig> in_cluster_config() {
  return in_cluster_config_from([](const char* name) { return std::getenv(name); }, kAccountDir);
}

}  // namespace erdma::agent::kube
