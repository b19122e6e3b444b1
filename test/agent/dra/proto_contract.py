#!/usr/bin/python3
"""The agent's kubelet protos against the kubelet's own: same packages, services, methods (with
their streaming), messages, enums and field numbers, names and types.

The upstream files are read from the Go module cache (k8s.io/kubelet at the pinned version), where
`go env GOMODCACHE` says it is; test/cluster/build-k8s.sh downloads the module there. Without go,
the module, protoc or python3-protobuf the test is skipped (exit 77) with the reason, and under
CI=true fails: scripts/test.sh builds Kubernetes from those modules before it runs ctest. Both
sides are compiled by protoc into descriptor sets and compared; comments and options (go_package)
do not matter on the wire and are ignored.

    proto_contract.py --protoc protoc --ours agent/proto --module k8s.io/kubelet@v0.37.2
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "..", "webhook", "server", "integration"))
from harness import running_under_ci  # noqa: E402

try:
    from google.protobuf import descriptor_pb2
except ImportError:  # reported by main, as a skip or (under CI) a failure
    descriptor_pb2 = None

PAIRS = [
    ("pluginregistration_v1.proto", "pkg/apis/pluginregistration/v1/api.proto"),
    ("dra_v1.proto", "pkg/apis/dra/v1/api.proto"),
    ("drahealth_v1.proto", "pkg/apis/dra-health/v1/api.proto"),
]


def load(protoc, path, tmp):
    out = os.path.join(tmp, os.path.basename(os.path.dirname(path)) + "-" + os.path.basename(path) + ".pb")
    subprocess.run([protoc, "-I", os.path.dirname(path), "--descriptor_set_out", out, path], check=True, timeout=60)
    fds = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        fds.ParseFromString(f.read())
    return fds.file[0]


def shape(fd):
    """What the wire sees, as plain values."""
    def fields(m):
        return sorted((f.number, f.name, f.type, f.label, f.type_name, f.proto3_optional) for f in m.field)

    def messages(ms, prefix):
        out = {}
        for m in ms:
            out[prefix + m.name] = fields(m)
            out.update(messages(m.nested_type, prefix + m.name + "."))
        return out

    return {
        "package": fd.package,
        "services": {s.name: sorted((m.name, m.input_type, m.output_type, m.client_streaming, m.server_streaming)
                                    for m in s.method) for s in fd.service},
        "messages": messages(fd.message_type, ""),
        "enums": {e.name: sorted((v.number, v.name) for v in e.value) for e in fd.enum_type},
    }


def skip_or_fail(why):
    """This machine lacks what the test reads: 77 with the reason, or 1 under CI=true."""
    if running_under_ci():
        print("FAIL: %s (under CI=true a failure: scripts/test.sh provides it before ctest runs)" % why)
        return 1
    print("skipped: %s" % why)
    return 77


def find_go():
    """go on PATH, else the toolchain the Kubernetes build uses (test/cluster/go-build-lib.sh)."""
    go = shutil.which("go")
    if go is None and os.access("/usr/local/go/bin/go", os.X_OK):
        go = "/usr/local/go/bin/go"
    return go


def module_dir(go, module):
    """The directory of `module` (path@version) in the Go module cache that `go env GOMODCACHE`
    names, or (None, why). Upper-case letters are stored as '!' plus the lower-case letter."""
    r = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60,
                       cwd=tempfile.gettempdir(), env=dict(os.environ, GOTOOLCHAIN="local"))
    cache = r.stdout.strip()
    if r.returncode != 0 or not cache:
        return None, "`%s env GOMODCACHE` failed (exit %d): %s" % (go, r.returncode, r.stderr.strip())
    return os.path.join(cache, re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protoc", default="protoc")
    ap.add_argument("--ours", required=True)
    ap.add_argument("--module", default="k8s.io/kubelet@v0.37.2", help="the kubelet's Go module, path@version")
    args = ap.parse_args()
    if descriptor_pb2 is None:
        return skip_or_fail("python3-protobuf is not installed (scripts/install-deps.sh installs it)")
    if not args.protoc or args.protoc.endswith("-NOTFOUND") or shutil.which(args.protoc) is None:
        return skip_or_fail("protoc is not installed (scripts/install-deps.sh installs protobuf-compiler)")
    go = find_go()
    if go is None:
        return skip_or_fail("go is not installed (neither on PATH nor /usr/local/go/bin/go; Go >= 1.26, "
                            "as test/cluster/build-k8s.sh needs), so the Go module cache cannot be found")
    kubelet, why = module_dir(go, args.module)
    if kubelet is None:
        return skip_or_fail(why)
    if not os.path.isdir(kubelet):
        return skip_or_fail("%s is not in the Go module cache (%s); test/cluster/build-k8s.sh downloads it, "
                            "or: GOFLAGS=-mod=mod %s mod download %s" % (args.module, kubelet, go, args.module))
    args.kubelet = kubelet
    print("kubelet protos: %s" % kubelet)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for ours, theirs in PAIRS:
            a = shape(load(args.protoc, os.path.join(args.ours, ours), tmp))
            b = shape(load(args.protoc, os.path.join(args.kubelet, theirs), tmp))
            for key in ("package", "services", "messages", "enums"):
                if a[key] != b[key]:
                    failures += 1
                    print("FAIL %s vs %s: %s differ\n  ours:    %s\n  kubelet: %s" % (ours, theirs, key, a[key], b[key]))
            if a == b:
                paths = ["/%s.%s/%s" % (a["package"], s, m[0]) for s, ms in a["services"].items() for m in ms]
                print("ok %s: %s" % (ours, " ".join(paths)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
