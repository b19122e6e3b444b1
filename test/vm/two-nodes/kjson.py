#!/usr/bin/python3
"""Small JSON and smc-status helpers for node.sh (Debian's /usr/bin/python3, standard library).

  kjson.py get FILE EXPR           print EXPR evaluated over the JSON document d in FILE
  kjson.py stdout FILE             the "stdout" of a `kubelet.py exec` answer
  kjson.py conn FILE LOCAL REMOTE  the smc-status row (text table) whose local or peer
                                   address:port is REMOTE and, when LOCAL is not "-", whose other
                                   end starts with LOCAL; prints "MODE REASON" (REASON "-" when
                                   none), exits 1 when no row matches
  kjson.py env RUN EXEC CONTAINER NAMEPREFIX EXPECTED_JSON
                                   for names starting NAMEPREFIX: the `env` output of an exec
                                   answer (EXEC) must equal what `kubelet.py run-pod` (RUN) sent
                                   for CONTAINER (the last of a name wins) and reports as its
                                   "env", and hold every EXPECTED_JSON name with its value
  kjson.py p50 FILE                median of the numbers in FILE, one a line
"""
import json
import re
import sys


def load(path):
    with open(path) as f:
        text = f.read()
    # kubelet.py prints one JSON object; take the last JSON line if anything else came first
    try:
        return json.loads(text)
    except ValueError:
        for line in reversed(text.strip().splitlines()):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise SystemExit("no JSON in %s" % path)


def main():
    cmd = sys.argv[1]
    if cmd == "get":
        d = load(sys.argv[2])
        print(eval(sys.argv[3], {}, {"d": d}))
    elif cmd == "stdout":
        sys.stdout.write(load(sys.argv[2]).get("stdout", ""))
    elif cmd == "conn":
        local, remote = sys.argv[3], sys.argv[4]
        for line in open(sys.argv[2]):
            f = line.split()
            if len(f) < 4 or f[1] not in ("SMCR", "SMCD", "TCP"):
                continue
            ends = (f[2], f[3])
            if remote not in ends:
                continue
            other = ends[1] if ends[0] == remote else ends[0]
            if local != "-" and not other.startswith(local):
                continue
            m = re.search(r"([A-Z][A-Z_0-9]+) \((0x[0-9a-f]{8})\)", line)
            print(f[1], "%s(%s)" % (m.group(1), m.group(2)) if m else "-")
            return 0
        return 1
    elif cmd == "env":
        run = load(sys.argv[2])
        container, prefix = sys.argv[4], sys.argv[5]
        expected = json.loads(sys.argv[6])
        full = {}
        for line in load(sys.argv[3]).get("stdout", "").splitlines():
            k, _, v = line.partition("=")
            full[k] = v
        seen = {k: v for k, v in full.items() if k.startswith(prefix)}
        sent = {}
        for k, v in run["env_sent"][container]:
            if k.startswith(prefix):
                sent[k] = v  # the last one of a name wins (runc sets them in order)
        reported = {k: v for k, v in run["env"][container].items() if k.startswith(prefix)}
        print("exec env: %s" % json.dumps(seen, sort_keys=True))
        print("sent (last wins): %s" % json.dumps(sent, sort_keys=True))
        print("merged spec: %s" % json.dumps(expected, sort_keys=True))
        # Allocate's envs reach the process unless the pod spec sets the same name (spec wins)
        spec_names = set(expected)
        alloc = {}
        for answer in (run["containers"][container].get("allocate") or {}).values():
            alloc.update(answer.get("envs") or {})
        print("Allocate envs: %s" % json.dumps(alloc, sort_keys=True))
        ok = seen == sent == reported and all(seen.get(k) == v for k, v in expected.items())
        ok = ok and bool(expected) and all(full.get(k) == v for k, v in alloc.items() if k not in spec_names)
        return 0 if ok else 1
    elif cmd == "p50":
        xs = sorted(float(x) for x in open(sys.argv[2]).read().split())
        if not xs:
            return 1
        n = len(xs)
        print("%.0f" % (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
