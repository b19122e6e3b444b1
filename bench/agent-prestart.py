#!/usr/bin/python3
# PreStartContainer at native speed on a real containerd: the time from kubelet's call to the
# agent's answer, over N SMC-R pods started one after another, and the agent's own split of it
# (PodResources, CRI, the pod's network namespace) from its "SMC-R pod setup" log lines.
#
# What runs: a private containerd (test/node/private_containerd.py: its own mount and network
# namespaces, a CNI bridge inside them, /dev/infiniband/uverbs0 only in its view of /dev), the
# kubelet stand-in test/node/kubelet.py (`serve` for registration and PodResources, `run-pod` per
# pod: Allocate, RunPodSandbox, PreStartContainer, CreateContainer, StartContainer), and the real
# `erdma-agent run` with a static device, inside containerd's namespaces so its SMC-R host set-up
# can never change the host's pnet table (the UEID table, which is global, is left alone).
#
# This machine's kernel may lack SMC: then the agent's last step, the pnet entry in the pod's
# namespace, fails where it would have added it, and the hook's time is everything up to that
# point (the lookups, entering the namespace, resolving SMC's netlink family); the setups are
# reported with their result. Exit status 0 when every pod started, every PreStartContainer was
# answered and logged, the agent found each pod's network namespace through CRI, and every setup
# ended as this kernel allows: configured where it has SMC, else failed for want of it. The numbers
# are printed, not judged. The test suite runs it with --pods 3 (ctest bench_agent_prestart_smoke).
# A machine without containerd, runc, the CNI plugins or root, or whose runc cannot start
# containers, prints "skipped" with the reason and exits 77 (ctest: Skipped), except under CI=true,
# where scripts/install-deps.sh provides them, CI runs as root, and a skip is a failure (exit 1).
#
#   sudo /usr/bin/python3 bench/agent-prestart.py --agent build/agent/erdma-agent --pods 50
#
# Debian's /usr/bin/python3 with python3-grpcio, python3-protobuf, python3-yaml; protoc; containerd,
# runc, containernetworking-plugins; root. Everything it starts is stopped and its temporary
# directory removed, also on failure or Ctrl-C.
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(SRC, "test", "node"))
sys.path.insert(0, os.path.join(SRC, "test", "webhook", "server", "integration"))
from harness import running_under_ci  # noqa: E402
from private_containerd import (KUBELET, WORKLOAD_IMAGE, PrivateContainerd,  # noqa: E402
                                install_step_provides_containerd, missing_tools, timed, wait_for)

SMCR_ANNOTATION = "network.alibabacloud.com/erdma-smcr"
NO_SMC = "the kernel has no SMC (module smc not loaded)"  # the agent's reason when it lacks SMC
AF_SMC = 43
RESOURCE = "aliyun/erdma"
# Only in containerd's (and the agent's) view of /dev: what Allocate hands to each container.
DEVICE_NODES = [("/dev/infiniband/uverbs0", 231, 192), ("/dev/infiniband/rdma_cm", 10, 58)]


class Unusable(Exception):
    """This machine cannot run the benchmark (the message says why)."""


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def describe(values, unit="ms"):
    if not values:
        return "none"
    return "p50 %.2f %s, p90 %.2f, p99 %.2f, max %.2f (n=%d)" % (
        statistics.median(values), unit, percentile(values, 90), percentile(values, 99), max(values), len(values))


def agent_config(tmp):
    kroot = os.path.join(tmp, "kroot")
    return {
        "devicePluginDir": os.path.join(kroot, "device-plugins"),
        "podResourcesSocket": os.path.join(kroot, "pod-resources", "kubelet.sock"),
        "criSocket": os.path.join(tmp, "c.sock"),
        "metricsListen": "",
        "slotsPerDevice": 64,
        # ueid "": the UEID table is global, never touch it. No preload install; Allocate mounts an
        # empty directory of ours where the library would be.
        "smcr": {"enabled": True, "ueid": "", "preloadSource": "", "preloadHostDir": os.path.join(tmp, "preload")},
        "devices": {"source": "static", "static": [{"name": "erdma_0", "uverbs": "uverbs0", "netdev": "eth0"}]},
    }


def pod_yaml(name):
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "annotations": {SMCR_ANNOTATION: "true"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "app", "image": WORKLOAD_IMAGE, "command": ["sleep", "100000"],
            "resources": {"limits": {RESOURCE: "1"}}}]}})


def memory_split(pid):
    """(VmRSS KiB, anonymous KiB, [(KiB, file name)] of file pages by file, largest first) from smaps.
    Anonymous includes the copied-on-write pages of file mappings (relocated library data)."""
    by_file, anon, current = {}, 0, None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if not head:
                continue
            if not head[0].endswith(":"):  # a mapping's header: range, perms, offset, dev, inode, path
                current = head[5] if len(head) > 5 and head[5].startswith("/") else None
            elif head[0] == "Rss:" and current:
                by_file[current] = by_file.get(current, 0) + int(head[1])
            elif head[0] == "Anonymous:":
                anon += int(head[1])
                if current:
                    by_file[current] -= int(head[1])
    with open("/proc/%d/status" % pid) as f:
        rss = next((int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")), 0)
    return rss, anon, sorted(((kib, os.path.basename(path)) for path, kib in by_file.items()), reverse=True)


def kernel_has_smc():
    import socket
    try:
        socket.socket(AF_SMC, socket.SOCK_STREAM, 0).close()
        return True
    except OSError:
        return False


def setup_lines(log_path):
    """The agent's "SMC-R pod setup" lines triggered by PreStartContainer, by pod."""
    out = {}
    try:
        with open(log_path) as f:
            for raw in f:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if line.get("msg") == "SMC-R pod setup" and line.get("trigger") == "PreStartContainer":
                    out[line.get("pod", "")] = line
    except OSError:
        pass
    return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="erdma-prestart-")
        self.node = PrivateContainerd(self.tmp, "erdma-prestart-%d" % os.getpid(), private_net=True,
                                      device_nodes=DEVICE_NODES, private_pid=True)
        self.serve = None
        self.agent = None
        self.agent_log = os.path.join(self.tmp, "agent.log")
        self.logs = []  # files the started processes write to

    def stop_process(self, proc, what):
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            print("%s did not stop in 20 s after SIGTERM; killing it" % what, file=sys.stderr)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)

    def cleanup(self):
        self.stop_process(self.agent, "erdma-agent")
        self.stop_process(self.serve, "kubelet.py serve")
        self.node.stop()
        for f in self.logs:
            f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def log_file(self, name):
        self.logs.append(open(os.path.join(self.tmp, name), "w"))
        return self.logs[-1]

    def start(self):
        self.node.start()
        self.node.build_images()
        kstate = os.path.join(self.tmp, "kstate")
        self.serve = subprocess.Popen(["/usr/bin/python3", KUBELET, "serve", "--root", os.path.join(self.tmp, "kroot"),
                                       "--state", kstate, "--seconds", "3600"],
                                      stdout=subprocess.DEVNULL, stderr=self.log_file("serve.log"),
                                      start_new_session=True)
        wait_for("kubelet.py serve", lambda: os.path.exists(os.path.join(kstate, "serve.ready")))
        os.makedirs(os.path.join(self.tmp, "preload"))
        cfg = os.path.join(self.tmp, "agent.json")
        with open(cfg, "w") as f:
            json.dump(agent_config(self.tmp), f)
        # In containerd's namespaces, as a DaemonSet with hostPID and hostNetwork runs on a node: it
        # sees the pods' processes and /proc/1, and its SMC-R host set-up acts on that private
        # network namespace, never on this host's.
        self.agent = self.node.run_inside([os.path.abspath(self.args.agent), "run", "--config", cfg],
                                          stdout=subprocess.DEVNULL, stderr=self.log_file("agent.log"))

        def registered():
            if self.agent.poll() is not None:
                raise AssertionError("erdma-agent exited with %s:\n%s" % (self.agent.returncode, self.tail_agent()))
            plugin = os.path.join(kstate, "plugins", RESOURCE.replace("/", "_") + ".json")
            try:
                with open(plugin) as f:
                    return json.load(f).get("devices")
            except (OSError, ValueError):
                return None
        timed("erdma-agent registration", wait_for, "the agent's registration with kubelet.py", registered, 60)

    def tail_agent(self):
        with open(self.agent_log) as f:
            return f.read()[-3000:]

    def run_pods(self):
        at_kubelet = []
        for i in range(self.args.pods):
            name = "p%03d" % i
            path = os.path.join(self.tmp, name + ".json")
            with open(path, "w") as f:
                f.write(pod_yaml(name))
            r = self.node.kubelet("run-pod", "-f", path, expect=None, quiet=True)
            if r.returncode != 0:
                err = (json.loads(r.stdout or "{}") or {}).get("error", r.stderr[-600:])
                if i == 0 and ("runc" in err or "OCI runtime" in err):
                    raise Unusable("runc cannot start containers on this host: %s" % err)
                raise AssertionError("run-pod %s failed: %s\nagent log:\n%s" % (name, err, self.tail_agent()))
            out = json.loads(r.stdout)
            at_kubelet.append(out["containers"]["app"]["prestart_ms"])
        return at_kubelet

    def report(self, at_kubelet):
        want = {"bench/p%03d" % i for i in range(self.args.pods)}
        lines = wait_for("a setup line for each pod", lambda: (lambda got: got if want <= set(got) else None)(
            setup_lines(self.agent_log)), 30)
        results = {}
        for pod in sorted(want):
            results[lines[pod]["result"]] = results.get(lines[pod]["result"], 0) + 1
        hook = [lines[p]["us"] / 1000 for p in want]
        steps = {k: [lines[p].get(k, 0) / 1000 for p in want] for k in ("podresources_us", "runtime_us", "netns_us")}
        found_netns = sum(1 for p in want if lines[p].get("netns"))
        with open("/proc/%d/task/%d/children" % (self.agent.pid, self.agent.pid)) as f:
            agent_pid = int(f.read().split()[0])  # nsenter's child
        rss, anon, files = memory_split(agent_pid)
        print("pods: %d, started one after another on containerd %s (private, CNI bridge)" % (
            self.args.pods, self.node.ctr("version").stdout.split("Version:")[1].split()[0]))
        print("PreStartContainer at the kubelet stand-in: " + describe(at_kubelet))
        print("in the agent's hook (us field):            " + describe(hook))
        print("  PodResources List:                       " + describe(steps["podresources_us"]))
        print("  CRI ListPodSandbox + PodSandboxStatus:   " + describe(steps["runtime_us"]))
        print("  the pod's network namespace:             " + describe(steps["netns_us"]))
        print("results: " + ", ".join("%s %d" % kv for kv in sorted(results.items())))
        print("pod network namespace found through CRI: %d of %d" % (found_netns, len(want)))
        print("erdma-agent VmRSS after the pods: %.1f MiB, of which anonymous %.1f MiB (heap, stacks, library data) "
              "and file pages, largest: %s" % (rss / 1024, anon / 1024, ", ".join(
                  "%s %.1f" % (name, kib / 1024) for kib, name in files[:8])))
        if results.get("configured", 0) != len(want):
            sample = next(lines[p] for p in sorted(want) if lines[p]["result"] != "configured")
            print("not configured, e.g. %s: %s" % (sample["pod"], sample.get("reason", "")))
        if found_netns != len(want):
            raise AssertionError("the agent did not find every pod's network namespace through CRI")
        # Every setup got as far as this kernel lets it: all the way with SMC, else to the pnet table.
        smc = kernel_has_smc()
        wrong = [(p, lines[p]["result"], lines[p].get("reason", "")) for p in sorted(want)
                 if (lines[p]["result"] != "configured" if smc else
                     (lines[p]["result"], lines[p].get("reason")) != ("failed", NO_SMC))]
        if wrong:
            raise AssertionError("setups that did not end as a kernel %s SMC allows: %s" % (
                "with" if smc else "without", wrong[:3]))


def skip(why):
    """This machine cannot run the benchmark: 77 with the reason, or under CI=true (whose machine
    has what scripts/install-deps.sh installs, and root) 1."""
    if running_under_ci() and install_step_provides_containerd():
        print("cannot run under CI=true, where scripts/install-deps.sh provides these and CI runs as root: " + why,
              file=sys.stderr)
        return 1
    print("skipped: %s" % why)
    return 77


def main():
    ap = argparse.ArgumentParser(description="PreStartContainer at native speed on a real containerd with the real "
                                             "erdma-agent (see the header of this file)")
    ap.add_argument("--agent", default=os.path.join(SRC, "build", "agent", "erdma-agent"))
    ap.add_argument("--pods", type=int, default=50, help="SMC-R pods to start (1-200, default 50)")
    args = ap.parse_args()
    if not 1 <= args.pods <= 200:
        ap.error("--pods must be 1-200")
    missing = missing_tools() + [t for t in ("protoc",) if shutil.which(t) is None]
    missing += [] if os.path.exists("/usr/lib/cni/bridge") else ["/usr/lib/cni/bridge (containernetworking-plugins)"]
    missing += [] if os.access(args.agent, os.X_OK) else [args.agent + " (scripts/build.sh build)"]
    if os.geteuid() != 0:
        missing.append("root (containerd, namespaces)")
    if missing:
        return skip("missing: %s" % ", ".join(missing))
    bench = Bench(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    try:
        bench.start()
        at_kubelet = timed("%d pods" % args.pods, bench.run_pods)
        bench.report(at_kubelet)
    except Unusable as e:
        return skip(str(e))
    finally:
        bench.cleanup()
        print("total: %.1f s" % (time.monotonic() - t0), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
