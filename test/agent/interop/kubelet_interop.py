#!/usr/bin/python3
# A kubelet written independently of the agent, in Python, speaking device plugin API v1beta1:
# it serves Registration on kubelet.sock, waits for erdma-agent to register, then drives the
# plugin (GetDevicePluginOptions, ListAndWatch, Allocate, GetPreferredAllocation,
# PreStartContainer), reads /metrics, restarts like kubelet does (deleting every socket), and
# stops the agent with SIGTERM.
#
# Needs Debian's python3-grpcio and python3-protobuf, so run it with /usr/bin/python3 (the first
# python3 on PATH may be another interpreter). Messages come from kubelet_v1beta1.proto beside
# this file (compiled with protoc at run time); gRPC method paths are spelled out by hand below.
# Every wait is bounded. Exit status 0 = all checks passed.
import argparse
import concurrent.futures
import importlib
import json
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc

WAIT = 15.0
checks = {"passed": 0, "failed": 0}


def check(cond, what):
    if cond:
        checks["passed"] += 1
    else:
        checks["failed"] += 1
        print("FAIL:", what, flush=True)


def load_messages(proto, workdir):
    subprocess.run(["protoc", "-I", os.path.dirname(proto), "--python_out", workdir, proto], check=True, timeout=60)
    sys.path.insert(0, workdir)
    return importlib.import_module(os.path.splitext(os.path.basename(proto))[0] + "_pb2")


class Kubelet:
    def __init__(self, pb, directory):
        self.pb = pb
        self.dir = directory
        self.registrations = queue.Queue()
        self.server = None

    def _register(self, request, context):
        self.registrations.put((time.monotonic(), request))
        return self.pb.Empty()

    def start(self):
        handler = grpc.method_handlers_generic_handler("v1beta1.Registration", {
            "Register": grpc.unary_unary_rpc_method_handler(
                self._register,
                request_deserializer=self.pb.RegisterRequest.FromString,
                response_serializer=self.pb.Empty.SerializeToString),
        })
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port("unix:" + os.path.join(self.dir, "kubelet.sock"))
        self.server.start()

    def restart(self):
        # What kubelet does when it starts: remove every socket in the directory, then serve.
        self.server.stop(0).wait(5)
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        self.start()

    def next_registration(self):
        return self.registrations.get(timeout=WAIT)


def plugin_calls(pb, channel):
    path = "/v1beta1.DevicePlugin/"
    return {
        "options": channel.unary_unary(path + "GetDevicePluginOptions", pb.Empty.SerializeToString,
                                       pb.DevicePluginOptions.FromString),
        "watch": channel.unary_stream(path + "ListAndWatch", pb.Empty.SerializeToString,
                                      pb.ListAndWatchResponse.FromString),
        "allocate": channel.unary_unary(path + "Allocate", pb.AllocateRequest.SerializeToString,
                                        pb.AllocateResponse.FromString),
        "preferred": channel.unary_unary(path + "GetPreferredAllocation",
                                         pb.PreferredAllocationRequest.SerializeToString,
                                         pb.PreferredAllocationResponse.FromString),
        "prestart": channel.unary_unary(path + "PreStartContainer", pb.PreStartContainerRequest.SerializeToString,
                                        pb.PreStartContainerResponse.FromString),
    }


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--proto", required=True)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="erdma-kubelet-", dir="/tmp") as work:
        pb = load_messages(args.proto, work)
        dp = os.path.join(work, "dp")
        os.mkdir(dp)
        port = free_port()
        config = os.path.join(work, "agent.json")
        features = os.path.join(work, "features.d", "erdma")
        os.mkdir(os.path.dirname(features))
        with open(config, "w") as f:
            # smcr off: this test is about the device plugin and must not touch the host's SMC tables.
            json.dump({"devicePluginDir": dp, "slotsPerDevice": 4, "metricsListen": "127.0.0.1:%d" % port,
                       "smcr": {"enabled": False}, "nfdFeatureFile": features,
                       "devices": {"source": "static", "static": [
                           {"name": "erdma_0", "uverbs": "uverbs0", "netdev": "eth0", "numaNode": 0},
                           {"name": "erdma_1", "uverbs": "uverbs1", "netdev": "eth1", "numaNode": 1,
                            "state": "DOWN"}]}}, f)
        kubelet = Kubelet(pb, dp)
        kubelet.start()
        log = open(os.path.join(work, "agent.log"), "w+")
        agent = subprocess.Popen([args.agent, "run", "--config", config], stdout=log, stderr=log)
        try:
            _, reg = kubelet.next_registration()
            check(reg.version == "v1beta1", "Register.version is %r" % reg.version)
            check(reg.endpoint == "erdma.sock", "Register.endpoint is %r" % reg.endpoint)
            check(reg.resource_name == "aliyun/erdma", "Register.resource_name is %r" % reg.resource_name)
            check(reg.options.pre_start_required, "Register.options.pre_start_required")
            check(reg.options.get_preferred_allocation_available, "Register.options.get_preferred_allocation_available")

            channel = grpc.insecure_channel("unix:" + os.path.join(dp, reg.endpoint))
            call = plugin_calls(pb, channel)
            opts = call["options"](pb.Empty(), timeout=WAIT)
            check(opts.pre_start_required and opts.get_preferred_allocation_available, "GetDevicePluginOptions")

            stream = call["watch"](pb.Empty(), timeout=WAIT)
            first = next(stream)
            health = {d.ID: d.health for d in first.devices}
            numa = {d.ID: [n.ID for n in d.topology.nodes] for d in first.devices}
            check(len(first.devices) == 8, "ListAndWatch lists 8 slots, got %d" % len(first.devices))
            check(health.get("erdma_0-3") == "Healthy", "erdma_0-3 healthy: %r" % health.get("erdma_0-3"))
            check(health.get("erdma_1-0") == "Unhealthy", "erdma_1-0 unhealthy: %r" % health.get("erdma_1-0"))
            check(numa.get("erdma_1-2") == [1], "erdma_1-2 on NUMA node 1: %r" % numa.get("erdma_1-2"))
            stream.cancel()

            req = pb.AllocateRequest()
            req.container_requests.add().devices_ids.extend(["erdma_0-1", "erdma_0-2"])
            resp = call["allocate"](req, timeout=WAIT)
            c = resp.container_responses[0]
            check(dict(c.envs) == {"ERDMA_DEVICES": "erdma_0", "NCCL_IB_HCA": "=erdma_0"}, "Allocate envs %r" % dict(c.envs))
            specs = [(d.container_path, d.host_path, d.permissions) for d in c.devices]
            check(specs == [("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0", "rw"),
                            ("/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm", "rw")], "Allocate devices %r" % specs)

            bad = pb.AllocateRequest()
            bad.container_requests.add().devices_ids.append("erdma_7-0")
            try:
                call["allocate"](bad, timeout=WAIT)
                check(False, "Allocate of an unknown ID succeeded")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.NOT_FOUND, "unknown ID: code %s" % e.code())
                check("erdma_7-0" in e.details(), "unknown ID named in %r" % e.details())

            pref = pb.PreferredAllocationRequest()
            pc = pref.container_requests.add()
            pc.available_deviceIDs.extend(["erdma_0-0", "erdma_1-0", "erdma_1-1", "erdma_1-2"])
            pc.allocation_size = 2
            presp = call["preferred"](pref, timeout=WAIT)
            chosen = list(presp.container_responses[0].deviceIDs)
            # Two devices, two slots: one slot of each (NCCL uses every device it is given).
            check(sorted(chosen) == ["erdma_0-0", "erdma_1-0"], "GetPreferredAllocation chose %r" % chosen)

            # One slot per device: both uverbs nodes, rdma_cm once, NCCL told about both devices
            # (exact match, so erdma_1 could never also pick an erdma_10).
            req = pb.AllocateRequest()
            req.container_requests.add().devices_ids.extend(chosen)
            c = call["allocate"](req, timeout=WAIT).container_responses[0]
            specs = [d.host_path for d in c.devices]
            check(specs == ["/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1", "/dev/infiniband/rdma_cm"],
                  "two-device Allocate devices %r" % specs)
            check(c.envs.get("NCCL_IB_HCA") == "=erdma_0,erdma_1", "two-device NCCL_IB_HCA %r" % dict(c.envs))
            check(c.envs.get("ERDMA_DEVICES") == "erdma_0,erdma_1", "two-device ERDMA_DEVICES %r" % dict(c.envs))
            # Static devices carry no GID table, so no GID index is claimed.
            check("NCCL_IB_GID_INDEX" not in c.envs, "no GID index without a GID table: %r" % dict(c.envs))

            pre = pb.PreStartContainerRequest()
            pre.devices_ids.append("erdma_0-1")
            call["prestart"](pre, timeout=WAIT)
            check(True, "PreStartContainer answered")
            channel.close()

            body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=WAIT).read().decode()
            check('erdma_agent_registrations_total{result="ok"} 1' in body, "metrics: one registration")
            check('erdma_agent_kubelet_registered 1' in body, "metrics: registered with kubelet")
            check('erdma_agent_allocate_requests_total{result="ok"} 2' in body, "metrics: two Allocates")
            check('erdma_agent_allocate_requests_total{result="error"} 1' in body, "metrics: one refused Allocate")
            check('erdma_agent_devices{health="unhealthy"} 1' in body, "metrics: one unhealthy device")
            check('erdma_agent_slots_allocated_total 4' in body, "metrics: four slots allocated")

            # Driver mode: the NFD feature file and the mismatch gauge agree on what the node has.
            # The agent writes both right after it registered, on its main thread: wait for them
            # (under load this sequence can finish first).
            end = time.monotonic() + WAIT
            while not os.path.exists(features) and time.monotonic() < end:
                time.sleep(0.02)
            check(os.path.exists(features), "the agent wrote the NFD feature file %s within %.0f s" % (features, WAIT))
            body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=WAIT).read().decode()
            with open(features) as f:
                feats = dict(l.strip().split("=", 1) for l in f if l.strip() and not l.startswith("#"))
            check(feats.get("erdma-devices") == "2", "NFD erdma-devices %r" % feats)
            check(feats.get("erdma-driver-want") == "default", "NFD erdma-driver-want %r" % feats)
            have = feats.get("erdma-driver-mode")
            mismatch = "1" if have != "default" else "0"
            check('erdma_agent_driver_mode_mismatch{want="default",have="%s"} %s' % (have, mismatch) in body,
                  "metrics: driver mode gauge for have=%r" % have)
            check(not any(n.startswith(".") for n in os.listdir(os.path.dirname(features))),
                  "no temporary file left beside the NFD feature file")

            t0 = time.monotonic()
            kubelet.restart()
            t1, reg2 = kubelet.next_registration()
            print("measured: re-registration %.0f ms after a kubelet restart (Python kubelet)" % ((t1 - t0) * 1000))
            check(reg2.endpoint == "erdma.sock", "re-registration endpoint")
            body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=WAIT).read().decode()
            check("erdma_agent_kubelet_restarts_total 1" in body, "metrics: one kubelet restart")

            agent.send_signal(signal.SIGTERM)
            rc = agent.wait(timeout=WAIT)
            check(rc == 0, "exit status after SIGTERM is %s" % rc)
            check(not os.path.exists(os.path.join(dp, "erdma.sock")), "socket removed on exit")
        except (queue.Empty, grpc.RpcError, StopIteration, subprocess.TimeoutExpired, OSError) as e:
            check(False, "unexpected %s: %s" % (type(e).__name__, e))
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait(timeout=WAIT)
            if checks["failed"]:
                log.seek(0)
                print("---- agent log ----\n" + log.read())
            log.close()
    print("kubelet interop: %d passed, %d failed" % (checks["passed"], checks["failed"]))
    return 0 if checks["failed"] == 0 and checks["passed"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
