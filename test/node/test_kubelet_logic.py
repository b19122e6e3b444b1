#!/usr/bin/python3
# Unit tests of the pure parts of test/node/kubelet.py: env merge order and effective values,
# volume/mount/device translation, sandbox and security configs, device picking, PodResources view,
# and the translation of the project's real rendered DaemonSet. No sockets, no containerd.
# Debian's /usr/bin/python3 with python3-yaml; run: /usr/bin/python3 test/node/test_kubelet_logic.py
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SRC, "test", "webhook", "server", "integration"))
import kubelet as k  # noqa: E402
from harness import skip_case, unittest_main  # noqa: E402


def pod_with(containers, **spec):
    s = {"containers": containers}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": s}


class EnvMerge(unittest.TestCase):
    def test_pod_spec_value_wins_over_allocate(self):
        c = {"name": "app", "env": [{"name": "SHARED", "value": "from-spec"}, {"name": "OWN", "value": "x"}]}
        pod = pod_with([c])
        alloc = [("aliyun/erdma", {"envs": {"SHARED": "from-allocate", "ONLY_ALLOC": "a"}})]
        sent = k.cri_env(alloc, k.pod_env(pod, c, {}))
        # kubelet's order on the wire: device manager first, pod after, the duplicate kept.
        self.assertEqual(sent, [("SHARED", "from-allocate"), ("ONLY_ALLOC", "a"), ("SHARED", "from-spec"), ("OWN", "x")])
        oci = k.oci_process_env(sent, [], "host1")
        self.assertEqual([e for e in oci if e.startswith("SHARED=")], ["SHARED=from-allocate", "SHARED=from-spec"])
        eff = k.effective_env(oci)
        self.assertEqual(eff["SHARED"], "from-spec")
        self.assertEqual(eff["ONLY_ALLOC"], "a")
        self.assertEqual(eff["HOSTNAME"], "host1")
        self.assertTrue(eff["PATH"].startswith("/usr/local/sbin"))

    def test_pod_path_replaces_containerd_default_in_place(self):
        oci = k.oci_process_env([("PATH", "/bin")], ["PATH=/image/bin"], "h")
        self.assertEqual([e for e in oci if e.startswith("PATH=")], ["PATH=/bin"])

    def test_expansion_sees_pod_variables_not_allocate_ones(self):
        c = {"name": "app", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-$(ALLOC)-$$(A)"}]}
        pod = pod_with([c])
        env = dict(k.pod_env(pod, c, {}))
        self.assertEqual(env["B"], "1-$(ALLOC)-$(A)")

    def test_command_expansion_uses_the_whole_list_last_wins(self):
        c = {"name": "app", "command": ["echo", "$(SHARED)", "$(ONLY_ALLOC)", "$(NOPE)"]}
        cmd, args = k.expand_command(c, [("SHARED", "alloc"), ("ONLY_ALLOC", "a"), ("SHARED", "spec")])
        self.assertEqual(cmd, ["echo", "spec", "a", "$(NOPE)"])
        self.assertEqual(args, [])

    def test_two_resources_setting_one_name_keep_the_first(self):
        env = k.device_env([("r.io/a", {"envs": {"X": "1"}}), ("r.io/b", {"envs": {"X": "2", "Y": "3"}})])
        self.assertEqual(env, [("X", "1"), ("Y", "3")])

    def test_envfrom_then_env_overrides_and_prefix(self):
        cms = {("ns", "defaults"): {"NCCL_IB_HCA": "mlx5", "K": "v"}}
        c = {"name": "app", "envFrom": [{"configMapRef": {"name": "defaults"}}, {"prefix": "P_", "configMapRef": {"name": "defaults"}}],
             "env": [{"name": "NCCL_IB_HCA", "value": "erdma"}]}
        env = dict(k.pod_env(pod_with([c]), c, cms))
        self.assertEqual(env["NCCL_IB_HCA"], "erdma")
        self.assertEqual(env["P_K"], "v")
        self.assertEqual(env["K"], "v")

    def test_missing_configmap_is_an_error_unless_optional(self):
        c = {"name": "app", "envFrom": [{"configMapRef": {"name": "training-defaults"}}]}
        with self.assertRaisesRegex(k.NodeError, "training-defaults.*--configmap"):
            k.pod_env(pod_with([c]), c, {})
        c["envFrom"][0]["configMapRef"]["optional"] = True
        self.assertEqual(k.pod_env(pod_with([c]), c, {}), [])

    def test_value_from(self):
        c = {"name": "app", "env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "ANN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['a/b']"}}},
            {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        ], "resources": {"limits": {"memory": "64Mi"}}}
        pod = pod_with([c])
        pod["metadata"]["annotations"] = {"a/b": "ann"}
        env = dict(k.pod_env(pod, c, {("ns", "c"): {"k": "cmv"}}, pod_ip="10.0.0.5"))
        self.assertEqual(env, {"POD": "p", "IP": "10.0.0.5", "ANN": "ann", "CM": "cmv", "MEM": "64"})

    def test_expand_edge_cases(self):
        look = {"A": "1"}.get
        self.assertEqual(k.expand("$(A)", look), "1")
        self.assertEqual(k.expand("$$(A)", look), "$(A)")
        self.assertEqual(k.expand("$(A", look), "$(A")
        self.assertEqual(k.expand("$x$", look), "$x$")
        self.assertEqual(k.expand("$(B)", look), "$(B)")


class Unsupported(unittest.TestCase):
    def test_fields_are_named(self):
        cases = [
            ({"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}, r"spec.volumes\[0\].secret"),
            ({"volumes": [{"name": "d", "downwardAPI": {}}]}, r"spec.volumes\[0\].downwardAPI"),
        ]
        for spec, pattern in cases:
            pod = pod_with([{"name": "a"}], **spec)
            with self.assertRaisesRegex(k.NodeError, pattern):
                k.check_supported(pod)
        pod = pod_with([{"name": "a", "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}])
        with self.assertRaisesRegex(k.NodeError, r"spec.containers\[0\].env\[0\].valueFrom.secretKeyRef"):
            k.check_supported(pod)
        pod = pod_with([{"name": "a", "lifecycle": {"postStart": {}}}])
        with self.assertRaisesRegex(k.NodeError, r"lifecycle"):
            k.check_supported(pod)

    def test_probes_are_notes(self):
        notes = k.check_supported(pod_with([{"name": "a", "livenessProbe": {"exec": {}}}]))
        self.assertEqual(len(notes), 1)
        self.assertIn("livenessProbe", notes[0])


class MountsAndDevices(unittest.TestCase):
    def test_order_readonly_and_propagation(self):
        pod = pod_with([], volumes=[
            {"name": "cfg", "configMap": {"name": "c"}},
            {"name": "ns", "hostPath": {"path": "/var/run/netns", "type": "DirectoryOrCreate"}},
            {"name": "bi", "hostPath": {"path": "/mnt/bi"}},
            {"name": "scratch", "emptyDir": {}},
        ])
        plan = k.plan_volumes(pod, {("ns", "c"): {"a.yaml": "x"}}, "/r", "U")
        c = {"name": "app", "securityContext": {"privileged": True}, "volumeMounts": [
            {"name": "cfg", "mountPath": "/etc/cfg"},
            {"name": "ns", "mountPath": "/var/run/netns", "mountPropagation": "HostToContainer", "readOnly": True},
            {"name": "bi", "mountPath": "/bi", "mountPropagation": "Bidirectional"},
            {"name": "scratch", "mountPath": "/scratch", "subPath": "sub"},
        ]}
        alloc = [{"container_path": "/opt/lib", "host_path": "/host/lib", "read_only": True}]
        extra = [{"container_path": "/etc/hosts", "host_path": "/r/etc-hosts", "readonly": False, "propagation": "PROPAGATION_PRIVATE"}]
        ms = k.container_mounts(c, plan, alloc, extra)
        self.assertEqual([m["container_path"] for m in ms], ["/opt/lib", "/etc/cfg", "/var/run/netns", "/bi", "/scratch", "/etc/hosts"])
        by = {m["container_path"]: m for m in ms}
        self.assertTrue(by["/opt/lib"]["readonly"])
        self.assertTrue(by["/etc/cfg"]["readonly"])  # configMap volumes are read-only
        self.assertEqual(by["/etc/cfg"]["host_path"], "/r/pods/U/volumes/kubernetes.io~configmap/cfg")
        self.assertEqual(by["/var/run/netns"]["propagation"], "PROPAGATION_HOST_TO_CONTAINER")
        self.assertTrue(by["/var/run/netns"]["readonly"])
        self.assertEqual(by["/bi"]["propagation"], "PROPAGATION_BIDIRECTIONAL")
        self.assertFalse(by["/bi"]["readonly"])
        self.assertEqual(by["/scratch"]["host_path"], "/r/pods/U/volumes/kubernetes.io~empty-dir/scratch/sub")

    def test_bidirectional_needs_privileged_and_volume_must_exist(self):
        pod = pod_with([], volumes=[{"name": "bi", "hostPath": {"path": "/mnt"}}])
        plan = k.plan_volumes(pod, {}, "/r", "U")
        with self.assertRaisesRegex(k.NodeError, "privileged"):
            k.container_mounts({"name": "a", "volumeMounts": [{"name": "bi", "mountPath": "/m", "mountPropagation": "Bidirectional"}]}, plan)
        with self.assertRaisesRegex(k.NodeError, "no volume named 'nope'"):
            k.container_mounts({"name": "a", "volumeMounts": [{"name": "nope", "mountPath": "/m"}]}, plan)

    def test_devices(self):
        devs = k.container_devices([
            {"container_path": "/dev/infiniband/uverbs0", "host_path": "/dev/infiniband/uverbs0", "permissions": "rw"},
            {"container_path": "/dev/infiniband/rdma_cm", "host_path": "/dev/infiniband/rdma_cm", "permissions": ""},
            {"container_path": "/dev/infiniband/uverbs0", "host_path": "/dev/other", "permissions": "rwm"},
        ])
        self.assertEqual(devs, [
            {"container_path": "/dev/infiniband/uverbs0", "host_path": "/dev/infiniband/uverbs0", "permissions": "rw"},
            {"container_path": "/dev/infiniband/rdma_cm", "host_path": "/dev/infiniband/rdma_cm", "permissions": "rwm"},
        ])

    def test_materialize_hostpath_types_and_configmap(self):
        tmp = tempfile.mkdtemp(prefix="kubelet-logic-")
        try:
            sock_path = os.path.join(tmp, "s.sock")
            s = socket.socket(socket.AF_UNIX)
            s.bind(sock_path)
            pod = pod_with([], volumes=[
                {"name": "mk", "hostPath": {"path": os.path.join(tmp, "made", "deep"), "type": "DirectoryOrCreate"}},
                {"name": "sock", "hostPath": {"path": sock_path, "type": "Socket"}},
                {"name": "cfg", "configMap": {"name": "c", "items": [{"key": "k", "path": "sub/file"}]}},
            ])
            plan = k.plan_volumes(pod, {(None, "c"): {"k": "content"}}, tmp, "U")
            k.materialize_volumes(plan)
            s.close()
            self.assertTrue(os.path.isdir(os.path.join(tmp, "made", "deep")))
            with open(os.path.join(plan["cfg"]["host_path"], "sub", "file")) as f:
                self.assertEqual(f.read(), "content")
            for t, path in (("Directory", os.path.join(tmp, "missing")), ("Socket", os.path.join(tmp, "made"))):
                bad = k.plan_volumes(pod_with([], volumes=[{"name": "x", "hostPath": {"path": path, "type": t}}]), {}, tmp, "U")
                with self.assertRaisesRegex(k.NodeError, "type %s" % t):
                    k.materialize_volumes(bad)
            self.assertFalse(os.path.exists(os.path.join(tmp, "missing")))
        finally:
            shutil.rmtree(tmp)


class SandboxAndSecurity(unittest.TestCase):
    def test_host_network_means_node_namespace_and_no_hostname(self):
        pod = pod_with([{"name": "a"}], hostNetwork=True)
        cfg = k.sandbox_config(pod, "U", "/var/log/pods", {"servers": [], "searches": [], "options": []})
        self.assertEqual(cfg["hostname"], "")
        self.assertEqual(cfg["linux"]["security_context"]["namespace_options"], {"network": "NODE", "pid": "CONTAINER", "ipc": "POD"})

    def test_pod_network_sandbox(self):
        pod = pod_with([{"name": "a"}])
        pod["metadata"]["annotations"] = {"network.alibabacloud.com/erdma-smcr": "true"}
        pod["metadata"]["labels"] = {"app": "x"}
        cfg = k.sandbox_config(pod, "U", "/var/log/pods", {"servers": ["1.1.1.1"], "searches": [], "options": []})
        self.assertEqual(cfg["hostname"], "p")
        self.assertEqual(cfg["metadata"], {"name": "p", "uid": "U", "namespace": "ns", "attempt": 0})
        self.assertEqual(cfg["log_directory"], "/var/log/pods/ns_p_U")
        self.assertEqual(cfg["annotations"], {"network.alibabacloud.com/erdma-smcr": "true"})
        self.assertEqual(cfg["labels"]["io.kubernetes.pod.uid"], "U")
        self.assertEqual(cfg["labels"]["app"], "x")
        self.assertEqual(cfg["linux"]["cgroup_parent"], "/kubepods/besteffort/podU")
        self.assertEqual(cfg["linux"]["security_context"]["namespace_options"]["network"], "POD")

    def test_qos_cgroup_parents(self):
        g = pod_with([{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}])
        self.assertEqual(k.cgroup_parent(g, "U"), "/kubepods/podU")
        b = pod_with([{"name": "a", "resources": {"requests": {"cpu": "1"}}}])
        self.assertEqual(k.cgroup_parent(b, "U"), "/kubepods/burstable/podU")
        self.assertEqual(k.cgroup_parent(b, "a-b", "systemd"), "kubepods-burstable-poda_b.slice")

    def test_container_security(self):
        pod = pod_with([], securityContext={"seccompProfile": {"type": "RuntimeDefault"}, "runAsUser": 1000})
        c = {"name": "a", "securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                                              "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}}
        sc = k.container_security(pod, c)
        self.assertEqual(sc["capabilities"], {"add_capabilities": ["NET_ADMIN"], "drop_capabilities": ["ALL"]})
        self.assertEqual(sc["run_as_user"], {"value": 1000})
        self.assertTrue(sc["readonly_rootfs"])
        self.assertTrue(sc["no_new_privs"])
        self.assertEqual(sc["seccomp"], {"profile_type": "RuntimeDefault"})
        self.assertEqual(sc["seccomp_profile_path"], "runtime/default")
        sc = k.container_security(pod_with([]), {"name": "a", "securityContext": {"privileged": True}})
        self.assertTrue(sc["privileged"])
        self.assertEqual(sc["seccomp"], {"profile_type": "Unconfined"})

    def test_resolv_conf_and_dns_policy(self):
        host = k.parse_resolv_conf("# c\nnameserver 10.0.0.2\nsearch a.example b.example\noptions ndots:2\n")
        self.assertEqual(host, {"servers": ["10.0.0.2"], "searches": ["a.example", "b.example"], "options": ["ndots:2"]})
        pod = pod_with([], dnsPolicy="None", dnsConfig={"nameservers": ["192.0.2.1"], "options": [{"name": "ndots", "value": "5"}]})
        self.assertEqual(k.dns_config(pod, host), {"servers": ["192.0.2.1"], "searches": [], "options": ["ndots:5"]})


class DeviceManager(unittest.TestCase):
    def test_pick_devices(self):
        self.assertEqual(k.pick_devices(2, ["d1", "d2", "d3"], {"d1"}, set()), ["d2", "d3"])
        self.assertEqual(k.pick_devices(1, ["d1", "d2", "d3"], set(), set(), preferred=["d3"]), ["d3"])
        self.assertEqual(k.pick_devices(1, ["d1", "d2"], set(), {"d2"}), ["d2"])
        with self.assertRaisesRegex(k.NodeError, "requested 2, available 1"):
            k.pick_devices(2, ["d1", "d2"], {"d1"}, set())

    def test_extended_requests(self):
        c = {"name": "a", "resources": {"limits": {"aliyun/erdma": "2", "cpu": "1", "nvidia.com/gpu": "1"}}}
        self.assertEqual(k.extended_requests(c), {"aliyun/erdma": 2, "nvidia.com/gpu": 1})
        self.assertEqual(k.extended_requests(c, ignore={"nvidia.com/gpu"}), {"aliyun/erdma": 2})

    def test_podresources_leaves_out_ordinary_init_containers(self):
        spec = {"spec": {"initContainers": [{"name": "init"}, {"name": "sidecar", "restartPolicy": "Always"}],
                         "containers": [{"name": "app"}]}}
        pods = {"ns/p": {"name": "p", "namespace": "ns", "spec": spec, "containers": {
            "init": {"devices": {"aliyun/erdma": ["e1"]}}, "sidecar": {"devices": {}},
            "app": {"devices": {"aliyun/erdma": ["e2"]}}}}}
        view = k.podresources_view(pods)
        self.assertEqual(view, [{"name": "p", "namespace": "ns", "containers": [
            {"name": "sidecar", "devices": []},
            {"name": "app", "devices": [{"resource_name": "aliyun/erdma", "device_ids": ["e2"]}]}]}])
        self.assertEqual(k.devices_in_use(pods, "aliyun/erdma"), {"e1", "e2"})


class ProtoCache(unittest.TestCase):
    def setUp(self):
        # Not a class decorator: a skipped class would not see CI=true, where a skip of something
        # the install step provides is a failure.
        if shutil.which("protoc") is None:
            skip_case(self, "protoc not installed (scripts/install-deps.sh installs protobuf-compiler)")
        self.dir = tempfile.mkdtemp(prefix="kubelet-proto-cache-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.old = os.environ.get("KUBELET_STANDIN_PROTO_CACHE")
        os.environ["KUBELET_STANDIN_PROTO_CACHE"] = os.path.join(self.dir, "cache")
        self.addCleanup(self.restore)

    def restore(self):
        if self.old is None:
            os.environ.pop("KUBELET_STANDIN_PROTO_CACHE", None)
        else:
            os.environ["KUBELET_STANDIN_PROTO_CACHE"] = self.old

    def test_compiles_once_then_imports(self):
        m = k.Messages("cri", "dp")
        self.assertTrue(hasattr(m.cri, "RunPodSandboxRequest"))
        entries = os.listdir(os.path.join(self.dir, "cache"))
        self.assertEqual(len(entries), 1, entries)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "cache", entries[0], "podresources_v1_pb2.py")))
        calls = []
        real = k.Messages._compile
        k.Messages._compile = staticmethod(lambda files, out: calls.append(files))
        try:
            m2 = k.Messages("podres")
        finally:
            k.Messages._compile = staticmethod(real)
        self.assertEqual(calls, [], "a second run must not call protoc")
        self.assertTrue(hasattr(m2.podres, "ListPodResourcesRequest"))
        self.assertEqual(os.listdir(os.path.join(self.dir, "cache")), entries)

    def test_unwritable_cache_is_a_clear_error(self):
        blocker = os.path.join(self.dir, "file")
        open(blocker, "w").close()
        os.environ["KUBELET_STANDIN_PROTO_CACHE"] = os.path.join(blocker, "cache")
        with self.assertRaises(k.NodeError) as e:
            k.Messages("cri")
        self.assertIn("not a writable directory", str(e.exception))


class Manifests(unittest.TestCase):
    def test_select_workload_from_stream(self):
        text = """
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: team}
data: {k: v}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: team}
spec:
  template:
    metadata: {annotations: {a: b}}
    spec: {containers: [{name: app, image: img, args: [x]}]}
"""
        docs = k.load_documents(text)
        pod, kind = k.select_pod(docs)
        self.assertEqual(kind, "StatefulSet")
        self.assertEqual(pod["metadata"]["name"], "web-0")
        self.assertEqual(pod["metadata"]["namespace"], "team")
        self.assertEqual(pod["metadata"]["annotations"], {"a": "b"})
        self.assertEqual(k.configmaps_of(docs), {("team", "c"): {"k": "v"}})
        k.apply_overrides(pod, "local:1", {"app": ["sh", "-c", "sleep 1"]})
        self.assertEqual(pod["spec"]["containers"][0], {"name": "app", "image": "local:1", "command": ["sh", "-c", "sleep 1"]})
        with self.assertRaisesRegex(k.NodeError, "no container 'nope'"):
            k.apply_overrides(pod, None, {"nope": ["x"]})
        self.assertEqual(k.parse_command_override('app=["sh","-c","x"]'), ("app", ["sh", "-c", "x"]))
        with self.assertRaisesRegex(k.NodeError, "JSON"):
            k.parse_command_override("app=sh -c x")

    def test_cri_log_decoding(self):
        lines = ["2024-01-01T00:00:00.000000001Z stdout P hel\n", "2024-01-01T00:00:00.000000002Z stdout F lo\n",
                 "2024-01-01T00:00:00.000000003Z stderr F oops\n"]
        self.assertEqual(k.decode_cri_log(lines), "hello\noops\n")
        self.assertEqual(k.decode_cri_log(lines, "stderr"), "oops\n")

    def test_project_daemonset(self):
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            skip_case(self, "kubectl not installed (scripts/install-deps.sh installs it): cannot render manifests/default")
        r = subprocess.run([kubectl, "kustomize", os.path.join(SRC, "manifests", "default")], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        docs = k.load_documents(r.stdout)
        pod, kind = k.select_pod(docs, kind="DaemonSet", name="erdma-agent", namespace="erdma-system")
        self.assertEqual(kind, "DaemonSet")
        k.check_supported(pod)
        cms = k.configmaps_of(docs)
        plan = k.plan_volumes(pod, cms, "/var/lib/kubelet", "U")
        c = pod["spec"]["containers"][0]
        sc = k.container_security(pod, c)
        for cap in ("NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"):
            self.assertIn(cap, sc["capabilities"]["add_capabilities"])
        sb = k.sandbox_config(pod, "U", "/var/log/pods", {"servers": [], "searches": [], "options": []})
        self.assertEqual(sb["hostname"], "")
        self.assertEqual(sb["linux"]["security_context"]["namespace_options"]["network"], "NODE")
        mounts = {m["container_path"]: m for m in k.container_mounts(c, plan)}
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        for vm in c["volumeMounts"]:
            m = mounts[vm["mountPath"]]
            vol = volumes[vm["name"]]
            if "hostPath" in vol:
                self.assertEqual(m["host_path"], vol["hostPath"]["path"], vm)
            self.assertEqual(m["readonly"], bool(vm.get("readOnly")) or "configMap" in vol, vm)
        self.assertEqual(mounts["/var/run/netns"]["propagation"], "PROPAGATION_HOST_TO_CONTAINER")
        cm_name = next(v["configMap"]["name"] for v in pod["spec"]["volumes"] if "configMap" in v)
        self.assertEqual(set(plan["config"]["files"]), set(k.find_configmap(cms, "erdma-system", cm_name)))

    def test_example_with_envfrom_needs_its_configmap(self):
        with open(os.path.join(SRC, "examples", "nccl-statefulset.yaml")) as f:
            docs = k.load_documents(f.read())
        pod, _ = k.select_pod(docs)
        c = pod["spec"]["containers"][0]
        with self.assertRaisesRegex(k.NodeError, "training-defaults"):
            k.pod_env(pod, c, k.configmaps_of(docs))
        env = dict(k.pod_env(pod, c, {("ml-training", "training-defaults"): {"NCCL_DEBUG": "WARN", "X": "1"}}))
        self.assertEqual(env["NCCL_DEBUG"], "INFO")
        self.assertEqual(env["X"], "1")


if __name__ == "__main__":
    unittest_main()
