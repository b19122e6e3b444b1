#!/usr/bin/python3
"""The admission port speaks HTTP/1.1 over TLS as kube-apiserver expects: every status code,
keep-alive, pipelining, chunked bodies, 100-continue, TLS versions and suites, plain HTTP
refused, metrics (checked with prometheus_client's parser) and one JSON log line per admission.
Clients: Python's http.client and ssl, curl, openssl s_client."""

import base64
import json
import os
import re
import socket
import ssl
import subprocess
import time
import warnings

from harness import (SERVICE_NAME, Server, Suite, expect, pod, post_review, review)


def raw_tls(server, timeout=10):
    ctx = ssl.create_default_context(cafile=server.ca)
    s = socket.create_connection(("127.0.0.1", server.port), timeout)
    return ctx.wrap_socket(s, server_hostname=SERVICE_NAME)


def read_response(f):
    """Reads one HTTP/1.1 response (Content-Length framed) from a binary file object."""
    status_line = f.readline()
    expect(status_line.startswith(b"HTTP/1."), "no status line, got %r" % status_line[:80])
    status = int(status_line.split()[1])
    headers = {}
    while True:
        line = f.readline()
        expect(line, "connection closed inside the header")
        if line in (b"\r\n", b"\n"):
            break
        k, v = line.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", "0")))
    return status, headers, body


def curl(server, *args):
    base = ["curl", "-sS", "--max-time", "20", "--cacert", server.ca,
            "--resolve", "%s:%d:127.0.0.1" % (SERVICE_NAME, server.port)]
    return subprocess.run(base + list(args), capture_output=True, timeout=30)


def url(server, path):
    return "https://%s:%d%s" % (SERVICE_NAME, server.port, path)


def s_client(server, *args, stdin=b"Q\n"):
    cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % server.port, "-servername", SERVICE_NAME,
           "-CAfile", server.ca, "-verify_return_error", "-brief"] + list(args)
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=30)


def main():
    suite = Suite("protocol")
    # The library from a hostPath volume: the one configuration where a pod can be refused (its
    # own volume of the preload volume's name), so every admission outcome is on the wire here.
    config = os.path.join(suite.workdir, "config.yaml")
    with open(config, "w") as f:
        f.write("smcr: {libraryFrom: hostPath}\n")
    server = Server(suite.workdir, config=config)
    body = review(pod(), uid="uid-mutate")
    sent = {"mutated": 0, "skipped": 0, "invalid": 0, "rejected": 0}

    def admission_as_apiserver():
        conn = server.connect()
        status, headers, data = post_review(conn, body)
        expect(status == 200, "status %d" % status)
        expect(headers["content-type"] == "application/json", headers)
        doc = json.loads(data)
        expect(doc["apiVersion"] == "admission.k8s.io/v1" and doc["kind"] == "AdmissionReview", doc)
        r = doc["response"]
        expect(r["uid"] == "uid-mutate" and r["allowed"] is True and r["patchType"] == "JSONPatch", r)
        patch = json.loads(base64.b64decode(r["patch"]))
        expect(any(op["path"] == "/spec/volumes" for op in patch), patch)
        expect(r.get("warnings"), "expected a warning for the added resource: %s" % r)
        sent["mutated"] += 1
        # v1beta1 reviews get a v1beta1 answer.
        beta = json.loads(body)
        beta["apiVersion"] = "admission.k8s.io/v1beta1"
        status, _, data = post_review(conn, json.dumps(beta).encode())
        expect(status == 200 and json.loads(data)["apiVersion"] == "admission.k8s.io/v1beta1", data)
        sent["mutated"] += 1
        # A pod that asks for nothing: allowed, no patch.
        status, _, data = post_review(conn, review(pod(smcr=False), uid="uid-skip"))
        expect(status == 200 and "patch" not in json.loads(data)["response"], data)
        sent["skipped"] += 1
        # A pod the webhook refuses: still HTTP 200, allowed false.
        bad = pod()
        bad["spec"]["volumes"] = [{"name": "erdma-smc-preload", "emptyDir": {}}]
        status, _, data = post_review(conn, review(bad, uid="uid-reject"))
        r = json.loads(data)["response"]
        expect(status == 200 and r["allowed"] is False and r["uid"] == "uid-reject", data)
        sent["rejected"] += 1
        conn.close()

    def status_codes():
        conn = server.connect()
        cases = [
            ("POST", "/mutate-pods", b"{not json", {"Content-Type": "application/json"}, 400),
            ("POST", "/mutate-pods", b"", {"Content-Type": "application/json"}, 400),
            ("POST", "/mutate-pods", body, {"Content-Type": "text/plain"}, 415),
            ("POST", "/mutate-pods", body, {}, 415),
            ("GET", "/mutate-pods?timeout=10s", None, {}, 405),
            ("PUT", "/mutate-pods", body, {"Content-Type": "application/json"}, 405),
            ("GET", "/nope", None, {}, 404),
            ("POST", "/", body, {"Content-Type": "application/json"}, 404),
            ("GET", "/healthz", None, {}, 200),
            ("GET", "/readyz", None, {}, 200),
        ]
        for method, path, data, headers, want in cases:
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            got = r.read()
            expect(r.status == want, "%s %s: want %d, got %d %r" % (method, path, want, r.status, got[:200]))
            if want == 405:
                expect(r.getheader("Allow") == "POST", r.getheaders())
        sent["invalid"] += 4  # two 400s and two 415s
        # HEAD answers headers only.
        conn.request("HEAD", "/healthz")
        r = conn.getresponse()
        expect(r.status == 200 and r.read() == b"", "HEAD")
        conn.close()

    def too_large_from_headers():
        # The 413 comes back before a single body byte is sent: decided from Content-Length.
        s = raw_tls(server)
        s.sendall(b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 67108864\r\n\r\n" % SERVICE_NAME.encode())
        status, headers, data = read_response(s.makefile("rb"))
        expect(status == 413, "want 413, got %d" % status)
        expect(headers.get("connection") == "close", headers)
        s.close()

    def keep_alive():
        conn = server.connect()
        conn.connect()
        first = conn.sock
        for i in range(25):
            status, headers, _ = post_review(conn, review(pod(), uid="ka-%d" % i))
            expect(status == 200, status)
            expect(headers.get("connection", "keep-alive").lower() != "close", headers)
            sent["mutated"] += 1
        expect(conn.sock is first, "the connection was replaced: not kept alive")
        conn.close()

    def pipelining():
        s = raw_tls(server)
        b1 = review(pod(), uid="pipe-1")
        b2 = review(pod(), uid="pipe-2")
        req = lambda b: (b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(b)) + b
        s.sendall(req(b1) + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + req(b2))
        f = s.makefile("rb")
        st1, _, d1 = read_response(f)
        st2, _, d2 = read_response(f)
        st3, _, d3 = read_response(f)
        expect((st1, st2, st3) == (200, 200, 200), (st1, st2, st3))
        expect(json.loads(d1)["response"]["uid"] == "pipe-1", d1[:100])
        expect(d2 == b"ok\n", d2)
        expect(json.loads(d3)["response"]["uid"] == "pipe-2", d3[:100])
        sent["mutated"] += 2
        s.close()

    def chunked_bodies():
        # Without a Content-Length the server's body buffer starts small and grows: one body
        # that fits at once, one of about 40 KB that needs several doublings.
        for containers in (1, 400):
            s = raw_tls(server)
            b = review(pod(containers=containers), uid="chunked-py-%d" % containers)
            s.sendall(b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(b), 97):
                piece = b[i:i + 97]
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            s.sendall(b"0\r\n\r\n")
            status, _, data = read_response(s.makefile("rb"))
            expect(status == 200 and json.loads(data)["response"]["uid"] == "chunked-py-%d" % containers,
                   (len(b), data[:200]))
            sent["mutated"] += 1
            s.close()
        path = os.path.join(suite.workdir, "body.json")
        with open(path, "wb") as f:
            f.write(review(pod(), uid="chunked-curl"))
        r = curl(server, "-H", "Content-Type: application/json", "-H", "Transfer-Encoding: chunked",
                 "--data-binary", "@" + path, "-w", "\n%{http_code}", url(server, "/mutate-pods?timeout=10s"))
        out = r.stdout.decode()
        expect(r.returncode == 0 and out.endswith("\n200"), (r.returncode, out[-200:], r.stderr))
        expect(json.loads(out.rsplit("\n", 1)[0])["response"]["uid"] == "chunked-curl", out[:200])
        sent["mutated"] += 1

    def curl_with_expect_continue():
        path = os.path.join(suite.workdir, "body.json")
        with open(path, "wb") as f:
            f.write(review(pod(), uid="curl-1"))
        r = curl(server, "-v", "-H", "Content-Type: application/json", "-H", "Expect: 100-continue",
                 "--data-binary", "@" + path, "-o", "/dev/null", "-w", "%{http_code}",
                 url(server, "/mutate-pods?timeout=10s"))
        expect(r.returncode == 0 and r.stdout == b"200", (r.returncode, r.stdout, r.stderr[-500:]))
        expect(b"HTTP/1.1 100 Continue" in r.stderr, "no 100 Continue: %r" % r.stderr[-800:])
        sent["mutated"] += 1

    def http10_closes():
        s = raw_tls(server)
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        f = s.makefile("rb")
        status, headers, data = read_response(f)
        expect(status == 200 and data == b"ok\n", (status, data))
        expect(f.read() == b"", "HTTP/1.0 without keep-alive must be closed")
        s.close()

    def tls_versions_and_suites():
        r = s_client(server, "-tls1_3")
        expect(r.returncode == 0 and b"Protocol version: TLSv1.3" in r.stderr, r.stderr[-600:])
        r = s_client(server, "-tls1_2")
        expect(r.returncode == 0 and b"Protocol version: TLSv1.2" in r.stderr, r.stderr[-600:])
        expect(re.search(rb"Ciphersuite: ECDHE-ECDSA-AES(128|256)-GCM", r.stderr), r.stderr[-600:])
        # The client's order wins among the (all AEAD, all ECDHE) suites on offer: a client that
        # prefers AES-128 is not made to pay for AES-256 with SHA-384, in TLS 1.2 and 1.3 alike.
        r = s_client(server, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384")
        expect(r.returncode == 0 and b"Ciphersuite: ECDHE-ECDSA-AES128-GCM-SHA256" in r.stderr, r.stderr[-600:])
        r = s_client(server, "-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256")
        expect(r.returncode == 0 and b"Ciphersuite: ECDHE-ECDSA-CHACHA20-POLY1305" in r.stderr, r.stderr[-600:])
        r = s_client(server, "-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384")
        expect(r.returncode == 0 and b"Ciphersuite: TLS_AES_128_GCM_SHA256" in r.stderr, r.stderr[-600:])
        # A non-ECDHE suite is not on offer.
        r = s_client(server, "-tls1_2", "-cipher", "AES128-GCM-SHA256")
        expect(r.returncode != 0, "static-RSA/CBC-less suite accepted: %r" % r.stderr[-600:])
        # TLS 1.1: the client is allowed to try (SECLEVEL=0); the server answers protocol_version.
        r = s_client(server, "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
        expect(r.returncode != 0, "TLS 1.1 handshake succeeded")
        expect(b"alert protocol version" in r.stderr, "want a protocol_version alert: %r" % r.stderr[-600:])
        # Python's client capped at TLS 1.1 fails the same way.
        ctx = ssl.create_default_context(cafile=server.ca)
        ctx.set_ciphers("DEFAULT@SECLEVEL=0")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # that is the point here
            ctx.minimum_version = ssl.TLSVersion.TLSv1
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        try:
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), 10), server_hostname=SERVICE_NAME)
            s.close()
            raise AssertionError("TLS 1.1 accepted")
        except ssl.SSLError as e:
            expect("VERSION" in str(e).upper(), e)
        # The name the apiserver verifies is on the certificate; another name is not.
        ctx = ssl.create_default_context(cafile=server.ca)
        try:
            ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), 10), server_hostname="other.example")
            raise AssertionError("hostname verification passed for a name not on the certificate")
        except ssl.SSLCertVerificationError:
            pass
        expect(server.alive(), "server died")

    def no_session_resumption():
        # kube-apiserver never resumes (client-go sets no session cache), so the server issues no
        # TLS 1.3 tickets and keeps no TLS 1.2 session cache: a client that offers its last session
        # gets a full handshake in both versions.
        for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
            ctx = ssl.create_default_context(cafile=server.ca)
            ctx.minimum_version = ctx.maximum_version = version
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), 10), server_hostname=SERVICE_NAME)
            # A request and its answer: TLS 1.3 tickets arrive after the handshake, before the data.
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            status, _, _ = read_response(s.makefile("rb"))
            expect(status == 200, status)
            session = s.session
            expect(session is None or not session.has_ticket, "%s: the server sent a session ticket" % version.name)
            s.close()
            if session is None:
                continue
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), 10), server_hostname=SERVICE_NAME,
                                session=session)
            expect(not s.session_reused, "%s: a session was resumed" % version.name)
            s.close()

    def plain_http_closed():
        s = socket.create_connection(("127.0.0.1", server.port), 10)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        s.settimeout(10)
        while True:
            try:
                chunk = s.recv(4096)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
        expect(b"HTTP/" not in got, "plain HTTP was answered: %r" % got[:100])
        s.close()

    def metrics_parse_and_count():
        m = server.metrics()
        get = lambda name, **labels: m.get((name, tuple(sorted(labels.items()))))
        for outcome, n in sent.items():
            got = get("erdma_webhook_admission_requests_total", outcome=outcome)
            expect(got == n, "outcome %s: want %d, got %r" % (outcome, n, got))
        total = sum(sent.values())
        expect(get("erdma_webhook_admission_duration_seconds_count") == total,
               (get("erdma_webhook_admission_duration_seconds_count"), total))
        expect(get("erdma_webhook_admission_duration_seconds_bucket", le="+Inf") == total, "histogram +Inf bucket")
        # Warnings are counted by kind; their sum is the number of warnings.
        warnings = sum(v for (name, labels), v in m.items() if name == "erdma_webhook_warnings_total")
        kinds = {dict(labels).get("kind") for (name, labels) in m if name == "erdma_webhook_warnings_total"}
        expect("resource_added" in kinds and "windows_pod" in kinds, "warnings_total kinds: %r" % kinds)
        expect(warnings >= sent["mutated"], "warnings_total: %r" % warnings)
        out = subprocess.run(["openssl", "x509", "-in", server.cert, "-noout", "-enddate"], capture_output=True,
                             text=True, check=True).stdout.strip().split("=", 1)[1]
        expect(get("erdma_webhook_tls_cert_not_after_seconds") == ssl.cert_time_to_seconds(out),
               (get("erdma_webhook_tls_cert_not_after_seconds"), out))
        expect(get("erdma_webhook_build_info", version=get_version()) == 1, "build_info")
        for kind in ("cert", "config"):
            for result in ("success", "error"):
                expect(get("erdma_webhook_reloads_total", kind=kind, result=result) == 0, (kind, result))
        conn = server.connect()
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        expect(server.metrics()[("erdma_webhook_connections_open", ())] >= 1, "connections_open with one open")
        conn.close()
        deadline = time.monotonic() + 5
        while server.metrics()[("erdma_webhook_connections_open", ())] != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        expect(server.metrics()[("erdma_webhook_connections_open", ())] == 0, "connections_open after close")

    def one_log_line_per_admission():
        lines = server.log_lines_when(lambda ls: sum(l["msg"] == "admission" for l in ls) >= sum(sent.values()))
        adm = [l for l in lines if l["msg"] == "admission"]
        expect(len(adm) == sum(sent.values()), (len(adm), sent))
        first = next(l for l in adm if l.get("uid") == "uid-mutate")
        for key in ("ts", "level", "uid", "namespace", "pod", "outcome", "ops", "warnings", "duration_us"):
            expect(key in first, "log line lacks %s: %s" % (key, first))
        expect(first["namespace"] == "team-a" and first["pod"] == "web-0" and first["outcome"] == "mutated", first)
        expect(first["ops"] > 0 and first["warnings"] >= 1, first)
        expect(any(l["msg"] == "serving" for l in lines), "no start-up line")
        # generateName pods are logged by their prefix.
        conn = server.connect()
        status, _, _ = post_review(conn, review(pod(generate_name="web-7d9f-"), uid="uid-gen"))
        conn.close()
        sent["mutated"] += 1
        gen = [l for l in server.log_lines_when(lambda ls: any(l.get("uid") == "uid-gen" for l in ls))
               if l.get("uid") == "uid-gen"]
        expect(status == 200 and len(gen) == 1 and gen[0]["pod"].startswith("web-7d9f-"), gen)

    def rsa_certificate():
        os.makedirs(os.path.join(suite.workdir, "rsa"), exist_ok=True)
        rsa = Server(os.path.join(suite.workdir, "rsa"), key_type="rsa")
        try:
            conn = rsa.connect()
            status, _, data = post_review(conn, review(pod(), uid="rsa-1"))
            expect(status == 200 and json.loads(data)["response"]["uid"] == "rsa-1", data[:200])
            conn.close()
            r = s_client(rsa, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384")
            expect(r.returncode == 0 and b"ECDHE-RSA-AES128-GCM-SHA256" in r.stderr, r.stderr[-600:])
        finally:
            expect(rsa.terminate() == 0, "rsa server exit status")

    suite.check("admission answered as the apiserver expects", admission_as_apiserver)
    suite.check("400 405 404 415 and probes", status_codes)
    suite.check("413 decided from the headers before the body", too_large_from_headers)
    suite.check("keep-alive: 25 requests on one connection", keep_alive)
    suite.check("pipelined requests answered in order", pipelining)
    suite.check("chunked bodies (python and curl)", chunked_bodies)
    suite.check("curl with Expect: 100-continue", curl_with_expect_continue)
    suite.check("HTTP/1.0 request answered then closed", http10_closes)
    suite.check("TLS 1.2/1.3 only, ECDHE suites, server preference, hostname", tls_versions_and_suites)
    suite.check("no session tickets, no session cache: every handshake is a full one", no_session_resumption)
    suite.check("plain HTTP on the TLS port is closed, not served", plain_http_closed)
    suite.check("metrics parse and count what was sent", metrics_parse_and_count)
    suite.check("one JSON log line per admission", one_log_line_per_admission)
    def handshake_failures_counted():
        from harness import generate_certs
        before = server.metrics()
        get = lambda m, reason: m[("erdma_webhook_tls_handshake_failures_total", (("reason", reason),))]

        def refusal_warnings():
            return [l for l in server.log_lines() if l["msg"].startswith("a client refused the serving certificate")]
        warned_before = len(refusal_warnings())
        # A client that trusts another CA (an apiserver with a stale caBundle) refuses our cert.
        other = os.path.join(suite.workdir, "other-ca")
        generate_certs(other)
        for _ in range(3):
            ctx = ssl.create_default_context(cafile=os.path.join(other, "ca.crt"))
            try:
                ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), 10), server_hostname=SERVICE_NAME)
                raise AssertionError("a client trusting another CA completed the handshake")
            except ssl.SSLCertVerificationError:
                pass
        # Plain HTTP is a protocol failure.
        s = socket.create_connection(("127.0.0.1", server.port), 10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass
        s.close()
        deadline = time.monotonic() + 5
        while get(server.metrics(), "untrusted_certificate") < get(before, "untrusted_certificate") + 3 and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        after = server.metrics()
        expect(get(after, "untrusted_certificate") == get(before, "untrusted_certificate") + 3,
               (get(before, "untrusted_certificate"), get(after, "untrusted_certificate")))
        expect(get(after, "protocol") >= get(before, "protocol") + 1, "plain HTTP not counted as a protocol failure")
        # Rate-limited to one per 10 s: three refusals in a row add at most one warning (none when an
        # earlier check's refusal warned less than 10 s ago), and at least one has been logged.
        warns = refusal_warnings()
        expect(len(warns) - warned_before <= 1, "three refusals logged %d warnings" % (len(warns) - warned_before))
        expect(len(warns) >= 1, "a refused certificate was never logged")

    def connection_cap():
        # Idle connections make room (test_connections.py); a new connection is closed at once only
        # when every open one is busy. Connections still in their TLS handshake are busy.
        os.makedirs(os.path.join(suite.workdir, "cap"), exist_ok=True)
        capped = Server(os.path.join(suite.workdir, "cap"), cert_dir=server.cert_dir,
                        extra_args=["--max-connections", "5"])
        try:
            held = [socket.create_connection(("127.0.0.1", capped.port), 10) for _ in range(5)]
            deadline = time.monotonic() + 20
            while capped.metrics()[("erdma_webhook_connections_open", ())] < 5 and time.monotonic() < deadline:
                time.sleep(0.02)
            expect(capped.metrics()[("erdma_webhook_connections_open", ())] == 5, "5 handshakes not open")
            # The sixth is closed at once: its handshake cannot complete.
            try:
                c = capped.connect(timeout=5)
                c.request("GET", "/healthz")
                c.getresponse().read()
                raise AssertionError("a sixth connection was served with 5 busy and --max-connections 5")
            except (ssl.SSLError, ConnectionError, OSError):
                pass
            m = capped.metrics()
            refused = m[("erdma_webhook_connections_refused_total", ())]
            expect(refused == 1, "connections_refused_total %r" % refused)
            expect(m[("erdma_webhook_connections_evicted_total", ())] == 0, "a busy connection was evicted")
            held.pop().close()
            deadline = time.monotonic() + 5
            while capped.metrics()[("erdma_webhook_connections_open", ())] > 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            c = capped.connect()
            c.request("GET", "/healthz")
            expect(c.getresponse().status == 200, "a slot freed by a close is usable again")
            c.close()
            for c in held:
                c.close()
        finally:
            expect(capped.terminate() == 0, "capped server exit status")

    suite.check("RSA serving certificate", rsa_certificate)
    suite.check("--max-connections closes a new connection when every open one is busy", connection_cap)
    suite.check("handshake failures counted by reason; untrusted cert warned once", handshake_failures_counted)
    code = server.terminate()
    suite.check("exit status 0 after SIGTERM", lambda: expect(code == 0, code))
    suite.finish()


def get_version():
    from harness import WEBHOOK
    out = subprocess.run([WEBHOOK, "version"], capture_output=True, text=True, timeout=10).stdout
    return out.split()[-1]


if __name__ == "__main__":
    main()
