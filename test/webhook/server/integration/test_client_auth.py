#!/usr/bin/python3
"""Client certificates (--client-ca) and the TLS policy flags against the real server: an
apiserver-like client with a certificate from the client CA is served, one without a certificate
or with one from another CA is refused at the handshake (counted, logged once per connection at
debug, warned at most once per 10 s), probes on the metrics port need no certificate, the CA file
is hot-reloaded with the pair (a broken one keeps the last good CA), --tls-cipher-suites and
--tls-min-version restrict what is negotiated, and bad settings stop the start with a clear error.
Clients: Python's ssl and http.client, openssl s_client; keys made at test time with openssl."""

import os
import socket
import ssl
import subprocess
import time
import urllib.request

from harness import (SERVICE_NAME, WEBHOOK, Server, Suite, Volume, client_context, expect, generate_certs, pod,
                     post_review, read, review)


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, timeout=60, capture_output=True)


def make_ca(directory, name):
    os.makedirs(directory, exist_ok=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", os.path.join(directory, "ca.key"), "-out", os.path.join(directory, "ca.crt"),
            "-days", "2", "-subj", "/CN=" + name,
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    return os.path.join(directory, "ca.crt")


def make_client(directory, ca_dir, name="kube-apiserver-admission"):
    """A client certificate signed by the CA in ca_dir, for TLS client authentication."""
    key, csr, crt = (os.path.join(directory, n) for n in ("client.key", "client.csr", "client.crt"))
    ext = os.path.join(directory, "client.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nextendedKeyUsage=clientAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
            "-subj", "/CN=" + name)
    openssl("x509", "-req", "-in", csr, "-CA", os.path.join(ca_dir, "ca.crt"), "-CAkey", os.path.join(ca_dir, "ca.key"),
            "-set_serial", "7", "-days", "2", "-extfile", ext, "-out", crt)
    return crt, key


def tls_client(server, cert=None, maximum=None):
    ctx = client_context(server.ca, maximum=maximum)
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


def refused(server, ctx):
    """Tries one request; returns the TLS error text. Under TLS 1.3 the client finishes its side of the
    handshake before the server has checked the client certificate, so the refusal (an alert) arrives
    on the first read."""
    try:
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), 10), server_hostname=SERVICE_NAME)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = s.recv(4096)
        s.close()
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
        return str(e)
    raise AssertionError("request answered without a valid client certificate: %r" % data[:80])


def counter(server, reason):
    return server.metrics()[("erdma_webhook_tls_handshake_failures_total", (("reason", reason),))]


def wait_for(cond, what, seconds=5):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


def main():
    suite = Suite("client_auth")
    w = suite.workdir
    make_ca(os.path.join(w, "pki-a"), "apiserver-client-ca-a")
    make_ca(os.path.join(w, "pki-b"), "apiserver-client-ca-b")
    client_a = make_client(os.path.join(w, "pki-a"), os.path.join(w, "pki-a"))
    client_b = make_client(os.path.join(w, "pki-b"), os.path.join(w, "pki-b"))
    ca_volume = Volume(os.path.join(w, "client-ca"))
    ca_volume.update({"ca.crt": read(os.path.join(w, "pki-a", "ca.crt"))})
    generate_certs(os.path.join(w, "certs"))
    suites = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256"
    server = Server(w, extra_args=["--client-ca", ca_volume.file("ca.crt"), "--tls-cipher-suites", suites,
                                   "--log-level", "debug"])

    def served_with_certificate():
        for maximum in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            conn = server.connect(context=tls_client(server, client_a, maximum=maximum))
            status, _, data = post_review(conn, review(pod(), uid="uid-client-auth"))
            expect(status == 200 and b"uid-client-auth" in data, (maximum, status, data[:200]))
            conn.close()

    def refused_without_or_with_wrong_certificate():
        before = counter(server, "client_certificate")
        for maximum in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            refused(server, tls_client(server, None, maximum=maximum))
            refused(server, tls_client(server, client_b, maximum=maximum))
        wait_for(lambda: counter(server, "client_certificate") == before + 4, "4 client_certificate failures")
        lines = server.log_lines_when(lambda ls: sum(l["msg"] == "handshake refused: client certificate"
                                                      for l in ls) >= 4)
        debug = [l for l in lines if l["msg"] == "handshake refused: client certificate"]
        expect(sum("no client certificate presented" in l["error"] for l in debug) >= 2, debug)
        expect(sum("client certificate refused: unable to get local issuer certificate" in l["error"]
                   for l in debug) >= 2, debug)
        warns = [l for l in lines if l["level"] == "warn" and "client certificate (--client-ca)" in l["msg"]]
        expect(len(warns) == 1, "four refusals within 10 s gave %d warnings" % len(warns))

    def probes_on_the_metrics_port_need_no_certificate():
        for path in ("/healthz", "/readyz"):
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (server.metrics_port, path), timeout=10) as r:
                expect(r.status == 200, (path, r.status))

    def cipher_suites_restricted():
        def s_client(*args):
            cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % server.port, "-servername", SERVICE_NAME,
                   "-CAfile", server.ca, "-verify_return_error", "-brief", "-cert", client_a[0], "-key", client_a[1]]
            return subprocess.run(cmd + list(args), input=b"Q\n", capture_output=True, timeout=30)
        r = s_client("-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384")
        expect(r.returncode == 0 and b"Ciphersuite: ECDHE-ECDSA-AES128-GCM-SHA256" in r.stderr, r.stderr[-600:])
        r = s_client("-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305")
        expect(r.returncode != 0, "a suite outside --tls-cipher-suites was negotiated: %r" % r.stderr[-600:])
        r = s_client("-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256")
        expect(r.returncode != 0, "a TLS 1.3 suite outside --tls-cipher-suites was negotiated: %r" % r.stderr[-600:])
        r = s_client("-tls1_3")
        expect(r.returncode == 0 and b"Ciphersuite: TLS_AES_128_GCM_SHA256" in r.stderr, r.stderr[-600:])

    def client_ca_hot_reload():
        # Another CA replaces the first: its client is served, the first one's is refused.
        ca_volume.update({"ca.crt": read(os.path.join(w, "pki-b", "ca.crt"))})

        def b_served():
            try:
                conn = server.connect(context=tls_client(server, client_b))
                status, _, _ = post_review(conn, review(pod()))
                conn.close()
                return status == 200
            except (ssl.SSLError, ConnectionError):
                return False
        wait_for(b_served, "the new client CA to be in effect")
        refused(server, tls_client(server, client_a))
        # A broken CA file is refused and logged; the last good CA keeps serving.
        ca_volume.update({"ca.crt": b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"})
        wait_for(lambda: any(l["msg"].startswith("certificate reload refused") and "ca.crt" in l.get("error", "")
                             for l in server.log_lines()), "the broken CA file to be refused")
        expect(b_served(), "the last good client CA stopped serving after a broken reload")
        refused(server, tls_client(server, client_a))
        metrics = server.metrics()
        expect(metrics[("erdma_webhook_reloads_total", (("kind", "cert"), ("result", "error")))] >= 1, "not counted")

    def bad_settings_stop_the_start():
        cert_dir = os.path.join(w, "certs")
        base = [WEBHOOK, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                "--tls-cert", os.path.join(cert_dir, "tls.crt"), "--tls-key", os.path.join(cert_dir, "tls.key")]
        r = subprocess.run(base + ["--tls-cipher-suites", "TLS_RSA_WITH_AES_128_CBC_SHA"], capture_output=True,
                           timeout=30)
        expect(r.returncode == 2 and b"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" in r.stderr, (r.returncode, r.stderr))
        leaf_as_ca = os.path.join(w, "pki-a", "client.crt")
        r = subprocess.run(base + ["--client-ca", leaf_as_ca], capture_output=True, timeout=30)
        expect(r.returncode == 1 and b"is not a CA certificate" in r.stderr, (r.returncode, r.stderr[-600:]))
        r = subprocess.run(base + ["--client-ca", os.path.join(w, "missing.crt")], capture_output=True, timeout=30)
        expect(r.returncode == 1 and b"missing.crt" in r.stderr, (r.returncode, r.stderr[-600:]))

    def min_version_13():
        d = os.path.join(w, "v13")
        os.makedirs(d)
        strict = Server(d, cert_dir=os.path.join(w, "certs"), extra_args=["--tls-min-version", "1.3"])
        try:
            refused(strict, tls_client(strict, maximum=ssl.TLSVersion.TLSv1_2))
            conn = strict.connect()
            status, _, _ = post_review(conn, review(pod()))
            expect(status == 200 and conn.sock.version() == "TLSv1.3", (status, conn.sock.version()))
            conn.close()
        finally:
            strict.kill()

    try:
        suite.check("a client certificate from the client CA is served (TLS 1.2 and 1.3)", served_with_certificate)
        suite.check("no certificate or another CA's: refused, counted, logged without flooding",
                    refused_without_or_with_wrong_certificate)
        suite.check("/healthz and /readyz on the metrics port need no certificate",
                    probes_on_the_metrics_port_need_no_certificate)
        suite.check("--tls-cipher-suites restricts TLS 1.2 and 1.3", cipher_suites_restricted)
        suite.check("the client CA file is hot-reloaded; a broken one keeps the last good CA", client_ca_hot_reload)
        suite.check("bad TLS settings stop the start with a clear error", bad_settings_stop_the_start)
        suite.check("--tls-min-version 1.3 refuses a TLS 1.2 client", min_version_13)
    finally:
        server.kill()
    suite.finish()


if __name__ == "__main__":
    main()
