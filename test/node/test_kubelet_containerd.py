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
# Skips with a printed reason when containerd/runc/ctr are missing (a failure under CI=true once
# scripts/install-deps.sh installs containerd) or when runc cannot start containers on this host.
# Debian's /usr/bin/python3 with python3-grpcio, python3-protobuf, python3-yaml; protoc; root.
import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import kubelet as k  # noqa: E402
from test_kubelet_roundtrip import FakePlugin, wait_for  # noqa: E402

KUBELET = os.path.join(HERE, "kubelet.py")
BUSYBOX = "/usr/bin/busybox"
TOOLS = ("sh", "env", "sleep", "cat", "ls", "echo", "true", "id", "stat", "grep", "mount")


def install_step_provides_containerd():
    try:
        with open(os.path.join(SRC, "scripts", "install-deps.sh")) as f:
            return "containerd" in f.read()
    except OSError:
        return False


def timed(what, fn, *a, **kw):
    t0 = time.monotonic()
    try:
        return fn(*a, **kw)
    finally:
        print("%s: %.2f s" % (what, time.monotonic() - t0), file=sys.stderr, flush=True)


def oci_archive(path, ref, files, entrypoint, env):
    """An OCI image layout tarball with one layer holding `files` ({path: (bytes, mode)} or a symlink
    target given as str), named `ref` for `ctr images import`."""
    layer_io = io.BytesIO()
    with tarfile.open(fileobj=layer_io, mode="w") as t:
        dirs = sorted({os.path.dirname(p) for p in files if os.path.dirname(p)})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            t.addfile(info)
        for p, content in sorted(files.items()):
            info = tarfile.TarInfo(p)
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                t.addfile(info)
            else:
                data, mode = content
                info.size, info.mode = len(data), mode
                t.addfile(info, io.BytesIO(data))
    raw = layer_io.getvalue()
    gz = gzip.compress(raw, mtime=0)
    blobs = {}

    def blob(data):
        d = hashlib.sha256(data).hexdigest()
        blobs[d] = data
        return "sha256:" + d

    layer = blob(gz)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Entrypoint": entrypoint, "Env": env},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}}).encode()
    cfg = blob(config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg, "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer,
                                       "size": len(gz)}]}).encode()
    man = blob(manifest)
    index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": man, "size": len(manifest),
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1]}}]}).encode()
    with tarfile.open(path, "w") as t:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", index)
        for d, data in blobs.items():
            add("blobs/sha256/" + d, data)


class RealContainerd(unittest.TestCase):
    def setUp(self):
        missing = [p for p in ("/usr/bin/containerd", "/usr/bin/ctr", "/usr/bin/containerd-shim-runc-v2", BUSYBOX)
                   if not os.path.exists(p)] + [t for t in ("runc", "protoc", "unshare") if shutil.which(t) is None]
        if missing:
            msg = "missing: %s" % ", ".join(missing)
            if os.environ.get("CI") == "true" and install_step_provides_containerd():
                self.fail(msg + " (scripts/install-deps.sh installs containerd, so CI must have it)")
            self.skipTest(msg)
        if os.geteuid() != 0:
            self.skipTest("needs root to run containerd")
        import grpc  # noqa: F401
        self.tmp = tempfile.mkdtemp(prefix="kctr-")
        self.cgroup_root = "kubelet-py-test-%d" % os.getpid()
        self.containerd = None
        self.serve = None
        self.plugin = None
        self.sock = os.path.join(self.tmp, "c.sock")
        self.addCleanup(self.cleanup)

    # ---- host side ----
    def start_containerd(self):
        t = self.tmp
        for d in ("root", "state", "net.d", "opt", "kroot", "klogs", "kstate"):
            os.makedirs(os.path.join(t, d))
        config = """version = 2
root = "{t}/root"
state = "{t}/state"
[grpc]
  address = "{t}/c.sock"
[ttrpc]
  address = "{t}/c.sock.ttrpc"
[debug]
  level = "info"
[plugins."io.containerd.internal.v1.opt"]
  path = "{t}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/kubelet-py-test/pause:1"
  disable_apparmor = true
  # Lowering oom_score_adj needs CAP_SYS_RESOURCE, which root lacks on some test hosts (the
  # sandbox's -998 then fails in runc's nsexec); keep containers at or above containerd's own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{t}/net.d"
""".format(t=t)
        with open(os.path.join(t, "config.toml"), "w") as f:
            f.write(config)
        self.log = open(os.path.join(t, "containerd.log"), "w")
        # A private mount namespace with a fresh /run: the shims' sockets (/run/containerd/s/...),
        # runc's state and every rootfs/shm mount stay in it and vanish with its last process.
        script = "mount --make-rprivate / && mount -t tmpfs tmpfs /run && exec /usr/bin/containerd --config %s/config.toml" % t
        self.containerd = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                           stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

        def up():
            if self.containerd.poll() is not None:
                raise AssertionError("containerd exited with %s: %s" % (self.containerd.returncode, self.tail()))
            return os.path.exists(self.sock) and self.ctr("version", check=False).returncode == 0
        timed("containerd start", wait_for, "containerd", up, 60)

    def tail(self):
        with open(os.path.join(self.tmp, "containerd.log")) as f:
            return f.read()[-3000:]

    def ctr(self, *args, check=True):
        r = subprocess.run(["/usr/bin/ctr", "--address", self.sock, "--timeout", "20s", "-n", "k8s.io"] + list(args),
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError("ctr %s: %s" % (" ".join(args), r.stderr))
        return r

    def build_images(self):
        with open(BUSYBOX, "rb") as f:
            bb = f.read()
        files = {"bin/busybox": (bb, 0o755)}
        files.update({"bin/" + tool: "busybox" for tool in TOOLS})
        files["etc/passwd"] = (b"root:x:0:0:root:/:/bin/sh\n", 0o644)
        oci_archive(os.path.join(self.tmp, "busybox.tar"), "localhost/kubelet-py-test/busybox:1", files,
                    ["/bin/sh"], ["PATH=/bin", "IMAGE_ONLY=image"])
        pause = {"bin/busybox": (bb, 0o755), "bin/sleep": "busybox"}
        oci_archive(os.path.join(self.tmp, "pause.tar"), "localhost/kubelet-py-test/pause:1", pause,
                    ["/bin/sleep", "2147483647"], ["PATH=/bin"])
        for name in ("pause.tar", "busybox.tar"):
            timed("ctr import " + name, self.ctr, "images", "import", os.path.join(self.tmp, name))

    def kubelet(self, *argv, expect=0):
        t = self.tmp
        cmd = ["/usr/bin/python3", KUBELET, argv[0], "--state", t + "/kstate", "--root", t + "/kroot",
               "--log-root", t + "/klogs", "--cri", "unix://" + self.sock, "--cgroup-root", self.cgroup_root,
               "--grace", "2"] + list(argv[1:])
        r = timed("kubelet.py " + argv[0], subprocess.run, cmd, capture_output=True, text=True, timeout=180)
        if expect is not None and r.returncode != expect:
            raise AssertionError("%s exited %d\nstdout: %s\nstderr: %s\ncontainerd: %s" % (
                argv, r.returncode, r.stdout, r.stderr, self.tail()))
        return r

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
        if self.containerd is not None:
            if self.containerd.poll() is None:
                os.killpg(self.containerd.pid, signal.SIGTERM)
                try:
                    self.containerd.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.containerd.pid, signal.SIGKILL)
                    self.containerd.wait(10)
            self.log.close()
        self.kill_leftovers()
        for hierarchy in os.listdir("/sys/fs/cgroup"):
            base = os.path.join("/sys/fs/cgroup", hierarchy, self.cgroup_root)
            if os.path.isdir(base):
                for d, _, _ in sorted(os.walk(base), key=lambda x: -len(x[0])):
                    try:
                        os.rmdir(d)
                    except OSError as e:
                        print("cannot remove cgroup %s: %s" % (d, e), file=sys.stderr)
        shutil.rmtree(self.tmp, ignore_errors=True)
        if os.path.exists(self.tmp):
            print("could not remove %s completely" % self.tmp, file=sys.stderr)

    def kill_leftovers(self):
        """Shims and container processes of this containerd only (their command line names our dir)."""
        for _ in range(50):
            pids = []
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == os.getpid():
                    continue
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        cmdline = f.read()
                except OSError:
                    continue
                if self.tmp.encode() in cmdline and b"containerd-shim" in cmdline:
                    pids.append(int(pid))
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)

    def test_host_network_pod_on_real_containerd(self):
        self.start_containerd()
        self.build_images()
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
                print("containerd log (tail):\n" + self.tail(), file=sys.stderr)
                self.skipTest("runc cannot start containers on this host: %s" % err)
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
        ls = json.loads(self.kubelet("exec", "team/smoke", "app", "--", "ls", "/dev/infiniband", "/opt/erdma").stdout)
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
    unittest.main(verbosity=2)
