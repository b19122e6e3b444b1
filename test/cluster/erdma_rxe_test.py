"""The VM nodes' CNI chain step (test/cluster/vm-node/erdma-rxe) against malformed and incomplete
input: every refusal is a CNI error object on stdout with the spec's code and exit status 1, and
VERSION, DEL of a device that is not there and CHECK of a missing one answer as the spec says.
None of these cases creates an RDMA device. Debian's /usr/bin/python3, standard library only."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

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

# The ipvlan layout: its configuration, its address bookkeeping. Creating the ipvlan itself needs
# root and a node; the VM-node lane does that (namespace ipvlan-rxe).
held = tempfile.mkdtemp(prefix="erdma-rxe-test.")
try:
    def ipv(**over):
        c = {"namespaces": ["ipvlan-rxe"], "master": "eth0", "addresses": ["10.255.1.110/24", "10.255.1.111/24"],
             "heldDir": held}
        c.update(over)
        return json.dumps({"cniVersion": "1.0.0", "name": "t", "type": "erdma-rxe", "ipvlan": c,
                           "prevResult": {"cniVersion": "1.0.0", "ips": [{"address": "10.89.1.9/24"}]}})
    ipv_args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ipvlan-rxe;K8S_POD_NAME=p"
    for what, bad in (("a master that is not a name", {"master": ""}),
                      ("addresses without a prefix length", {"addresses": ["10.255.1.110"]}),
                      ("namespaces that is not a list", {"namespaces": "ipvlan-rxe"}),
                      ("a heldDir that is not a path", {"heldDir": 3})):
        expect("ipvlan with %s: code 7" % what, run(ipv(**bad), CNI_COMMAND="ADD", CNI_CONTAINERID=CID, CNI_ARGS=ipv_args), 7)
    expect("ipvlan ADD into a network namespace outside /run/netns: code 4",
           run(ipv(), CNI_COMMAND="ADD", CNI_CONTAINERID=CID, CNI_NETNS="/proc/self/ns/net", CNI_IFNAME="eth0",
               CNI_ARGS=ipv_args), 4)
    if os.listdir(held):
        failed += 1
        print("FAIL: a refused ADD held an address: %r" % os.listdir(held))
    # Both addresses held by other pods: ADD is refused before any ip command (PATH is empty).
    for a, owner in (("10.255.1.110", "c" * 20), ("10.255.1.111", "d" * 20)):
        with open(os.path.join(held, a), "w") as f:
            f.write(owner + "\n")
    out = expect("ipvlan ADD with every address held by other pods: code 11",
                 run(ipv(), CNI_COMMAND="ADD", CNI_CONTAINERID=CID, CNI_NETNS="/run/netns/erdma-rxe-test-none",
                     CNI_IFNAME="eth0", CNI_ARGS=ipv_args, PATH=""), 11)
    if isinstance(out, dict) and "every ipvlan address is held (2)" not in out.get("msg", ""):
        failed += 1
        print("FAIL: the refusal does not say why: %r" % (out,))
    expect("ipvlan CHECK of a pod holding no address: code 11",
           run(ipv(), CNI_COMMAND="CHECK", CNI_CONTAINERID=CID, CNI_ARGS=ipv_args), 11)
    expect("ipvlan CHECK of a pod holding its address succeeds",
           run(ipv(), CNI_COMMAND="CHECK", CNI_CONTAINERID="c" * 20, CNI_ARGS=ipv_args), None)
    expect("ipvlan DEL gives the pod's address back",
           run(ipv(), CNI_COMMAND="DEL", CNI_CONTAINERID="c" * 20, CNI_ARGS=ipv_args, PATH=""), None)
    if sorted(os.listdir(held)) != ["10.255.1.111"]:
        failed += 1
        print("FAIL: after DEL of one pod the held addresses are %r" % sorted(os.listdir(held)))
    expect("ipvlan DEL again (idempotent)", run(ipv(), CNI_COMMAND="DEL", CNI_CONTAINERID="c" * 20, CNI_ARGS=ipv_args), None)
    # Another namespace is not touched by the ipvlan section: its device is still checked.
    expect("a namespace outside ipvlan.namespaces gets its device checked: code 11",
           run(ipv(), CNI_COMMAND="CHECK", CNI_CONTAINERID=CID, CNI_ARGS="K8S_POD_NAMESPACE=smcr-demo"), 11)
finally:
    shutil.rmtree(held)
print("erdma_rxe: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
