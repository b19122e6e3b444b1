#!/usr/bin/python3
# A stand-in for kubelet on a test node that runs real containerd: it starts pods the way kubelet
# does, through containerd's CRI, with a real device plugin (erdma-agent) in the loop. Written
# independently of the agent: it shares no code with it and builds its own CRI messages.
#
# Needs Debian's /usr/bin/python3 with python3-grpcio, python3-protobuf and python3-yaml, and
# protoc (protobuf-compiler). The first python3 on PATH may be another interpreter: run this file
# directly or with /usr/bin/python3. Messages are compiled at run time with `protoc --python_out`
# into a temporary directory that is removed again: test/node/cri_subset.proto (CRI runtime.v1),
# test/agent/interop/kubelet_v1beta1.proto (device plugin API) and
# agent/proto/podresources_v1.proto (PodResources v1). Every gRPC method path is spelled out below
# as kubelet uses it. grpc is imported only by the commands that talk gRPC, so the pure functions
# load fast (python + grpc start-up costs about 2.5 s under qemu TCG: one process does a whole pod).
#
# Output: JSON on stdout (one object, or one JSON line per event for `serve`), human logs on
# stderr, exit status 0 = success. Every wait is bounded.
#
# ---- Interface -----------------------------------------------------------------------------------
# Pods are named NAMESPACE/NAME. STATE (default /run/kubelet-standin) keeps what kubelet keeps in
# memory: plugins/<resource with / as _>.json (what `serve` learnt from each device plugin) and
# pods.json (uids, sandbox and container ids, CRI configs, device allocations).
#
#  serve --root /var/lib/kubelet --state DIR [--seconds N] [--keep-plugin-sockets]
#      kubelet's device-plugin Registration (v1beta1) on ROOT/device-plugins/kubelet.sock and its
#      PodResources v1 List on ROOT/pod-resources/kubelet.sock. Like kubelet at start-up it first
#      deletes every socket in ROOT/device-plugins (that is how plugins notice a kubelet restart;
#      --keep-plugin-sockets skips it). After a Register it dials ROOT/device-plugins/<endpoint>,
#      calls GetDevicePluginOptions, keeps ListAndWatch open and writes STATE/plugins/<res>.json
#      ({resource, endpoint, options, devices:[{ID,health,numa}], connected, registrations, ...})
#      whenever it changes. A new Register for the same resource replaces the old endpoint. When the
#      plugin's socket disappears or its stream ends, the plugin is marked disconnected and its
#      devices Unhealthy (kubelet's behaviour); the plugin is expected to register again, which
#      connects afresh. PodResources List answers from STATE/pods.json exactly like kubelet:
#      every pod, its spec.containers (and restartable init containers) with their devices;
#      ordinary init containers are NOT listed. Writes STATE/serve.ready once both sockets serve.
#      SIGTERM/SIGINT or --seconds (default 3600) end it; both sockets are removed.
#
#  run-pod -f FILE [--name NAME] [--namespace NS] [--image REF] [--command CONTAINER=JSON_ARGV]...
#          [--configmap FILE]... [--ignore-resource NAME]... [common options]
#      FILE: YAML or JSON, possibly a multi-document stream: a Pod, or the first Deployment /
#      StatefulSet / DaemonSet / ReplicaSet / Job whose spec.template is used (pod name
#      <workload>-0 unless --name). ConfigMaps in FILE and in --configmap files feed configMap
#      volumes, envFrom and valueFrom. --image replaces every image; --command replaces one
#      container's command and args. Then, in kubelet's order:
#        1. admission (device manager): for each container, init containers first, that requests
#           a resource a plugin registered: pick device ids (GetPreferredAllocation when the plugin
#           offers it; devices of finished init containers are reused first, as kubelet does),
#           Allocate, record the allocation in STATE (PodResources reports it from then on);
#        2. RunPodSandbox with the config kubelet builds (see sandbox_config());
#        3. per container: PreStartContainer when the plugin requires it (30 s, kubelet's budget;
#           its latency is reported), CreateContainer with the config kubelet builds (see
#           container_config()), StartContainer. Init containers run one after another and must
#           exit 0 (--init-timeout, default 120 s) before the next starts.
#      Prints {"pod", "uid", "sandbox_id", "pod_ip", "netns", "containers": {name: {"id",
#      "devices", "allocate", "prestart_ms", "prestart"}}, "env": {container: {name: value as the
#      process sees it}}, "env_sent": {container: [[name, value], ...] in CRI order}}.
#      A resource no plugin registered fails admission, as on a node without it (name it with
#      --ignore-resource to drop it). Pod features this stand-in cannot honour fail with an error
#      naming the field (secret / downwardAPI / projected / PVC volumes, secretKeyRef, lifecycle
#      hooks, subPathExpr, ...). Probes are not run (a note on stderr).
#
#  run-daemonset -f RENDERED.yaml --name erdma-agent --namespace erdma-system [--image REF]
#          [--config-file KEY=PATH]... [--pod-name NAME] [common options]
#      The same flow for the named DaemonSet's template (e.g. `kubectl kustomize manifests/default`
#      output), without device allocation. hostPath types are honoured like kubelet: Directory /
#      File / Socket / CharDevice / BlockDevice must exist, DirectoryOrCreate / FileOrCreate are
#      created. --config-file KEY=PATH replaces key KEY of the ConfigMaps its volumes use.
#
#  exec POD CONTAINER [--timeout S] -- ARGV...  ExecSync; prints {"stdout","stderr","exit_code"};
#                                               exits with the command's exit code
#  logs POD CONTAINER [--stream stdout|stderr|all] [--attempt N]
#                                               the CRI log file as plain text on stdout
#  stop-container POD CONTAINER [--grace S]     StopContainer (grace: the pod's
#                                               terminationGracePeriodSeconds)
#  restart-container POD CONTAINER [--grace S]  as kubelet restarts a crashed container: stop,
#                                               remove, PreStartContainer again, CreateContainer
#                                               with attempt+1 (same allocation), StartContainer
#  delete-pod POD [--keep-logs]                 StopContainer each, StopPodSandbox,
#                                               RemovePodSandbox, release its devices in STATE,
#                                               remove its pod and log directories
#  list                                         pods with uids, sandbox ids and live CRI states
#
#  Common options: --state DIR, --root DIR (/var/lib/kubelet: pod dirs, emptyDir, configMap files,
#  etc-hosts), --log-root DIR (/var/log/pods), --cri unix:///run/containerd/containerd.sock,
#  --cgroup-driver cgroupfs|systemd, --cgroup-root /, --node-name NAME, --timeout S (per CRI call, default 60).
#  KUBELET_STANDIN_PROTO_CACHE=DIR compiles the protos once into DIR and reuses them (saves a protoc
#  run and a compile per command, about a second under qemu TCG); unset, nothing is kept.
#
# ---- Environment variables: who wins when the pod spec and Allocate set the same name -----------
# kubelet (pkg/kubelet/kubelet_pods.go, GenerateRunContainerOptions) starts the container's env
# with what the device manager returns (kl.containerManager.GetResources ->
# pkg/kubelet/cm/devicemanager pod_devices.go deviceRunContainerOptions: the envs of every
# Allocate answer of the container; for a name two resources both set, the first one seen stays
# and the conflict is logged) and then APPENDS makeEnvironmentVariables(): envFrom first, then
# env, each later entry replacing an earlier one of the same name (a Go map, so the order among
# these is unspecified), $(VAR) in values expanded against the pod's own variables only, never
# the Allocate ones. Nothing removes the duplicate: kuberuntime_container.go
# generateContainerConfig copies opts.Envs one-to-one into ContainerConfig.envs, so the CRI
# request carries the name twice, the device plugin's value first.
# containerd's CRI (pkg/cri/server/container_create_linux.go, containerSpec) then builds
# image env + CRI envs and hands it to oci.WithEnv -> replaceOrAppendEnvValues (oci/spec_opts.go):
# it replaces in place only names already in the spec before the call (PATH, HOSTNAME), and
# appends everything else, so both entries reach the OCI spec in that order. runc sets them one
# by one (libcontainer init, populateProcessEnvironment -> os.Setenv), so the LAST one wins.
# Result: THE POD SPEC'S VALUE WINS over Allocate's, in the container's process and in ExecSync;
# Allocate's value only shows where the pod does not set the name. ($(VAR) in command/args is
# expanded against the whole list, last one winning too: kubecontainer.ExpandContainerCommandAndArgs.)
# This script sends the same list (env_sent) and reports the effective values (env).
import argparse
import contextlib
import copy
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
PROTO_FILES = {
    "cri": os.path.join(HERE, "cri_subset.proto"),
    "dp": os.path.join(SRC, "test", "agent", "interop", "kubelet_v1beta1.proto"),
    "podres": os.path.join(SRC, "agent", "proto", "podresources_v1.proto"),
}

DEVICE_PLUGIN_VERSION = "v1beta1"
PRESTART_TIMEOUT_S = 30  # kubelet: pluginapi.KubeletPreStartContainerRPCTimeoutInSecs
PLUGIN_CALL_TIMEOUT_S = 10
DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
CONTAINERD_DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController")


class NodeError(Exception):
    """An error for the user: the message says what is wrong and how to fix it."""


def log(*parts):
    print("kubelet.py %s: %s" % (time.strftime("%H:%M:%S"), " ".join(str(p) for p in parts)),
          file=sys.stderr, flush=True)


# ---- manifests ------------------------------------------------------------------------------------

def load_documents(text, source="input"):
    import yaml
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise NodeError("%s is not valid YAML/JSON: %s" % (source, e))
    out = []
    for d in docs:
        if not isinstance(d, dict):
            raise NodeError("%s: a document is not an object (%r...)" % (source, str(d)[:40]))
        if d.get("kind") == "List":
            out.extend(i for i in d.get("items") or [] if isinstance(i, dict))
        else:
            out.append(d)
    return out


def configmaps_of(docs):
    """ConfigMaps in a stream, keyed by (namespace or None, name)."""
    out = {}
    for d in docs:
        if d.get("kind") == "ConfigMap":
            meta = d.get("metadata") or {}
            out[(meta.get("namespace"), meta.get("name"))] = dict(d.get("data") or {})
    return out


def find_configmap(configmaps, namespace, name):
    if (namespace, name) in configmaps:
        return configmaps[(namespace, name)]
    return configmaps.get((None, name))


def select_pod(docs, kind=None, name=None, namespace=None, pod_name=None):
    """The pod kubelet would run for this stream: (pod dict, kind of the source object)."""
    for d in docs:
        k = d.get("kind")
        meta = d.get("metadata") or {}
        if kind is not None and k != kind:
            continue
        if name is not None and meta.get("name") != name:
            continue
        if namespace is not None and meta.get("namespace", "default") != namespace:
            continue
        if k == "Pod":
            pod = copy.deepcopy(d)
        elif k in WORKLOAD_KINDS or k == "CronJob":
            spec = d.get("spec") or {}
            if k == "CronJob":
                spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
            template = spec.get("template")
            if not isinstance(template, dict):
                raise NodeError("%s %s has no spec.template" % (k, meta.get("name")))
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(template.get("metadata") or {}),
                   "spec": copy.deepcopy(template.get("spec") or {})}
            pod["metadata"]["name"] = "%s-0" % meta.get("name")
            pod["metadata"].setdefault("namespace", meta.get("namespace", "default"))
        else:
            continue
        pod["metadata"].setdefault("namespace", namespace or meta.get("namespace") or "default")
        if namespace is not None:
            pod["metadata"]["namespace"] = namespace
        if pod_name:
            pod["metadata"]["name"] = pod_name
        if not pod["metadata"].get("name"):
            raise NodeError("the pod has no metadata.name: give --name")
        return pod, k
    wanted = " ".join(x for x in (kind or "a Pod or workload", name and "named " + name,
                                  namespace and "in namespace " + namespace) if x)
    raise NodeError("no %s in the input (kinds found: %s)" % (wanted, ", ".join(sorted({str(d.get("kind")) for d in docs})) or "none"))


def apply_overrides(pod, image=None, commands=None):
    spec = pod.setdefault("spec", {})
    all_containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    if image:
        for c in all_containers:
            c["image"] = image
    for name, argv in (commands or {}).items():
        for c in all_containers:
            if c.get("name") == name:
                c["command"] = list(argv)
                c.pop("args", None)
                break
        else:
            raise NodeError("--command %s=...: the pod has no container %r (it has: %s)" % (
                name, name, ", ".join(c.get("name", "?") for c in all_containers)))
    return pod


def parse_command_override(text):
    name, sep, argv = text.partition("=")
    if not sep or not name:
        raise NodeError("--command wants CONTAINER=JSON_ARGV, e.g. app='[\"sh\",\"-c\",\"sleep 1000\"]', got %r" % text)
    try:
        value = json.loads(argv)
    except ValueError as e:
        raise NodeError("--command %s: %r is not a JSON array of strings (%s)" % (name, argv, e))
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise NodeError("--command %s: want a non-empty JSON array of strings, got %r" % (name, argv))
    return name, value


# ---- quantities and QoS ---------------------------------------------------------------------------

_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
           "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18,
           "m": 1e-3, "": 1}


def parse_quantity(q, what="quantity"):
    """A Kubernetes quantity as a float of base units ("500m" -> 0.5, "64Mi" -> 67108864)."""
    m = re.fullmatch(r"\s*([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)\s*(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m|)\s*", str(q))
    if not m:
        raise NodeError("%s %r is not a Kubernetes quantity" % (what, q))
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def container_resources(c):
    """(requests, limits) with the API server's defaulting: a limit without a request is the request."""
    res = c.get("resources") or {}
    limits = dict(res.get("limits") or {})
    requests = dict(res.get("requests") or {})
    for k, v in limits.items():
        requests.setdefault(k, v)
    return requests, limits


def qos_class(pod):
    spec = pod.get("spec") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        requests, limits = container_resources(c)
        for r in ("cpu", "memory"):
            if r in requests or r in limits:
                any_set = True
            if r not in limits or r not in requests or parse_quantity(limits[r]) != parse_quantity(requests[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def cgroup_parent(pod, uid, driver="cgroupfs", root="/"):
    """kubelet's pod cgroup under --cgroup-root (default /): kubepods[/qos]/pod<uid>."""
    qos = qos_class(pod)
    if driver == "systemd":
        u = uid.replace("-", "_")
        if qos == "Guaranteed":
            return "kubepods-pod%s.slice" % u
        return "kubepods-%s-pod%s.slice" % (qos.lower(), u)
    base = "/" + root.strip("/") + "/kubepods" if root.strip("/") else "/kubepods"
    if qos == "Guaranteed":
        return "%s/pod%s" % (base, uid)
    return "%s/%s/pod%s" % (base, qos.lower(), uid)


def linux_resources(pod, c, memory_capacity):
    """LinuxContainerResources as kubelet computes them (cpu shares/quota, memory limit, OOM score)."""
    requests, limits = container_resources(c)
    out = {}
    cpu_req = parse_quantity(requests["cpu"], "cpu request") if "cpu" in requests else 0
    out["cpu_shares"] = max(2, int(cpu_req * 1024)) if cpu_req else 2
    if "cpu" in limits:
        out["cpu_period"] = 100000
        out["cpu_quota"] = max(1000, int(parse_quantity(limits["cpu"], "cpu limit") * 100000))
    if "memory" in limits:
        out["memory_limit_in_bytes"] = int(parse_quantity(limits["memory"], "memory limit"))
    qos = qos_class(pod)
    if qos == "Guaranteed":
        out["oom_score_adj"] = -997
    elif qos == "BestEffort":
        out["oom_score_adj"] = 1000
    else:
        mem_req = parse_quantity(requests["memory"]) if "memory" in requests else 0
        adj = 1000 - int(1000 * mem_req / memory_capacity) if memory_capacity else 999
        out["oom_score_adj"] = min(999, max(2, adj))
    return out


def extended_requests(c, ignore=()):
    """Extended resources a container asks for: {resource: count} (limits, as the device manager uses)."""
    _, limits = container_resources(c)
    out = {}
    for k, v in limits.items():
        if k in ("cpu", "memory", "ephemeral-storage") or k.startswith("hugepages-") or k in ignore:
            continue
        if "/" not in k:
            continue
        n = parse_quantity(v, "resource %s" % k)
        if n != int(n) or n < 0:
            raise NodeError("container %s: %s: %s is not a whole number of devices" % (c.get("name"), k, v))
        if n:
            out[k] = int(n)
    return out


# ---- supported features ---------------------------------------------------------------------------

SUPPORTED_VOLUMES = ("hostPath", "emptyDir", "configMap")


def check_supported(pod):
    """Raise a NodeError naming the first pod field this stand-in cannot honour; return notes."""
    spec = pod.get("spec") or {}
    notes = []
    for i, v in enumerate(spec.get("volumes") or []):
        kinds = [k for k in v if k != "name"]
        for k in kinds:
            if k not in SUPPORTED_VOLUMES:
                raise NodeError("spec.volumes[%d].%s (volume %r) is not supported by this stand-in kubelet "
                                "(supported: %s)" % (i, k, v.get("name"), ", ".join(SUPPORTED_VOLUMES)))
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            where = "spec.%s[%d]" % (field, i)
            if c.get("lifecycle"):
                raise NodeError("%s.lifecycle (container %r): postStart/preStop hooks are not supported" % (where, c.get("name")))
            if c.get("volumeDevices"):
                raise NodeError("%s.volumeDevices (container %r) is not supported" % (where, c.get("name")))
            for j, m in enumerate(c.get("volumeMounts") or []):
                if m.get("subPathExpr"):
                    raise NodeError("%s.volumeMounts[%d].subPathExpr is not supported" % (where, j))
            for j, ef in enumerate(c.get("envFrom") or []):
                if "secretRef" in ef:
                    raise NodeError("%s.envFrom[%d].secretRef is not supported (no secrets here)" % (where, j))
            for j, e in enumerate(c.get("env") or []):
                vf = e.get("valueFrom") or {}
                if "secretKeyRef" in vf:
                    raise NodeError("%s.env[%d].valueFrom.secretKeyRef (%s) is not supported (no secrets here)" % (
                        where, j, e.get("name")))
                if "fileKeyRef" in vf:
                    raise NodeError("%s.env[%d].valueFrom.fileKeyRef (%s) is not supported" % (where, j, e.get("name")))
            sc = c.get("securityContext") or {}
            if sc.get("seLinuxOptions"):
                raise NodeError("%s.securityContext.seLinuxOptions is not supported" % where)
            if sc.get("appArmorProfile"):
                raise NodeError("%s.securityContext.appArmorProfile is not supported" % where)
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if c.get(probe):
                    notes.append("%s.%s is not run by this stand-in kubelet" % (where, probe))
    psc = spec.get("securityContext") or {}
    if psc.get("seLinuxOptions"):
        raise NodeError("spec.securityContext.seLinuxOptions is not supported")
    if spec.get("os", {}).get("name", "linux") != "linux":
        raise NodeError("spec.os.name %r: this node is linux" % spec["os"]["name"])
    return notes


# ---- $(VAR) expansion (kubelet's rules) -----------------------------------------------------------

def expand(text, lookup):
    """Expand $(NAME) references the way kubelet does: $$ is a literal $, an unknown or unclosed
    reference stays as written, a $ before anything else is kept."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "$" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end >= 0:
                    name = text[i + 2:end]
                    value = lookup(name)
                    out.append(value if value is not None else "$(" + name + ")")
                    i = end + 1
                    continue
                out.append("$(")
                i += 2
                continue
            out.append("$" + nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


# ---- environment ----------------------------------------------------------------------------------

def field_ref_value(path, pod, pod_ip, host_ip, node_name):
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", "default"),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": node_name,
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip or "",
        "status.podIPs": pod_ip or "",
        "status.hostIP": host_ip or "",
        "status.hostIPs": host_ip or "",
    }
    if path in simple:
        return simple[path]
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if m:
        return (meta.get(m.group(1)) or {}).get(m.group(2), "")
    raise NodeError("valueFrom.fieldRef.fieldPath %r is not supported" % path)


def resource_field_value(ref, pod, container, node_cpu, node_memory):
    cname = ref.get("containerName")
    if cname:
        target = next((c for c in (pod["spec"].get("containers") or []) + (pod["spec"].get("initContainers") or [])
                       if c.get("name") == cname), None)
        if target is None:
            raise NodeError("resourceFieldRef.containerName %r: no such container" % cname)
    else:
        target = container
    requests, limits = container_resources(target)
    res = ref.get("resource", "")
    kind, _, name = res.partition(".")
    if name not in ("cpu", "memory", "ephemeral-storage") or kind not in ("limits", "requests"):
        raise NodeError("valueFrom.resourceFieldRef.resource %r is not supported" % res)
    table = limits if kind == "limits" else requests
    if name in table:
        value = parse_quantity(table[name])
    elif kind == "limits":  # kubelet defaults a missing limit to node allocatable
        value = node_cpu if name == "cpu" else node_memory
    else:
        value = 0
    divisor = parse_quantity(ref.get("divisor", "1"))
    import math
    return str(int(math.ceil(value / divisor))) if divisor else "0"


def pod_env(pod, container, configmaps, pod_ip="", host_ip="", node_name="", node_cpu=1, node_memory=0):
    """kubelet's makeEnvironmentVariables: envFrom first, then env replacing same names;
    $(VAR) expanded against the variables declared so far. Returns [(name, value)]."""
    ns = (pod.get("metadata") or {}).get("namespace", "default")
    tmp = {}
    cname = container.get("name")
    for i, ef in enumerate(container.get("envFrom") or []):
        ref = ef.get("configMapRef")
        if ref is None:
            continue
        data = find_configmap(configmaps, ns, ref.get("name"))
        if data is None:
            if ref.get("optional"):
                continue
            raise NodeError("container %s: envFrom[%d].configMapRef %s/%s not found: add the ConfigMap to the "
                            "input stream or pass it with --configmap FILE" % (cname, i, ns, ref.get("name")))
        prefix = ef.get("prefix", "")
        for k, v in data.items():
            tmp[prefix + k] = str(v)

    def lookup(name):
        return tmp.get(name)

    for i, e in enumerate(container.get("env") or []):
        name = e.get("name")
        value = e.get("value", "")
        if value is None:
            value = ""
        value = str(value)
        if value != "":
            value = expand(value, lookup)
        elif e.get("valueFrom"):
            vf = e["valueFrom"]
            if "fieldRef" in vf:
                value = field_ref_value(vf["fieldRef"].get("fieldPath", ""), pod, pod_ip, host_ip, node_name)
            elif "resourceFieldRef" in vf:
                value = resource_field_value(vf["resourceFieldRef"], pod, container, node_cpu, node_memory)
            elif "configMapKeyRef" in vf:
                ref = vf["configMapKeyRef"]
                data = find_configmap(configmaps, ns, ref.get("name"))
                if data is None or ref.get("key") not in data:
                    if ref.get("optional"):
                        continue
                    if data is None:
                        raise NodeError("container %s: env %s: ConfigMap %s/%s not found: add it to the input stream "
                                        "or pass it with --configmap FILE" % (cname, name, ns, ref.get("name")))
                    raise NodeError("container %s: env %s: couldn't find key %s in ConfigMap %s/%s" % (
                        cname, name, ref.get("key"), ns, ref.get("name")))
                value = str(data[ref["key"]])
            else:
                raise NodeError("container %s: env[%d] %s: valueFrom %s is not supported" % (
                    cname, i, name, ",".join(vf)))
        tmp[name] = value
    return list(tmp.items())


def device_env(allocations):
    """The device manager's part of the env: every Allocate answer's envs, in resource order;
    a name set by two resources keeps the first value (pod_devices.go deviceRunContainerOptions)."""
    seen = {}
    out = []
    for resource, resp in allocations:
        for k, v in (resp.get("envs") or {}).items():
            if k in seen:
                if seen[k] != v:
                    log("env %s: %s sets %r, already %r from an earlier resource; keeping the first" % (k, resource, v, seen[k]))
                continue
            seen[k] = v
            out.append((k, v))
    return out


def cri_env(allocations, pod_envs):
    """ContainerConfig.envs as kubelet sends them: device manager's first, then the pod's."""
    return device_env(allocations) + list(pod_envs)


def oci_process_env(cri_envs, image_env=(), hostname=""):
    """The OCI spec's process.env containerd 1.6 writes: its default PATH, HOSTNAME, then image env
    and the CRI envs through replaceOrAppendEnvValues (in-place only for names that were there
    before the call; everything else appended, duplicates included)."""

    def replace_or_append(defaults, overrides):
        index = {e.split("=", 1)[0]: i for i, e in enumerate(defaults)}
        results = list(defaults)
        for value in overrides:
            if "=" not in value:
                if value in index:
                    results[index[value]] = None
                continue
            k = value.split("=", 1)[0]
            if k in index:
                results[index[k]] = value
            else:
                results.append(value)
        return [r for r in results if r is not None]

    env = replace_or_append([CONTAINERD_DEFAULT_PATH], ["HOSTNAME=" + hostname])
    return replace_or_append(env, list(image_env) + ["%s=%s" % kv for kv in cri_envs])


def effective_env(process_env):
    """What the process sees: runc sets the entries in order, so the last of a name wins."""
    out = {}
    for e in process_env:
        k, _, v = e.partition("=")
        out[k] = v
    return out


def expand_command(container, envs):
    """kubecontainer.ExpandContainerCommandAndArgs: $(VAR) against the whole env list, last wins."""
    table = {}
    for k, v in envs:
        table[k] = v
    cmd = [expand(a, table.get) for a in container.get("command") or []]
    args = [expand(a, table.get) for a in container.get("args") or []]
    return cmd, args


# ---- volumes and mounts ---------------------------------------------------------------------------

def pod_dir(root, uid):
    return os.path.join(root, "pods", uid)


def plan_volumes(pod, configmaps, root, uid):
    """Where each volume lives on the host and what must be true or done there (no I/O)."""
    ns = (pod.get("metadata") or {}).get("namespace", "default")
    plan = {}
    for i, v in enumerate((pod.get("spec") or {}).get("volumes") or []):
        name = v.get("name")
        if "hostPath" in v:
            hp = v["hostPath"] or {}
            path = hp.get("path")
            if not path or not path.startswith("/"):
                raise NodeError("spec.volumes[%d] (%s): hostPath.path must be absolute, got %r" % (i, name, path))
            plan[name] = {"kind": "hostPath", "host_path": path, "type": hp.get("type", ""), "read_only": False}
        elif "emptyDir" in v:
            ed = v["emptyDir"] or {}
            plan[name] = {"kind": "emptyDir", "host_path": os.path.join(pod_dir(root, uid), "volumes",
                                                                          "kubernetes.io~empty-dir", name),
                          "medium": ed.get("medium", ""), "size_limit": ed.get("sizeLimit"), "read_only": False}
        elif "configMap" in v:
            cm = v["configMap"] or {}
            data = find_configmap(configmaps, ns, cm.get("name"))
            if data is None:
                if not cm.get("optional"):
                    raise NodeError("volume %s: ConfigMap %s/%s not found: add it to the input stream or pass it "
                                    "with --configmap FILE" % (name, ns, cm.get("name")))
                data = {}
            mode = cm.get("defaultMode", 0o644)
            files = {}
            if cm.get("items"):
                for item in cm["items"]:
                    if item.get("key") not in data:
                        if cm.get("optional"):
                            continue
                        raise NodeError("volume %s: ConfigMap %s/%s has no key %r" % (name, ns, cm.get("name"), item.get("key")))
                    files[item.get("path", item["key"])] = (str(data[item["key"]]), item.get("mode", mode))
            else:
                files = {k: (str(val), mode) for k, val in data.items()}
            for p in files:
                if p.startswith("/") or ".." in p.split("/"):
                    raise NodeError("volume %s: item path %r must be relative without '..'" % (name, p))
            plan[name] = {"kind": "configMap", "configmap": cm.get("name"),
                          "host_path": os.path.join(pod_dir(root, uid), "volumes", "kubernetes.io~configmap", name),
                          "files": files, "read_only": True}
    return plan


_HOSTPATH_CHECK = {
    "Directory": (stat.S_ISDIR, "a directory"),
    "File": (stat.S_ISREG, "a file"),
    "Socket": (stat.S_ISSOCK, "a socket"),
    "CharDevice": (stat.S_ISCHR, "a character device"),
    "BlockDevice": (stat.S_ISBLK, "a block device"),
}


def materialize_volumes(plan):
    """Do on the host what kubelet's volume manager does before the containers start."""
    for name, v in plan.items():
        path = v["host_path"]
        if v["kind"] == "hostPath":
            t = v["type"]
            if t in ("", None):
                continue
            if t == "DirectoryOrCreate":
                if not os.path.exists(path):
                    os.makedirs(path, 0o755)
                elif not os.path.isdir(path):
                    raise NodeError("volume %s: hostPath %s (DirectoryOrCreate) exists but is not a directory" % (name, path))
            elif t == "FileOrCreate":
                if not os.path.exists(path):
                    if not os.path.isdir(os.path.dirname(path)):
                        raise NodeError("volume %s: hostPath %s (FileOrCreate): parent directory missing" % (name, path))
                    with open(path, "a"):
                        pass
                elif not os.path.isfile(path):
                    raise NodeError("volume %s: hostPath %s (FileOrCreate) exists but is not a file" % (name, path))
            elif t in _HOSTPATH_CHECK:
                test, what = _HOSTPATH_CHECK[t]
                try:
                    st = os.stat(path)
                except OSError:
                    raise NodeError("volume %s: hostPath %s (type %s) does not exist: kubelet refuses to start the "
                                    "pod until it does; create it first" % (name, path, t))
                if not test(st.st_mode):
                    raise NodeError("volume %s: hostPath %s (type %s) is not %s" % (name, path, t, what))
            else:
                raise NodeError("volume %s: hostPath type %r is not a Kubernetes hostPath type" % (name, t))
        elif v["kind"] == "emptyDir":
            os.makedirs(path, 0o777, exist_ok=True)
            os.chmod(path, 0o777)
            if v.get("medium") == "Memory" and not os.path.ismount(path):
                opts = "size=%d" % int(parse_quantity(v["size_limit"])) if v.get("size_limit") else "mode=1777"
                run_bounded(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", path], 20, "mount tmpfs for emptyDir " + name)
        elif v["kind"] == "configMap":
            if os.path.isdir(path):
                shutil.rmtree(path)
            os.makedirs(path, 0o755)
            for rel, (content, mode) in v["files"].items():
                target = os.path.join(path, rel)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w") as f:
                    f.write(content)
                os.chmod(target, mode)


PROPAGATION = {None: "PROPAGATION_PRIVATE", "None": "PROPAGATION_PRIVATE",
               "HostToContainer": "PROPAGATION_HOST_TO_CONTAINER", "Bidirectional": "PROPAGATION_BIDIRECTIONAL"}


def container_mounts(container, plan, alloc_mounts=(), extra=()):
    """CRI mounts in kubelet's order: the device manager's (Allocate), then volumeMounts, then
    kubelet's own (etc-hosts, termination log) given as `extra`."""
    out = []
    seen = set()
    for m in alloc_mounts:
        if m["container_path"] in seen:
            continue
        seen.add(m["container_path"])
        out.append({"container_path": m["container_path"], "host_path": m["host_path"],
                    "readonly": bool(m.get("read_only")), "propagation": "PROPAGATION_PRIVATE"})
    cname = container.get("name")
    for j, vm in enumerate(container.get("volumeMounts") or []):
        vol = plan.get(vm.get("name"))
        if vol is None:
            raise NodeError("container %s: volumeMounts[%d]: no volume named %r in spec.volumes" % (cname, j, vm.get("name")))
        mp = vm.get("mountPropagation")
        if mp not in PROPAGATION:
            raise NodeError("container %s: volumeMounts[%d].mountPropagation %r is not valid" % (cname, j, mp))
        if mp == "Bidirectional" and not ((container.get("securityContext") or {}).get("privileged")):
            raise NodeError("container %s: volumeMounts[%d]: Bidirectional propagation needs a privileged "
                            "container (API validation refuses it otherwise)" % (cname, j))
        host = vol["host_path"]
        if vm.get("subPath"):
            sp = vm["subPath"]
            if sp.startswith("/") or ".." in sp.split("/"):
                raise NodeError("container %s: volumeMounts[%d].subPath %r must be relative without '..'" % (cname, j, sp))
            host = os.path.join(host, sp)
        out.append({"container_path": vm.get("mountPath"), "host_path": host,
                    "readonly": bool(vm.get("readOnly")) or vol["read_only"], "propagation": PROPAGATION[mp]})
    mounted = {m["container_path"] for m in out}
    for m in extra:
        if m["container_path"] not in mounted:
            out.append(m)
    return out


def container_devices(alloc_devices):
    """CRI devices from the Allocate DeviceSpecs; a container path seen twice keeps the first."""
    out = []
    seen = set()
    for d in alloc_devices:
        if d["container_path"] in seen:
            continue
        seen.add(d["container_path"])
        out.append({"container_path": d["container_path"], "host_path": d["host_path"],
                    "permissions": d.get("permissions") or "rwm"})
    return out


# ---- security, sandbox and container configs ------------------------------------------------------

def namespace_options(pod):
    spec = pod.get("spec") or {}
    return {"network": "NODE" if spec.get("hostNetwork") else "POD",
            "pid": "NODE" if spec.get("hostPID") else ("POD" if spec.get("shareProcessNamespace") else "CONTAINER"),
            "ipc": "NODE" if spec.get("hostIPC") else "POD"}


def seccomp_profile(profile):
    """CRI SecurityProfile (and the older profile path) for a pod/container seccompProfile."""
    t = (profile or {}).get("type")
    if t == "RuntimeDefault":
        return {"profile_type": "RuntimeDefault"}, "runtime/default"
    if t == "Localhost":
        ref = profile.get("localhostProfile", "")
        return {"profile_type": "Localhost", "localhost_ref": ref}, "localhost/" + ref
    return {"profile_type": "Unconfined"}, "unconfined"


def container_security(pod, c):
    """kubelet's determineEffectiveSecurityContext: container settings over the pod's."""
    psc = (pod.get("spec") or {}).get("securityContext") or {}
    sc = c.get("securityContext") or {}
    out = {"namespace_options": namespace_options(pod)}
    caps = sc.get("capabilities") or {}
    if caps.get("add") or caps.get("drop"):
        out["capabilities"] = {"add_capabilities": list(caps.get("add") or []),
                               "drop_capabilities": list(caps.get("drop") or [])}
    if sc.get("privileged"):
        out["privileged"] = True
    run_as_user = sc.get("runAsUser", psc.get("runAsUser"))
    if run_as_user is not None:
        out["run_as_user"] = {"value": int(run_as_user)}
    run_as_group = sc.get("runAsGroup", psc.get("runAsGroup"))
    if run_as_group is not None:
        out["run_as_group"] = {"value": int(run_as_group)}
    non_root = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
    if non_root:
        if run_as_user is None:
            raise NodeError("container %s: runAsNonRoot without runAsUser: this stand-in cannot read the image's user "
                            "to verify it; set runAsUser" % c.get("name"))
        if int(run_as_user) == 0:
            raise NodeError("container %s: runAsNonRoot and runAsUser 0: kubelet refuses to start it" % c.get("name"))
    if sc.get("readOnlyRootFilesystem"):
        out["readonly_rootfs"] = True
    groups = list(psc.get("supplementalGroups") or [])
    if psc.get("fsGroup") is not None:
        groups.append(int(psc["fsGroup"]))
    if groups:
        out["supplemental_groups"] = groups
    if sc.get("allowPrivilegeEscalation") is not None:
        out["no_new_privs"] = not sc["allowPrivilegeEscalation"]
    profile, path = seccomp_profile(sc.get("seccompProfile") or psc.get("seccompProfile"))
    if sc.get("privileged"):
        profile, path = {"profile_type": "Unconfined"}, "unconfined"
    out["seccomp"] = profile
    out["seccomp_profile_path"] = path
    return out


def parse_resolv_conf(text):
    servers, searches, options = [], [], []
    for line in text.splitlines():
        f = line.split("#", 1)[0].split()
        if not f:
            continue
        if f[0] == "nameserver" and len(f) > 1:
            servers.append(f[1])
        elif f[0] in ("search", "domain"):
            searches = f[1:]
        elif f[0] == "options":
            options.extend(f[1:])
    return {"servers": servers, "searches": searches, "options": options}


def dns_config(pod, host_resolv):
    """No cluster DNS here: kubelet then falls back from ClusterFirst to the node's resolv.conf."""
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy", "ClusterFirst")
    extra = spec.get("dnsConfig") or {}
    if policy == "None":
        base = {"servers": [], "searches": [], "options": []}
    else:
        base = copy.deepcopy(host_resolv)
    base["servers"] += list(extra.get("nameservers") or [])
    base["searches"] += list(extra.get("searches") or [])
    for o in extra.get("options") or []:
        base["options"].append(o["name"] + (":" + str(o["value"]) if o.get("value") is not None else ""))
    return base


def sandbox_config(pod, uid, log_root, dns, cgroup_driver="cgroupfs", attempt=0, cgroup_root="/"):
    """PodSandboxConfig as kubelet's generatePodSandboxConfig builds it."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    name, ns = meta["name"], meta.get("namespace", "default")
    labels = dict(meta.get("labels") or {})
    labels.update({"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": uid})
    host_network = bool(spec.get("hostNetwork"))
    hostname = ""
    if not host_network:  # runc refuses a hostname without a private UTS namespace
        hostname = spec.get("hostname") or name
        hostname = hostname[:63].rstrip("-.")
    psc = spec.get("securityContext") or {}
    sec = {"namespace_options": namespace_options(pod)}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    if any((c.get("securityContext") or {}).get("privileged") for c in containers):
        sec["privileged"] = True
    if psc.get("runAsUser") is not None:
        sec["run_as_user"] = {"value": int(psc["runAsUser"])}
    if psc.get("runAsGroup") is not None:
        sec["run_as_group"] = {"value": int(psc["runAsGroup"])}
    groups = list(psc.get("supplementalGroups") or [])
    if psc.get("fsGroup") is not None:
        groups.append(int(psc["fsGroup"]))
    if groups:
        sec["supplemental_groups"] = groups
    profile, path = seccomp_profile(psc.get("seccompProfile"))
    sec["seccomp"] = profile
    sec["seccomp_profile_path"] = path
    ports = []
    for c in spec.get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                ports.append({"protocol": p.get("protocol", "TCP"), "container_port": int(p["containerPort"]),
                              "host_port": int(p["hostPort"]), "host_ip": p.get("hostIP", "")})
    linux = {"cgroup_parent": cgroup_parent(pod, uid, cgroup_driver, cgroup_root), "security_context": sec}
    sysctls = {s["name"]: str(s["value"]) for s in psc.get("sysctls") or []}
    if sysctls:
        linux["sysctls"] = sysctls
    cfg = {
        "metadata": {"name": name, "uid": uid, "namespace": ns, "attempt": attempt},
        "hostname": hostname,
        "log_directory": os.path.join(log_root, "%s_%s_%s" % (ns, name, uid)),
        "dns_config": dns,
        "port_mappings": ports,
        "labels": labels,
        "annotations": dict(meta.get("annotations") or {}),
        "linux": linux,
    }
    return cfg


def container_hash(c):
    return "%08x" % (int(hashlib.sha256(json.dumps(c, sort_keys=True).encode()).hexdigest()[:8], 16))


def container_config(pod, uid, c, attempt, envs, mounts, devices, alloc_annotations, memory_capacity):
    """ContainerConfig as kubelet's generateContainerConfig builds it."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    name = c["name"]
    command, args = expand_command(c, envs)
    annotations = dict(alloc_annotations)
    annotations.update({
        "io.kubernetes.container.hash": container_hash(c),
        "io.kubernetes.container.restartCount": str(attempt),
        "io.kubernetes.container.terminationMessagePath": c.get("terminationMessagePath", DEFAULT_TERMINATION_MESSAGE_PATH),
        "io.kubernetes.container.terminationMessagePolicy": c.get("terminationMessagePolicy", "File"),
        "io.kubernetes.pod.terminationGracePeriod": str(spec.get("terminationGracePeriodSeconds", 30)),
    })
    if c.get("ports"):
        annotations["io.kubernetes.container.ports"] = json.dumps(c["ports"], separators=(",", ":"))
    cfg = {
        "metadata": {"name": name, "attempt": attempt},
        "image": {"image": c.get("image", "")},
        "command": command,
        "args": args,
        "working_dir": c.get("workingDir", ""),
        "envs": [{"key": k, "value": v} for k, v in envs],
        "mounts": mounts,
        "devices": devices,
        "labels": {"io.kubernetes.container.name": name, "io.kubernetes.pod.name": meta["name"],
                   "io.kubernetes.pod.namespace": meta.get("namespace", "default"), "io.kubernetes.pod.uid": uid},
        "annotations": annotations,
        "log_path": os.path.join(name, "%d.log" % attempt),
        "stdin": bool(c.get("stdin")),
        "stdin_once": bool(c.get("stdinOnce")),
        "tty": bool(c.get("tty")),
        "linux": {"resources": linux_resources(pod, c, memory_capacity), "security_context": container_security(pod, c)},
    }
    return cfg


# ---- device manager (pure part) -------------------------------------------------------------------

def pick_devices(needed, healthy, in_use, reusable, preferred=None):
    """kubelet's devicesToAllocate: reusable (init container) devices first, then the plugin's
    preferred choice among the free healthy ones, then free healthy ones in order."""
    chosen = []
    for d in sorted(reusable):
        if len(chosen) == needed:
            break
        chosen.append(d)
    if len(chosen) == needed:
        return chosen
    available = [d for d in sorted(healthy) if d not in in_use and d not in chosen]
    if len(available) < needed - len(chosen):
        raise NodeError("requested number of devices unavailable: requested %d, available %d" % (
            needed - len(chosen), len(available)))
    for d in preferred or []:
        if len(chosen) == needed:
            break
        if d in available and d not in chosen:
            chosen.append(d)
    for d in available:
        if len(chosen) == needed:
            break
        if d not in chosen:
            chosen.append(d)
    return chosen


def podresources_view(pods):
    """What kubelet's PodResources v1 List reports: per pod, spec.containers (and restartable init
    containers) with their devices; ordinary init containers are left out."""
    out = []
    for key in sorted(pods):
        p = pods[key]
        spec = p["spec"].get("spec") or {}
        listed = [c["name"] for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
        listed += [c["name"] for c in spec.get("containers") or []]
        containers = []
        for name in listed:
            devs = (p["containers"].get(name) or {}).get("devices") or {}
            containers.append({"name": name, "devices": [{"resource_name": r, "device_ids": list(ids)}
                                                          for r, ids in sorted(devs.items())]})
        out.append({"name": p["name"], "namespace": p["namespace"], "containers": containers})
    return out


def devices_in_use(pods, resource):
    used = set()
    for p in pods.values():
        for c in p["containers"].values():
            used.update((c.get("devices") or {}).get(resource, []))
    return used


def decode_cri_log(lines, stream="all"):
    """CRI log lines "<time> <stdout|stderr> <P|F> <text>" to plain text (P: partial line)."""
    out = []
    for line in lines:
        line = line.rstrip("\n")
        parts = line.split(" ", 3)
        if len(parts) < 3:
            continue
        _, s, tag = parts[:3]
        text = parts[3] if len(parts) == 4 else ""
        if stream != "all" and s != stream:
            continue
        out.append(text if tag.startswith("P") else text + "\n")
    return "".join(out)


def container_by_name(pod, name):
    spec = pod.get("spec") or {}
    for field in ("initContainers", "containers"):
        for c in spec.get(field) or []:
            if c.get("name") == name:
                return c, field == "initContainers"
    return None, False


# ---- state ----------------------------------------------------------------------------------------

def atomic_write_json(path, value):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return default
    except ValueError as e:
        raise NodeError("%s is not valid JSON (%s): remove it or the whole state directory" % (path, e))


def resource_file(resource):
    return resource.replace("/", "_") + ".json"


class State:
    def __init__(self, directory):
        self.dir = directory
        try:
            os.makedirs(os.path.join(directory, "plugins"), exist_ok=True)
        except OSError as e:
            raise NodeError("state directory %s: %s (choose another with --state)" % (directory, e))
        self.pods_path = os.path.join(directory, "pods.json")

    @contextlib.contextmanager
    def locked(self):
        with open(os.path.join(self.dir, ".lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def pods(self):
        return read_json(self.pods_path, {"pods": {}})["pods"]

    def save_pods(self, pods):
        atomic_write_json(self.pods_path, {"pods": pods})

    def plugins(self):
        out = {}
        d = os.path.join(self.dir, "plugins")
        for f in sorted(os.listdir(d)):
            if f.endswith(".json") and ".tmp." not in f:
                p = read_json(os.path.join(d, f), None)
                if p:
                    out[p["resource"]] = p
        return out

    def pod(self, key):
        pods = self.pods()
        if key not in pods:
            raise NodeError("no pod %s in %s (pods: %s); names are NAMESPACE/NAME" % (
                key, self.pods_path, ", ".join(sorted(pods)) or "none"))
        return pods[key]


# ---- gRPC shell -----------------------------------------------------------------------------------

class Messages:
    """The compiled protos. Compiled into a temporary directory that is removed right away, or,
    when KUBELET_STANDIN_PROTO_CACHE names a directory, once into a subdirectory of it named by
    a digest of the protos and of protoc's size and mtime, which later runs import (with their
    bytecode cached there too): under qemu TCG, protoc and compiling its output cost about a second per command."""

    def __init__(self, *which):
        import importlib
        missing = [PROTO_FILES[w] for w in which if not os.path.exists(PROTO_FILES[w])]
        if missing:
            raise NodeError("proto file(s) missing: %s (run from a full erdma-controller checkout)" % ", ".join(missing))
        if shutil.which("protoc") is None:
            raise NodeError("protoc not found: apt-get install protobuf-compiler")
        cache = os.environ.get("KUBELET_STANDIN_PROTO_CACHE")
        if cache:
            work = self._cached(cache)
        else:
            work = tempfile.mkdtemp(prefix="kubelet-py-protos-")
        try:
            if not cache:
                self._compile([PROTO_FILES[w] for w in which], work)
            sys.path.insert(0, work)
            try:
                for w in which:
                    setattr(self, w, importlib.import_module(os.path.splitext(os.path.basename(PROTO_FILES[w]))[0] + "_pb2"))
            finally:
                sys.path.remove(work)
        finally:
            if not cache:
                shutil.rmtree(work, ignore_errors=True)

    @staticmethod
    def _compile(files, out):
        cmd = ["protoc"] + ["-I" + d for d in sorted({os.path.dirname(f) for f in files})] + ["--python_out", out] + files
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise NodeError("protoc failed: %s" % r.stderr.strip())

    @classmethod
    def _cached(cls, cache):
        """DIR/<digest>: every proto compiled there once; concurrent first runs each compile into
        their own directory and the first rename wins."""
        files = [PROTO_FILES[k] for k in sorted(PROTO_FILES)]
        digest = hashlib.sha256()
        try:
            protoc = os.stat(shutil.which("protoc"))  # a changed protoc compiles afresh
            digest.update(("%d %d\n" % (protoc.st_size, protoc.st_mtime_ns)).encode())
            for f in files:
                with open(f, "rb") as fh:
                    digest.update(fh.read())
        except OSError as e:
            raise NodeError("reading the protos for KUBELET_STANDIN_PROTO_CACHE: %s" % e)
        target = os.path.join(cache, digest.hexdigest()[:16])
        if os.path.isdir(target):
            return target
        try:
            os.makedirs(cache, exist_ok=True)
            work = tempfile.mkdtemp(prefix=".compiling-", dir=cache)
        except OSError as e:
            raise NodeError("KUBELET_STANDIN_PROTO_CACHE=%s is not a writable directory: %s" % (cache, e))
        try:
            cls._compile(files, work)
            os.rename(work, target)
        except OSError:
            if not os.path.isdir(target):
                raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return target


def unix_target(sock):
    if sock.startswith("unix://"):
        return sock, sock[len("unix://"):]
    if sock.startswith("unix:"):
        return "unix://" + sock[5:], sock[5:]
    return "unix://" + sock, sock


def rpc_error(e, what, service, path):
    import grpc
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else str(e)
    if code == grpc.StatusCode.UNAVAILABLE:
        hint = {"cri": "containerd not reachable at %s: is it running?" % path,
                "plugin": "device plugin not reachable at %s: is erdma-agent running and registered?" % path}[service]
        return NodeError("%s: %s (%s)" % (what, hint, details))
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return NodeError("%s: no answer in time from %s (%s)" % (what, path, details))
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return NodeError("%s: %s does not implement this method (%s)%s" % (
            what, path, details, " - is containerd's CRI plugin enabled?" if service == "cri" else ""))
    if code == grpc.StatusCode.NOT_FOUND:
        return NodeError("%s: not found (%s)" % (what, details))
    return NodeError("%s: %s: %s" % (what, code.name if code else "error", details))


class Cri:
    """containerd's CRI RuntimeService, method paths as kubelet calls them."""
    METHODS = ("Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus",
               "ListPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer",
               "ListContainers", "ContainerStatus", "ExecSync")

    def __init__(self, m, sock, timeout):
        import grpc
        self.grpc = grpc
        self.pb = m.cri
        self.target, self.path = unix_target(sock)
        self.timeout = timeout
        self.channel = grpc.insecure_channel(self.target)
        self.calls = {}
        for name in self.METHODS:
            req = getattr(self.pb, name + "Request")
            resp = getattr(self.pb, name + "Response")
            self.calls[name] = self.channel.unary_unary("/runtime.v1.RuntimeService/" + name,
                                                        request_serializer=req.SerializeToString,
                                                        response_deserializer=resp.FromString)

    def call(self, name, fields=None, deadline=None):
        """One CRI call; `fields` is the request as a dict of proto field names."""
        from google.protobuf import json_format
        req = getattr(self.pb, name + "Request")()
        json_format.ParseDict(fields or {}, req)
        t0 = time.monotonic()
        try:
            resp = self.calls[name](req, timeout=deadline or self.timeout)
        except self.grpc.RpcError as e:
            raise rpc_error(e, "CRI " + name, "cri", self.path)
        log("CRI %s %.0f ms" % (name, (time.monotonic() - t0) * 1000))
        return resp

    def not_found(self, err):
        return isinstance(err, NodeError) and ": not found" in str(err)


class Plugin:
    """A device plugin's endpoint, as kubelet's device manager calls it."""

    def __init__(self, m, sock):
        import grpc
        self.grpc = grpc
        self.pb = m.dp
        self.path = sock
        self.channel = grpc.insecure_channel("unix://" + sock)
        pb = self.pb
        mk = self.channel.unary_unary
        self.options = mk("/v1beta1.DevicePlugin/GetDevicePluginOptions", pb.Empty.SerializeToString,
                          pb.DevicePluginOptions.FromString)
        self.list_and_watch = self.channel.unary_stream("/v1beta1.DevicePlugin/ListAndWatch", pb.Empty.SerializeToString,
                                                        pb.ListAndWatchResponse.FromString)
        self.preferred = mk("/v1beta1.DevicePlugin/GetPreferredAllocation", pb.PreferredAllocationRequest.SerializeToString,
                            pb.PreferredAllocationResponse.FromString)
        self.allocate_rpc = mk("/v1beta1.DevicePlugin/Allocate", pb.AllocateRequest.SerializeToString,
                               pb.AllocateResponse.FromString)
        self.prestart_rpc = mk("/v1beta1.DevicePlugin/PreStartContainer", pb.PreStartContainerRequest.SerializeToString,
                               pb.PreStartContainerResponse.FromString)

    def _call(self, what, fn, req, timeout):
        try:
            return fn(req, timeout=timeout)
        except self.grpc.RpcError as e:
            raise rpc_error(e, what, "plugin", self.path)

    def get_preferred(self, available, must_include, size):
        req = self.pb.PreferredAllocationRequest()
        req.container_requests.add(available_deviceIDs=available, must_include_deviceIDs=must_include, allocation_size=size)
        resp = self._call("GetPreferredAllocation", self.preferred, req, PLUGIN_CALL_TIMEOUT_S)
        return list(resp.container_responses[0].deviceIDs) if resp.container_responses else []

    def allocate(self, ids):
        req = self.pb.AllocateRequest()
        req.container_requests.add(devices_ids=ids)
        resp = self._call("Allocate", self.allocate_rpc, req, PLUGIN_CALL_TIMEOUT_S)
        if len(resp.container_responses) != 1:
            raise NodeError("Allocate at %s answered %d container responses for 1 request" % (self.path, len(resp.container_responses)))
        r = resp.container_responses[0]
        return {"envs": dict(r.envs),
                "mounts": [{"container_path": x.container_path, "host_path": x.host_path, "read_only": x.read_only} for x in r.mounts],
                "devices": [{"container_path": x.container_path, "host_path": x.host_path, "permissions": x.permissions} for x in r.devices],
                "annotations": dict(r.annotations),
                "cdi_devices": [x.name for x in r.cdi_devices]}

    def prestart(self, ids):
        grpc = self.grpc
        try:  # connect first, so the latency is the call alone
            grpc.channel_ready_future(self.channel).result(timeout=PLUGIN_CALL_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            raise NodeError("PreStartContainer: device plugin not reachable at %s: is erdma-agent running?" % self.path)
        t0 = time.monotonic()
        self._call("PreStartContainer", self.prestart_rpc, self.pb.PreStartContainerRequest(devices_ids=ids), PRESTART_TIMEOUT_S)
        return round((time.monotonic() - t0) * 1000, 2)

    def close(self):
        self.channel.close()


def run_bounded(cmd, timeout, what):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NodeError("%s: %s did not finish in %d s" % (what, " ".join(cmd), timeout))
    except FileNotFoundError:
        raise NodeError("%s: %s not found" % (what, cmd[0]))
    if r.returncode != 0:
        raise NodeError("%s: %s failed: %s" % (what, " ".join(cmd), r.stderr.strip()))
    return r.stdout


def memory_capacity():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def host_ip():
    import socket
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("127.0.0.1", 9))  # loopback only: no packet leaves this host
            return s.getsockname()[0]
    except OSError:
        return ""


def netns_from_info(info):
    """containerd 1.6's verbose sandbox info: runtimeSpec.linux.namespaces[type=network].path."""
    try:
        doc = json.loads(info.get("info", "{}"))
    except ValueError:
        return ""
    for ns in ((doc.get("runtimeSpec") or {}).get("linux") or {}).get("namespaces") or []:
        if ns.get("type") == "network":
            return ns.get("path", "")
    return ""


# ---- serve ----------------------------------------------------------------------------------------

class Kubelet:
    """kubelet's Registration and PodResources servers plus its device-plugin endpoint clients."""

    def __init__(self, m, root, state):
        self.m = m
        self.root = root
        self.state = state
        self.dp_dir = os.path.join(root, "device-plugins")
        self.lock = threading.Lock()
        self.endpoints = {}  # resource -> dict(endpoint, plugin, stream, generation, info)
        self.registrations = 0
        self.stopping = threading.Event()

    def write_plugin(self, resource):
        info = self.endpoints[resource]["info"]
        info["updated"] = time.time()
        atomic_write_json(os.path.join(self.state.dir, "plugins", resource_file(resource)), info)

    def register(self, request, context):
        import grpc
        if request.version != DEVICE_PLUGIN_VERSION:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unsupported device plugin version %r: kubelet speaks %s" % (
                request.version, DEVICE_PLUGIN_VERSION))
        res = request.resource_name
        if "/" not in res or res.startswith("kubernetes.io/") or res.split("/", 1)[0].endswith(".kubernetes.io"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid extended resource name %r" % res)
        if not request.endpoint or "/" in request.endpoint:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "endpoint must be a file name in %s, got %r" % (
                self.dp_dir, request.endpoint))
        log("Register resource=%s endpoint=%s version=%s" % (res, request.endpoint, request.version))
        with self.lock:
            self.registrations += 1
            gen = self.registrations
        threading.Thread(target=self.connect, args=(res, request.endpoint, gen, {
            "pre_start_required": request.options.pre_start_required,
            "get_preferred_allocation_available": request.options.get_preferred_allocation_available}),
            daemon=True).start()
        return self.m.dp.Empty()

    def connect(self, resource, endpoint, gen, register_options):
        import grpc
        sock = os.path.join(self.dp_dir, endpoint)
        with self.lock:
            old = self.endpoints.get(resource)
            count = (old["info"]["registrations"] if old else 0) + 1
        if old:
            log("re-registration of %s: replacing endpoint %s" % (resource, old["info"]["endpoint"]))
            self.drop(resource, old, "replaced by a new registration")
        plugin = Plugin(self.m, sock)
        try:
            grpc.channel_ready_future(plugin.channel).result(timeout=PLUGIN_CALL_TIMEOUT_S)
            opts = plugin.options(self.m.dp.Empty(), timeout=PLUGIN_CALL_TIMEOUT_S)
            stream = plugin.list_and_watch(self.m.dp.Empty())
        except (grpc.RpcError, grpc.FutureTimeoutError) as e:
            log("cannot connect to plugin %s at %s: %s" % (resource, sock, e))
            plugin.close()
            return
        try:
            inode = os.stat(sock).st_ino
        except OSError:
            inode = None
        info = {"resource": resource, "endpoint": endpoint, "socket": sock, "generation": gen,
                "options": {"pre_start_required": opts.pre_start_required,
                            "get_preferred_allocation_available": opts.get_preferred_allocation_available},
                "register_options": register_options, "devices": [], "connected": True, "registrations": count,
                "registered_at": time.time(), "list_and_watch_updates": 0, "disconnect_reason": ""}
        entry = {"plugin": plugin, "stream": stream, "gen": gen, "info": info, "inode": inode}
        with self.lock:
            cur = self.endpoints.get(resource)
            if cur is not None and cur["gen"] > gen:
                stream.cancel()
                plugin.close()
                return
            self.endpoints[resource] = entry
            self.write_plugin(resource)
        try:
            for resp in stream:
                devices = [{"ID": d.ID, "health": d.health, "numa": [n.ID for n in d.topology.nodes]} for d in resp.devices]
                with self.lock:
                    if self.endpoints.get(resource) is not entry:
                        break
                    info["devices"] = devices
                    info["list_and_watch_updates"] += 1
                    self.write_plugin(resource)
                log("ListAndWatch %s: %d devices, %d healthy" % (
                    resource, len(devices), sum(1 for d in devices if d["health"] == "Healthy")))
        except grpc.RpcError as e:
            reason = "ListAndWatch ended: %s" % (e.code().name if hasattr(e, "code") else e)
        else:
            reason = "ListAndWatch ended"
        if self.stopping.is_set():
            return
        with self.lock:
            if self.endpoints.get(resource) is entry:
                self.mark_disconnected(resource, reason)

    def mark_disconnected(self, resource, reason):
        """Called with the lock held. kubelet marks a vanished plugin's devices unhealthy."""
        entry = self.endpoints[resource]
        info = entry["info"]
        if not info["connected"]:
            return
        log("plugin %s disconnected: %s" % (resource, reason))
        info["connected"] = False
        info["disconnect_reason"] = reason
        for d in info["devices"]:
            d["health"] = "Unhealthy"
        self.write_plugin(resource)
        entry["stream"].cancel()

    def drop(self, resource, entry, reason):
        with self.lock:
            if self.endpoints.get(resource) is entry:
                self.mark_disconnected(resource, reason)
        entry["stream"].cancel()
        entry["plugin"].close()

    def watch_sockets(self):
        """kubelet notices a plugin that went away; the plugin has to register again."""
        while not self.stopping.wait(0.5):
            with self.lock:
                for resource, entry in list(self.endpoints.items()):
                    if not entry["info"]["connected"]:
                        continue
                    try:
                        inode = os.stat(entry["info"]["socket"]).st_ino
                    except OSError:
                        inode = None
                    if inode is None:
                        self.mark_disconnected(resource, "plugin socket removed")
                    elif inode != entry["inode"]:
                        self.mark_disconnected(resource, "plugin socket replaced")

    def list_pod_resources(self, request, context):
        pr = self.m.podres
        out = pr.ListPodResourcesResponse()
        try:
            pods = self.state.pods()
        except NodeError as e:
            import grpc
            context.abort(grpc.StatusCode.INTERNAL, str(e))
        for p in podresources_view(pods):
            item = out.pod_resources.add(name=p["name"], namespace=p["namespace"])
            for c in p["containers"]:
                ci = item.containers.add(name=c["name"])
                for d in c["devices"]:
                    ci.devices.add(resource_name=d["resource_name"], device_ids=d["device_ids"])
        return out


def cmd_serve(args):
    import concurrent.futures
    import grpc
    m = Messages("dp", "podres")
    state = State(args.state)
    dp_dir = os.path.join(args.root, "device-plugins")
    pr_dir = os.path.join(args.root, "pod-resources")
    for d in (dp_dir, pr_dir):
        os.makedirs(d, 0o750, exist_ok=True)
    if not args.keep_plugin_sockets:
        for name in os.listdir(dp_dir):
            p = os.path.join(dp_dir, name)
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                log("removing socket %s (kubelet does this at start-up)" % p)
                os.unlink(p)
    reg_sock = os.path.join(dp_dir, "kubelet.sock")
    pr_sock = os.path.join(pr_dir, "kubelet.sock")
    for s in (reg_sock, pr_sock):
        if os.path.exists(s):
            os.unlink(s)
    ready = os.path.join(state.dir, "serve.ready")
    if os.path.exists(ready):
        os.unlink(ready)
    for f in os.listdir(os.path.join(state.dir, "plugins")):
        os.unlink(os.path.join(state.dir, "plugins", f))  # plugins must register with this kubelet
    kl = Kubelet(m, args.root, state)
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers([
        grpc.method_handlers_generic_handler("v1beta1.Registration", {
            "Register": grpc.unary_unary_rpc_method_handler(
                kl.register, request_deserializer=m.dp.RegisterRequest.FromString,
                response_serializer=m.dp.Empty.SerializeToString)}),
        grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(
                kl.list_pod_resources, request_deserializer=m.podres.ListPodResourcesRequest.FromString,
                response_serializer=m.podres.ListPodResourcesResponse.SerializeToString)}),
    ])
    for s in (reg_sock, pr_sock):
        if server.add_insecure_port("unix:" + s) == 0:
            raise NodeError("cannot listen on %s" % s)
    server.start()
    stop = threading.Event()
    reason = {"why": "--seconds elapsed"}

    def on_signal(signum, _frame):
        reason["why"] = signal.Signals(signum).name
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    watcher = threading.Thread(target=kl.watch_sockets, daemon=True)
    watcher.start()
    atomic_write_json(ready, {"pid": os.getpid(), "registration": reg_sock, "podresources": pr_sock})
    print(json.dumps({"ready": True, "registration": reg_sock, "podresources": pr_sock, "pid": os.getpid()}), flush=True)
    log("serving Registration on %s and PodResources on %s" % (reg_sock, pr_sock))
    stop.wait(args.seconds)
    kl.stopping.set()
    with kl.lock:
        entries = list(kl.endpoints.values())
    for e in entries:
        e["stream"].cancel()
        e["plugin"].close()
    server.stop(1).wait(5)
    for s in (reg_sock, pr_sock, ready):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(s)
    watcher.join(2)
    print(json.dumps({"stopped": reason["why"], "registrations": kl.registrations}), flush=True)
    return 0


# ---- pods -----------------------------------------------------------------------------------------

def parse_config_files(items):
    out = {}
    for it in items or []:
        key, sep, path = it.partition("=")
        if not sep or not key or not path:
            raise NodeError("--config-file wants KEY=PATH, got %r" % it)
        try:
            with open(path) as f:
                out[key] = f.read()
        except OSError as e:
            raise NodeError("--config-file %s: cannot read %s: %s" % (key, path, e))
    return out


def load_input(args):
    try:
        with open(args.file) as f:
            text = f.read()
    except OSError as e:
        raise NodeError("-f %s: %s" % (args.file, e))
    docs = load_documents(text, args.file)
    configmaps = configmaps_of(docs)
    for extra in getattr(args, "configmap", None) or []:
        try:
            with open(extra) as f:
                configmaps.update(configmaps_of(load_documents(f.read(), extra)))
        except OSError as e:
            raise NodeError("--configmap %s: %s" % (extra, e))
    return docs, configmaps


class PodRunner:
    def __init__(self, args, m):
        self.args = args
        self.m = m
        self.state = State(args.state)
        self.cri = Cri(m, args.cri, args.timeout)
        self.plugins = {}
        self.memory = memory_capacity()

    def plugin(self, resource, info):
        if resource not in self.plugins:
            self.plugins[resource] = Plugin(self.m, info["socket"])
        return self.plugins[resource]

    def admit(self, key, pod, uid, allocate):
        """Device manager admission: allocate every container's devices, record them in STATE."""
        spec = pod["spec"]
        containers = {}
        ignore = set(self.args.ignore_resource or [])
        with self.state.locked():
            pods = self.state.pods()
            if key in pods:
                raise NodeError("pod %s already exists (sandbox %s): delete-pod it first" % (key, pods[key].get("sandbox_id")))
            plugins = self.state.plugins() if allocate else {}
            reusable = {}
            entry = {"namespace": pod["metadata"]["namespace"], "name": pod["metadata"]["name"], "uid": uid,
                     "spec": pod, "containers": containers, "phase": "admitting", "created": time.time()}
            for field in ("initContainers", "containers"):
                for c in spec.get(field) or []:
                    init = field == "initContainers" and c.get("restartPolicy") != "Always"
                    rec = {"init": field == "initContainers", "devices": {}, "allocate": {}, "attempt": 0}
                    containers[c["name"]] = rec
                    if not allocate:
                        continue
                    for resource, needed in extended_requests(c, ignore).items():
                        info = plugins.get(resource)
                        if info is None:
                            raise NodeError("container %s requests %s=%d but no device plugin registered %s on this "
                                            "node (is `kubelet.py serve` running and has the plugin registered? "
                                            "--ignore-resource %s drops the request)" % (
                                                c["name"], resource, needed, resource, resource))
                        healthy = [d["ID"] for d in info["devices"] if d["health"] == "Healthy"]
                        in_use = devices_in_use(pods, resource) | devices_in_use({key: entry}, resource)
                        reuse = reusable.get(resource, set())
                        plugin = self.plugin(resource, info)
                        preferred = None
                        if info["options"].get("get_preferred_allocation_available") and len(reuse) < needed:
                            avail = sorted((set(healthy) - in_use) | set(list(sorted(reuse))[:needed]))
                            must = sorted(reuse)[:needed]
                            preferred = plugin.get_preferred(avail, must, needed)
                            log("GetPreferredAllocation %s for %s: %s" % (resource, c["name"], preferred))
                        try:
                            ids = pick_devices(needed, healthy, in_use - reuse, reuse, preferred)
                        except NodeError as e:
                            raise NodeError("container %s: %s: %s (healthy: %d, in use: %d)" % (
                                c["name"], resource, e, len(healthy), len(in_use)))
                        resp = plugin.allocate(ids)
                        log("Allocate %s for %s: %s" % (resource, c["name"], ids))
                        rec["devices"][resource] = ids
                        rec["allocate"][resource] = resp
                        if init:
                            reusable.setdefault(resource, set()).update(ids)
                        else:
                            reusable[resource] = reuse - set(ids)
            pods[key] = entry
            self.state.save_pods(pods)
        return entry

    def update(self, key, fn):
        with self.state.locked():
            pods = self.state.pods()
            if key not in pods:
                raise NodeError("pod %s vanished from %s while starting" % (key, self.state.pods_path))
            fn(pods[key])
            self.state.save_pods(pods)

    def prestart(self, rec, name):
        total = None
        per = {}
        plugins = self.state.plugins()
        for resource, ids in rec["devices"].items():
            info = plugins.get(resource)
            if info is None:
                raise NodeError("container %s: plugin for %s is no longer registered" % (name, resource))
            if info["options"].get("pre_start_required"):
                ms = self.plugin(resource, info).prestart(ids)
                log("PreStartContainer %s for %s: %.1f ms" % (resource, name, ms))
                per[resource] = ms
                total = (total or 0) + ms
        return total, per

    def run(self, pod, allocate=True):
        args = self.args
        notes = check_supported(pod)
        for n in notes:
            log("note:", n)
        meta = pod["metadata"]
        key = "%s/%s" % (meta["namespace"], meta["name"])
        uid = meta.get("uid") or str(uuid.uuid4())
        meta["uid"] = uid
        configmaps = self.configmaps
        plan = plan_volumes(pod, configmaps, args.root, uid)
        self.cri.call("Version", {"version": "v1"})
        entry = self.admit(key, pod, uid, allocate)
        try:
            materialize_volumes(plan)
            with open("/etc/resolv.conf") as f:
                resolv = parse_resolv_conf(f.read())
        except OSError as e:
            resolv = {"servers": [], "searches": [], "options": []}
            log("no /etc/resolv.conf (%s): empty DNS config" % e)
        sb_cfg = sandbox_config(pod, uid, args.log_root, dns_config(pod, resolv), args.cgroup_driver, cgroup_root=args.cgroup_root)
        os.makedirs(sb_cfg["log_directory"], 0o755, exist_ok=True)
        pdir = pod_dir(args.root, uid)
        os.makedirs(pdir, 0o750, exist_ok=True)
        self.update(key, lambda p: p.update(sandbox_config=sb_cfg, volumes=plan, phase="sandbox"))
        runtime_handler = pod["spec"].get("runtimeClassName", "")
        resp = self.cri.call("RunPodSandbox", {"config": sb_cfg, "runtime_handler": runtime_handler})
        sandbox_id = resp.pod_sandbox_id
        st = self.cri.call("PodSandboxStatus", {"pod_sandbox_id": sandbox_id, "verbose": True})
        pod_ip = st.status.network.ip
        netns = netns_from_info(dict(st.info))
        self.update(key, lambda p: p.update(sandbox_id=sandbox_id, pod_ip=pod_ip, netns=netns))
        etc_hosts = os.path.join(pdir, "etc-hosts")
        with open(etc_hosts, "w") as f:
            if pod["spec"].get("hostNetwork"):
                f.write("# Kubernetes-managed hosts file (host network).\n")
                with contextlib.suppress(OSError), open("/etc/hosts") as h:
                    f.write(h.read())
            else:
                f.write("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
                if pod_ip:
                    f.write("%s\t%s\n" % (pod_ip, sb_cfg["hostname"]))
            for alias in pod["spec"].get("hostAliases") or []:
                f.write("%s\t%s\n" % (alias["ip"], "\t".join(alias.get("hostnames") or [])))
        os.chmod(etc_hosts, 0o644)
        out = {"pod": key, "uid": uid, "sandbox_id": sandbox_id, "pod_ip": pod_ip, "netns": netns,
               "containers": {}, "env": {}, "env_sent": {}}
        hip = host_ip()
        for field in ("initContainers", "containers"):
            for c in pod["spec"].get(field) or []:
                rec = entry["containers"][c["name"]]
                res = self.start_container(key, pod, uid, sandbox_id, sb_cfg, c, rec, 0, plan, pod_ip, hip, etc_hosts)
                out["containers"][c["name"]] = res["summary"]
                out["env"][c["name"]] = res["env"]
                out["env_sent"][c["name"]] = res["env_sent"]
                if field == "initContainers" and c.get("restartPolicy") != "Always":
                    self.wait_init(res["summary"]["id"], c["name"])
        self.update(key, lambda p: p.update(phase="running"))
        return out

    def build_config(self, pod, uid, sb_cfg, c, rec, attempt, plan, pod_ip, hip, etc_hosts):
        allocations = [(r, rec["allocate"][r]) for r in rec["allocate"]]
        penv = pod_env(pod, c, self.configmaps, pod_ip, hip, self.args.node_name, os.cpu_count() or 1, self.memory)
        envs = cri_env(allocations, penv)
        alloc_mounts = [m for _, a in allocations for m in a["mounts"]]
        alloc_devices = [d for _, a in allocations for d in a["devices"]]
        alloc_annotations = {}
        for _, a in allocations:
            for k, v in a["annotations"].items():
                alloc_annotations.setdefault(k, v)
        extra = [{"container_path": "/etc/hosts", "host_path": etc_hosts, "readonly": False,
                  "propagation": "PROPAGATION_PRIVATE"}]
        tpath = c.get("terminationMessagePath", DEFAULT_TERMINATION_MESSAGE_PATH)
        if tpath:
            cdir = os.path.join(pod_dir(self.args.root, uid), "containers", c["name"])
            os.makedirs(cdir, 0o750, exist_ok=True)
            tfile = os.path.join(cdir, uuid.uuid4().hex[:8])
            with open(tfile, "w"):
                pass
            os.chmod(tfile, 0o666)
            extra.append({"container_path": tpath, "host_path": tfile, "readonly": False, "propagation": "PROPAGATION_PRIVATE"})
        mounts = container_mounts(c, plan, alloc_mounts, extra)
        cfg = container_config(pod, uid, c, attempt, envs, mounts, container_devices(alloc_devices),
                               alloc_annotations, self.memory)
        return cfg, envs

    def start_container(self, key, pod, uid, sandbox_id, sb_cfg, c, rec, attempt, plan, pod_ip, hip, etc_hosts):
        name = c["name"]
        total, per = self.prestart(rec, name)
        cfg, envs = self.build_config(pod, uid, sb_cfg, c, rec, attempt, plan, pod_ip, hip, etc_hosts)
        os.makedirs(os.path.join(sb_cfg["log_directory"], name), 0o755, exist_ok=True)
        cid = self.cri.call("CreateContainer", {"pod_sandbox_id": sandbox_id, "config": cfg, "sandbox_config": sb_cfg}).container_id
        self.update(key, lambda p: p["containers"][name].update(id=cid, attempt=attempt, config=cfg, prestart_ms=total))
        self.cri.call("StartContainer", {"container_id": cid})
        image_env = []  # containerd adds the image's env before ours; it does not change who wins between ours
        env = effective_env(oci_process_env(envs, image_env, sb_cfg["hostname"] or os.uname().nodename))
        for k in list(env):
            if k in ("PATH", "HOSTNAME") and k not in dict(envs):
                del env[k]
        summary = {"id": cid, "attempt": attempt, "devices": rec["devices"], "allocate": rec["allocate"],
                   "prestart_ms": total, "prestart": per}
        return {"summary": summary, "env": env, "env_sent": [list(kv) for kv in envs]}

    def wait_init(self, cid, name):
        deadline = time.monotonic() + self.args.init_timeout
        while time.monotonic() < deadline:
            st = self.cri.call("ContainerStatus", {"container_id": cid}).status
            if st.state == self.m.cri.CONTAINER_EXITED:
                if st.exit_code != 0:
                    raise NodeError("init container %s exited with %d (%s): see `kubelet.py logs`" % (
                        name, st.exit_code, st.reason))
                log("init container %s completed" % name)
                return
            time.sleep(0.2)
        raise NodeError("init container %s did not finish within %d s (--init-timeout)" % (name, self.args.init_timeout))


def cmd_run_pod(args, kind=None):
    docs, configmaps = load_input(args)
    if kind == "DaemonSet":
        pod, _ = select_pod(docs, kind="DaemonSet", name=args.name, namespace=args.namespace, pod_name=args.pod_name)
        overrides = parse_config_files(args.config_file)
        if overrides:
            used = [((v.get("configMap") or {}).get("name")) for v in pod["spec"].get("volumes") or [] if "configMap" in v]
            if not used:
                raise NodeError("--config-file: DaemonSet %s mounts no ConfigMap" % args.name)
            for cm in used:
                data = find_configmap(configmaps, pod["metadata"]["namespace"], cm)
                if data is None:
                    data = configmaps.setdefault((pod["metadata"]["namespace"], cm), {})
                data.update(overrides)
        allocate = False
    else:
        pod, _ = select_pod(docs, pod_name=args.name, namespace=args.namespace)
        allocate = True
    commands = dict(parse_command_override(c) for c in args.command or [])
    apply_overrides(pod, args.image, commands)
    m = Messages("cri", "dp")
    runner = PodRunner(args, m)
    runner.configmaps = configmaps
    out = runner.run(pod, allocate=allocate)
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0


def split_pod(key):
    if "/" not in key:
        raise NodeError("pod %r: name pods NAMESPACE/NAME" % key)
    return key


def container_rec(state, key, name):
    p = state.pod(split_pod(key))
    rec = p["containers"].get(name)
    if rec is None or not rec.get("id"):
        raise NodeError("pod %s has no started container %r (containers: %s)" % (key, name, ", ".join(p["containers"])))
    return p, rec


def cmd_exec(args):
    state = State(args.state)
    _, rec = container_rec(state, args.pod, args.container)
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise NodeError("exec: give the command after --")
    cri = Cri(Messages("cri"), args.cri, args.timeout)
    r = cri.call("ExecSync", {"container_id": rec["id"], "cmd": argv, "timeout": int(args.exec_timeout)},
                 deadline=args.exec_timeout + 10)
    out = {"stdout": r.stdout.decode(errors="replace"), "stderr": r.stderr.decode(errors="replace"), "exit_code": r.exit_code}
    print(json.dumps(out))
    return min(r.exit_code, 255) if r.exit_code >= 0 else 1


def cmd_logs(args):
    state = State(args.state)
    p, rec = container_rec(state, args.pod, args.container)
    attempt = rec.get("attempt", 0) if args.attempt is None else args.attempt
    path = os.path.join(p["sandbox_config"]["log_directory"], args.container, "%d.log" % attempt)
    try:
        with open(path, errors="replace") as f:
            sys.stdout.write(decode_cri_log(f, args.stream))
    except OSError as e:
        raise NodeError("log file %s: %s" % (path, e))
    return 0


def grace_of(p, args):
    if args.grace is not None:
        return int(args.grace)
    return int((p["spec"].get("spec") or {}).get("terminationGracePeriodSeconds", 30))


def cmd_stop_container(args):
    state = State(args.state)
    p, rec = container_rec(state, args.pod, args.container)
    m = Messages("cri")
    cri = Cri(m, args.cri, args.timeout)
    grace = grace_of(p, args)
    cri.call("StopContainer", {"container_id": rec["id"], "timeout": grace}, deadline=grace + args.timeout)
    st = cri.call("ContainerStatus", {"container_id": rec["id"]}).status
    print(json.dumps({"pod": args.pod, "container": args.container, "id": rec["id"],
                      "state": m.cri.ContainerState.Name(st.state), "exit_code": st.exit_code}))
    return 0


def cmd_restart_container(args):
    state = State(args.state)
    p, rec = container_rec(state, args.pod, args.container)
    m = Messages("cri", "dp")
    cri = Cri(m, args.cri, args.timeout)
    grace = grace_of(p, args)
    old = rec["id"]
    try:
        cri.call("StopContainer", {"container_id": old, "timeout": grace}, deadline=grace + args.timeout)
        cri.call("RemoveContainer", {"container_id": old})
    except NodeError as e:
        if not cri.not_found(e):
            raise
    runner = PodRunner(args, m)
    runner.configmaps = {}
    key = split_pod(args.pod)
    name = args.container
    attempt = rec.get("attempt", 0) + 1
    total, per = runner.prestart(rec, name)
    cfg = copy.deepcopy(rec["config"])
    cfg["metadata"]["attempt"] = attempt
    cfg["log_path"] = os.path.join(name, "%d.log" % attempt)
    cfg["annotations"]["io.kubernetes.container.restartCount"] = str(attempt)
    cid = cri.call("CreateContainer", {"pod_sandbox_id": p["sandbox_id"], "config": cfg,
                                     "sandbox_config": p["sandbox_config"]}).container_id
    runner.update(key, lambda q: q["containers"][name].update(id=cid, attempt=attempt, config=cfg, prestart_ms=total))
    cri.call("StartContainer", {"container_id": cid})
    print(json.dumps({"pod": key, "container": name, "old_id": old, "id": cid, "attempt": attempt,
                      "prestart_ms": total, "prestart": per}))
    return 0


def cmd_delete_pod(args):
    state = State(args.state)
    key = split_pod(args.pod)
    p = state.pod(key)
    cri = Cri(Messages("cri"), args.cri, args.timeout)
    grace = grace_of(p, args)
    for name, rec in p["containers"].items():
        if rec.get("id"):
            try:
                cri.call("StopContainer", {"container_id": rec["id"], "timeout": grace}, deadline=grace + args.timeout)
            except NodeError as e:
                if not cri.not_found(e):
                    raise
    if p.get("sandbox_id"):
        for method in ("StopPodSandbox", "RemovePodSandbox"):
            try:
                cri.call(method, {"pod_sandbox_id": p["sandbox_id"]})
            except NodeError as e:
                if not cri.not_found(e):
                    raise
    released = {}
    with state.locked():
        pods = state.pods()
        gone = pods.pop(key, None) or p
        for rec in gone["containers"].values():
            for r, ids in (rec.get("devices") or {}).items():
                released.setdefault(r, [])
                released[r] += [i for i in ids if i not in released[r]]
        state.save_pods(pods)
    for v in (p.get("volumes") or {}).values():
        if v["kind"] == "emptyDir" and os.path.ismount(v["host_path"]):
            run_bounded(["umount", v["host_path"]], 20, "unmount emptyDir")
    shutil.rmtree(pod_dir(args.root, p["uid"]), ignore_errors=True)
    if not args.keep_logs and p.get("sandbox_config"):
        shutil.rmtree(p["sandbox_config"]["log_directory"], ignore_errors=True)
    print(json.dumps({"pod": key, "deleted": True, "sandbox_id": p.get("sandbox_id"), "released": released}))
    return 0


def cmd_list(args):
    state = State(args.state)
    pods = state.pods()
    live = {}
    live_c = {}
    error = None
    try:
        m = Messages("cri")
        cri = Cri(m, args.cri, args.timeout)
        for it in cri.call("ListPodSandbox").items:
            live[it.id] = m.cri.PodSandboxState.Name(it.state)
        for it in cri.call("ListContainers").containers:
            live_c[it.id] = m.cri.ContainerState.Name(it.state)
    except NodeError as e:
        error = str(e)
        log(error)
    out = []
    for key in sorted(pods):
        p = pods[key]
        out.append({"pod": key, "uid": p["uid"], "sandbox_id": p.get("sandbox_id"), "phase": p.get("phase"),
                    "state": live.get(p.get("sandbox_id"), "unknown" if error else "GONE"),
                    "pod_ip": p.get("pod_ip"), "netns": p.get("netns"),
                    "containers": {n: {"id": c.get("id"), "attempt": c.get("attempt"), "devices": c.get("devices"),
                                       "state": live_c.get(c.get("id"), "unknown" if error else "GONE")}
                                   for n, c in p["containers"].items()}})
    print(json.dumps({"pods": out, "cri_error": error}, indent=1))
    return 0


# ---- command line ---------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description="kubelet stand-in for test nodes (see the file header)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--state", default="/run/kubelet-standin", help="state directory (shared with serve)")
        p.add_argument("--root", default="/var/lib/kubelet", help="kubelet root (pod dirs, sockets)")
        p.add_argument("--log-root", default="/var/log/pods", help="pod log directories")
        p.add_argument("--cri", default="unix:///run/containerd/containerd.sock", help="CRI socket")
        p.add_argument("--cgroup-driver", default="cgroupfs", choices=("cgroupfs", "systemd"))
        p.add_argument("--cgroup-root", default="/", help="kubelet's --cgroup-root (cgroupfs driver)")
        p.add_argument("--node-name", default=os.uname().nodename)
        p.add_argument("--timeout", type=float, default=60, help="seconds per CRI call")
        p.add_argument("--grace", type=int, default=None, help="stop grace period (default: the pod's)")
        p.add_argument("--init-timeout", type=float, default=120)
        return p

    s = sub.add_parser("serve")
    s.add_argument("--root", default="/var/lib/kubelet")
    s.add_argument("--state", default="/run/kubelet-standin")
    s.add_argument("--seconds", type=float, default=3600)
    s.add_argument("--keep-plugin-sockets", action="store_true")

    for name in ("run-pod", "run-daemonset"):
        r = common(sub.add_parser(name))
        r.add_argument("-f", "--file", required=True)
        r.add_argument("--name", default=None)
        r.add_argument("--namespace", default=None)
        r.add_argument("--image", default=None)
        r.add_argument("--command", action="append", default=[])
        r.add_argument("--configmap", action="append", default=[])
        r.add_argument("--ignore-resource", action="append", default=[])
        if name == "run-daemonset":
            r.add_argument("--config-file", action="append", default=[])
            r.add_argument("--pod-name", default=None)

    e = common(sub.add_parser("exec"))
    e.add_argument("pod")
    e.add_argument("container")
    e.add_argument("--exec-timeout", "--exec-seconds", dest="exec_timeout", type=float, default=30)
    e.add_argument("argv", nargs=argparse.REMAINDER)

    lg = common(sub.add_parser("logs"))
    lg.add_argument("pod")
    lg.add_argument("container")
    lg.add_argument("--stream", choices=("stdout", "stderr", "all"), default="all")
    lg.add_argument("--attempt", type=int, default=None)

    for name in ("stop-container", "restart-container"):
        c = common(sub.add_parser(name))
        c.add_argument("pod")
        c.add_argument("container")
    d = common(sub.add_parser("delete-pod"))
    d.add_argument("pod")
    d.add_argument("--keep-logs", action="store_true")
    common(sub.add_parser("list"))

    args = ap.parse_args(argv)
    if args.cmd == "run-daemonset" and (not args.name or not args.namespace):
        ap.error("run-daemonset needs --name and --namespace")
    handlers = {"serve": cmd_serve, "run-pod": cmd_run_pod, "run-daemonset": lambda a: cmd_run_pod(a, "DaemonSet"),
                "exec": cmd_exec, "logs": cmd_logs, "stop-container": cmd_stop_container,
                "restart-container": cmd_restart_container, "delete-pod": cmd_delete_pod, "list": cmd_list}
    try:
        return handlers[args.cmd](args)
    except NodeError as e:
        log("error:", e)
        print(json.dumps({"error": str(e)}))
        return 1


if __name__ == "__main__":
    sys.exit(main())
