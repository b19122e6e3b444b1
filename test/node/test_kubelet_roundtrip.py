#!/usr/bin/python3
# Round trip of test/node/kubelet.py against a small fake device plugin and a fake CRI runtime,
# both written here (python grpc servers on temporary unix sockets), so no containerd is needed:
#   serve -> Register -> GetDevicePluginOptions + ListAndWatch -> STATE/plugins/<resource>.json;
#   run-pod -> GetPreferredAllocation, Allocate (init container's device reused), RunPodSandbox,
#   PreStartContainer, CreateContainer (env order on the wire), StartContainer;
#   PodResources List; exec; logs; restart-container; a plugin restart and re-registration;
#   delete-pod releasing the devices; SIGTERM ending serve with its sockets removed.
# Debian's /usr/bin/python3 with python3-grpcio, python3-protobuf, python3-yaml, and protoc.
import concurrent.futures
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "test", "webhook", "server", "integration"))
import kubelet as k  # noqa: E402
from harness import skip_case, unittest_main  # noqa: E402
from private_containerd import wait_for  # noqa: E402

try:
    import grpc
except ImportError:  # pragma: no cover
    grpc = None

KUBELET = os.path.join(HERE, "kubelet.py")
RESOURCE = "aliyun/erdma"
WAIT = 30.0

POD = """
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: team}
data: {settings.conf: "a=1\\n", FROM_CM: cm-value}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team}
spec:
  template:
    metadata:
      labels: {app: web}
      annotations: {network.alibabacloud.com/erdma-smcr: "true"}
    spec:
      initContainers:
      - name: setup
        image: registry.example.com/busybox:1
        command: [sh, -c, "true"]
        resources: {limits: {aliyun/erdma: "1"}}
      containers:
      - name: app
        image: registry.example.com/app:1
        command: [app, "--hca=$(NCCL_IB_HCA)"]
        env:
        - {name: NCCL_IB_HCA, value: from-spec}
        - {name: REF, value: "$(NCCL_IB_HCA)/$(ERDMA_DEVICES)"}
        envFrom: [{configMapRef: {name: app-config}}]
        resources: {limits: {aliyun/erdma: "1"}}
        volumeMounts:
        - {name: cfg, mountPath: /etc/app}
        - {name: scratch, mountPath: /scratch}
      - name: side
        image: registry.example.com/side:1
        resources: {limits: {aliyun/erdma: "1"}}
      volumes:
      - {name: cfg, configMap: {name: app-config}}
      - {name: scratch, emptyDir: {}}
"""


class FakePlugin:
    """A device plugin with four devices (one unhealthy) that records the calls it gets."""

    def __init__(self, pb, sock):
        self.pb = pb
        self.sock = sock
        self.calls = queue.Queue()
        self.updates = queue.Queue()
        self.devices = [("e1", "Healthy"), ("e2", "Healthy"), ("e3", "Healthy"), ("e4", "Unhealthy")]
        self.server = None

    def start(self):
        pb = self.pb

        def options(req, ctx):
            return pb.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True)

        def list_and_watch(req, ctx):
            def snapshot():
                r = pb.ListAndWatchResponse()
                for i, h in self.devices:
                    d = r.devices.add(ID=i, health=h)
                    d.topology.nodes.add(ID=0)
                return r
            yield snapshot()
            while ctx.is_active():
                try:
                    self.updates.get(timeout=0.2)
                except queue.Empty:
                    continue
                yield snapshot()

        def preferred(req, ctx):
            self.calls.put(("GetPreferredAllocation", [list(c.available_deviceIDs) for c in req.container_requests],
                            [list(c.must_include_deviceIDs) for c in req.container_requests]))
            out = pb.PreferredAllocationResponse()
            for c in req.container_requests:
                ids = list(c.must_include_deviceIDs)
                for d in sorted(c.available_deviceIDs, reverse=True):  # prefers the highest id
                    if len(ids) < c.allocation_size and d not in ids:
                        ids.append(d)
                out.container_responses.add(deviceIDs=ids)
            return out

        def allocate(req, ctx):
            out = pb.AllocateResponse()
            for c in req.container_requests:
                ids = list(c.devices_ids)
                self.calls.put(("Allocate", ids))
                r = out.container_responses.add()
                r.envs["NCCL_IB_HCA"] = "from-allocate"
                r.envs["ERDMA_DEVICES"] = ",".join(ids)
                r.devices.add(container_path="/dev/infiniband/uverbs0", host_path="/dev/null", permissions="rw")
                r.mounts.add(container_path="/opt/erdma", host_path="/tmp", read_only=True)
                r.annotations["erdma.example/ids"] = ",".join(ids)
            return out

        def prestart(req, ctx):
            self.calls.put(("PreStartContainer", list(req.devices_ids)))
            return pb.PreStartContainerResponse()

        u = grpc.unary_unary_rpc_method_handler
        handlers = {
            "GetDevicePluginOptions": u(options, pb.Empty.FromString, pb.DevicePluginOptions.SerializeToString),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(list_and_watch, pb.Empty.FromString,
                                                                 pb.ListAndWatchResponse.SerializeToString),
            "GetPreferredAllocation": u(preferred, pb.PreferredAllocationRequest.FromString,
                                        pb.PreferredAllocationResponse.SerializeToString),
            "Allocate": u(allocate, pb.AllocateRequest.FromString, pb.AllocateResponse.SerializeToString),
            "PreStartContainer": u(prestart, pb.PreStartContainerRequest.FromString,
                                   pb.PreStartContainerResponse.SerializeToString),
        }
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", handlers)])
        self.server.add_insecure_port("unix:" + self.sock)
        self.server.start()

    def stop(self):
        if self.server:
            self.server.stop(0).wait(5)
            self.server = None
        if os.path.exists(self.sock):
            os.unlink(self.sock)

    def register(self, kubelet_sock):
        with grpc.insecure_channel("unix:" + kubelet_sock) as ch:
            reg = ch.unary_unary("/v1beta1.Registration/Register", self.pb.RegisterRequest.SerializeToString,
                                 self.pb.Empty.FromString)
            reg(self.pb.RegisterRequest(version="v1beta1", endpoint=os.path.basename(self.sock), resource_name=RESOURCE,
                                        options=self.pb.DevicePluginOptions(pre_start_required=True,
                                                                            get_preferred_allocation_available=True)),
                timeout=10)

    def drain(self):
        out = []
        while True:
            try:
                out.append(self.calls.get_nowait())
            except queue.Empty:
                return out


class FakeCri:
    """Just enough of containerd's CRI to accept what kubelet.py sends, recording the requests."""

    def __init__(self, pb, sock):
        self.pb = pb
        self.sock = sock
        self.requests = []
        self.containers = {}
        self.lock = threading.Lock()
        self.server = None

    def start(self):
        pb = self.pb
        n = {"c": 0}

        def rec(name, req):
            with self.lock:
                self.requests.append((name, req))

        def h(name, fn):
            def call(req, ctx):
                rec(name, req)
                return fn(req, ctx)
            return grpc.unary_unary_rpc_method_handler(call, getattr(pb, name + "Request").FromString,
                                                       getattr(pb, name + "Response").SerializeToString)

        def version(req, ctx):
            return pb.VersionResponse(version="0.1.0", runtime_name="fake", runtime_version="1", runtime_api_version="v1")

        def run_sandbox(req, ctx):
            self.sandbox_config = req.config
            return pb.RunPodSandboxResponse(pod_sandbox_id="sb-1")

        def sandbox_status(req, ctx):
            r = pb.PodSandboxStatusResponse()
            r.status.id = req.pod_sandbox_id
            r.status.network.ip = "10.88.0.7"
            r.info["info"] = json.dumps({"pid": 1, "runtimeSpec": {"linux": {"namespaces": [
                {"type": "pid"}, {"type": "network", "path": "/var/run/netns/cni-fake"}]}}})
            return r

        def create(req, ctx):
            with self.lock:
                n["c"] += 1
                cid = "c-%d" % n["c"]
                self.containers[cid] = req
            return pb.CreateContainerResponse(container_id=cid)

        def start(req, ctx):
            cfg = self.containers[req.container_id]
            path = os.path.join(cfg.sandbox_config.log_directory, cfg.config.log_path)
            with open(path, "w") as f:
                f.write("2024-01-01T00:00:00.1Z stdout P started \n2024-01-01T00:00:00.2Z stdout F %s\n"
                        "2024-01-01T00:00:00.3Z stderr F warn\n" % cfg.config.metadata.name)
            return pb.StartContainerResponse()

        def status(req, ctx):
            cfg = self.containers[req.container_id]
            r = pb.ContainerStatusResponse()
            r.status.id = req.container_id
            r.status.state = pb.CONTAINER_EXITED if cfg.config.metadata.name == "setup" else pb.CONTAINER_RUNNING
            return r

        def exec_sync(req, ctx):
            cfg = self.containers[req.container_id].config
            return pb.ExecSyncResponse(stdout=("%s:%s" % (cfg.metadata.name, " ".join(req.cmd))).encode(), exit_code=3)

        def empty(name):
            return lambda req, ctx: getattr(pb, name + "Response")()

        handlers = {
            "Version": h("Version", version), "RunPodSandbox": h("RunPodSandbox", run_sandbox),
            "PodSandboxStatus": h("PodSandboxStatus", sandbox_status), "CreateContainer": h("CreateContainer", create),
            "StartContainer": h("StartContainer", start), "ContainerStatus": h("ContainerStatus", status),
            "ExecSync": h("ExecSync", exec_sync),
        }
        for name in ("StopContainer", "RemoveContainer", "StopPodSandbox", "RemovePodSandbox"):
            handlers[name] = h(name, empty(name))
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("runtime.v1.RuntimeService", handlers)])
        self.server.add_insecure_port("unix:" + self.sock)
        self.server.start()

    def stop(self):
        if self.server:
            self.server.stop(0).wait(5)

    def names(self):
        with self.lock:
            return [n for n, _ in self.requests]

    def creates(self):
        with self.lock:
            return [r for n, r in self.requests if n == "CreateContainer"]


class RoundTrip(unittest.TestCase):
    def setUp(self):
        # Checked here, not in a class decorator, so that CI=true turns the skip into a failure.
        if grpc is None:
            skip_case(self, "python3-grpcio is not installed (scripts/install-deps.sh installs it)")
        if shutil.which("protoc") is None:
            skip_case(self, "protoc not installed (scripts/install-deps.sh installs protobuf-compiler)")
        self.tmp = tempfile.mkdtemp(prefix="kubelet-rt-")
        self.root = os.path.join(self.tmp, "root")
        self.state = os.path.join(self.tmp, "state")
        self.logs = os.path.join(self.tmp, "logs")
        self.m = k.Messages("cri", "dp", "podres")
        os.makedirs(os.path.join(self.root, "device-plugins"))
        stale = os.path.join(self.root, "device-plugins", "stale.sock")
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.bind(stale)
        s.close()
        self.stale = stale
        self.cri = FakeCri(self.m.cri, os.path.join(self.tmp, "cri.sock"))
        self.cri.start()
        self.plugin = FakePlugin(self.m.dp, os.path.join(self.root, "device-plugins", "erdma.sock"))
        self.serve = None

    def tearDown(self):
        if self.serve and self.serve.poll() is None:
            self.serve.kill()
            self.serve.wait(10)
        if self.serve:
            self.serve.stdout.close()
        self.plugin.stop()
        self.cri.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def kubelet(self, *argv, expect=0):
        cmd = ["/usr/bin/python3", KUBELET] + list(argv[:1]) + ["--state", self.state, "--root", self.root,
                                                                 "--log-root", self.logs, "--cri", "unix://" + self.cri.sock] + list(argv[1:])
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        print("kubelet.py %s: %.2f s" % (argv[0], time.monotonic() - t0), file=sys.stderr)
        self.assertEqual(r.returncode, expect, "%s\nstdout: %s\nstderr: %s" % (argv, r.stdout, r.stderr))
        return r.stdout

    def plugin_info(self):
        return k.read_json(os.path.join(self.state, "plugins", "aliyun_erdma.json"), None)

    def podresources(self):
        with grpc.insecure_channel("unix:" + os.path.join(self.root, "pod-resources", "kubelet.sock")) as ch:
            lst = ch.unary_unary("/v1.PodResourcesLister/List", self.m.podres.ListPodResourcesRequest.SerializeToString,
                                 self.m.podres.ListPodResourcesResponse.FromString)
            resp = lst(self.m.podres.ListPodResourcesRequest(), timeout=10)
        return {"%s/%s" % (p.namespace, p.name): {c.name: {d.resource_name: list(d.device_ids) for d in c.devices}
                                                  for c in p.containers} for p in resp.pod_resources}

    def test_round_trip(self):
        self.serve = subprocess.Popen(["/usr/bin/python3", KUBELET, "serve", "--root", self.root, "--state", self.state,
                                       "--seconds", "300"], stdout=subprocess.PIPE, text=True)
        wait_for("serve.ready", lambda: os.path.exists(os.path.join(self.state, "serve.ready")))
        self.assertFalse(os.path.exists(self.stale), "serve removes old plugin sockets, as kubelet does")
        self.plugin.start()
        self.plugin.register(os.path.join(self.root, "device-plugins", "kubelet.sock"))
        info = wait_for("the plugin's device list", lambda: (self.plugin_info() or {}).get("devices") and self.plugin_info())
        self.assertTrue(info["connected"])
        self.assertEqual(info["options"], {"pre_start_required": True, "get_preferred_allocation_available": True})
        self.assertEqual([(d["ID"], d["health"]) for d in info["devices"]], self.plugin.devices)
        self.assertEqual(info["devices"][0]["numa"], [0])

        pod_file = os.path.join(self.tmp, "pod.yaml")
        with open(pod_file, "w") as f:
            f.write(POD)
        out = json.loads(self.kubelet("run-pod", "-f", pod_file, "--image", "localhost/test:1"))
        self.assertEqual(out["pod"], "team/web-0")
        self.assertEqual(out["sandbox_id"], "sb-1")
        self.assertEqual(out["pod_ip"], "10.88.0.7")
        self.assertEqual(out["netns"], "/var/run/netns/cni-fake")
        calls = self.plugin.drain()
        allocs = [c[1] for c in calls if c[0] == "Allocate"]
        # setup gets the plugin's preferred (highest healthy) device; app reuses it; side gets the next.
        self.assertEqual(allocs, [["e3"], ["e3"], ["e2"]])
        prestarts = [c[1] for c in calls if c[0] == "PreStartContainer"]
        self.assertEqual(prestarts, [["e3"], ["e3"], ["e2"]])
        pref = [c for c in calls if c[0] == "GetPreferredAllocation"]
        self.assertNotIn("e4", pref[0][1][0], "unhealthy devices are not offered")
        for name in ("setup", "app", "side"):
            self.assertIsInstance(out["containers"][name]["prestart_ms"], float)
        self.assertEqual(out["containers"]["app"]["devices"], {RESOURCE: ["e3"]})

        # The pod's own value wins in the process; on the wire both are sent, Allocate's first.
        self.assertEqual(out["env"]["app"]["NCCL_IB_HCA"], "from-spec")
        self.assertEqual(out["env"]["app"]["ERDMA_DEVICES"], "e3")
        self.assertEqual(out["env"]["app"]["FROM_CM"], "cm-value")
        self.assertEqual(out["env"]["app"]["REF"], "from-spec/$(ERDMA_DEVICES)")
        self.assertEqual(out["env"]["side"]["NCCL_IB_HCA"], "from-allocate")
        creates = {c.config.metadata.name: c for c in self.cri.creates()}
        wire = [(e.key, e.value) for e in creates["app"].config.envs]
        self.assertEqual([kv for kv in wire if kv[0] == "NCCL_IB_HCA"], [("NCCL_IB_HCA", "from-allocate"), ("NCCL_IB_HCA", "from-spec")])
        self.assertLess(wire.index(("ERDMA_DEVICES", "e3")), wire.index(("FROM_CM", "cm-value")))
        app = creates["app"].config
        self.assertEqual(list(app.command), ["app", "--hca=from-spec"])
        self.assertEqual(app.image.image, "localhost/test:1")
        self.assertEqual([(d.container_path, d.host_path, d.permissions) for d in app.devices],
                         [("/dev/infiniband/uverbs0", "/dev/null", "rw")])
        mounts = [(m.container_path, m.readonly) for m in app.mounts]
        self.assertEqual(mounts[:3], [("/opt/erdma", True), ("/etc/app", True), ("/scratch", False)])
        self.assertIn("/etc/hosts", [m[0] for m in mounts])
        self.assertEqual(app.annotations["erdma.example/ids"], "e3")
        self.assertEqual(app.log_path, "app/0.log")
        self.assertEqual(app.labels["io.kubernetes.pod.namespace"], "team")
        sb = self.cri.sandbox_config
        self.assertEqual(sb.annotations["network.alibabacloud.com/erdma-smcr"], "true")
        self.assertEqual(sb.hostname, "web-0")
        self.assertEqual(sb.metadata.name, "web-0")
        self.assertEqual(sb.log_directory, os.path.join(self.logs, "team_web-0_" + out["uid"]))
        self.assertEqual(creates["app"].sandbox_config.metadata.uid, out["uid"])
        order = self.cri.names()
        self.assertEqual(order[:3], ["Version", "RunPodSandbox", "PodSandboxStatus"])
        self.assertEqual(order.index("CreateContainer"), 3)
        with open(os.path.join(self.root, "pods", out["uid"], "volumes", "kubernetes.io~configmap", "cfg", "settings.conf")) as f:
            self.assertEqual(f.read(), "a=1\n")

        # PodResources: app containers with their devices, not the ordinary init container.
        self.assertEqual(self.podresources(), {"team/web-0": {"app": {RESOURCE: ["e3"]}, "side": {RESOURCE: ["e2"]}}})

        ex = self.kubelet("exec", "team/web-0", "app", "--", "env", expect=3)
        self.assertEqual(json.loads(ex), {"stdout": "app:env", "stderr": "", "exit_code": 3})
        self.assertEqual(self.kubelet("logs", "team/web-0", "app"), "started app\nwarn\n")
        self.assertEqual(self.kubelet("logs", "team/web-0", "app", "--stream", "stderr"), "warn\n")

        rs = json.loads(self.kubelet("restart-container", "team/web-0", "app"))
        self.assertEqual(rs["attempt"], 1)
        self.assertNotEqual(rs["id"], rs["old_id"])
        self.assertEqual([c for c in self.plugin.drain()], [("PreStartContainer", ["e3"])])
        again = self.cri.creates()[-1].config
        self.assertEqual((again.metadata.name, again.metadata.attempt, again.log_path), ("app", 1, "app/1.log"))
        self.assertEqual([(e.key, e.value) for e in again.envs], wire)
        self.assertIn("RemoveContainer", self.cri.names())

        # A second pod asking for two devices: only e1 is left healthy and free.
        second = os.path.join(self.tmp, "second.yaml")
        with open(second, "w") as f:
            f.write("apiVersion: v1\nkind: Pod\nmetadata: {name: two, namespace: team}\nspec:\n  containers:\n"
                    "  - {name: c, image: x, resources: {limits: {aliyun/erdma: '2'}}}\n")
        err = json.loads(self.kubelet("run-pod", "-f", second, expect=1))
        self.assertIn("requested 2, available 1", err["error"])

        # A device turning unhealthy shows in the state file.
        self.plugin.devices[0] = ("e1", "Unhealthy")
        self.plugin.updates.put(1)
        wait_for("e1 unhealthy", lambda: self.plugin_info()["devices"][0]["health"] == "Unhealthy")

        # The plugin restarts: its socket goes away (kubelet marks it disconnected), then it registers again.
        self.plugin.stop()
        gone = wait_for("disconnect", lambda: not self.plugin_info()["connected"] and self.plugin_info())
        self.assertTrue(all(d["health"] == "Unhealthy" for d in gone["devices"]))
        self.plugin.devices[0] = ("e1", "Healthy")
        self.plugin.start()
        self.plugin.register(os.path.join(self.root, "device-plugins", "kubelet.sock"))
        back = wait_for("re-registration", lambda: (self.plugin_info()["registrations"] == 2 and self.plugin_info()["connected"]
                                                     and self.plugin_info()["devices"]) and self.plugin_info())
        self.assertEqual(back["devices"][0]["health"], "Healthy")

        dl = json.loads(self.kubelet("delete-pod", "team/web-0"))
        self.assertEqual(dl["released"], {RESOURCE: ["e3", "e2"]})
        self.assertEqual(self.podresources(), {})
        self.assertFalse(os.path.exists(os.path.join(self.root, "pods", out["uid"])))
        self.assertFalse(os.path.exists(sb.log_directory))
        self.assertIn("RemovePodSandbox", self.cri.names())

        self.serve.send_signal(signal.SIGTERM)
        self.assertEqual(self.serve.wait(20), 0)
        lines = [json.loads(x) for x in self.serve.stdout.read().splitlines() if x.strip()]
        self.assertEqual(lines[-1]["stopped"], "SIGTERM")
        self.assertEqual(lines[-1]["registrations"], 2)
        for s in (os.path.join(self.root, "device-plugins", "kubelet.sock"), os.path.join(self.root, "pod-resources", "kubelet.sock")):
            self.assertFalse(os.path.exists(s), s)

    def test_unreachable_containerd_is_named(self):
        pod_file = os.path.join(self.tmp, "p.yaml")
        with open(pod_file, "w") as f:
            f.write("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n")
        r = subprocess.run(["/usr/bin/python3", KUBELET, "run-pod", "-f", pod_file, "--state", self.state, "--root", self.root,
                            "--cri", "unix://" + os.path.join(self.tmp, "nothing.sock"), "--timeout", "3"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("containerd not reachable at %s: is it running?" % os.path.join(self.tmp, "nothing.sock"),
                      json.loads(r.stdout)["error"])


if __name__ == "__main__":
    unittest_main()
