#!/usr/bin/python3
"""The test cluster's DNS (dns.py) on queries built here: what each name and type is answered,
the wire format of the answers, and queries that cannot be read. No socket, no apiserver: the
lookup is a dict. Debian's /usr/bin/python3, standard library only."""
import os
import socket
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dns  # noqa: E402

SERVICES = {("team-a", "web"): ["10.96.0.20"], ("team-a", "bulk-server"): ["10.89.1.5", "10.89.2.7"],
            ("team-a", "empty"): []}


def lookup(namespace, service):
    if namespace == "broken":
        raise dns.LookupError_("apiserver: connection refused")
    return SERVICES.get((namespace, service))


def query(name, qtype=dns.TYPE_A, qid=0x1234, flags=0x0100, extra=b""):
    q = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".") if p) + b"\0"
    return struct.pack("!HHHHHH", qid, flags, 1, 0, 0, 1 if extra else 0) + q + struct.pack("!HH", qtype, 1) + extra


def parse(resp):
    """(id, flags, rcode, [addresses]) of a response made by dns.response."""
    qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", resp[:12])
    pos = 12
    if qd:
        while resp[pos]:
            pos += resp[pos] + 1
        pos += 5
    addresses = []
    for _ in range(an):
        ptr, rtype, rclass, ttl, rdlen = struct.unpack("!HHHIH", resp[pos:pos + 12])
        assert (ptr, rtype, rclass, ttl, rdlen) == (0xC00C, 1, 1, dns.TTL, 4), (ptr, rtype, rclass, ttl, rdlen)
        addresses.append(socket.inet_ntoa(resp[pos + 12:pos + 16]))
        pos += 16
    assert pos == len(resp), "trailing bytes"
    return qid, flags, flags & 0xF, addresses


def ask(msg):
    out, line = dns.answer(msg, "cluster.local", lookup)
    return (parse(out) if out is not None else None), line


class Answers(unittest.TestCase):
    def test_a_service_by_its_full_name(self):
        (qid, flags, rcode, addrs), line = ask(query("web.team-a.svc.cluster.local"))
        self.assertEqual((qid, rcode, addrs), (0x1234, 0, ["10.96.0.20"]))
        self.assertTrue(flags & 0x8000 and flags & 0x0400, "a response, authoritative")
        self.assertTrue(flags & 0x0100, "RD echoed")
        self.assertIn("-> 10.96.0.20", line)

    def test_names_are_case_insensitive_and_the_question_is_echoed(self):
        msg = query("WEB.Team-A.svc.Cluster.Local")
        out, _ = dns.answer(msg, "cluster.local", lookup)
        self.assertEqual(out[12:12 + len(msg) - 12], msg[12:])
        self.assertEqual(parse(out)[3], ["10.96.0.20"])

    def test_a_headless_service_answers_each_ready_address(self):
        (_, _, rcode, addrs), _ = ask(query("bulk-server.team-a.svc.cluster.local"))
        self.assertEqual((rcode, addrs), (0, ["10.89.1.5", "10.89.2.7"]))

    def test_a_service_without_ready_endpoints_has_no_records(self):
        (_, _, rcode, addrs), line = ask(query("empty.team-a.svc.cluster.local"))
        self.assertEqual((rcode, addrs), (0, []))
        self.assertIn("no ready address", line)

    def test_other_types_of_a_service_get_an_empty_answer(self):
        (_, _, rcode, addrs), _ = ask(query("web.team-a.svc.cluster.local", qtype=28))
        self.assertEqual((rcode, addrs), (0, []))

    def test_no_such_service_and_other_names_in_the_domain_are_nxdomain(self):
        for name in ("nope.team-a.svc.cluster.local", "web.svc.cluster.local", "team-a.cluster.local",
                     "a.web.team-a.svc.cluster.local", "cluster.local"):
            (_, _, rcode, addrs), _ = ask(query(name))
            self.assertEqual((rcode, addrs), (dns.RCODE_NXDOMAIN, []), name)

    def test_names_outside_the_domain_are_nxdomain_so_the_search_list_goes_on(self):
        for name in ("example.com", "web", "notcluster.local"):
            (_, _, rcode, _), line = ask(query(name))
            self.assertEqual(rcode, dns.RCODE_NXDOMAIN, name)
            self.assertIn("outside cluster.local", line)

    def test_an_apiserver_that_does_not_answer_is_servfail(self):
        (_, _, rcode, _), line = ask(query("web.broken.svc.cluster.local"))
        self.assertEqual(rcode, dns.RCODE_SERVFAIL)
        self.assertIn("connection refused", line)

    def test_an_edns_record_after_the_question_is_ignored(self):
        opt = b"\0" + struct.pack("!HHIH", 41, 1232, 0, 0)
        (_, _, rcode, addrs), _ = ask(query("web.team-a.svc.cluster.local", extra=opt))
        self.assertEqual((rcode, addrs), (0, ["10.96.0.20"]))

    def test_answers_fit_in_512_bytes(self):
        svc, ns = "s" * 63, "n" * 63  # the longest names a Service and a namespace can have
        many = {(ns, svc): ["10.0.%d.%d" % (i // 250, i % 250) for i in range(100)]}
        out, _ = dns.answer(query("%s.%s.svc.cluster.local" % (svc, ns)), "cluster.local", lambda n, s: many.get((n, s)))
        got = parse(out)[3]
        self.assertLessEqual(len(out), 512)
        self.assertGreater(len(out), 512 - 16, "as many as fit")
        self.assertEqual(got, many[(ns, svc)][:len(got)])


class ApiAnswers(unittest.TestCase):
    """Api.addresses over answers the apiserver might give, good and malformed: never a throw."""

    def api(self, answers):
        api = dns.Api.__new__(dns.Api)  # no connection: get() answers from the dict
        api.get = lambda path: answers.get(path.split("?")[0])
        return api

    SVC = "/api/v1/namespaces/team-a/services/web"
    SLICES = "/apis/discovery.k8s.io/v1/namespaces/team-a/endpointslices"

    def test_a_cluster_ip(self):
        self.assertEqual(self.api({self.SVC: {"spec": {"clusterIP": "10.96.0.20"}}}).addresses("team-a", "web"),
                         ["10.96.0.20"])

    def test_no_such_service(self):
        self.assertIsNone(self.api({}).addresses("team-a", "web"))

    def test_headless_ready_endpoints_only_once_each(self):
        slices = {"items": [{"endpoints": [{"addresses": ["10.89.1.5"], "conditions": {"ready": True}},
                                           {"addresses": ["10.89.1.6"], "conditions": {"ready": False}},
                                           {"addresses": ["10.89.1.5", "10.89.2.7"]}]}]}
        api = self.api({self.SVC: {"spec": {"clusterIP": "None"}}, self.SLICES: slices})
        self.assertEqual(api.addresses("team-a", "web"), ["10.89.1.5", "10.89.2.7"])

    def test_malformed_answers_give_no_address(self):
        cases = (([], None),  # not a Service: as if there were none
                 ({"spec": 5}, {"items": 3}),
                 ({"spec": {"clusterIP": 7}}, {"items": [5, {"endpoints": "x"}]}),
                 ({"spec": {}}, {"items": [{"endpoints": [5, {"addresses": [1, "fe80::1", "nope"], "conditions": []}]}]}))
        for svc, slices in cases:
            got = self.api({self.SVC: svc, self.SLICES: slices}).addresses("team-a", "web")
            self.assertEqual(got, None if not isinstance(svc, dict) else [], (svc, slices))


class Unreadable(unittest.TestCase):
    def test_short_or_response_packets_get_no_answer(self):
        for msg in (b"", b"\x12\x34\x01", struct.pack("!HHHHHH", 1, 0x8000, 1, 0, 0, 0)):
            out, line = dns.answer(msg, "cluster.local", lookup)
            self.assertIsNone(out)
            self.assertIn("dropped", line)

    def test_questions_that_cannot_be_read_are_formerr(self):
        good = query("web.team-a.svc.cluster.local")
        bad = {
            "two questions": good[:4] + struct.pack("!H", 2) + good[6:],
            "no question": good[:4] + struct.pack("!H", 0) + good[6:],
            "cut in the name": good[:20],
            "cut before the type": good[:-3],
            "a compression pointer": good[:12] + b"\xc0\x0c" + good[-4:],
            "not ASCII": query("w\xe9b.team-a.svc.cluster.local".encode("latin-1").decode("latin-1")).replace(b"w", b"\xff", 1),
        }
        for why, msg in bad.items():
            out, line = dns.answer(msg, "cluster.local", lookup)
            self.assertIsNotNone(out, why)
            qid, _, rcode, addrs = parse(out)
            self.assertEqual((qid, rcode, addrs), (0x1234, dns.RCODE_FORMERR, []), why)
            self.assertIn("FORMERR", line, why)

    def test_another_opcode_is_not_implemented(self):
        (_, _, rcode, _), _ = ask(query("web.team-a.svc.cluster.local", flags=(2 << 11)))
        self.assertEqual(rcode, dns.RCODE_NOTIMP)


if __name__ == "__main__":
    unittest.main()
