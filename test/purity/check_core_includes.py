#!/usr/bin/python3
"""The cores decide, the shells act: no file under a `core/` directory may include an I/O, clock,
thread or logging facility, or a library that brings one (Boost, OpenSSL, gRPC, libnl, verbs,
libyaml). Header-only libraries such as Asio and Beast would still link, so the rule is checked on
the includes themselves, here, instead of relying on the linker.

    check_core_includes.py SOURCE_DIR          check the tree; exit 1 and list every offence
    check_core_includes.py --self-test         show that each rule catches what it should

Standard library only; any python3 runs it.
"""

import os
import re
import sys
import tempfile

# (pattern on the included name, why it is not allowed in a core)
FORBIDDEN = [
    (r"^boost/", "Boost (Asio/Beast are I/O)"),
    (r"^openssl/", "OpenSSL"),
    (r"^grpc", "gRPC"),
    (r"^google/protobuf/", "protobuf"),
    (r"^netlink/", "libnl"),
    (r"^linux/(netlink|rtnetlink|genetlink)\.h$", "netlink sockets"),
    (r"^infiniband/", "libibverbs"),
    (r"^yaml\.h$", "libyaml (parsing files belongs to the shells)"),
    (r"^(chrono|fstream|thread|mutex|condition_variable|future|filesystem|iostream|random)$",
     "clock, file, thread or console I/O"),
    (r"^(sys/socket\.h|sys/stat\.h|unistd\.h|fcntl\.h|sched\.h|dirent\.h)$", "system calls"),
    (r"^common/(log|metrics)\.hpp$", "the logger or the metrics registry"),
    (r"^common/(file_watch|work_queue|guarded|unique_fd)\.hpp$",
     "common_runtime (file watches, worker threads, file descriptors)"),
    (r"^common/structured\.hpp$", "file reading (common/structured)"),
    (r"^common/http/", "the HTTP server"),
    # Every folder of agent/ and webhook/ beside core/ is a shell (sys, kube, kubelet, the device
    # plugin, SMC-R, DRA, daemon, cli, server, ...): named by exclusion, so a new folder is covered.
    (r"^(agent|webhook)/(?!core/)[^/]+/", "a shell of this project (includes go downhill only)"),
]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
CORE_DIRS = ("agent/core", "webhook/core")
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc")


def offences(path, text):
    out = []
    for m in INCLUDE.finditer(text):
        name = m.group(1)
        for pattern, why in FORBIDDEN:
            if re.search(pattern, name):
                line = text.count("\n", 0, m.start()) + 1
                out.append("%s:%d: includes <%s>: %s" % (path, line, name, why))
    return out


def check_tree(src):
    found, files = [], 0
    for core in CORE_DIRS:
        root = os.path.join(src, core)
        if not os.path.isdir(root):
            found.append("%s: missing (the purity rule has nothing to check; was it moved?)" % core)
            continue
        for dirpath, _, names in os.walk(root):
            for n in sorted(names):
                if n.endswith(EXTENSIONS):
                    p = os.path.join(dirpath, n)
                    with open(p, encoding="utf-8") as f:
                        found += offences(os.path.relpath(p, src), f.read())
                    files += 1
    # The cores' CMake targets must not link a runtime library either.
    for cmake, target in (("agent/CMakeLists.txt", "agent_core"), ("webhook/CMakeLists.txt", "webhook_core")):
        with open(os.path.join(src, cmake), encoding="utf-8") as f:
            text = f.read()
        m = re.search(r"target_link_libraries\(%s\s+([^)]*)\)" % target, text)
        if not m:
            found.append("%s: no target_link_libraries(%s ...) found" % (cmake, target))
            continue
        for lib in m.group(1).split():
            if lib in ("PUBLIC", "PRIVATE", "INTERFACE"):
                continue
            if lib not in ("common", "nlohmann_json::nlohmann_json", "simdjson::simdjson"):
                found.append("%s: %s links %s; the cores link only common, nlohmann_json and simdjson" %
                             (cmake, target, lib))
    return found, files


def self_test():
    cases = [
        ('#include <boost/asio.hpp>\n', True), ('#include <chrono>\n', True), ('# include <thread>\n', True),
        ('#include "common/log.hpp"\n', True), ('#include "common/work_queue.hpp"\n', True),
        ('#include <grpcpp/grpcpp.h>\n', True),
        ('#include <netlink/msg.h>\n', True), ('#include <infiniband/verbs.h>\n', True),
        ('#include "agent/sys/netns.hpp"\n', True), ('#include <fstream>\n', True),
        ('#include "agent/kube/api.hpp"\n', True), ('#include "agent/deviceplugin/plugin_runtime.hpp"\n', True),
        ('#include "webhook/server/session.hpp"\n', True), ('#include "agent/core/pnet.hpp"\n', False),
        ('#include "webhook/core/mutate.hpp"\n', False),
        ('#include <string>\n#include "common/result.hpp"\n', False), ('#include <nlohmann/json.hpp>\n', False),
        ('// #include <chrono> is mentioned in a comment only\n', False),
    ]
    bad = [text for text, want in cases if bool(offences("x.cpp", text)) != want]
    with tempfile.TemporaryDirectory() as d:
        for core in CORE_DIRS:
            os.makedirs(os.path.join(d, core))
        for cmake, target in (("agent/CMakeLists.txt", "agent_core"), ("webhook/CMakeLists.txt", "webhook_core")):
            with open(os.path.join(d, cmake), "w") as f:
                f.write("target_link_libraries(%s PUBLIC common common_runtime)\n" % target)
        with open(os.path.join(d, "agent/core/a.cpp"), "w") as f:
            f.write("#include <thread>\n")
        found, _ = check_tree(d)
        if len(found) != 3:
            bad.append("tree with one bad include and two bad links: %d offences, want 3: %s" % (len(found), found))
    for b in bad:
        print("self-test FAILED: %r" % (b,))
    print("%d passed, %d failed" % (len(cases) + 1 - len(bad), len(bad)))
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    found, files = check_tree(sys.argv[1])
    for f in found:
        print(f)
    print("%d core files checked, %d offences" % (files, len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
