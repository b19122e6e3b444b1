#!/usr/bin/python3
"""The values table of charts/erdma-controller/README.md, from the chart's values.schema.json (every
key the chart reads, its type and allowed values) and values.yaml (its default, and the first
sentences of the comment above it, or above its parent).

    scripts/chart-values-table.py           print the table
    scripts/chart-values-table.py --write   replace the table in the chart's README
    scripts/chart-values-table.py --check   exit 1 when the README's table is not this one
    scripts/chart-values-table.py --chart DIR ...   another copy of the chart

test/helm runs --check. Debian's /usr/bin/python3 with python3-yaml (scripts/install-deps.sh).
"""
import json
import os
import re
import sys

import yaml

CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "charts", "erdma-controller")
BEGIN = "<!-- values table: scripts/chart-values-table.py --write; do not edit by hand -->"
END = "<!-- end of the values table -->"
MAX_DEFAULT = 48  # longer defaults are left to values.yaml


def comments_by_path(text):
    """{dotted key path: its comment} for every mapping key of values.yaml: the comment lines right
    above it (no blank line between), at its indentation."""
    out, stack, pending = {}, [], []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = []
            continue
        indent = len(line) - len(line.lstrip(" "))
        if stripped.startswith("#"):
            pending.append((indent, stripped.lstrip("#").strip()))
            continue
        m = re.match(r"( *)([A-Za-z0-9_.-]+):( |$)", line)
        if not m or stripped.startswith("- "):
            pending = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        out[".".join(k for _, k in stack)] = " ".join(t for i, t in pending if i == indent)
        pending = []
    return out


def summary(text, want=100, most=260):
    """The comment's first sentences, until they hold `want` characters; cut at a word (with
    "...") past `most`."""
    out = ""
    for sentence in re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=\.)\s+", text.strip()):
        if len(out) >= want:
            break
        out = (out + " " + sentence).strip()
    if len(out) > most:
        out = out[:most].rsplit(" ", 1)[0] + " ..."
    return out


def rows(schema, values, comments):
    defs = schema.get("definitions", {})

    def resolve(node):
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        return node

    def walk(node, path, default):
        node = resolve(node)
        props = node.get("properties")
        if props and node.get("type", "object") == "object":
            for key, sub in props.items():
                yield from walk(sub, path + [key], default.get(key) if isinstance(default, dict) else None)
            return
        kind = node.get("type") or ("string" if "enum" in node or "pattern" in node else "")
        if isinstance(kind, list):
            kind = " or ".join(kind)
        if "enum" in node:
            kind += ": " + ", ".join("`%s`" % v for v in node["enum"])
        shown = json.dumps(default, separators=(", ", ": "))
        if default is None:
            shown = "unset"
        elif len(shown) > MAX_DEFAULT:
            shown = "see values.yaml"
        else:
            shown = "`%s`" % shown
        key = ".".join(path)
        what = summary(comments.get(key, "")) or summary(comments.get(".".join(path[:-1]), ""))
        yield "| `%s` | %s | %s | %s |" % (key, kind, shown, what.replace("|", "\\|"))

    return list(walk(schema, [], values))


def table(chart):
    with open(os.path.join(chart, "values.schema.json")) as f:
        schema = json.load(f)
    with open(os.path.join(chart, "values.yaml")) as f:
        text = f.read()
    lines = ["| value | type | default | what it does |", "|---|---|---|---|"]
    lines += rows(schema, yaml.safe_load(text), comments_by_path(text))
    return "\n".join(lines) + "\n"


def main():
    args = sys.argv[1:]
    chart = CHART
    if args[:1] == ["--chart"] and len(args) >= 2:
        chart, args = args[1], args[2:]
    readme = os.path.join(chart, "README.md")
    want = table(chart)
    if not args:
        sys.stdout.write(want)
        return 0
    if args not in (["--write"], ["--check"]):
        sys.exit(__doc__)
    with open(readme) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit("%s has no %r ... %r section for the table" % (readme, BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    if args == ["--check"]:
        if old.strip() != want.strip():
            print("%s: the values table is not the one values.schema.json and values.yaml give; run "
                  "scripts/chart-values-table.py --write" % readme, file=sys.stderr)
            return 1
        return 0
    with open(readme, "w") as f:
        f.write(head + BEGIN + "\n" + want + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
