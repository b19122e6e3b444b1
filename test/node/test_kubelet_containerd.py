#!/usr/bin/python3
# Smoke test of test/node/kubelet.py against a REAL containerd on this host: a private containerd
# (its own root, state and socket under a temporary directory, run inside a private mount
# namespace with a tmpfs over /run, so the host's /run/containerd and /var/lib/containerd are never
# touched and every mount it makes disappears with it), two images built here (a busybox-based
# workload image and a pause image, OCI archives imported with ctr), the fake device plugin of
# test_kubelet_roundtrip.py registered through `kubelet.py serve`, then run-pod of a hostNetwork
# pod, exec `env` (the pod spec's value must beat Allocate's for a name both set), the Allocate
# device and mount inside the container, restart-container, delete-pod; then containerd stopped and
# everything removed (temporary dir, pod cgroups under a private --cgroup-root).
#
# Skips with a printed reason (exit 77) when containerd/runc/ctr are missing, without root, or when
# runc cannot start containers on this host; under CI=true each of these is a failure, since
# scripts/install-deps.sh installs containerd and CI runs as root (harness.skip_case).
# Debian's /usr/bin/python3 with python3-grpcio, python3-protobuf, python3-yaml; protoc; root.
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "test", "webhook", "server", "integration"))
import kubelet as k  # noqa: E402
from harness import skip_case, unittest_main  # noqa: E402
from private_containerd import (KUBELET, PrivateContainerd, install_step_provides_containerd,  # noqa: E402
                                missing_tools, wait_for)
from test_kubelet_roundtrip import FakePlugin  # noqa: E402


class RealContainerd(unittest.TestCase):
    def setUp(self):
        missing = missing_tools() + ([] if shutil.which("protoc") else ["protoc"])
        if missing:
            skip_case(self, "missing: %s" % ", ".join(missing), provided_by_install=install_step_provides_containerd())
        if os.geteuid() != 0:
            skip_case(self, "needs root to run containerd")
        import grpc  # noqa: F401
        self.tmp = tempfile.mkdtemp(prefix="kctr-")
        self.node = PrivateContainerd(self.tmp, "kubelet-py-test-%d" % os.getpid())
        self.serve = None
        self.plugin = None
        self.addCleanup(self.cleanup)

    def ctr(self, *args, check=True):
        return self.node.ctr(*args, check=check)

    def kubelet(self, *argv, expect=0):
        return self.node.kubelet(*argv, expect=expect)

    def cleanup(self):
        if self.serve is not None and self.serve.poll() is None:
            self.serve.send_signal(signal.SIGTERM)
            try:
                self.serve.wait(20)
            except subprocess.TimeoutExpired:
                self.serve.kill()
                self.serve.wait(5)
        if self.plugin is not None:
            self.plugin.stop()
        self.node.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if os.path.exists(self.tmp):
            print("could not remove %s completely" % self.tmp, file=sys.stderr)

    def test_host_network_pod_on_real_containerd(self):
        self.node.start()
        self.node.build_images()
        m = k.Messages("dp")
        self.serve = subprocess.Popen(["/usr/bin/python3", KUBELET, "serve", "--root", self.tmp + "/kroot",
                                       "--state", self.tmp + "/kstate", "--seconds", "600"], stdout=subprocess.DEVNULL)
        wait_for("serve.ready", lambda: os.path.exists(self.tmp + "/kstate/serve.ready"))
        self.plugin = FakePlugin(m.dp, os.path.join(self.tmp, "kroot", "device-plugins", "erdma.sock"))
        self.plugin.start()
        self.plugin.register(os.path.join(self.tmp, "kroot", "device-plugins", "kubelet.sock"))
        wait_for("devices", lambda: (k.read_json(self.tmp + "/kstate/plugins/aliyun_erdma.json", None) or {}).get("devices"))

        pod = os.path.join(self.tmp, "pod.yaml")
        with open(pod, "w") as f:
            f.write("""apiVersion: v1
kind: Pod
metadata:
  name: smoke
  namespace: team
  annotations: {network.alibabacloud.com/erdma-smcr: "true"}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: localhost/kubelet-py-test/busybox:1
    command: [sh, -c, "echo started; exec sleep 100000"]
    env:
    - {name: NCCL_IB_HCA, value: from-spec}
    resources: {limits: {aliyun/erdma: "1"}}
    securityContext: {capabilities: {add: [NET_ADMIN], drop: [ALL]}, readOnlyRootFilesystem: true}
""")
        r = self.kubelet("run-pod", "-f", pod, expect=None)
        if r.returncode != 0:
            err = (json.loads(r.stdout or "{}") or {}).get("error", r.stderr[-400:])
            if "runc" in err or "OCI runtime" in err:  # the runtime itself cannot run containers here
                print("containerd log (tail):\n" + self.node.tail(), file=sys.stderr)
                # A bad device or mount in an Allocate answer reads the same ("OCI runtime create
                # failed"), and CI's machine runs containers for the cluster tests: a failure there.
                skip_case(self, "runc cannot start containers on this host: %s" % err)
            self.fail("run-pod failed: %s\n%s" % (err, r.stderr))
        out = json.loads(r.stdout)
        self.assertEqual(out["netns"], "", "a hostNetwork pod has no netns path")
        self.assertEqual(out["env"]["app"]["NCCL_IB_HCA"], "from-spec")

        env = json.loads(self.kubelet("exec", "team/smoke", "app", "--", "env").stdout)
        self.assertEqual(env["exit_code"], 0)
        lines = env["stdout"].splitlines()
        # The real runtime agrees with kubelet.py's prediction: the pod spec's value wins.
        self.assertIn("NCCL_IB_HCA=from-spec", lines)
        self.assertNotIn("NCCL_IB_HCA=from-allocate", lines)
        self.assertIn("ERDMA_DEVICES=%s" % out["containers"]["app"]["devices"]["aliyun/erdma"][0], lines)
        self.assertIn("IMAGE_ONLY=image", lines)
        # /opt/erdma is the plugin's read-only mount of this machine's /tmp: only its presence is
        # checked, since listing it races with other processes' temporary files (runc's own
        # runc-process* file of this very exec among them).
        ls = json.loads(self.kubelet("exec", "team/smoke", "app", "--", "ls", "-d", "/dev/infiniband/uverbs0",
                                     "/opt/erdma").stdout)
        self.assertEqual(ls["exit_code"], 0, ls)
        self.assertIn("uverbs0", ls["stdout"])
        ro = json.loads(self.kubelet("exec", "team/smoke", "app", "--", "sh", "-c", "echo x > /x", expect=1).stdout)
        self.assertNotEqual(ro["exit_code"], 0, "readOnlyRootFilesystem")
        self.assertEqual(self.kubelet("logs", "team/smoke", "app").stdout, "started\n")

        rs = json.loads(self.kubelet("restart-container", "team/smoke", "app").stdout)
        self.assertEqual(rs["attempt"], 1)
        again = json.loads(self.kubelet("exec", "team/smoke", "app", "--", "env").stdout)
        self.assertIn("NCCL_IB_HCA=from-spec", again["stdout"].splitlines())
        listed = json.loads(self.kubelet("list").stdout)
        self.assertEqual(listed["pods"][0]["state"], "SANDBOX_READY")
        self.assertEqual(listed["pods"][0]["containers"]["app"]["state"], "CONTAINER_RUNNING")

        dl = json.loads(self.kubelet("delete-pod", "team/smoke").stdout)
        self.assertTrue(dl["deleted"])
        self.assertEqual(self.ctr("containers", "list", "-q").stdout.strip(), "")


if __name__ == "__main__":
    unittest_main()
