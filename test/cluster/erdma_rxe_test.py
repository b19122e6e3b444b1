"""The VM nodes' CNI chain step (test/cluster/vm-node/erdma-rxe) against malformed and incomplete
input: every refusal is a CNI error object on stdout with the spec's code and exit status 1, and
VERSION, DEL of a device that is not there and CHECK of a missing one answer as the spec says.
None of these cases creates an RDMA device. Debian's /usr/bin/python3, standard library only."""
import json
import os
import subprocess
import sys

PLUGIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vm-node", "erdma-rxe")
CID = "0123456789abcdef0123"  # no device rxe_0123456789ab exists on a build host
passed = failed = 0


def run(stdin, **env):
    e = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    e.update({k: v for k, v in env.items() if v is not None})
    r = subprocess.run(["/usr/bin/python3", PLUGIN], input=stdin, capture_output=True, text=True, env=e, timeout=60)
    try:
        out = json.loads(r.stdout) if r.stdout.strip() else None
    except ValueError:
        out = "not JSON: " + r.stdout
    return r.returncode, out


def expect(name, got, code):
    global passed, failed
    rc, out = got
    ok = (rc == 0 and code is None) or (rc == 1 and isinstance(out, dict) and out.get("code") == code and out.get("msg"))
    if ok:
        passed += 1
        print("PASS:", name)
    else:
        failed += 1
        print("FAIL: %s: exit %d, %r" % (name, rc, out))
    return out


conf = json.dumps({"cniVersion": "1.0.0", "name": "t", "type": "erdma-rxe", "prevResult": {"cniVersion": "1.0.0", "ips": []}})
expect("stdin that is not JSON: code 6", run("{not json", CNI_COMMAND="ADD", CNI_CONTAINERID=CID), 6)
expect("an unknown CNI_COMMAND: code 4", run(conf, CNI_COMMAND="FROB", CNI_CONTAINERID=CID), 4)
expect("no CNI_CONTAINERID: code 4", run(conf, CNI_COMMAND="ADD", CNI_NETNS="/proc/self/ns/net", CNI_IFNAME="eth0"), 4)
expect("a container ID shorter than 12 characters: code 4",
       run(conf, CNI_COMMAND="ADD", CNI_CONTAINERID="abc", CNI_NETNS="/proc/self/ns/net", CNI_IFNAME="eth0"), 4)
expect("ADD without CNI_NETNS: code 4", run(conf, CNI_COMMAND="ADD", CNI_CONTAINERID=CID, CNI_IFNAME="eth0"), 4)
no_prev = json.dumps({"cniVersion": "1.0.0", "name": "t", "type": "erdma-rxe"})
expect("ADD as a first plugin (no prevResult): code 4",
       run(no_prev, CNI_COMMAND="ADD", CNI_CONTAINERID=CID, CNI_NETNS="/proc/self/ns/net", CNI_IFNAME="eth0"), 4)
v = expect("VERSION lists the supported versions", run(conf, CNI_COMMAND="VERSION"), None)
if not (isinstance(v, dict) and "1.0.0" in v.get("supportedVersions", [])):
    failed += 1
    print("FAIL: VERSION answer: %r" % (v,))
expect("DEL of a device that is not there succeeds (idempotent)", run(conf, CNI_COMMAND="DEL", CNI_CONTAINERID=CID), None)
expect("CHECK of a missing device: code 11", run(conf, CNI_COMMAND="CHECK", CNI_CONTAINERID=CID), 11)
skip = json.dumps({"cniVersion": "1.0.0", "name": "t", "type": "erdma-rxe", "skipNamespaces": ["plain-veth"],
                   "prevResult": {"cniVersion": "1.0.0", "ips": [{"address": "10.89.1.9/24"}]}})
args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=plain-veth;K8S_POD_NAME=p"
# A skipped namespace: ADD passes prevResult on unchanged and creates nothing (rdma is never run:
# an empty PATH would fail it), CHECK has nothing to find.
out = expect("ADD in a skipped namespace passes prevResult on, no device",
             run(skip, CNI_COMMAND="ADD", CNI_CONTAINERID=CID, CNI_NETNS="/proc/self/ns/net", CNI_IFNAME="eth0",
                 CNI_ARGS=args, PATH=""), None)
if out != json.loads(skip)["prevResult"]:
    failed += 1
    print("FAIL: the skipped ADD's result is not prevResult: %r" % (out,))
expect("CHECK in a skipped namespace succeeds", run(skip, CNI_COMMAND="CHECK", CNI_CONTAINERID=CID, CNI_ARGS=args, PATH=""), None)
expect("a namespace that is not skipped still gets its device checked: code 11",
       run(skip, CNI_COMMAND="CHECK", CNI_CONTAINERID=CID, CNI_ARGS="K8S_POD_NAMESPACE=smcr-demo"), 11)
expect("skipNamespaces that is not a list of names: code 7",
       run(json.dumps({"cniVersion": "1.0.0", "type": "erdma-rxe", "skipNamespaces": "plain-veth"}), CNI_COMMAND="ADD",
           CNI_CONTAINERID=CID, CNI_ARGS=args), 7)
print("erdma_rxe: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
