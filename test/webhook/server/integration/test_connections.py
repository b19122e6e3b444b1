#!/usr/bin/python3
"""Connections cannot be hoarded (security review M1): a client holding every slot of
--max-connections idle does not lock the apiserver out, connections that never carried an
AdmissionReview go first and time out sooner, and --max-connections-per-peer keeps one address
to its share. Peers are told apart by source address: 127.0.0.1 and 127.0.0.2 on loopback.

Runs with Debian's /usr/bin/python3 (python3-prometheus-client). Loopback only; every wait is on an
event (a metric, an end of stream) with a generous deadline."""

import json
import os
import socket
import ssl
import time

from harness import Server, Suite, expect, pod, post_review, review

HOARDER = "127.0.0.1"
NEWCOMER = "127.0.0.2"


def metric(server, name):
    return server.metrics().get((name, ()), 0)


def wait_metric(server, name, want, seconds=20):
    deadline = time.monotonic() + seconds
    while metric(server, name) != want and time.monotonic() < deadline:
        time.sleep(0.02)
    got = metric(server, name)
    expect(got == want, "%s: want %r, got %r" % (name, want, got))


def reviewed(server, uid, idle, source=HOARDER):
    """A connection that has carried one AdmissionReview and now waits, kept alive. The client has
    the answer before the server counts the connection idle; the eviction order is the order of
    the latter, so this returns once `idle` connections wait (this one among them)."""
    c = server.connect(timeout=20, source=source)
    status, _, data = post_review(c, review(pod(), uid=uid))
    expect(status == 200 and json.loads(data)["response"]["uid"] == uid, "review %s: %d" % (uid, status))
    wait_metric(server, "erdma_webhook_connections_idle", idle)
    return c


def probed(server, idle, source=HOARDER):
    """A connection that has carried only a GET /healthz and now waits, kept alive (as reviewed())."""
    c = server.connect(timeout=20, source=source)
    c.request("GET", "/healthz")
    r = c.getresponse()
    expect(r.status == 200 and r.read() == b"ok\n", "healthz")
    wait_metric(server, "erdma_webhook_connections_idle", idle)
    return c


def closed_by_server(conn, seconds=20):
    """True once the server has closed this idle connection (close_notify or EOF) within `seconds`."""
    conn.sock.settimeout(seconds)
    try:
        return conn.sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def main():
    suite = Suite("connections")

    def start(name, *args):
        os.makedirs(os.path.join(suite.workdir, name), exist_ok=True)
        return Server(os.path.join(suite.workdir, name), extra_args=list(args))

    def idle_hoard_does_not_lock_out():
        server = start("hoard", "--max-connections", "32")
        held = []
        try:
            for i in range(32):
                held.append(reviewed(server, "hoard-%d" % i, idle=i + 1))
            wait_metric(server, "erdma_webhook_connections_open", 32)
            t0 = time.monotonic()
            c = server.connect(timeout=20, source=NEWCOMER)
            status, _, data = post_review(c, review(pod(), uid="newcomer"))
            took = time.monotonic() - t0
            expect(status == 200 and json.loads(data)["response"]["uid"] == "newcomer", "newcomer: %d" % status)
            print("  newcomer answered in %.1f ms with 32 of 32 slots held idle" % (took * 1000))
            expect(metric(server, "erdma_webhook_connections_evicted_total") == 1, "one eviction")
            expect(metric(server, "erdma_webhook_connections_refused_total") == 0, "nobody refused")
            expect(closed_by_server(held[0]), "the connection idle longest was not the one closed")
            # The others still serve on the same connection.
            sock = held[1].sock
            status, _, _ = post_review(held[1], review(pod(), uid="again"))
            expect(status == 200 and held[1].sock is sock, "a hoarded connection that was not evicted")
            # Every further newcomer gets in the same way.
            for i in range(8):
                n = server.connect(timeout=20, source=NEWCOMER)
                status, _, _ = post_review(n, review(pod(), uid="n%d" % i))
                expect(status == 200, "newcomer %d: %d" % (i, status))
                held.append(n)
            expect(metric(server, "erdma_webhook_connections_evicted_total") == 9, "nine evictions")
            c.close()
        finally:
            for h in held:
                h.close()
            expect(server.terminate() == 0, "exit status")

    def strangers_evicted_before_reviewers():
        server = start("order", "--max-connections", "4")
        try:
            a = reviewed(server, "a", idle=1)   # waits longest, but carried a review
            b = reviewed(server, "b", idle=2)
            c = probed(server, idle=3)          # only probed: evicted first
            d = probed(server, idle=4)
            wait_metric(server, "erdma_webhook_connections_open", 4)
            # Each newcomer takes an evicted connection's place: four wait again.
            e = reviewed(server, "e", idle=4, source=NEWCOMER)
            expect(closed_by_server(c), "the probed connection that waited longest was not evicted")
            f = reviewed(server, "f", idle=4, source=NEWCOMER)
            expect(closed_by_server(d), "the other probed connection was not evicted next")
            g = reviewed(server, "g", idle=4, source=NEWCOMER)
            expect(closed_by_server(a), "then the reviewed connection idle longest")
            sock = b.sock
            status, _, _ = post_review(b, review(pod(), uid="b2"))
            expect(status == 200 and b.sock is sock, "b was evicted out of turn")
            for x in (a, b, c, d, e, f, g):
                x.close()
        finally:
            expect(server.terminate() == 0, "exit status")

    def per_peer_cap():
        server = start("peer", "--max-connections", "32", "--max-connections-per-peer", "4")
        try:
            # Four connections of one peer, each in the middle of a request body (busy).
            busy = []
            for _ in range(4):
                c = server.connect(timeout=20, source=NEWCOMER)
                c.connect()
                c.sock.sendall(b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 1000\r\n\r\n{")
                busy.append(c)
            wait_metric(server, "erdma_webhook_connections_open", 4)
            # Each has read its header (1000 bytes reserved for its body): all four are busy.
            wait_metric(server, "erdma_webhook_body_budget_used_bytes", 4000)
            # A fifth from that peer is closed at once; another peer is served.
            try:
                c = server.connect(timeout=10, source=NEWCOMER)
                c.request("GET", "/healthz")
                c.getresponse().read()
                raise AssertionError("a fifth connection of one peer was served with --max-connections-per-peer 4")
            except (ssl.SSLError, ConnectionError, OSError):
                pass
            expect(metric(server, "erdma_webhook_connections_peer_refused_total") == 1, "peer refusal not counted")
            other = reviewed(server, "other", idle=1, source=HOARDER)
            for c in busy:
                c.close()
            wait_metric(server, "erdma_webhook_connections_open", 1)
            # Idle connections at the peer's cap: the peer's own oldest makes room, not another's,
            # though the other peer's connection has waited longer.
            idle = [reviewed(server, "p%d" % i, idle=i + 2, source=NEWCOMER) for i in range(4)]
            fifth = reviewed(server, "p4", idle=5, source=NEWCOMER)
            expect(closed_by_server(idle[0]), "the peer's own oldest connection was not the one closed")
            sock = other.sock
            status, _, _ = post_review(other, review(pod(), uid="other2"))
            expect(status == 200 and other.sock is sock, "another peer's connection was closed")
            expect(metric(server, "erdma_webhook_connections_evicted_total") == 1, "one eviction")
            for c in idle + [fifth, other]:
                c.close()
        finally:
            expect(server.terminate() == 0, "exit status")

    def short_idle_before_review():
        server = start("short", "--idle-timeout-before-review", "1s")
        try:
            r = reviewed(server, "r", idle=1)
            p = probed(server, idle=2)
            t0 = time.monotonic()
            expect(closed_by_server(p), "a probed connection outlived --idle-timeout-before-review")
            print("  connection without a review closed after %.2f s idle (--idle-timeout-before-review 1s)"
                  % (time.monotonic() - t0))
            sock = r.sock
            status, _, _ = post_review(r, review(pod(), uid="r2"))
            expect(status == 200 and r.sock is sock, "a reviewed connection was closed with the short timeout")
            r.close()
            p.close()
        finally:
            expect(server.terminate() == 0, "exit status")

    suite.check("32 idle connections holding --max-connections 32 do not lock a new client out",
                idle_hoard_does_not_lock_out)
    suite.check("connections without a review are evicted before the apiserver's", strangers_evicted_before_reviewers)
    suite.check("--max-connections-per-peer: a peer's fifth is refused while all are busy, else evicts its own",
                per_peer_cap)
    suite.check("--idle-timeout-before-review closes a connection that never carried a review", short_idle_before_review)
    suite.finish()


if __name__ == "__main__":
    main()
