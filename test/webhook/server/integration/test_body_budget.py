#!/usr/bin/python3
"""Request bodies share one byte budget (security review 2026-12b, M4): one peer sending 40 bodies
of 8 MiB at once (the default --max-body-bytes) gets each one either served or answered 429 with
Retry-After, never buffered past the budget, while ordinary AdmissionReviews from another peer
are all served with the same patch as on an idle server (a chunked one too; a chunked 1 MiB body
is refused once it grows past the share small bodies keep), /healthz answers, and the process's
peak RSS stays under the bound the budget implies, itself under the container's memory limit in
manifests/base.

Runs with Debian's /usr/bin/python3 (python3-prometheus-client). Loopback only; peers are told
apart by source address (127.0.0.1 and 127.0.0.2). Every wait is on an event (an answer, a metric,
a thread's signal) with a generous deadline; nothing is timed."""

import base64
import json
import os
import re
import select
import socket
import ssl
import threading
import time

from harness import SERVICE_NAME, SOURCE_DIR, Server, Suite, expect, pod, post_review, review

MIB = 1 << 20
KIB = 1 << 10
BIG = 8 * MIB        # the default --max-body-bytes: the largest body the server reads
BIG_CLIENTS = 40
HOG = "127.0.0.1"
APISERVER = "127.0.0.2"
ORDINARY_REVIEWS = 20
THREADS = 2          # as manifests/base/webhook-deployment.yaml runs it (--threads=2)

# What the RSS bound allows beyond the idle process and the budget itself, each for a reason:
# per open TLS connection, OpenSSL's read and write record buffers (about 17 KiB each) and the
# session's header and read buffers (16 KiB each) rounded up; per I/O thread, simdjson's
# buffers for one document (about 14 bytes per byte of JSON that is not whitespace, see
# ReviewDecoder::release_large_buffers) and the answer.
PER_CONNECTION = 96 * KIB
DECODE_FACTOR = 14


def container_memory_limit_kib():
    """The webhook container's memory limit in manifests/base/webhook-deployment.yaml."""
    with open(os.path.join(SOURCE_DIR, "manifests/base/webhook-deployment.yaml")) as f:
        text = f.read()
    m = re.search(r"\n(\s+)limits:\n(?:\1\s+.*\n)*?\1\s+memory:\s*(\d+)Mi\n", text)
    expect(m, "no memory limit found in manifests/base/webhook-deployment.yaml")
    return int(m.group(2)) * 1024


def big_review(i):
    """A valid AdmissionReview of exactly BIG bytes: an ordinary pod, padded with whitespace."""
    core = review(pod(name="big-%d" % i), uid="big-%d" % i)
    return core[:-1] + b" " * (BIG - len(core)) + b"}"


def patch_of(data):
    r = json.loads(data)["response"]
    return json.loads(base64.b64decode(r["patch"])) if "patch" in r else None


def raw_tls(port, ca, source):
    ctx = ssl.create_default_context(cafile=ca)
    s = socket.create_connection(("127.0.0.1", port), 60, source_address=(source, 0))
    return ctx.wrap_socket(s, server_hostname=SERVICE_NAME)


def read_answer(sock):
    """(status, headers dict, body) of one HTTP/1.1 answer with a Content-Length."""
    f = sock.makefile("rb")
    line = f.readline()
    expect(line.startswith(b"HTTP/1.1 "), "no HTTP answer: %r" % line[:100])
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", "0")))
    return int(line.split()[1]), headers, body


class BigClient:
    """One connection from HOG posting one BIG body in two steps: the header (the server reserves
    the body or answers 429 at once), then, once released, the body (or nothing, if answered)."""

    def __init__(self, server, i):
        self.i = i
        self.body = big_review(i)
        self.sock = raw_tls(server.port, server.ca, HOG)
        self.answer = None
        self.error = None

    def send_header(self):
        self.sock.sendall(b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: %s\r\n"
                          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                          % (SERVICE_NAME.encode(), len(self.body)))

    def finish(self):
        """Sends the body unless an answer came first (a 429 is sent before the body is read),
        then reads the answer."""
        try:
            view = memoryview(self.body)
            for off in range(0, len(view), 256 * KIB):
                if select.select([self.sock], [], [], 0)[0]:
                    break  # answered already: the rest is not wanted
                self.sock.sendall(view[off:off + 256 * KIB])
            self.answer = read_answer(self.sock)
        except Exception as e:  # reported by the check that reads self.answer
            self.error = e
        finally:
            self.sock.close()


def post_chunked(server, body):
    """POSTs body from APISERVER with Transfer-Encoding: chunked in 16 KiB chunks; the answer."""
    s = raw_tls(server.port, server.ca, APISERVER)
    try:
        s.sendall(b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" % SERVICE_NAME.encode())
        for off in range(0, len(body), 16 * KIB):
            if select.select([s], [], [], 0)[0]:
                break  # answered already
            piece = body[off:off + 16 * KIB]
            s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        else:
            s.sendall(b"0\r\n\r\n")
        return read_answer(s)
    finally:
        s.close()


def metric(server, name):
    return server.metrics().get((name, ()), 0)


def main():
    suite = Suite("body_budget")
    # The held bodies are sent only after the ordinary reviews: on a loaded machine (the sanitizer
    # build, beside VMs) that can take longer than the default body timeout, so it is set far out.
    server = Server(suite.workdir, extra_args=["--threads", str(THREADS), "--body-timeout", "300s"])
    ordinary = review(pod(name="web-0"), uid="ordinary")
    state = {}

    def idle_baseline():
        c = server.connect(source=APISERVER)
        status, _, data = post_review(c, ordinary)
        expect(status == 200, status)
        state["patch"] = patch_of(data)
        expect(state["patch"] and "LD_PRELOAD" in json.dumps(state["patch"]),
               "the SMC-R pod was not mutated: %r" % state["patch"])
        c.close()
        state["budget"] = int(metric(server, "erdma_webhook_body_budget_bytes"))
        state["idle_rss_kib"] = server.rss_kib()
        print("  idle RSS %d KiB; body budget %d bytes" % (state["idle_rss_kib"], state["budget"]))
        expect(state["budget"] < BIG_CLIENTS * BIG, "the default budget holds all 40 bodies: nothing to test")

    def big_bodies_reserved_or_refused_while_ordinary_served():
        clients = [BigClient(server, i) for i in range(BIG_CLIENTS)]
        state["clients"] = clients
        for c in clients:
            c.send_header()
        try:
            # Every header has been answered with 429 or its body reserved: wait for the sum.
            deadline = time.monotonic() + 60
            while True:
                m = server.metrics()
                used = int(m.get(("erdma_webhook_body_budget_used_bytes", ()), 0))
                refused = int(m.get(("erdma_webhook_body_budget_refused_total", ()), 0))
                if used % BIG == 0 and used // BIG + refused == BIG_CLIENTS:
                    break
                expect(time.monotonic() < deadline, "headers not all handled: %d bytes held, %d refused" %
                       (used, refused))
                time.sleep(0.02)
            state["held"] = used // BIG
            print("  40 headers of 8 MiB bodies: %d reserved (%d bytes), %d refused" % (state["held"], used, refused))
            expect(used <= state["budget"], "%d bytes held past the budget of %d" % (used, state["budget"]))
            expect(refused > 0, "no body refused although 40 x 8 MiB exceed the budget")

            # The budget is as full as large bodies may make it; the apiserver's reviews still fit.
            c = server.connect(source=APISERVER)
            for j in range(ORDINARY_REVIEWS):
                status, _, data = post_review(c, ordinary)
                expect(status == 200, "ordinary review %d: %d %r" % (j, status, data[:200]))
                expect(patch_of(data) == state["patch"], "ordinary review %d: a different patch" % j)
            c.request("GET", "/healthz")
            r = c.getresponse()
            expect(r.status == 200 and r.read() == b"ok\n", "healthz on the admission port")
            c.close()
            expect(metric(server, "erdma_webhook_body_budget_used_bytes") == used,
                   "the ordinary reviews' reservations were not given back")

            # A chunked body reserves as it grows: an ordinary review fits, a 1 MiB one stops
            # once it grows past the reserve's 64 KiB.
            status, _, data = post_chunked(server, ordinary)
            expect(status == 200 and patch_of(data) == state["patch"], "chunked review: %d" % status)
            padded = ordinary[:-1] + b" " * MIB + b"}"
            status, headers, data = post_chunked(server, padded)
            expect(status == 429 and headers.get("retry-after") == "1" and b"chunked request body" in data,
                   "chunked 1 MiB body: %d %r %r" % (status, headers, data[:200]))
            state["chunked_refused"] = 1
        finally:
            # The bodies go out whatever failed above, so that the peak RSS check sees them.
            threads = [threading.Thread(target=c.finish) for c in clients]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
        expect(not any(t.is_alive() for t in threads), "a big client is still running")

    def each_big_body_served_or_429():
        served = refused = 0
        for c in state["clients"]:
            expect(c.error is None and c.answer, "big body %d: no answer (%r)" % (c.i, c.error))
            status, headers, body = c.answer
            if status == 200:
                served += 1
                r = json.loads(body)["response"]
                expect(r["uid"] == "big-%d" % c.i and r["allowed"] is True, r)
            else:
                expect(status == 429, "big body %d: %d %r" % (c.i, status, body[:200]))
                expect(headers.get("retry-after", "").isdigit() and int(headers["retry-after"]) >= 1, headers)
                expect(b"body budget" in body, body)
                refused += 1
        print("  big bodies: %d served, %d answered 429" % (served, refused))
        expect(served == state["held"], "served %d, but %d were reserved" % (served, state["held"]))
        expect(refused + state.get("chunked_refused", 0) == metric(server, "erdma_webhook_body_budget_refused_total"),
               "429s and the counter differ")
        expect(refused > 0, "no 429")

    def budget_given_back_and_probes_answer():
        deadline = time.monotonic() + 20
        while metric(server, "erdma_webhook_body_budget_used_bytes") != 0:
            expect(time.monotonic() < deadline, "the budget was not given back")
            time.sleep(0.02)
        c = server.connect(source=APISERVER)
        status, _, data = post_review(c, ordinary)
        expect(status == 200 and patch_of(data) == state["patch"], status)
        c.close()
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % server.metrics_port, timeout=10) as r:
            expect(r.status == 200, "healthz on the metrics port")

    def peak_rss_within_the_budget_bound():
        hwm = server.hwm_kib()
        limit = container_memory_limit_kib()
        connections = BIG_CLIENTS + 2
        decode = THREADS * DECODE_FACTOR * len(review(pod(name="big-0"), uid="big-0"))
        bound = state["idle_rss_kib"] + (state["budget"] + connections * PER_CONNECTION + decode) // KIB
        print("  peak RSS %d KiB; bound %d KiB (idle %d + budget %d + %d connections + decoding); "
              "container limit %d KiB" % (hwm, bound, state["idle_rss_kib"], state["budget"] // KIB, connections,
                                          limit))
        expect(bound < limit, "the default budget does not fit the container's memory limit")
        if os.environ.get("ERDMA_SANITIZE"):
            # AddressSanitizer keeps freed bodies in its quarantine (256 MiB by default): the
            # peak measures the quarantine, not the server.
            print("  sanitizer build (%s): peak RSS not compared" % os.environ["ERDMA_SANITIZE"])
            return
        expect(hwm < bound, "peak RSS %d KiB over the bound %d KiB" % (hwm, bound))

    try:
        suite.check("an ordinary review on the idle server, the budget and the idle RSS", idle_baseline)
        suite.check("40 bodies of 8 MiB from one peer: reserved or refused; another peer's reviews served meanwhile",
                    big_bodies_reserved_or_refused_while_ordinary_served)
        suite.check("each 8 MiB body served or answered 429 with Retry-After; some 429s", each_big_body_served_or_429)
        suite.check("the budget given back; reviews and /healthz answered afterwards", budget_given_back_and_probes_answer)
        suite.check("peak RSS under the bound from the budget, and that under the container limit",
                    peak_rss_within_the_budget_bound)
        code = server.terminate()
        suite.check("exit status 0 after SIGTERM", lambda: expect(code == 0, code))
    finally:
        server.kill()  # only if a check left it running
    suite.finish()


if __name__ == "__main__":
    main()
