#!/usr/bin/python3
# Stands in for the node's kubelet and container runtime around a real erdma-agent in the VM test,
# written independently of the agent (messages compiled at run time from the project's .proto
# files; every gRPC method path spelled out here, as kubelet and containerd use them).
#
#   fake_node.py serve --dp DIR --podres SOCK --cri SOCK --state FILE --seconds N
#       kubelet's Registration on DIR/kubelet.sock (the eRDMA devices' registration is written to
#       DIR/registered.json, others to DIR/registered-<resource>.json), kubelet's PodResources v1 List on SOCK, and the CRI RuntimeService
#       (ListPodSandbox, PodSandboxStatus verbose, containerd-style info JSON) on SOCK. Pods come
#       from the JSON state FILE, re-read on every call so the test can "create" pods:
#         {"pods": [{"namespace": "team", "name": "web-0", "ids": ["rxe1-1"],
#                    "annotations": {...}, "netns": "/run/netns/pod1", "hostNetwork": false}]}
#   fake_node.py allocate --dp DIR --ids ID,...      Allocate like kubelet; prints the DeviceSpecs
#                                                    and whether each host path exists
#   fake_node.py prestart --dp DIR --ids ID,...      PreStartContainer with kubelet's 30 s budget;
#                                                    prints status and latency
#   fake_node.py burst --dp DIR --ids ID,...         one PreStartContainer per ID, all at once (as
#                                                    kubelet starts a node's pods in parallel); prints
#                                                    how many succeeded and the latency percentiles
#
# Needs Debian's python3-grpcio and python3-protobuf: run with /usr/bin/python3. Every wait is
# bounded; answers are one JSON line on stdout; exit status 0 means the call succeeded.
import argparse
import concurrent.futures
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
PROTOS = {
    "kubelet": os.path.join(SRC, "test/agent/interop/kubelet_v1beta1.proto"),
    "podres": os.path.join(SRC, "agent/proto/podresources_v1.proto"),
    "cri": os.path.join(SRC, "agent/proto/cri_runtime_v1.proto"),
}


def load(workdir):
    mods = {}
    for key, proto in PROTOS.items():
        subprocess.run(["protoc", "-I", os.path.dirname(proto), "--python_out", workdir, proto], check=True, timeout=60)
    sys.path.insert(0, workdir)
    for key, proto in PROTOS.items():
        mods[key] = importlib.import_module(os.path.splitext(os.path.basename(proto))[0] + "_pb2")
    return mods


def read_state(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"pods": []}


def containerd_info(pod):
    namespaces = [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]
    if not pod.get("hostNetwork"):
        namespaces.append({"type": "network", "path": pod.get("netns", "")})
    return json.dumps({"pid": pod.get("pid", 0), "processStatus": "running", "netNamespaceClosed": False,
                       "runtimeSpec": {"ociVersion": "1.1.0", "linux": {"namespaces": namespaces}}})


def cmd_serve(args):
    with tempfile.TemporaryDirectory(prefix="fake-node-") as work:
        pb = load(work)
        k, pr, cri = pb["kubelet"], pb["podres"], pb["cri"]

        def register(request, context):
            # The agent registers the eRDMA devices (registered.json: what allocate and prestart
            # talk to) and the SMC-R library resource (registered-aliyun_erdma-smcr.json), in
            # either order.
            name = "registered.json" if request.resource_name == "aliyun/erdma" else \
                "registered-%s.json" % request.resource_name.replace("/", "_")
            with open(os.path.join(args.dp, name + ".tmp"), "w") as f:
                json.dump({"version": request.version, "endpoint": request.endpoint,
                           "resource": request.resource_name,
                           "pre_start_required": request.options.pre_start_required}, f)
            os.rename(os.path.join(args.dp, name + ".tmp"), os.path.join(args.dp, name))
            return k.Empty()

        def list_pods(request, context):
            out = pr.ListPodResourcesResponse()
            for p in read_state(args.state)["pods"]:
                item = out.pod_resources.add(name=p["name"], namespace=p["namespace"])
                c = item.containers.add(name=p.get("container", "app"))
                c.devices.add(resource_name=p.get("resource", "aliyun/erdma"), device_ids=p["ids"])
            return out

        def sandbox_id(p):
            return "sb-" + p["namespace"] + "-" + p["name"]

        def metadata(p):
            return cri.PodSandboxMetadata(name=p["name"], namespace=p["namespace"], uid="uid-" + p["name"], attempt=0)

        def list_sandboxes(request, context):
            out = cri.ListPodSandboxResponse()
            for i, p in enumerate(read_state(args.state)["pods"]):
                out.items.add(id=sandbox_id(p), metadata=metadata(p), state=cri.SANDBOX_READY,
                              created_at=1700000000000000000 + i, annotations=p.get("annotations", {}))
            return out

        def sandbox_status(request, context):
            for p in read_state(args.state)["pods"]:
                if sandbox_id(p) != request.pod_sandbox_id:
                    continue
                status = cri.PodSandboxStatus(id=sandbox_id(p), metadata=metadata(p), state=cri.SANDBOX_READY,
                                              created_at=1700000000000000000, annotations=p.get("annotations", {}))
                status.linux.namespaces.options.network = cri.NODE if p.get("hostNetwork") else cri.POD
                resp = cri.PodSandboxStatusResponse(status=status)
                if request.verbose:
                    resp.info["info"] = containerd_info(p)
                return resp
            context.abort(grpc.StatusCode.NOT_FOUND, "an error occurred when try to find sandbox")

        handlers = [
            grpc.method_handlers_generic_handler("v1beta1.Registration", {
                "Register": grpc.unary_unary_rpc_method_handler(
                    register, request_deserializer=k.RegisterRequest.FromString,
                    response_serializer=k.Empty.SerializeToString)}),
            grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
                "List": grpc.unary_unary_rpc_method_handler(
                    list_pods, request_deserializer=pr.ListPodResourcesRequest.FromString,
                    response_serializer=pr.ListPodResourcesResponse.SerializeToString)}),
            grpc.method_handlers_generic_handler("runtime.v1.RuntimeService", {
                "ListPodSandbox": grpc.unary_unary_rpc_method_handler(
                    list_sandboxes, request_deserializer=cri.ListPodSandboxRequest.FromString,
                    response_serializer=cri.ListPodSandboxResponse.SerializeToString),
                "PodSandboxStatus": grpc.unary_unary_rpc_method_handler(
                    sandbox_status, request_deserializer=cri.PodSandboxStatusRequest.FromString,
                    response_serializer=cri.PodSandboxStatusResponse.SerializeToString)}),
        ]
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers(handlers)
        for sock in (os.path.join(args.dp, "kubelet.sock"), args.podres, args.cri):
            if os.path.exists(sock):
                os.unlink(sock)
            server.add_insecure_port("unix:" + sock)
        server.start()
        print(json.dumps({"serving": True}), flush=True)
        stop = {"now": False}
        signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
        end = time.monotonic() + args.seconds
        while not stop["now"] and time.monotonic() < end:
            time.sleep(0.2)
        server.stop(1).wait(5)
    return 0


def plugin_channel(args, pb):
    path = os.path.join(args.dp, "registered.json")
    end = time.monotonic() + args.wait
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.1)
    with open(path) as f:
        reg = json.load(f)
    return reg, grpc.insecure_channel("unix:" + os.path.join(args.dp, reg["endpoint"]))


def cmd_allocate(args):
    with tempfile.TemporaryDirectory(prefix="fake-kubelet-") as work:
        k = load(work)["kubelet"]
        reg, channel = plugin_channel(args, {"kubelet": k})
        options = channel.unary_unary("/v1beta1.DevicePlugin/GetDevicePluginOptions", k.Empty.SerializeToString,
                                      k.DevicePluginOptions.FromString)(k.Empty(), timeout=10)
        watch = channel.unary_stream("/v1beta1.DevicePlugin/ListAndWatch", k.Empty.SerializeToString,
                                     k.ListAndWatchResponse.FromString)(k.Empty(), timeout=10)
        first = next(watch)
        watch.cancel()
        req = k.AllocateRequest()
        req.container_requests.add(devices_ids=args.ids.split(","))
        resp = channel.unary_unary("/v1beta1.DevicePlugin/Allocate", k.AllocateRequest.SerializeToString,
                                   k.AllocateResponse.FromString)(req, timeout=10)
        c = resp.container_responses[0]
        specs = [{"container_path": d.container_path, "host_path": d.host_path, "permissions": d.permissions,
                  "host_path_exists": os.path.exists(d.host_path)} for d in c.devices]
        print(json.dumps({"registered": reg, "pre_start_required": options.pre_start_required,
                          "advertised": len(first.devices),
                          "healthy": sum(1 for d in first.devices if d.health == "Healthy"),
                          "envs": dict(c.envs), "devices": specs}))
        return 0 if specs and all(s["host_path_exists"] for s in specs) else 1


def prestart_call(args, work):
    """The kubelet messages and a connected PreStartContainer stub (connected first, so a measured
    latency is the call alone)."""
    k = load(work)["kubelet"]
    reg, channel = plugin_channel(args, {"kubelet": k})
    call = channel.unary_unary("/v1beta1.DevicePlugin/PreStartContainer",
                               k.PreStartContainerRequest.SerializeToString, k.PreStartContainerResponse.FromString)
    grpc.channel_ready_future(channel).result(timeout=10)
    return k, call


def cmd_prestart(args):
    with tempfile.TemporaryDirectory(prefix="fake-kubelet-") as work:
        k, call = prestart_call(args, work)
        t0 = time.monotonic()
        try:
            call(k.PreStartContainerRequest(devices_ids=args.ids.split(",")), timeout=30)  # kubelet's budget
            ok, detail = True, "OK"
        except grpc.RpcError as e:
            ok, detail = False, "%s: %s" % (e.code(), e.details())
        ms = (time.monotonic() - t0) * 1000
        print(json.dumps({"ok": ok, "status": detail, "ms": round(ms, 2)}))
        return 0 if ok else 1


def percentile(sorted_values, q):
    """Nearest-rank percentile of a sorted list (q in 0..100)."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil(n * q / 100)
    return sorted_values[min(len(sorted_values), int(rank)) - 1]


def cmd_burst(args):
    ids = args.ids.split(",")
    with tempfile.TemporaryDirectory(prefix="fake-kubelet-") as work:
        k, call = prestart_call(args, work)

        def one(device_id):
            t0 = time.monotonic()
            try:
                call(k.PreStartContainerRequest(devices_ids=[device_id]), timeout=30)  # kubelet's budget
                error = None
            except grpc.RpcError as e:
                error = "%s: %s: %s" % (device_id, e.code(), e.details())
            return (time.monotonic() - t0) * 1000, error

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(ids)) as pool:
            results = list(pool.map(one, ids))
        wall = (time.monotonic() - t0) * 1000
        ms = sorted(r[0] for r in results)
        errors = [r[1] for r in results if r[1]]
        print(json.dumps({"calls": len(ids), "ok": len(ids) - len(errors), "errors": errors[:5],
                          "p50_ms": round(percentile(ms, 50), 1), "p99_ms": round(percentile(ms, 99), 1),
                          "max_ms": round(ms[-1], 1), "wall_ms": round(wall, 1)}))
        return 0 if not errors else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--dp", required=True)
    s.add_argument("--podres", required=True)
    s.add_argument("--cri", required=True)
    s.add_argument("--state", required=True)
    s.add_argument("--seconds", type=float, default=300)
    for name in ("allocate", "prestart", "burst"):
        c = sub.add_parser(name)
        c.add_argument("--dp", required=True)
        c.add_argument("--ids", required=True)
        c.add_argument("--wait", type=float, default=60)
    args = ap.parse_args()
    return {"serve": cmd_serve, "allocate": cmd_allocate, "prestart": cmd_prestart,
            "burst": cmd_burst}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
