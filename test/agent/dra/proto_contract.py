#!/usr/bin/python3
"""The agent's kubelet protos against the kubelet's own: same packages, services, methods (with
their streaming), messages, enums and field numbers, names and types.

The upstream files are read from the Go module cache (k8s.io/kubelet at the pinned version); the
test is skipped (exit 77) when it is not there. Both sides are compiled by protoc into descriptor
sets and compared; comments and options (go_package) do not matter on the wire and are ignored.

    proto_contract.py --protoc protoc --ours agent/proto --kubelet ~/go/pkg/mod/k8s.io/kubelet@v0.37.2
"""
import argparse
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protoc", default="protoc")
    ap.add_argument("--ours", required=True)
    ap.add_argument("--kubelet", required=True)
    args = ap.parse_args()
    if not os.path.isdir(args.kubelet):
        print("skipped: %s is not there (the Go module cache holds the kubelet's protos)" % args.kubelet)
        return 77
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
