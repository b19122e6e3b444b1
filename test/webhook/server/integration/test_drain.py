#!/usr/bin/python3
"""Graceful drain on SIGTERM: readyz turns 503, the listener closes, idle keep-alive connections
are closed, requests in flight finish and are answered (none dropped), the process exits 0; a
request that never completes is cut off when the grace period ends, and the exit is still 0."""

import json
import os
import signal
import socket
import ssl
import time
import urllib.error
import urllib.request

from harness import SERVICE_NAME, Server, Suite, expect, pod, review, wait_until


def raw_tls(port, ca):
    ctx = ssl.create_default_context(cafile=ca)
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), 10), server_hostname=SERVICE_NAME)


def readyz(server):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % server.metrics_port, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def refuses_connections(port):
    """Whether a new TCP connection to the admission port is refused (the listener is closed)."""
    try:
        socket.create_connection(("127.0.0.1", port), 2).close()
    except ConnectionRefusedError:
        return True
    return False


def logged(server, msg):
    return any(l["msg"] == msg for l in server.log_lines())


def gauge(server, name):
    return server.metrics()[(name, ())]


def read_response(sock):
    f = sock.makefile("rb")
    status = int(f.readline().split()[1])
    headers = {}
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, v = line.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return status, headers, f.read(int(headers.get("content-length", "0")))


def main():
    suite = Suite("drain")

    def in_flight_requests_finish():
        os.makedirs(os.path.join(suite.workdir, "a"))
        server = Server(os.path.join(suite.workdir, "a"),
                        extra_args=["--shutdown-grace", "10s"])
        try:
            expect(readyz(server) == 200, "ready before the signal")
            # Eight requests in flight: headers and half the body sent.
            bodies, socks = [], []
            for i in range(8):
                b = review(pod(), uid="inflight-%d" % i)
                s = raw_tls(server.port, server.ca)
                s.sendall(b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(b) + b[: len(b) // 2])
                bodies.append(b)
                socks.append(s)
            # And one idle kept-alive connection that has finished a request.
            idle = raw_tls(server.port, server.ca)
            idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            expect(read_response(idle)[0] == 200, "idle connection's first request")
            # The signal must find the eight mid-body (their headers read: each body's length is
            # reserved in the body budget) and the ninth connection waiting for its next request.
            in_flight_bytes = sum(len(b) for b in bodies)
            wait_until(lambda: gauge(server, "erdma_webhook_connections_open") == 9
                       and gauge(server, "erdma_webhook_connections_idle") == 1
                       and gauge(server, "erdma_webhook_body_budget_used_bytes") == in_flight_bytes,
                       "9 open connections: 8 with their headers read (%d body bytes reserved), 1 idle"
                       % in_flight_bytes)
            t_signal = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            wait_until(lambda: logged(server, "draining"), "the 'draining' log line after SIGTERM")
            expect(server.alive(), "exited with requests in flight")
            expect(readyz(server) == 503, "readyz while draining")
            # The listener is closed by the event loop just after the line is logged.
            wait_until(lambda: refuses_connections(server.port),
                       "the listener to close while draining (it still accepted connections)")
            idle.settimeout(5)
            expect(idle.recv(100) == b"", "the idle connection was not closed")
            expect(server.alive(), "exited with requests in flight")
            for i, (s, b) in enumerate(zip(socks, bodies)):
                s.sendall(b[len(b) // 2:])
                status, headers, data = read_response(s)
                expect(status == 200, "in-flight %d: status %d" % (i, status))
                expect(json.loads(data)["response"]["uid"] == "inflight-%d" % i, data[:100])
                expect(headers.get("connection") == "close", "in-flight %d: %s" % (i, headers))
                s.close()
            code = server.proc.wait(timeout=10)
            took = time.monotonic() - t_signal
            print("  8 in-flight requests answered; exit %d %.2f s after SIGTERM" % (code, took))
            expect(code == 0, "exit status %d" % code)
            expect(took < 5, "drain waited for the grace period although nothing was left")
            msgs = [l["msg"] for l in server.log_lines()]
            expect("draining" in msgs and "drained; exiting" in msgs, msgs[-5:])
        finally:
            server.kill()

    def grace_period_bounds_the_drain():
        os.makedirs(os.path.join(suite.workdir, "b"))
        server = Server(os.path.join(suite.workdir, "b"), extra_args=["--shutdown-grace", "1s"])
        try:
            stuck = raw_tls(server.port, server.ca)
            stuck.sendall(b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 1000\r\n\r\n{")
            # In flight once its header is read: its 1000 bytes are reserved in the body budget.
            wait_until(lambda: gauge(server, "erdma_webhook_body_budget_used_bytes") == 1000,
                       "the stuck request's header read (1000 body bytes reserved)")
            t0 = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            code = server.proc.wait(timeout=10)
            took = time.monotonic() - t0
            print("  exit %d %.2f s after SIGTERM with a request that never completes (grace 1 s)" % (code, took))
            expect(code == 0, "exit status %d" % code)
            expect(0.9 <= took <= 4, "took %.2f s" % took)
            expect(any(l["msg"].startswith("shutdown grace period over") for l in server.log_lines()), "no log line")
            stuck.close()
        finally:
            server.kill()

    def sigint_also_drains():
        os.makedirs(os.path.join(suite.workdir, "c"))
        server = Server(os.path.join(suite.workdir, "c"))
        try:
            server.proc.send_signal(signal.SIGINT)
            expect(server.proc.wait(timeout=10) == 0, "exit status after SIGINT")
        finally:
            server.kill()

    suite.check("SIGTERM: in-flight requests answered, idle closed, readyz 503, exit 0", in_flight_requests_finish)
    suite.check("the grace period bounds a drain", grace_period_bounds_the_drain)
    suite.check("SIGINT drains too", sigint_also_drains)
    suite.finish()


if __name__ == "__main__":
    main()
