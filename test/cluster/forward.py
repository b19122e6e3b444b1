#!/usr/bin/python3
"""A TCP forwarder across network namespaces, for scripts/cluster.sh: kubectl on the host reaches
the API server, which listens only inside the cluster's network namespace.

  forward.py listen HOST:PORT -- CMD...
      binds and listens on HOST:PORT in the current (the host's) network namespace, then execs CMD
      with the listening socket inherited and its number in ERDMA_FORWARD_FD. CMD is `unshare ...`
      that creates the cluster's namespaces: the socket stays in the host's namespace.
  forward.py serve --to HOST:PORT
      run inside the cluster's namespaces: accepts on ERDMA_FORWARD_FD and connects each client to
      HOST:PORT there (its own network namespace), copying bytes both ways until both sides close.

No process of its own is left in the host's PID namespace: `serve` runs in the cluster's PID
namespace and ends with it. Debian's /usr/bin/python3, standard library only.
"""
import fcntl
import os
import socket
import sys
import threading


def parse_addr(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        sys.exit("forward.py: expected HOST:PORT, got %r" % text)
    return host, int(port)


def listen(addr, argv):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(addr)
    except OSError as e:
        sys.exit("forward.py: cannot listen on %s:%d: %s" % (addr[0], addr[1], e))
    s.listen(128)
    # Out of the way of the low descriptors the command's shell redirects (cluster.sh uses 3).
    fd = fcntl.fcntl(s.fileno(), fcntl.F_DUPFD, 50)
    os.set_inheritable(fd, True)
    os.environ["ERDMA_FORWARD_FD"] = str(fd)
    os.execvp(argv[0], argv)


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def handle(client, target):
    try:
        upstream = socket.create_connection(target, timeout=10)
        upstream.settimeout(None)
    except OSError as e:
        print("forward.py: cannot connect to %s:%d: %s" % (target[0], target[1], e), file=sys.stderr, flush=True)
        client.close()
        return
    # Each chunk is relayed as it comes; with Nagle's algorithm a request whose TLS records arrive
    # in two chunks would wait for the server's delayed ACK (about 40 ms) before its second half.
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(target):
    fd = int(os.environ["ERDMA_FORWARD_FD"])
    s = socket.socket(fileno=fd)
    while True:
        client, _ = s.accept()
        threading.Thread(target=handle, args=(client, target), daemon=True).start()


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "listen" and a[2] == "--":
        listen(parse_addr(a[1]), a[3:])
    elif len(a) == 3 and a[0] == "serve" and a[1] == "--to":
        serve(parse_addr(a[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
