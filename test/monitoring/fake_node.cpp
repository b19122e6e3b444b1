// The node around erdma-agent for the monitoring test (test_live_alerts.py): a fake kubelet
// (Registration on kubelet.sock, DevicePlugin calls to the agent), kubelet's PodResources and a
// CRI runtime, all real gRPC servers on unix sockets in the directory given as argv[1]. It takes
// one command a line on stdin and answers one line on stdout ("ok ..." or "error ..."), so the
// test drives it step by step:
//   wait-registered N            until the agent registered N times (15 s at most)
//   pod NS/NAME DEVICE_ID host   an SMC-R pod on the host network holding DEVICE_ID
//   pod NS/NAME DEVICE_ID PATH   an SMC-R pod whose sandbox's netns is PATH
//   allocate DEVICE_ID           kubelet's Allocate for one container
//   prestart DEVICE_ID           kubelet's PreStartContainer (30 s, kubelet's budget)
//   kubelet-gone                 kubelet restarts (every socket in the directory deleted) and
//                                does not come back: the agent is no longer registered
//   quit
// Built from the fakes of test/fakes (fake_kubelet, fake_pod_apis).
#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include <sys/stat.h>

#include "test/fakes/fake_kubelet.hpp"
#include "test/fakes/fake_pod_apis.hpp"

namespace {

using namespace std::chrono_literals;
using erdma::agent::testing::FakeCriServer;
using erdma::agent::testing::FakeKubelet;
using erdma::agent::testing::FakePodResourcesServer;
using erdma::agent::testing::FakeSandbox;

constexpr const char* kResource = "aliyun/erdma";
constexpr const char* kSmcrAnnotation = "network.alibabacloud.com/erdma-smcr";

std::string endpoint;  // the socket the agent registered, relative to the directory

std::string run(const std::string& line, FakeKubelet& kubelet, FakePodResourcesServer& podres, FakeCriServer& cri) {
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  if (cmd == "wait-registered") {
    size_t n = 0;
    in >> n;
    auto req = kubelet.wait_for_registrations(n, 15s);
    if (!req) return "error no registration number " + std::to_string(n) + " within 15 s";
    // The agent registers two resources, in either order: the eRDMA devices (which this node
    // plays pods with) and the SMC-R library resource. Take the eRDMA one.
    if (req->resource_name() != kResource) {
      req = kubelet.wait_for_registrations(n + 1, 15s);
      if (!req) return "error no registration number " + std::to_string(n + 1) + " within 15 s";
    }
    if (req->resource_name() != kResource) return "error no registration of " + std::string(kResource);
    endpoint = req->endpoint();
    return "ok " + req->resource_name() + " " + endpoint;
  }
  if (cmd == "pod") {
    std::string pod, id, where;
    in >> pod >> id >> where;
    const auto slash = pod.find('/');
    if (slash == std::string::npos || id.empty() || where.empty())
      return "error usage: pod NS/NAME DEVICE_ID host|PATH";
    FakeSandbox sb;
    sb.id = "sb-" + pod.substr(slash + 1);
    sb.ns = pod.substr(0, slash);
    sb.name = pod.substr(slash + 1);
    sb.annotations[kSmcrAnnotation] = "true";
    if (where == "host") {
      sb.host_network = true;
    } else {
      sb.netns_path = where;
    }
    podres.add(sb.ns, sb.name, "app", kResource, {id});
    cri.add(sb);
    return "ok " + sb.id;
  }
  if (cmd == "allocate" || cmd == "prestart") {
    std::string id;
    in >> id;
    if (endpoint.empty()) return "error the agent has not registered";
    auto stub = kubelet.plugin(endpoint);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    grpc::Status st;
    if (cmd == "allocate") {
      v1beta1::AllocateRequest req;
      req.add_container_requests()->add_devices_ids(id);
      v1beta1::AllocateResponse resp;
      st = stub->Allocate(&ctx, req, &resp);
    } else {
      v1beta1::PreStartContainerRequest req;
      req.add_devices_ids(id);
      v1beta1::PreStartContainerResponse resp;
      st = stub->PreStartContainer(&ctx, req, &resp);
    }
    return st.ok() ? "ok " + cmd + " " + id : "error " + cmd + " " + id + ": " + st.error_message();
  }
  if (cmd == "kubelet-gone") {
    kubelet.stop();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(kubelet.dir(), ec)) {
      struct stat st {};
      if (::lstat(entry.path().c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) std::filesystem::remove(entry.path(), ec);
    }
    endpoint.clear();
    return "ok kubelet gone";
  }
  return "error unknown command: " + line;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fake_node DIR (the agent's devicePluginDir; podres.sock and cri.sock go there too)\n";
    return 2;
  }
  const std::string dir = argv[1];
  // The sockets the agent dials besides kubelet.sock live in a subdirectory: kubelet-gone deletes
  // every socket of the device-plugin directory, as a restarting kubelet does.
  std::filesystem::create_directories(dir + "/node");
  FakePodResourcesServer podres(dir + "/node/podres.sock");
  FakeCriServer cri(dir + "/node/cri.sock");
  FakeKubelet kubelet(dir);
  kubelet.start();
  std::cout << "ok ready" << std::endl;
  for (std::string line; std::getline(std::cin, line);) {
    if (line.empty()) continue;
    if (line == "quit") break;
    std::cout << run(line, kubelet, podres, cri) << std::endl;
  }
  kubelet.stop();
  return 0;
}
