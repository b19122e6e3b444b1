# A private containerd on this host for tests and benchmarks: its own root, state and socket under a
# directory the caller owns, run inside a private mount namespace with a tmpfs over /run and /var/lib, so the
# host's /run/containerd, /var/lib/containerd and /var/lib/cni are never touched and every mount it makes
# disappears with it. Optionally:
#   private_net: containerd (and so every pod's CNI network) lives in a network namespace of its
#       own with a bridge and host-local IPAM whose state stays under the private /run; the host's
#       network is not changed;
#   device_nodes: character devices that exist only in containerd's view of /dev (an overlay over
#       the host's /dev inside its mount namespace), e.g. /dev/infiniband/uverbs0 on a host with no
#       RDMA, so a device plugin's Allocate answer can be honoured;
#   private_pid: a PID namespace of its own (with its own /proc), whose init is a shell that only
#       waits for containerd; run_inside() starts more processes there (a node agent that must see
#       the pods' processes, their /proc/PID/ns/net, and a /proc/1 it may read). When that init
#       ends, the kernel kills everything left in the namespace.
# Pods' cgroups go under a private --cgroup-root, removed by stop().
#
# Debian's /usr/bin/python3; containerd, runc, ctr (the containerd and runc packages), unshare;
# root.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
KUBELET = os.path.join(HERE, "kubelet.py")
BUSYBOX = "/usr/bin/busybox"
TOOLS = ("sh", "env", "sleep", "cat", "ls", "echo", "true", "id", "stat", "grep", "mount")
WORKLOAD_IMAGE = "localhost/kubelet-py-test/busybox:1"
PAUSE_IMAGE = "localhost/kubelet-py-test/pause:1"


def missing_tools():
    """What this host lacks to run a private containerd (empty: nothing)."""
    return [p for p in ("/usr/bin/containerd", "/usr/bin/ctr", "/usr/bin/containerd-shim-runc-v2", BUSYBOX)
            if not os.path.exists(p)] + [t for t in ("runc", "unshare") if shutil.which(t) is None]


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


def wait_for(what, pred, timeout=30, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


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


def cri_section(opt, pause, netd):
    """The CRI plugin's part of the config, shared with scripts/cluster.sh (containerd-cri.toml)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "containerd-cri.toml")) as f:
        text = f.read()
    return text.replace("@OPT@", opt).replace("@PAUSE@", pause).replace("@NETD@", netd).replace("@CNIBIN@", "/usr/lib/cni")


class PrivateContainerd:
    """One containerd under `tmp` (which the caller creates and removes), with the kubelet stand-in's
    directories beside it: kroot (device-plugins, pod-resources), klogs, kstate."""

    def __init__(self, tmp, cgroup_root, private_net=False, device_nodes=(), private_pid=False):
        self.tmp = tmp
        self.cgroup_root = cgroup_root
        self.private_net = private_net
        self.private_pid = private_pid
        self.device_nodes = list(device_nodes)  # [(path, major, minor)]
        self.sock = os.path.join(tmp, "c.sock")
        self.proc = None
        self.log = None

    def config_toml(self):
        t = self.tmp
        return """version = 2
root = "{t}/root"
state = "{t}/state"
[grpc]
  address = "{t}/c.sock"
[ttrpc]
  address = "{t}/c.sock.ttrpc"
[debug]
  level = "info"
""".format(t=t) + cri_section(opt=t + "/opt", pause=PAUSE_IMAGE, netd=t + "/net.d")

    def namespace_script(self):
        """Run by `unshare` in the new namespaces: the mounts, then containerd."""
        t = self.tmp
        # -n everywhere: util-linux would otherwise record the mounts in /run/mount/utab, and the
        # first ones run while /run is still this machine's.
        # A tmpfs over /var/lib too: the CNI library keeps each pod's result under /var/lib/cni,
        # which would otherwise stay on this machine after the test (containerd's own root and
        # state are under the caller's directory, so nothing else of /var/lib is needed).
        lines = ["set -e", "mount -n --make-rprivate /", "mount -n -t tmpfs tmpfs /run",
                 "mount -n -t tmpfs tmpfs /var/lib"]
        if self.device_nodes:
            # The host's /dev stays as it is: containerd sees an overlay whose upper layer is a
            # tmpfs holding the extra nodes; /dev/pts and /dev/shm are bound back in.
            lines += ["mkdir -p {t}/dev-lower {t}/dev-layer".format(t=t),
                      "mount -n --rbind /dev {t}/dev-lower".format(t=t),
                      "mount -n -t tmpfs tmpfs {t}/dev-layer".format(t=t),
                      "mkdir {t}/dev-layer/up {t}/dev-layer/work".format(t=t),
                      "mount -n -t overlay overlay -o lowerdir={t}/dev-lower,upperdir={t}/dev-layer/up,"
                      "workdir={t}/dev-layer/work /dev".format(t=t)]
            for sub in ("pts", "shm", "mqueue"):
                if os.path.ismount("/dev/" + sub):
                    lines.append("mount -n --rbind {t}/dev-lower/{s} /dev/{s}".format(t=t, s=sub))
            for path, major, minor in self.device_nodes:
                lines += ["mkdir -p %s" % os.path.dirname(path), "mknod -m 666 %s c %d %d" % (path, major, minor)]
        if self.private_net:
            lines.append("ip link set lo up")
        containerd = "/usr/bin/containerd --config %s/config.toml" % t
        if self.private_pid:
            # PID 1 of the namespace gets only the signals it handles: pass SIGTERM on, then end
            # (which takes every process left in the namespace with it).
            lines += [containerd + " &", "pid=$!", "trap 'kill -TERM $pid; wait $pid; exit 0' TERM INT", "wait $pid"]
        else:
            lines.append("exec " + containerd)
        return "\n".join(lines)

    def start(self):
        t = self.tmp
        for d in ("root", "state", "net.d", "opt", "kroot", "klogs", "kstate"):
            os.makedirs(os.path.join(t, d), exist_ok=True)
        with open(os.path.join(t, "config.toml"), "w") as f:
            f.write(self.config_toml())
        if self.private_net:
            # A bridge in containerd's own network namespace; host-local keeps its leases under the
            # private /run.
            with open(os.path.join(t, "net.d", "10-bench.conflist"), "w") as f:
                json.dump({"cniVersion": "1.0.0", "name": "private", "plugins": [
                    {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
                     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]],
                              "dataDir": "/run/cni/ipam"}},
                    {"type": "loopback"}]}, f)
        self.log = open(os.path.join(t, "containerd.log"), "w")
        argv = ["unshare", "--mount", "--propagation", "private"] + (["--net"] if self.private_net else []) + (
            ["--pid", "--fork", "--mount-proc"] if self.private_pid else [])
        self.proc = subprocess.Popen(argv + ["sh", "-c", self.namespace_script()],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("containerd exited with %s: %s" % (self.proc.returncode, self.tail()))
            return os.path.exists(self.sock) and self.ctr("version", check=False).returncode == 0
        timed("containerd start", wait_for, "containerd", up, 60)

    def namespace_init(self):
        """The host PID of the process whose namespaces containerd runs in."""
        if not self.private_pid:
            return self.proc.pid
        with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
            return int(f.read().split()[0])

    def run_inside(self, argv, **popen):
        """Starts `argv` in containerd's mount, network and PID namespaces, in a process group of its
        own (stop it with os.killpg: the signal reaches it, not only nsenter)."""
        ns = ["-m"] + (["-n"] if self.private_net else []) + (["-p"] if self.private_pid else [])
        return subprocess.Popen(["nsenter", "-t", str(self.namespace_init())] + ns + ["--"] + list(argv),
                                start_new_session=True, **popen)

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
        """A busybox workload image and a pause image, built here from the host's busybox."""
        with open(BUSYBOX, "rb") as f:
            bb = f.read()
        files = {"bin/busybox": (bb, 0o755)}
        files.update({"bin/" + tool: "busybox" for tool in TOOLS})
        files["etc/passwd"] = (b"root:x:0:0:root:/:/bin/sh\n", 0o644)
        oci_archive(os.path.join(self.tmp, "busybox.tar"), WORKLOAD_IMAGE, files, ["/bin/sh"],
                    ["PATH=/bin", "IMAGE_ONLY=image"])
        pause = {"bin/busybox": (bb, 0o755), "bin/sleep": "busybox"}
        oci_archive(os.path.join(self.tmp, "pause.tar"), PAUSE_IMAGE, pause, ["/bin/sleep", "2147483647"], ["PATH=/bin"])
        for name in ("pause.tar", "busybox.tar"):
            timed("ctr import " + name, self.ctr, "images", "import", os.path.join(self.tmp, name))

    def kubelet_argv(self, command, *argv):
        t = self.tmp
        return ["/usr/bin/python3", KUBELET, command, "--state", t + "/kstate", "--root", t + "/kroot",
                "--log-root", t + "/klogs", "--cri", "unix://" + self.sock, "--cgroup-root", self.cgroup_root,
                "--grace", "2"] + list(argv)

    def kubelet(self, *argv, expect=0, quiet=False):
        cmd = self.kubelet_argv(*argv)
        if quiet:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        else:
            r = timed("kubelet.py " + argv[0], subprocess.run, cmd, capture_output=True, text=True, timeout=180)
        if expect is not None and r.returncode != expect:
            raise AssertionError("%s exited %d\nstdout: %s\nstderr: %s\ncontainerd: %s" % (
                argv, r.returncode, r.stdout, r.stderr, self.tail()))
        return r

    def stop(self):
        """containerd, its shims and containers, and the pods' cgroups."""
        if self.proc is not None:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(10)
            self.log.close()
            self.proc = None
        self.kill_leftovers()
        self.kill_pod_processes()
        for d in self.pod_cgroups():
            try:
                os.rmdir(d)
            except OSError as e:
                print("cannot remove cgroup %s: %s" % (d, e), file=sys.stderr)

    def kill_leftovers(self):
        """Shims and container processes of this containerd only (their command line names our dir)."""
        def shims():
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
            return pids
        kill_until_gone(shims, "containerd shims of " + self.tmp)

    def pod_cgroups(self):
        """Every cgroup directory under the pods' cgroup root, in every hierarchy, deepest first."""
        found = []
        for hierarchy in os.listdir("/sys/fs/cgroup"):
            base = os.path.join("/sys/fs/cgroup", hierarchy, self.cgroup_root)
            if os.path.isdir(base):
                found += [d for d, _, _ in os.walk(base)]
        return sorted(found, key=lambda d: -len(d))

    def kill_pod_processes(self):
        """Containers still running when containerd stops (it leaves them to their shims by design):
        every process in the pods' cgroups."""
        def in_pod_cgroups():
            pids = set()
            for d in self.pod_cgroups():
                try:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        pids.update(int(p) for p in f.read().split())
                except OSError:
                    continue
            return pids
        kill_until_gone(in_pod_cgroups, "processes in the pods' cgroups under " + self.cgroup_root)


def kill_until_gone(find, what):
    """SIGKILLs the PIDs find() returns until it returns none, for 10 s at most."""
    for _ in range(50):
        pids = find()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    print("still running after 10 s: %s" % what, file=sys.stderr)
