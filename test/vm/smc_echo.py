#!/usr/bin/python3
# A plain TCP client and server (no AF_SMC anywhere) used to prove that libsmc-preload.so moves real
# programs to SMC without code change, on the host (where it must fall back to TCP) and in the VM
# (where it must form SMC-R). Debian's /usr/bin/python3, standard library only.
#
#   smc_echo.py serve --bind ADDR --port-file FILE [--count N] [--timeout S]
#   smc_echo.py connect --to ADDR:PORT --bytes N [--hold S] [--ready-file FILE] [--timeout S]
#   smc_echo.py selftest [--bytes N]      # server thread + client, UDP and unix sockets too
#
# The client sends N deterministic bytes, half-closes, and checks the server's SHA-256 of what it
# received. It prints one "OK ..." line (with throughput) and exits 0 only if the digests match.
import argparse
import hashlib
import os
import random
import socket
import sys
import threading
import time


def payload(n):
    return random.Random(20240601).randbytes(n)


def serve_one(conn, timeout):
    conn.settimeout(timeout)
    h = hashlib.sha256()
    total = 0
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        h.update(chunk)
        total += len(chunk)
    conn.sendall(f"{total} {h.hexdigest()}\n".encode())
    conn.close()


def cmd_serve(args):
    family = socket.AF_INET6 if ":" in args.bind else socket.AF_INET
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.bind, 0))
    srv.listen(8)
    srv.settimeout(args.timeout)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.rename(tmp, args.port_file)
    for _ in range(args.count):
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            print("serve: no connection before the timeout", file=sys.stderr)
            return 1
        serve_one(conn, args.timeout)
    return 0


def run_client(host, port, nbytes, timeout, hold=0.0, ready_file=None):
    data = payload(nbytes)
    want = hashlib.sha256(data).hexdigest()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    t0 = time.monotonic()
    s.connect((host, port))
    view = memoryview(data)
    for off in range(0, nbytes, 1 << 20):
        s.sendall(view[off:off + (1 << 20)])
    s.shutdown(socket.SHUT_WR)
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    secs = time.monotonic() - t0
    parts = reply.decode(errors="replace").split()
    ok = len(parts) == 2 and parts[0] == str(nbytes) and parts[1] == want
    rate = nbytes / (1 << 20) / secs if secs > 0 else 0.0
    line = f"{'OK' if ok else 'MISMATCH'} bytes={nbytes} sha256={want[:16]} seconds={secs:.3f} MiB/s={rate:.1f}"
    print(line, flush=True)
    if ready_file:
        with open(ready_file + ".tmp", "w") as f:
            f.write(line + "\n")
        os.rename(ready_file + ".tmp", ready_file)
    if hold > 0:
        time.sleep(hold)  # keep the connection open for whoever inspects it
    s.close()
    return 0 if ok else 1


def cmd_connect(args):
    host, _, port = args.to.rpartition(":")
    return run_client(host.strip("[]"), int(port), args.bytes, args.timeout, args.hold, args.ready_file)


def cmd_selftest(args):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(30)
    port = srv.getsockname()[1]

    def accept():
        conn, _ = srv.accept()
        serve_one(conn, 30)

    t = threading.Thread(target=accept)
    t.start()
    rc = run_client("127.0.0.1", port, args.bytes, 30)
    t.join(30)

    u1 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u1.bind(("127.0.0.1", 0))
    u2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u2.settimeout(10)
    u2.sendto(b"ping", u1.getsockname())
    u1.settimeout(10)
    got, _ = u1.recvfrom(16)
    print(f"UDP {'OK' if got == b'ping' else 'BAD'} domain={u1.family.value} type={u1.type.value}", flush=True)

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.sendall(b"unix")
    got = b.recv(16)
    print(f"UNIX {'OK' if got == b'unix' else 'BAD'}", flush=True)
    return rc if got == b"unix" else 1


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--bind", required=True)
    s.add_argument("--port-file", required=True)
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--timeout", type=float, default=60)
    c = sub.add_parser("connect")
    c.add_argument("--to", required=True)
    c.add_argument("--bytes", type=int, default=1 << 20)
    c.add_argument("--hold", type=float, default=0)
    c.add_argument("--ready-file")
    c.add_argument("--timeout", type=float, default=60)
    t = sub.add_parser("selftest")
    t.add_argument("--bytes", type=int, default=1 << 20)
    args = p.parse_args()
    return {"serve": cmd_serve, "connect": cmd_connect, "selftest": cmd_selftest}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
