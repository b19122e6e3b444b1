#!/usr/bin/python3
"""images/build-images.sh end to end: the OCI archives it writes, and the images they hold.

Builds all four archives twice into a temporary directory and checks: the OCI layout containerd
1.6 imports (index.json annotations and platform, media types, every blob named by its digest,
diff_ids against the uncompressed layers), identical bytes for identical inputs, the image
configs against the Dockerfiles. Then unpacks the images and runs them under chroot, so nothing
comes from the host: erdma-agent and erdma-webhook start with only the image's libraries,
libsmc-preload.so loads into tcp-bulk in the workload image, and tcp-bulk moves data over
127.0.0.1 with a SHA-256 that agrees with sha256sum. With containerd installed, a private
containerd (own root, state and socket under the temporary directory) imports every archive.

Needs the build outputs (erdma-agent, erdma-webhook, smc-preload), root for the chroot checks and
containerd for the import: without one of them the checks that need it are skipped with the
reason, and under CI=true (root; scripts/install-deps.sh installs containerd) fail. Runs on the
shared runner (test/webhook/server/integration/harness.py). Loopback only; every step is bounded
and prints its duration; every process started is stopped and every mount undone on the way out,
and the work directory removed (kept after a failure outside CI, as every suite does).
Runs with Debian's /usr/bin/python3 (python3-yaml reads the manifests).
"""

import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
BUILD_DIR = os.environ.get("ERDMA_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
BUILD_IMAGES = os.path.join(SOURCE_DIR, "images/build-images.sh")
OCI_IMAGE = os.path.join(SOURCE_DIR, "images/oci_image.py")
OUTPUTS = {"agent/erdma-agent": "erdma-agent", "webhook/erdma-webhook": "erdma-webhook",
           "agent/preload/libsmc-preload.so": "smc-preload"}
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/webhook/server/integration"))
from harness import Suite, expect, project_version  # noqa: E402  (the shared runner of the Python suites)

VERSION = project_version()
REFS = {
    "erdma-agent": "registry.example.com/erdma-controller/erdma-agent:" + VERSION,
    "erdma-webhook": "registry.example.com/erdma-controller/erdma-webhook:" + VERSION,
    "pause": "localhost/erdma-controller/pause:1",
    "workload": "localhost/erdma-controller/workload:1",
}

ENTRYPOINTS = {"erdma-agent": ["/usr/bin/erdma-agent"], "erdma-webhook": ["/usr/bin/erdma-webhook"],
               "pause": ["/pause"], "workload": ["/bin/sh"]}


def run(args, timeout=120, **kw):
    """subprocess.run with text output captured and a bound."""
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


class Archive:
    """An OCI archive read into memory: {member name: bytes}, plus its tar headers."""

    def __init__(self, path):
        self.path = path
        self.files, self.headers = {}, []
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                self.headers.append(m)
                if m.isfile():
                    self.files[m.name] = tar.extractfile(m).read()

    def blob(self, digest):
        expect(digest.startswith("sha256:"), "digest %s is not sha256" % digest)
        name = "blobs/sha256/" + digest[len("sha256:"):]
        expect(name in self.files, "%s: no blob %s" % (self.path, name))
        return self.files[name]

    def index(self):
        return json.loads(self.files["index.json"])

    def manifest(self):
        d = self.index()["manifests"][0]
        return json.loads(self.blob(d["digest"]))

    def config(self):
        return json.loads(self.blob(self.manifest()["config"]["digest"]))

    def layer_tar(self):
        return gzip.decompress(self.blob(self.manifest()["layers"][0]["digest"]))


def check_layout(path, image):
    a = Archive(path)
    expect(json.loads(a.files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}, "oci-layout")
    for name, data in a.files.items():
        if name.startswith("blobs/sha256/"):
            expect(sha256_hex(data) == name.rsplit("/", 1)[1], "%s: blob %s does not match its name" % (path, name))
    for h in a.headers:
        expect(h.uid == 0 and h.gid == 0 and h.mtime == 0, "%s: %s is %d:%d, mtime %d" % (path, h.name, h.uid, h.gid, h.mtime))
    index = a.index()
    expect(index["schemaVersion"] == 2 and index["mediaType"] == "application/vnd.oci.image.index.v1+json", index)
    expect(len(index["manifests"]) == 1, "one manifest per archive: %s" % index)
    d = index["manifests"][0]
    ref = REFS[image]
    expect(d["mediaType"] == "application/vnd.oci.image.manifest.v1+json", d)
    expect(d["platform"] == {"architecture": "amd64", "os": "linux"}, d)
    expect(d["annotations"] == {"io.containerd.image.name": ref,
                                "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1]}, d["annotations"])
    expect(d["size"] == len(a.blob(d["digest"])), "manifest size")
    m = a.manifest()
    expect(m["schemaVersion"] == 2 and m["mediaType"] == "application/vnd.oci.image.manifest.v1+json", m)
    expect(m["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json", m["config"])
    expect(m["config"]["size"] == len(a.blob(m["config"]["digest"])), "config size")
    expect(len(m["layers"]) == 1 and m["layers"][0]["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip",
           m["layers"])
    expect(m["layers"][0]["size"] == len(a.blob(m["layers"][0]["digest"])), "layer size")
    c = a.config()
    expect(c["architecture"] == "amd64" and c["os"] == "linux", "config platform")
    layer = a.layer_tar()
    expect(c["rootfs"] == {"type": "layers", "diff_ids": ["sha256:" + sha256_hex(layer)]},
           "diff_ids %s, uncompressed layer sha256:%s" % (c["rootfs"], sha256_hex(layer)))
    expect(c["config"]["Entrypoint"] == ENTRYPOINTS[image], c["config"])
    expect(any(e.startswith("PATH=") for e in c["config"]["Env"]), c["config"]["Env"])
    expect(c["history"] and c["history"][0]["created_by"], c["history"])
    import io
    with tarfile.open(fileobj=io.BytesIO(layer)) as t:
        names = [m.name for m in t.getmembers()]
        bad = [(m.name, m.uid, m.gid, m.mtime) for m in t.getmembers() if m.uid or m.gid or m.mtime]
    expect(not bad, "layer entries not 0:0 at time 0: %s" % bad[:5])
    expect(names == sorted(names, key=lambda n: n.split("/")), "layer entries are not sorted")
    expect(not [n for n in names if n.startswith(("usr/share/doc/", "usr/share/man/"))], "docs in the layer")
    print("  %s: %s, %d entries, %.1f MiB" % (os.path.basename(path), ref, len(names), os.path.getsize(path) / 1048576))


def dockerfile_final_stage(image):
    """{instruction: [arguments]} of the last stage of images/IMAGE/Dockerfile."""
    out = {}
    with open(os.path.join(SOURCE_DIR, "images", image, "Dockerfile")) as f:
        text = re.sub(r"\\\n", " ", f.read())
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "FROM":
            out = {}
        elif word and not word.startswith("#"):
            out.setdefault(word, []).append(rest.strip())
    return out


def check_config_matches_dockerfile(path, image):
    cfg = Archive(path).config()["config"]
    df = dockerfile_final_stage(image)
    expect(cfg["Entrypoint"] == json.loads(df["ENTRYPOINT"][-1]), "Entrypoint %s, Dockerfile %s" % (cfg["Entrypoint"], df["ENTRYPOINT"]))
    expect(cfg.get("Cmd") == json.loads(df["CMD"][-1]), "Cmd %s, Dockerfile %s" % (cfg.get("Cmd"), df["CMD"]))
    expect(cfg.get("User") == (df["USER"][-1] if "USER" in df else None), "User %s, Dockerfile %s" % (cfg.get("User"), df.get("USER")))
    ports = {p if "/" in p else p + "/tcp" for arg in df.get("EXPOSE", []) for p in arg.split()}
    expect(set(cfg.get("ExposedPorts", {})) == ports, "ExposedPorts %s, Dockerfile %s" % (cfg.get("ExposedPorts"), ports))
    expect(cfg["Labels"]["org.opencontainers.image.version"] == VERSION, cfg["Labels"])


def unpack(archive, root):
    """Extracts the image's layer into root with GNU tar (symlinks stay inside root under chroot)."""
    os.makedirs(root)
    layer = os.path.join(os.path.dirname(root), os.path.basename(root) + ".layer.tgz")
    with open(layer, "wb") as f:
        a = Archive(archive)
        f.write(a.blob(a.manifest()["layers"][0]["digest"]))
    r = run(["tar", "-xzf", layer, "-C", root], timeout=120)
    os.unlink(layer)
    expect(r.returncode == 0, "tar -x %s: %s" % (archive, r.stderr))


def chroot(root, *args, timeout=60, user=None, **kw):
    cmd = ["/usr/sbin/chroot"] + (["--userspec=" + user] if user else []) + [root] + list(args)
    return run(cmd, timeout=timeout, env={"PATH": "/usr/bin:/bin"}, **kw)


def resolve_in_root(root, path, depth=0):
    """The host path of path inside root, symlinks (absolute ones too) followed within root."""
    expect(depth < 40, "symlink loop at %s" % path)
    cur = root
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        nxt = os.path.join(cur, part)
        if os.path.islink(nxt):
            target = os.readlink(nxt)
            base = "/" + os.path.relpath(cur, root) if cur != root else "/"
            full = os.path.normpath(target if target.startswith("/") else os.path.join(base, target))
            return resolve_in_root(root, "/".join([full] + parts[i + 1:]), depth + 1)
        cur = nxt
    return cur


def manifest_programs(image):
    """Every program the manifests in manifests/base run in the image: container commands and
    exec hooks and probes."""
    import yaml  # Debian's python3-yaml, as in test_dockerfiles.py
    ref_prefix = REFS[image].rsplit(":", 1)[0] + ":"
    programs = set()
    base = os.path.join(SOURCE_DIR, "manifests/base")
    for fn in sorted(os.listdir(base)):
        if not fn.endswith(".yaml"):
            continue
        with open(os.path.join(base, fn)) as f:
            for doc in yaml.safe_load_all(f):
                pod = ((doc or {}).get("spec", {}).get("template") or {}).get("spec") or {}
                for c in pod.get("containers", []) + pod.get("initContainers", []):
                    if not c.get("image", "").startswith(ref_prefix):
                        continue
                    if c.get("command"):
                        programs.add(c["command"][0])
                    hooks = list((c.get("lifecycle") or {}).values()) + \
                        [c.get(k) or {} for k in ("livenessProbe", "readinessProbe", "startupProbe")]
                    for h in hooks:
                        cmd = (h.get("exec") or {}).get("command") or []
                        if cmd:
                            programs.add(cmd[0])
    return programs


def check_manifest_programs(root, image):
    programs = manifest_programs(image)
    expect(programs, "manifests/base runs nothing from %s" % REFS[image])
    for prog in sorted(programs):
        host = resolve_in_root(root, prog)
        expect(os.path.isfile(host) and os.access(host, os.X_OK), "%s runs %s, which %s lacks" % (
            "manifests/base", prog, image))
        print("  %s: %s is in the image" % (image, prog))


def loader_error(r):
    return "error while loading shared libraries" in r.stderr or r.returncode == 127


class ChrootServer:
    """`tcp-bulk serve` in the workload rootfs on 127.0.0.1; port from --port-file."""

    def __init__(self, root, *extra):
        self.root = root
        port_file = os.path.join(root, "tmp/port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.out = open(os.path.join(os.path.dirname(root), "serve.out"), "w+")
        self.proc = subprocess.Popen(["/usr/sbin/chroot", root, "/usr/bin/tcp-bulk", "serve", "--bind", "127.0.0.1",
                                      "--port", "0", "--port-file", "/tmp/port", *extra],
                                     stdout=self.out, stderr=subprocess.PIPE, text=True,
                                     env={"PATH": "/usr/bin:/bin"}, start_new_session=True)
        deadline = time.monotonic() + 15
        while not os.path.exists(port_file):
            if self.proc.poll() is not None:
                raise AssertionError("tcp-bulk serve exited with %d: %s" % (self.proc.returncode, self.proc.stderr.read()))
            if time.monotonic() > deadline:
                raise AssertionError("tcp-bulk serve wrote no port file within 15 s")
            time.sleep(0.02)
        with open(port_file) as f:
            self.port = int(f.read())

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc.stderr.close()
        self.out.seek(0)
        lines = [json.loads(l) for l in self.out if l.strip()]
        self.out.close()
        return lines


def free_port():
    """A loopback port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class FakeServer(threading.Thread):
    """A loopback server that reads until EOF and answers with reply (None: never answers)."""

    def __init__(self, reply):
        super().__init__(daemon=True)
        self.reply = reply
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.sock.settimeout(30)
        self.port = self.sock.getsockname()[1]
        self.done = threading.Event()
        self.start()

    def run(self):
        try:
            c, _ = self.sock.accept()
        except OSError:
            return
        with c:
            c.settimeout(30)
            try:
                while c.recv(65536):
                    pass
                if self.reply is None:
                    self.done.wait(30)
                else:
                    c.sendall(self.reply)
            except OSError:
                pass

    def close(self):
        self.done.set()
        self.sock.close()
        self.join(35)


def main(suite):
    missing = [(rel, target) for rel, target in OUTPUTS.items() if not os.path.isfile(os.path.join(BUILD_DIR, rel))]
    if missing:
        suite.skip("build the images", "build outputs missing in %s: %s; build them: cmake --build %s --target %s" % (
            BUILD_DIR, " ".join(r for r, _ in missing), BUILD_DIR, " ".join(t for _, t in missing)))
        return

    work = suite.workdir
    started = []  # processes to stop on the way out
    try:
        env = dict(os.environ)
        env.pop("SOURCE_DATE_EPOCH", None)
        out_a, out_b = os.path.join(work, "a"), os.path.join(work, "b")
        archives = {i: os.path.join(out_a, i + ".tar") for i in REFS}

        def build(out, *images, extra_env=None):
            r = run([BUILD_IMAGES, "--build-dir", BUILD_DIR, "--out", out, *images], timeout=900,
                    env=dict(env, **(extra_env or {})))
            sys.stdout.write(r.stdout)
            expect(r.returncode == 0, "build-images.sh failed (%d): %s" % (r.returncode, r.stderr))
            return r

        def build_all():
            build(out_a)
            expect(sorted(os.listdir(out_a)) == sorted(os.path.basename(p) for p in archives.values()),
                   "archives in %s: %s (no temporary files may stay)" % (out_a, os.listdir(out_a)))
        suite.check("build-images.sh writes the four archives", build_all)
        if not all(os.path.exists(p) for p in archives.values()):
            return

        for image, path in archives.items():
            suite.check("%s: OCI layout, digests and diff_ids" % image, check_layout, path, image)
        for image in ("erdma-agent", "erdma-webhook"):
            suite.check("%s: config agrees with its Dockerfile" % image, check_config_matches_dockerfile,
                        archives[image], image)

        def reproducible():
            build(out_b)
            for image, path in archives.items():
                other = os.path.join(out_b, os.path.basename(path))
                with open(path, "rb") as f1, open(other, "rb") as f2:
                    expect(sha256_hex(f1.read()) == sha256_hex(f2.read()), "%s differs between two builds" % image)
        suite.check("the same inputs give byte-identical archives", reproducible)

        def epoch_honoured():
            out_c = os.path.join(work, "c")
            build(out_c, "pause", extra_env={"SOURCE_DATE_EPOCH": "86400"})
            a, b = Archive(archives["pause"]), Archive(os.path.join(out_c, "pause.tar"))
            expect(a.manifest()["layers"][0]["digest"] != b.manifest()["layers"][0]["digest"], "same layer digest")
            with tarfile.open(fileobj=__import__("io").BytesIO(b.layer_tar())) as t:
                expect([m.mtime for m in t.getmembers()] == [86400], "layer mtimes")
        suite.check("SOURCE_DATE_EPOCH dates the layer", epoch_honoured)

        def errors_are_clear():
            empty = os.path.join(work, "empty-build")
            os.makedirs(empty)
            r = run([BUILD_IMAGES, "--build-dir", empty, "--out", os.path.join(work, "x"), "erdma-agent"])
            expect(r.returncode == 1 and "cmake --build %s --target erdma-agent" % empty in r.stderr, r.stderr)
            r = run([BUILD_IMAGES, "--out", os.path.join(work, "x"), "no-such-image"])
            expect(r.returncode == 2 and "unknown image" in r.stderr, r.stderr)
            r = run(["/usr/bin/python3", OCI_IMAGE, "--out", os.path.join(work, "x", "p.tar"), "--ref", "a/b:1",
                     "--package", "erdma-no-such-package"])
            expect(r.returncode == 1 and "erdma-no-such-package" in r.stderr and "scripts/install-deps.sh" in r.stderr,
                   r.stderr)
        suite.check("missing build output, unknown image, missing package: clear errors", errors_are_clear)

        if os.geteuid() != 0:
            suite.skip("images run under chroot", "chroot needs root (uid %d)" % os.geteuid())
            return

        roots = {}
        for image in ("erdma-agent", "erdma-webhook", "workload"):
            roots[image] = os.path.join(work, "rootfs-" + image)
            suite.check("%s: unpack the layer" % image, unpack, archives[image], roots[image])

        def agent_runs():
            root = roots["erdma-agent"]
            r = chroot(root, "/usr/bin/erdma-agent", "--help")
            expect(r.returncode == 0 and "Usage: erdma-agent" in r.stdout, "erdma-agent --help: %d %s" % (r.returncode, r.stderr))
            r = chroot(root, "/usr/bin/erdma-agent", "version")
            expect(r.returncode == 0 and VERSION in r.stdout, "erdma-agent version: %s %s" % (r.stdout, r.stderr))
            # Device discovery loads libibverbs and reads /etc/libibverbs.d; with no RDMA device here
            # it reports none (exit 1), not a loader failure.
            r = chroot(root, "/usr/bin/erdma-agent", "devices")
            expect(not loader_error(r) and r.returncode in (0, 1) and "RDMA" in r.stdout + r.stderr,
                   "erdma-agent devices: %d %s %s" % (r.returncode, r.stdout, r.stderr))
            for p in ("usr/lib/erdma-controller/libsmc-preload.so", "etc/libibverbs.d/erdma.driver",
                      "usr/lib/x86_64-linux-gnu/libibverbs/liberdma-rdmav34.so", "etc/passwd", "tmp"):
                expect(os.path.lexists(os.path.join(root, p)), "/%s is not in the image" % p)
            expect(os.readlink(os.path.join(root, "lib64")) == "usr/lib64", "/lib64 is not the merged-/usr link")
        suite.check("erdma-agent runs from its image alone (chroot)", agent_runs)

        def webhook_runs():
            root = roots["erdma-webhook"]
            r = chroot(root, "/usr/bin/erdma-webhook", "--help")
            expect(r.returncode == 0 and "Usage: erdma-webhook" in r.stdout, "erdma-webhook --help: %d %s" % (r.returncode, r.stderr))
            r = chroot(root, "/usr/bin/erdma-webhook", "version", user="65532:65532")
            expect(r.returncode == 0 and VERSION in r.stdout, "erdma-webhook version as 65532: %s %s" % (r.stdout, r.stderr))
        suite.check("erdma-webhook runs from its image alone (chroot, as its user)", webhook_runs)
        for image in ("erdma-agent", "erdma-webhook"):
            suite.check("%s: every program manifests/base runs in it is there" % image, check_manifest_programs,
                        roots[image], image)

        def webhook_prestop_runs():
            r = chroot(roots["erdma-webhook"], "/bin/sleep", "0", user="65532:65532")
            expect(r.returncode == 0, "/bin/sleep 0 in erdma-webhook: %d %s" % (r.returncode, r.stderr))
        suite.check("erdma-webhook: the preStop /bin/sleep runs", webhook_prestop_runs)

        wl = roots["workload"]

        def busybox_tools():
            r = chroot(wl, "/bin/sh", "-c", "echo hi; ls / >/dev/null; id -u; wc -c </etc/passwd; "
                       "sha256sum /etc/passwd; hostname >/dev/null; stat -c %s /usr/bin/tcp-bulk; "
                       "env | grep -c PATH; sleep 0; cat /etc/group >/dev/null; ps >/dev/null 2>&1; ip -V >/dev/null 2>&1; echo done")
            expect(r.returncode == 0 and r.stdout.startswith("hi\n0\n") and r.stdout.endswith("done\n"), "%s %s" % (r.stdout, r.stderr))
            with open(os.path.join(wl, "etc/passwd"), "rb") as f:
                expect(sha256_hex(f.read()) in r.stdout, "sha256sum output: %s" % r.stdout)
        suite.check("workload: busybox tools", busybox_tools)

        def smcss_runs():
            # This machine's kernel decides the one right answer: with SMC's sock_diag a table (its
            # header at least), without it exit 1 and a message that says so.
            with open("/proc/net/protocols") as f:
                has_smc = any(line.split()[:1] == ["SMC"] for line in f)
            r = chroot(wl, "/usr/bin/smcss", "-a")
            if has_smc:
                expect(r.returncode == 0 and r.stdout.split()[:3] == ["State", "UID", "Inode"], "%d %s %s" % (r.returncode, r.stdout, r.stderr))
            else:
                expect(r.returncode == 1 and r.stdout == "" and "no SMC, or no smc_diag" in r.stderr,
                       "%d %r %r" % (r.returncode, r.stdout, r.stderr))
            r = chroot(wl, "/usr/bin/smcss", "-x")
            expect(r.returncode == 2 and "usage: smcss" in r.stderr, "%d %s" % (r.returncode, r.stderr))
        suite.check("workload: smcss reads SMC sock_diag (or says the kernel has none)", smcss_runs)

        def preload_loads():
            dest = os.path.join(wl, "opt/preload")
            os.makedirs(dest)
            shutil.copy(os.path.join(BUILD_DIR, "agent/preload/libsmc-preload.so"), dest)
            r = chroot(wl, "/usr/bin/env", "LD_PRELOAD=/opt/preload/libsmc-preload.so", "/usr/bin/tcp-bulk", "--help")
            expect(r.returncode == 0 and "tcp-bulk serve" in r.stdout and "cannot be preloaded" not in r.stderr,
                   "%d %s" % (r.returncode, r.stderr))
            r = chroot(wl, "/usr/bin/env", "LD_PRELOAD=/opt/preload/libsmc-preload.so", "LD_TRACE_LOADED_OBJECTS=1",
                       "/usr/bin/tcp-bulk")
            expect(r.returncode == 0 and "/opt/preload/libsmc-preload.so (0x" in r.stdout and "not found" not in r.stdout,
                   "loaded objects: %s %s" % (r.stdout, r.stderr))
        suite.check("workload: libsmc-preload.so loads into tcp-bulk", preload_loads)

        def gen_digest(n):
            gen = subprocess.Popen(["/usr/sbin/chroot", wl, "/usr/bin/tcp-bulk", "gen", "--bytes", str(n)], stdout=subprocess.PIPE)
            r = subprocess.run(["sha256sum"], stdin=gen.stdout, capture_output=True, text=True, timeout=60)
            gen.stdout.close()
            expect(gen.wait(60) == 0 and r.returncode == 0, "tcp-bulk gen --bytes %d | sha256sum" % n)
            return r.stdout.split()[0]

        def bulk_transfer():
            server = ChrootServer(wl)
            started.append(server)
            sizes = [0, 1, 55, 56, 63, 64, 65, 1 << 20, (1 << 20) + 3]
            try:
                for n in sizes:
                    r = chroot(wl, "/usr/bin/tcp-bulk", "send", "--to", "127.0.0.1:%d" % server.port, "--bytes", str(n),
                               "--timeout", "30")
                    expect(r.returncode == 0, "send %d bytes: %d %s" % (n, r.returncode, r.stderr))
                    got = json.loads(r.stdout)
                    want = gen_digest(n)
                    expect(got["bytes"] == n and got["match"] is True and got["sha256"] == want,
                           "send %d: %s, sha256sum of gen %s" % (n, got, want))
                    expect(set(got) == {"bytes", "sha256", "match", "seconds", "mib_per_s"}, got)
                    if n == 1 << 20:
                        print("  1 MiB over 127.0.0.1: %.4f s, %.1f MiB/s" % (got["seconds"], got["mib_per_s"]))
            finally:
                lines = server.stop()
                started.remove(server)
            expect([l["bytes"] for l in lines] == sizes, "server saw %s" % lines)
        suite.check("tcp-bulk: serve + send over 127.0.0.1, sha256 equals sha256sum", bulk_transfer)

        def once_and_hold():
            server = ChrootServer(wl, "--once")
            started.append(server)
            try:
                p = subprocess.Popen(["/usr/sbin/chroot", wl, "/usr/bin/tcp-bulk", "send", "--to", "127.0.0.1:%d" % server.port,
                                      "--bytes", "1K", "--hold", "2"], stdout=subprocess.PIPE, text=True)
                started.append(p)
                line = p.stdout.readline()
                expect(json.loads(line)["match"] is True, line)
                expect(p.poll() is None, "send --hold 2 exited right after the exchange")
                expect(p.wait(30) == 0, "send --hold exit status %s" % p.returncode)
                p.stdout.close()
                started.remove(p)
                expect(server.proc.wait(15) == 0, "serve --once did not exit 0 after one connection")
            finally:
                lines = server.stop()
                started.remove(server)
            expect([l["bytes"] for l in lines] == [1024], lines)
        suite.check("tcp-bulk: serve --once exits after one connection; send --hold keeps the socket", once_and_hold)

        def failures_are_clear():
            port = free_port()
            r = chroot(wl, "/usr/bin/tcp-bulk", "send", "--to", "127.0.0.1:%d" % port, "--bytes", "10", "--timeout", "10")
            expect(r.returncode == 1 and "connect to 127.0.0.1:%d: ECONNREFUSED" % port in r.stderr and not r.stdout,
                   "%d %r" % (r.returncode, r.stderr))
            fake = FakeServer(b'{"bytes":10,"sha256":"%s"}\n' % (b"0" * 64))
            try:
                r = chroot(wl, "/usr/bin/tcp-bulk", "send", "--to", "127.0.0.1:%d" % fake.port, "--bytes", "10")
            finally:
                fake.close()
            expect(r.returncode == 1 and json.loads(r.stdout)["match"] is False and "received 10 bytes" in r.stderr,
                   "%d %s %s" % (r.returncode, r.stdout, r.stderr))
            fake = FakeServer(None)
            try:
                r = chroot(wl, "/usr/bin/tcp-bulk", "send", "--to", "127.0.0.1:%d" % fake.port, "--bytes", "10",
                           "--timeout", "1")
            finally:
                fake.close()
            expect(r.returncode == 1 and "timed out" in r.stderr and "--timeout" in r.stderr, "%d %s" % (r.returncode, r.stderr))
            r = chroot(wl, "/usr/bin/tcp-bulk", "send", "--to", "127.0.0.1", "--bytes", "10")
            expect(r.returncode == 2 and "HOST:PORT" in r.stderr, r.stderr)
        suite.check("tcp-bulk: refused, wrong digest, silent server, bad flags fail with clear messages", failures_are_clear)

        def library_check_refuses():
            r = run(["/usr/bin/python3", OCI_IMAGE, "--out", os.path.join(work, "x", "bad.tar"), "--ref", "a/b:1",
                     "--file", os.path.join(wl, "usr/bin/tcp-bulk") + "=/usr/bin/tcp-bulk"])
            expect(r.returncode == 1 and "libc.so.6" in r.stderr and "ld-linux-x86-64.so.2" in r.stderr, r.stderr)
            expect(not os.path.exists(os.path.join(work, "x", "bad.tar")), "an archive was written anyway")
        suite.check("oci_image.py refuses an image that lacks a needed library", library_check_refuses)

        if not (os.path.exists("/usr/bin/containerd") and shutil.which("ctr")):
            suite.skip("ctr import into a private containerd",
                       "containerd is not installed (/usr/bin/containerd, ctr; scripts/install-deps.sh installs it)")
        else:
            suite.check("ctr import into a private containerd", containerd_import, work, archives, started)
    finally:
        for p in started:
            proc = p.proc if isinstance(p, ChrootServer) else p
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL) if isinstance(p, ChrootServer) else proc.kill()
                except ProcessLookupError:
                    pass
                proc.wait(10)
        unmount_under(work)  # suite.finish removes the directory, and no mount may stay under it


def unmount_under(path):
    with open("/proc/self/mounts") as f:
        points = [l.split()[1] for l in f if l.split()[1].startswith(path + "/")]
    for p in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", p], timeout=30)


def containerd_import(work, archives, started):
    d = os.path.join(work, "ctr")
    os.makedirs(d)
    sock = os.path.join(d, "c.sock")
    with open(os.path.join(d, "config.toml"), "w") as f:
        f.write('version = 2\nroot = "%s/root"\nstate = "%s/state"\n[grpc]\n  address = "%s"\n'
                '[plugins."io.containerd.internal.v1.opt"]\n  path = "%s/opt"\n' % (d, d, sock, d))
    log = open(os.path.join(d, "containerd.log"), "wb")
    proc = subprocess.Popen(["/usr/bin/containerd", "--config", os.path.join(d, "config.toml")],
                            stdout=log, stderr=log)
    started.append(proc)
    try:
        t0 = time.monotonic()
        while True:
            expect(proc.poll() is None, "containerd exited with %s" % proc.returncode)
            expect(time.monotonic() - t0 < 30, "containerd did not answer within 30 s")
            if os.path.exists(sock) and run(["ctr", "-a", sock, "--timeout", "2s", "version"], timeout=10).returncode == 0:
                break
            time.sleep(0.2)
        print("  containerd up in %.1f s" % (time.monotonic() - t0))
        for image, path in archives.items():
            t1 = time.monotonic()
            r = run(["ctr", "-a", sock, "-n", "k8s.io", "images", "import", path], timeout=300)
            expect(r.returncode == 0, "ctr import %s: %s" % (path, r.stderr))
            print("  imported %s in %.1f s" % (image, time.monotonic() - t1))
        r = run(["ctr", "-a", sock, "-n", "k8s.io", "images", "ls", "-q"], timeout=60)
        names = set(r.stdout.split())
        expect(set(REFS.values()) <= names, "ctr images ls: %s" % sorted(names))
        r = run(["ctr", "-a", sock, "-n", "k8s.io", "images", "check"], timeout=60)
        for ref in REFS.values():
            line = next((l for l in r.stdout.splitlines() if l.startswith(ref + " ")), "")
            expect("complete" in line and line.rstrip().endswith("true"), "ctr images check: %r" % line)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        started.remove(proc)
        log.close()


if __name__ == "__main__":
    # ctest's timeout and Ctrl-C end the run through main's cleanup, not around it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    suite = Suite("build_images")
    try:
        main(suite)
    except BaseException:  # killed, or a bug in the test: nothing to keep
        shutil.rmtree(suite.workdir, ignore_errors=True)
        raise
    suite.finish()
