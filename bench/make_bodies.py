#!/usr/bin/python3
# Generates the AdmissionReview bodies in bench/bodies/ (realistic pods, as the apiserver sends
# them): review-15k.json, an SMC-R pod with an eRDMA container, managedFields, probes and four
# containers; review-3k.json, a small eRDMA pod. Usage: bench/make_bodies.py bench/bodies
import json, sys, os
out = sys.argv[1]
def mf(manager, op, t):
    return {"manager": manager, "operation": op, "apiVersion": "v1", "time": t, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                         "f:ownerReferences": {".": {}, "k:{\"uid\":\"5d5b5f0a-1f7e-4a0e-9c6e-3b0c8f7d2a11\"}": {}}},
                         "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:env": {".": {}}, "f:image": {}, "f:imagePullPolicy": {},
                                    "f:name": {}, "f:ports": {".": {}}, "f:resources": {".": {}, "f:limits": {".": {}}}}},
                                    "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                                    "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}}
def env(prefix, n):
    return [{"name": f"{prefix}_SETTING_{i:02d}", "value": f"value-{i}-for-{prefix.lower()}-component"} for i in range(n)]
def container(name, image, n_env, erdma=False, probes=True):
    c = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
         "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
         "env": env(name.upper().replace("-", "_"), n_env) + [
             {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
             {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}],
         "resources": {"limits": {"cpu": "4", "memory": "8Gi"}, "requests": {"cpu": "2", "memory": "4Gi"}},
         "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": True},
                          {"name": "kube-api-access-7x2kq", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
         "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}, "runAsNonRoot": True}}
    if erdma: c["resources"]["limits"]["aliyun/erdma"] = "1"
    if probes:
        c["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 10, "periodSeconds": 10,
                              "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
        c["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 5,
                               "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    return c
def pod(name, containers, init, smcr, big):
    ann = {"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z", "prometheus.io/scrape": "true", "prometheus.io/port": "9090"}
    if smcr: ann["network.alibabacloud.com/erdma-smcr"] = "true"
    md = {"generateName": name + "-7c9d8f6b5-", "namespace": "team-a",
          "labels": {"app": name, "pod-template-hash": "7c9d8f6b5", "tier": "backend"},
          "annotations": ann,
          "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name + "-7c9d8f6b5",
                               "uid": "5d5b5f0a-1f7e-4a0e-9c6e-3b0c8f7d2a11", "controller": True, "blockOwnerDeletion": True}]}
    if big: md["managedFields"] = [mf("kube-controller-manager", "Update", "2026-11-30T10:00:01Z")]
    spec = {"containers": containers, "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {"fsGroup": 2000},
            "schedulerName": "default-scheduler", "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "volumes": [{"name": "config", "configMap": {"name": name + "-config", "defaultMode": 420}},
                        {"name": "kube-api-access-7x2kq", "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}]}
    if init: spec["initContainers"] = init
    if big:
        spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}}]}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": {"phase": "Pending", "qosClass": "Burstable"}}
def review(p, uid):
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"}, "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-a", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller", "uid": "0b7e4d8a-2f1c-4c55-9a3e-6d2b1f0e9c77",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
        "object": p, "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}
big = review(pod("trainer", [container("app", "registry.example.com/ml/trainer:2.4.1", 50, erdma=True),
                             container("metrics-exporter", "registry.example.com/ops/exporter:1.8.0", 25),
                             container("log-shipper", "registry.example.com/ops/shipper:3.2.2", 18)],
                 [container("init-config", "registry.example.com/ops/init:1.0.3", 6, probes=False)], True, True),
             "7f3e9c2a-5b1d-4e8f-a6c0-2d9b8e1f4a35")
small = review(pod("worker", [container("app", "registry.example.com/ml/worker:1.0.0", 4, erdma=True, probes=False)], None, False, False),
               "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")
s_big = json.dumps(big, separators=(",", ":"))
s_small = json.dumps(small, separators=(",", ":"))
open(os.path.join(out, "review-15k.json"), "w").write(s_big)
open(os.path.join(out, "review-3k.json"), "w").write(s_small)
print(len(s_big), len(s_small))
