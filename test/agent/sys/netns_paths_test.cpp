// The pure parts of opening a pod's netns once (review L2): which runtime paths are opened at all,
// and a process's start time from /proc/<pid>/stat.
#include "agent/sys/netns.hpp"

#include <doctest/doctest.h>

namespace erdma::agent {

TEST_CASE("runtime netns paths are opened only under the runtime's directories") {
  struct Case {
    const char* path;
    bool want;
  };
  for (const auto& c : std::vector<Case>{{"/var/run/netns/cni-1234", true},
                                         {"/run/netns/cni-1234", true},
                                         {"/run/containerd/io.containerd.grpc.v1.cri/sandboxes/x/netns", true},
                                         {"/var/run/netns/", false},
                                         {"/var/run/netns/../../etc/shadow", false},
                                         {"/var/run/netns/./cni-1", false},
                                         {"/proc/1/ns/net", false},
                                         {"/etc/passwd", false},
                                         {"var/run/netns/cni-1", false},
                                         {"/var/run/netnsX/cni-1", false},
                                         {"", false}}) {
    CAPTURE(c.path);
    CHECK(is_runtime_netns_path(c.path, kRuntimeNetnsDirs) == c.want);
  }
  CHECK(is_runtime_netns_path("/srv/ns/a", {"/srv/ns/"}));
}

TEST_CASE("a process's start time is field 22 of its stat line, counted after the command") {
  CHECK(parse_proc_start_time("4242 (pause) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 1024 1") ==
        987654u);
  // A command with spaces and parentheses.
  CHECK(parse_proc_start_time("77 (a) b (c)) R 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0") == 55u);
  CHECK_FALSE(parse_proc_start_time("4242 (pause) S 1 2 3").has_value());
  CHECK_FALSE(parse_proc_start_time("no parenthesis").has_value());
  CHECK_FALSE(parse_proc_start_time("1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12x 0").has_value());
  CHECK(boot_ticks_now() > 0);
}

}  // namespace erdma::agent
