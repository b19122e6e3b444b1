#!/usr/bin/python3
"""Writes the pod network of one test node as a CNI conflist (Debian's /usr/bin/python3).

  cni.py --role 1|2 --layout bridge|ipvlan --out FILE

bridge: a Linux bridge cni0 per node with its own pod subnet 10.244.ROLE.0/24 (host-local), the
        node routes the peer's pod subnet via the peer's node IP (node.sh adds that route).
ipvlan: an ipvlan L2 child of eth0 in the pod, the pod IP in the node subnet 10.77.0.0/24 from
        node ROLE's range 10.77.0.ROLE1-10.77.0.ROLE9 (host-local).
containerd 1.6 uses the first conflist in its conf_dir (max_conf_num 1) and reloads it when the
directory changes, so node.sh switches the layout by replacing one file (written here to a
temporary name and renamed, so containerd never reads half a file).
"""
import argparse
import json
import os

p = argparse.ArgumentParser()
p.add_argument("--role", type=int, choices=(1, 2), required=True)
p.add_argument("--layout", choices=("bridge", "ipvlan"), required=True)
p.add_argument("--out", required=True)
a = p.parse_args()
if a.layout == "bridge":
    plugin = {
        "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.%d.0/24" % a.role}]],
                 "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "/run/cni/ipam-bridge"},
    }
else:
    plugin = {
        "type": "ipvlan", "master": "eth0", "mode": "l2",
        "ipam": {"type": "host-local",
                 "ranges": [[{"subnet": "10.77.0.0/24", "rangeStart": "10.77.0.%d1" % a.role,
                              "rangeEnd": "10.77.0.%d9" % a.role}]],
                 "dataDir": "/run/cni/ipam-ipvlan"},
    }
conf = {"cniVersion": "1.0.0", "name": "pods-" + a.layout, "plugins": [plugin]}
tmp = a.out + ".tmp"
with open(tmp, "w") as f:
    json.dump(conf, f, indent=2)
os.rename(tmp, a.out)
print("%s: %s" % (a.out, conf["name"]))
