#!/usr/bin/python3
"""A device plugin whose Allocate answers name CDI devices and nothing else, for test/cluster/cdi.sh:
whatever a container of the real kubelet then receives came through the container runtime's CDI.

Needs Debian's /usr/bin/python3 with python3-grpcio and python3-protobuf, and protoc
(protobuf-compiler); the first python3 on PATH may be another interpreter. The messages come from
test/agent/interop/kubelet_v1beta1.proto (the device plugin API v1beta1, written apart from the
agent's own .proto), compiled into a temporary directory that is removed again.

  cdi_plugin.py --dir DIR --resource NAME --device ID=CDI_NAME [--device ...] [--seconds N]

DIR is the kubelet's device-plugin directory (its kubelet.sock; the plugin's own socket is made
there too). The plugin serves DevicePlugin v1beta1 on DIR/erdma-cdi-test.sock, registers NAME with
the kubelet, advertises each ID as Healthy, and answers Allocate of ID with the CDI device
CDI_NAME (ContainerAllocateResponse.cdi_devices: no env, mount or device of its own). One JSON
line per Allocate on stdout; logs on stderr. It ends on SIGTERM or SIGINT, or after N seconds
(default 600), and removes its socket.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "agent", "interop", "kubelet_v1beta1.proto")
SOCKET = "erdma-cdi-test.sock"


def log(msg):
    print("cdi_plugin: " + msg, file=sys.stderr, flush=True)


def parse_devices(items):
    """['card0=vendor/class=card0', ...] -> {'card0': 'vendor/class=card0'}; the first '=' splits."""
    devices = {}
    for item in items:
        dev_id, sep, cdi_name = item.partition("=")
        if not sep or not dev_id or "=" not in cdi_name or "/" not in cdi_name.split("=")[0]:
            raise SystemExit("--device %r: expected ID=VENDOR/CLASS=NAME, e.g. card0=erdma.aliyun.com/test=card0" % item)
        devices[dev_id] = cdi_name
    return devices


def compile_messages():
    if shutil.which("protoc") is None:
        raise SystemExit("protoc not found: apt-get install protobuf-compiler")
    work = tempfile.mkdtemp(prefix="cdi-plugin-protos-")
    try:
        r = subprocess.run(["protoc", "-I" + os.path.dirname(PROTO), "--python_out", work, PROTO],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise SystemExit("protoc failed on %s: %s" % (PROTO, r.stderr.strip()))
        sys.path.insert(0, work)
        import kubelet_v1beta1_pb2 as pb  # noqa: E402 (compiled just above)
        sys.path.remove(work)
        return pb
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="the kubelet's device-plugin directory")
    ap.add_argument("--resource", required=True, help="the extended resource, e.g. erdma.aliyun.com/cdi-test")
    ap.add_argument("--device", action="append", default=[], required=True, help="ID=VENDOR/CLASS=NAME")
    ap.add_argument("--seconds", type=float, default=600)
    args = ap.parse_args()
    devices = parse_devices(args.device)
    kubelet_sock = os.path.join(args.dir, "kubelet.sock")
    if not os.path.exists(kubelet_sock):
        raise SystemExit("%s does not exist: is the kubelet running with this device-plugin directory?" % kubelet_sock)
    try:
        import grpc
    except ImportError:
        raise SystemExit("python3-grpcio is missing: run with /usr/bin/python3 (scripts/install-deps.sh installs it)")
    from concurrent import futures
    pb = compile_messages()

    stop = threading.Event()

    def options(_req, _ctx):
        return pb.DevicePluginOptions()

    def list_and_watch(_req, ctx):
        yield pb.ListAndWatchResponse(devices=[pb.Device(ID=d, health="Healthy") for d in sorted(devices)])
        while not stop.is_set() and ctx.is_active():
            stop.wait(1)

    def allocate(req, ctx):
        resp = pb.AllocateResponse()
        for creq in req.container_requests:
            unknown = [d for d in creq.devices_ids if d not in devices]
            if unknown:
                ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown device(s) %s" % unknown)
            names = [devices[d] for d in creq.devices_ids]
            resp.container_responses.append(
                pb.ContainerAllocateResponse(cdi_devices=[pb.CDIDevice(name=n) for n in names]))
            print(json.dumps({"allocate": list(creq.devices_ids), "cdi_devices": names}), flush=True)
        return resp

    def preferred(req, _ctx):
        return pb.PreferredAllocationResponse(container_responses=[
            pb.ContainerPreferredAllocationResponse(deviceIDs=list(c.available_deviceIDs)[:c.allocation_size])
            for c in req.container_requests])

    def pre_start(_req, _ctx):
        return pb.PreStartContainerResponse()

    def unary(fn, req_type, resp_type):
        return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req_type.FromString,
                                                   response_serializer=resp_type.SerializeToString)

    handlers = {
        "GetDevicePluginOptions": unary(options, pb.Empty, pb.DevicePluginOptions),
        "ListAndWatch": grpc.unary_stream_rpc_method_handler(
            list_and_watch, request_deserializer=pb.Empty.FromString,
            response_serializer=pb.ListAndWatchResponse.SerializeToString),
        "Allocate": unary(allocate, pb.AllocateRequest, pb.AllocateResponse),
        "GetPreferredAllocation": unary(preferred, pb.PreferredAllocationRequest, pb.PreferredAllocationResponse),
        "PreStartContainer": unary(pre_start, pb.PreStartContainerRequest, pb.PreStartContainerResponse),
    }
    sock = os.path.join(args.dir, SOCKET)
    if os.path.exists(sock):
        os.unlink(sock)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", handlers),))
    server.add_insecure_port("unix://" + sock)
    server.start()
    try:
        with grpc.insecure_channel("unix://" + kubelet_sock) as ch:
            register = ch.unary_unary("/v1beta1.Registration/Register",
                                      request_serializer=pb.RegisterRequest.SerializeToString,
                                      response_deserializer=pb.Empty.FromString)
            register(pb.RegisterRequest(version="v1beta1", endpoint=SOCKET, resource_name=args.resource,
                                        options=pb.DevicePluginOptions()), timeout=30)
        log("registered %s with %d device(s) %s on %s" % (args.resource, len(devices), sorted(devices), sock))
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        end = time.monotonic() + args.seconds
        while not stop.is_set() and time.monotonic() < end:
            stop.wait(min(1.0, max(0.0, end - time.monotonic())))
        log("stopping (%s)" % ("signal" if stop.is_set() else "after %g s" % args.seconds))
    finally:
        stop.set()
        server.stop(grace=1).wait(5)
        if os.path.exists(sock):
            os.unlink(sock)


if __name__ == "__main__":
    main()
