#!/usr/bin/python3
"""The test cluster's DNS for Services (scripts/cluster.sh starts it; each kubelet's clusterDNS
names it): A records for <service>.<namespace>.svc.<domain>, nothing else.

    dns.py --listen 10.255.0.1:53 [--listen ADDRESS:PORT ...] --server https://127.0.0.1:6443 --ca CA --cert CERT --key KEY \
        [--domain cluster.local]

A Service with a ClusterIP answers with it; a headless one (clusterIP: None) with the addresses of
its ready endpoints (EndpointSlices), as a cluster's DNS does, so that the README's examples
(examples/smcr-client.yaml reaches bulk-server by name) run as written. Answers live 5 s. Other
record types of a Service's name get an empty answer, every other name NXDOMAIN (this cluster
resolves nothing else; REFUSED would stop a resolver before it tried its next search domain). A query that cannot be read gets FORMERR,
or nothing when not even its header can be read; an apiserver that does not answer gives SERVFAIL.
UDP only: an answer never exceeds 512 bytes (addresses that would not fit are left out). Each query is logged on
stdout. Debian's /usr/bin/python3 (or any python3), standard library only.
"""
import argparse
import http.client
import json
import select
import socket
import ssl
import struct
import sys
import urllib.parse

TYPE_A = 1
CLASS_IN = 1
RCODE_FORMERR, RCODE_SERVFAIL, RCODE_NXDOMAIN, RCODE_NOTIMP = 1, 2, 3, 4
TTL = 5
UDP_SIZE = 512  # what a resolver takes without EDNS; more addresses than fit are left out


class LookupError_(Exception):
    """The apiserver could not be asked: SERVFAIL."""


def read_question(msg):
    """(id, flags, name, qtype, qclass, question_bytes) of a query; ValueError when it cannot be
    read past its header (id and flags are then in the exception's args for FORMERR)."""
    if len(msg) < 12:
        raise ValueError("shorter than a header", None)
    qid, flags, qdcount = struct.unpack("!HHH", msg[:6])
    if flags & 0x8000:
        raise ValueError("a response, not a query", (qid, flags, "drop"))
    if qdcount != 1:
        raise ValueError("%d questions" % qdcount, (qid, flags, "formerr"))
    pos, labels = 12, []
    while True:
        if pos >= len(msg):
            raise ValueError("name runs past the end", (qid, flags, "formerr"))
        n = msg[pos]
        if n & 0xC0:
            raise ValueError("compressed or extended label in a question", (qid, flags, "formerr"))
        pos += 1
        if n == 0:
            break
        if pos + n > len(msg):
            raise ValueError("label runs past the end", (qid, flags, "formerr"))
        labels.append(msg[pos:pos + n])
        pos += n
    if pos + 4 > len(msg) or pos - 12 > 255:
        raise ValueError("question too short or name too long", (qid, flags, "formerr"))
    qtype, qclass = struct.unpack("!HH", msg[pos:pos + 4])
    try:
        name = ".".join(label.decode("ascii").lower() for label in labels)
    except UnicodeDecodeError:
        raise ValueError("name is not ASCII", (qid, flags, "formerr"))
    return qid, flags, name, qtype, qclass, msg[12:pos + 4]


def service_of(name, domain):
    """(namespace, service) when name is <service>.<namespace>.svc.<domain>, "other" for another
    name under the domain, None for a name outside it."""
    suffix = ".svc." + domain
    if name != domain and not name.endswith("." + domain):
        return None
    if not name.endswith(suffix):
        return "other"
    parts = name[:-len(suffix)].split(".")
    if len(parts) != 2 or not all(parts):
        return "other"
    return parts[1], parts[0]


def response(qid, flags, question, rcode, addresses=()):
    """A response to a query with these id and flags: authoritative, the question echoed, an A
    record per address (the name by a pointer to the question's)."""
    opcode_rd = flags & 0x7900  # opcode and RD, as asked
    head = struct.pack("!HHHHHH", qid, 0x8000 | 0x0400 | 0x0080 | opcode_rd | rcode,
                       1 if question else 0, len(addresses), 0, 0)
    body = b"".join(struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL, 4) + socket.inet_aton(a)
                    for a in addresses)
    return head + (question or b"") + body


def answer(msg, domain, lookup):
    """The response bytes to the query msg (None: no answer at all), and a line saying what was
    asked and answered. lookup(namespace, service) gives the addresses, None for no such Service,
    or raises LookupError_."""
    try:
        qid, flags, name, qtype, qclass, question = read_question(msg)
    except ValueError as e:
        why, head = e.args
        if head is None or head[2] == "drop":
            return None, "dropped: %s" % why
        return response(head[0], head[1], None, RCODE_FORMERR), "FORMERR: %s" % why
    what = "%s %s" % ({TYPE_A: "A", 28: "AAAA"}.get(qtype, "type%d" % qtype), name)
    if (flags >> 11) & 0xF != 0:
        return response(qid, flags, question, RCODE_NOTIMP), what + " -> NOTIMP (opcode)"
    target = service_of(name, domain)
    if target is None:
        return response(qid, flags, question, RCODE_NXDOMAIN), what + " -> NXDOMAIN (outside %s)" % domain
    if target == "other":
        return response(qid, flags, question, RCODE_NXDOMAIN), what + " -> NXDOMAIN"
    try:
        addresses = lookup(*target)
    except LookupError_ as e:
        return response(qid, flags, question, RCODE_SERVFAIL), what + " -> SERVFAIL (%s)" % e
    if addresses is None:
        return response(qid, flags, question, RCODE_NXDOMAIN), what + " -> NXDOMAIN (no such Service)"
    if qtype != TYPE_A or qclass != CLASS_IN:
        return response(qid, flags, question, 0), what + " -> no records of that type"
    addresses = addresses[:(UDP_SIZE - 12 - len(question)) // 16]
    return response(qid, flags, question, 0, addresses), what + " -> " + (" ".join(addresses) or "no ready address")


class Api:
    """Services and EndpointSlices from the apiserver, a connection per lookup."""

    def __init__(self, server, ca, cert, key):
        url = urllib.parse.urlparse(server)
        self.host, self.port = url.hostname, url.port or 443
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)

    def get(self, path):
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=3)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
        except (OSError, http.client.HTTPException) as e:
            raise LookupError_("apiserver: %s" % e)
        finally:
            conn.close()
        if r.status == 404:
            return None
        if r.status != 200:
            raise LookupError_("apiserver answered %d for %s" % (r.status, path))
        try:
            return json.loads(body)
        except ValueError as e:
            raise LookupError_("apiserver sent no JSON for %s: %s" % (path, e))

    def addresses(self, namespace, service):
        q = urllib.parse.quote
        svc = self.get("/api/v1/namespaces/%s/services/%s" % (q(namespace, safe=""), q(service, safe="")))
        if not isinstance(svc, dict):
            return None
        spec = svc.get("spec") if isinstance(svc.get("spec"), dict) else {}
        ip = spec.get("clusterIP")
        if isinstance(ip, str) and ip and ip != "None":
            return [ip]
        selector = urllib.parse.urlencode({"labelSelector": "kubernetes.io/service-name=" + service})
        slices = self.get("/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices?%s" % (q(namespace, safe=""), selector))
        found = []
        items = slices.get("items") if isinstance(slices, dict) else None
        for s in items if isinstance(items, list) else []:
            endpoints = s.get("endpoints") if isinstance(s, dict) else None
            for ep in endpoints if isinstance(endpoints, list) else []:
                if not isinstance(ep, dict):
                    continue
                conditions = ep.get("conditions") if isinstance(ep.get("conditions"), dict) else {}
                if conditions.get("ready") is False:
                    continue
                addrs = ep.get("addresses")
                for a in addrs if isinstance(addrs, list) else []:
                    if isinstance(a, str) and a.count(".") == 3 and a not in found:
                        found.append(a)
        return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", required=True, action="append",
                    help="ADDRESS:PORT (UDP), once per address: an answer leaves from the address asked")
    ap.add_argument("--server", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--domain", default="cluster.local")
    a = ap.parse_args()
    api = Api(a.server, a.ca, a.cert, a.key)
    # A socket per address, not one on 0.0.0.0: an answer from a wildcard socket leaves from the
    # address the route back picks (the pods' bridge), which the asking resolver does not accept.
    socks = []
    for listen in a.listen:
        host, _, port = listen.rpartition(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((host, int(port)))
        except (OSError, ValueError) as e:
            sys.exit("dns: cannot listen on %s: %s" % (listen, e))
        socks.append(sock)
    print("dns: serving %s on %s (udp), Services from %s" % (a.domain, " ".join(a.listen), a.server), flush=True)
    domain = a.domain.strip(".").lower()
    while True:
        for sock in select.select(socks, [], [])[0]:
            msg, peer = sock.recvfrom(4096)
            out, line = answer(msg, domain, api.addresses)
            print("dns: %s: %s" % (peer[0], line), flush=True)
            if out is not None:
                sock.sendto(out, peer)


if __name__ == "__main__":
    main()
