#!/usr/bin/python3
"""The Dockerfiles in images/, checked as far as a machine with no container engine allows.

For each image: the base is a pinned Debian bookworm-slim (never :latest), the build is
multi-stage, every file copied from the build context exists, every file copied from the build
stage exists in this build tree, every shared library a shipped binary needs (ldd) resolves and
comes from a Debian package the runtime stage installs (dpkg -S against `install-deps.sh
--print runtime-*`), and the image agrees with the manifests: version, image name, command,
user. A copied artifact whose CMake target this tree does not define yet is reported as skipped,
with the reason.

Runs with Debian's /usr/bin/python3 (python3-yaml); reads only local files.
"""

import os
import re
import shlex
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
BUILD_DIR = os.environ.get("ERDMA_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/webhook/server/integration"))
from harness import Suite, expect, project_version  # noqa: E402  (the shared runner of the Python suites)

IMAGES = {"erdma-webhook": "Deployment", "erdma-agent": "DaemonSet"}
REGISTRY_PATH = "registry.example.com/erdma-controller/"
BUILD_ROOT_IN_IMAGE = "/src/build/"


def parse_dockerfile(path):
    """[(instruction, argument text)], continuation lines joined, comments dropped."""
    out, pending = [], ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            line = pending + line
            pending = ""
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages(instructions):
    """[{name, from, instructions}] in order; ARGs before the first FROM under key None."""
    result, current = [], None
    for ins, arg in instructions:
        if ins == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", arg, re.I)
            current = {"from": m.group(1), "name": m.group(2), "instructions": []}
            result.append(current)
        elif current is not None:
            current["instructions"].append((ins, arg))
    return result


def global_args(instructions):
    args = {}
    for ins, arg in instructions:
        if ins == "FROM":
            break
        if ins == "ARG":
            name, _, default = arg.partition("=")
            args[name] = default
    return args


def copies(stage):
    """[(from stage or None, [sources], destination)]."""
    out = []
    for ins, arg in stage["instructions"]:
        if ins not in ("COPY", "ADD"):
            continue
        words = shlex.split(arg)
        src_stage = None
        while words and words[0].startswith("--"):
            if words[0].startswith("--from="):
                src_stage = words[0].split("=", 1)[1]
            words = words[1:]
        out.append((src_stage, words[:-1], words[-1]))
    return out


def json_array(arg):
    return yaml.safe_load(arg) if arg.startswith("[") else shlex.split(arg)


def install_purposes(stage):
    out = []
    for ins, arg in stage["instructions"]:
        if ins == "RUN":
            out += re.findall(r"install-deps\.sh\s+([a-z-]+)", arg)
    return out


def print_purpose(purpose):
    r = subprocess.run([os.path.join(SOURCE_DIR, "scripts/install-deps.sh"), "--print", purpose],
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, "install-deps.sh --print %s: %s" % (purpose, r.stderr))
    return set(r.stdout.split())


def ninja_outputs():
    r = subprocess.run(["ninja", "-C", BUILD_DIR, "-t", "targets", "all"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    return {line.split(":", 1)[0] for line in r.stdout.splitlines() if ":" in line}


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def aliases(path):
    """path, its real path, and their /usr-merged twins (/lib/x <-> /usr/lib/x)."""
    out = []
    for p in (path, os.path.realpath(path)):
        for q in (p, p[len("/usr"):] if p.startswith("/usr/lib/") else "/usr" + p if p.startswith("/lib/") else p):
            if q not in out:
                out.append(q)
    return out


def packages_of(paths):
    """{path: Debian package that ships it, or None}, from one `dpkg -S` over every alias."""
    queries = sorted({a for p in paths for a in aliases(p)})
    r = subprocess.run(["dpkg", "-S", *queries], capture_output=True, text=True, timeout=120)
    owner = {}
    for line in r.stdout.splitlines():
        pkgs, _, file = line.partition(": ")
        owner[file.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    return {p: next((owner[a] for a in aliases(p) if a in owner), None) for p in paths}


def package_of(path):
    return packages_of([path])[path]


def shared_libraries(binary):
    """{soname: resolved path or None}, from ldd; {} for a static binary (erdma-cdi-hook), once
    readelf confirms it has no dynamic section."""
    r = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30)
    if r.returncode != 0 and "not a dynamic executable" in r.stdout + r.stderr:
        d = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, timeout=30)
        expect("There is no dynamic section" in d.stdout, "%s: ldd says static, readelf -d shows %s" %
               (binary, d.stdout[:200]))
        return {}
    expect(r.returncode == 0, "ldd %s: %s" % (binary, r.stderr))
    libs = {}
    for line in r.stdout.splitlines():
        line = line.strip()
        m = re.match(r"(\S+) => (not found|(\S+) \(0x[0-9a-f]+\))", line)
        if m:
            libs[m.group(1)] = None if m.group(2) == "not found" else m.group(3)
        elif line.startswith("/"):  # the dynamic loader itself
            libs[line.split()[0]] = line.split()[0]
    return libs


def workload(name):
    """The Deployment or DaemonSet of an image, from manifests/base (no kubectl needed)."""
    base = os.path.join(SOURCE_DIR, "manifests/base")
    for fn in sorted(os.listdir(base)):
        if not fn.endswith(".yaml") or fn == "kustomization.yaml":
            continue
        with open(os.path.join(base, fn)) as f:
            for doc in yaml.safe_load_all(f):
                if doc and doc.get("kind") == IMAGES[name] and doc["metadata"]["name"] == name:
                    return doc
    return None


def main():
    suite = Suite("images")
    version = project_version()
    targets = ninja_outputs()
    bases = {}

    for name in IMAGES:
        path = os.path.join(SOURCE_DIR, "images", name, "Dockerfile")
        instructions = parse_dockerfile(path)
        st = stages(instructions)
        args = global_args(instructions)
        final = st[-1] if st else None
        stage_names = {s["name"] for s in st if s["name"]}

        def base_pinned(st=st, args=args, name=name):
            expect(len(st) >= 2, "%s: want a build stage and a runtime stage, got %d stage(s)" % (name, len(st)))
            for s in st:
                ref = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), s["from"])
                expect(re.fullmatch(r"debian:bookworm-\d{8}-slim|debian@sha256:[0-9a-f]{64}", ref),
                       "%s: base %r is not a pinned Debian bookworm-slim" % (name, ref))
                bases.setdefault(ref, set()).add(name)
            expect(st[-1]["name"] not in [s["name"] for s in st[:-1]], "the last stage is the image")

        def context_copies_exist(st=st, name=name):
            for s in st:
                for src_stage, sources, _ in copies(s):
                    if src_stage is None:
                        for src in sources:
                            expect(os.path.exists(os.path.join(SOURCE_DIR, src)),
                                   "%s: COPY %s: not in the repository" % (name, src))

        def runtime_stage_installs_only_runtime(final=final, name=name):
            purposes = install_purposes(final)
            expect(purposes == ["runtime-" + name.split("-", 1)[1]],
                   "%s: the runtime stage should install exactly runtime-%s, got %s" %
                   (name, name.split("-", 1)[1], purposes))
            for s in st[:-1]:
                for p in install_purposes(s):
                    print_purpose(p)

        suite.check("%s: pinned bookworm-slim base, multi-stage" % name, base_pinned)
        suite.check("%s: files copied from the build context exist" % name, context_copies_exist)
        suite.check("%s: the runtime stage installs its runtime list" % name, runtime_stage_installs_only_runtime)

        runtime = print_purpose("runtime-" + name.split("-", 1)[1])
        build_runs = " ".join(arg for s in st[:-1] for ins, arg in s["instructions"] if ins == "RUN")
        shipped = []
        for src_stage, sources, dest in copies(final):
            if src_stage is None:
                continue
            expect(src_stage in stage_names, "%s: COPY --from=%s names no stage" % (name, src_stage))
            for src in sources:
                label = "%s: %s (copied to %s)" % (name, src, dest)
                if not src.startswith(BUILD_ROOT_IN_IMAGE):
                    suite.check(label, lambda src=src: expect(False, "%s is not under the build tree %s" %
                                                               (src, BUILD_ROOT_IN_IMAGE)))
                    continue
                rel = src[len(BUILD_ROOT_IN_IMAGE):]
                local = os.path.join(BUILD_DIR, rel)
                if not os.path.exists(local) and targets is not None and rel not in targets:
                    suite.skip(label, "this tree defines no CMake target that builds %s yet" % rel, provided_by_install=False)
                    continue

                def copied_exists(local=local, rel=rel):
                    expect(os.path.exists(local), "%s is not in the build tree %s" % (rel, BUILD_DIR))
                    expect(rel in build_runs, "the build stage never names %s (built and stripped there)" % rel)
                suite.check(label + " exists after the build", copied_exists)
                if os.path.exists(local) and is_elf(local):
                    shipped.append((local, dest))

        def libraries_from_runtime_packages(shipped=shipped, runtime=runtime, name=name):
            expect(shipped, "%s ships no binary" % name)
            problems = []
            for local, dest in shipped:
                libs = shared_libraries(local)
                owners = packages_of([p for p in libs.values() if p])
                for soname, resolved in sorted(libs.items()):
                    if resolved is None:
                        problems.append("%s: %s not found" % (dest, soname))
                        continue
                    pkg = owners[resolved]
                    if pkg is None:
                        problems.append("%s: %s (%s) belongs to no Debian package" % (dest, soname, resolved))
                    elif pkg not in runtime:
                        problems.append("%s: %s comes from %s, which the runtime stage does not install" %
                                        (dest, soname, pkg))
                print("  %s: %d shared libraries from %s" % (dest, len(libs), " ".join(sorted(set(
                    v for v in owners.values() if v)))))
            expect(not problems, problems)
        suite.check("%s: every shared library (ldd) comes from a runtime package" % name,
                    libraries_from_runtime_packages)

        def agrees_with_manifests(final=final, name=name):
            labels = " ".join(arg for ins, arg in final["instructions"] if ins == "LABEL")
            m = re.search(r'org\.opencontainers\.image\.version="([^"]+)"', labels)
            expect(m and m.group(1) == version, "%s: image version label %s, project %s" %
                   (name, m and m.group(1), version))
            with open(os.path.join(SOURCE_DIR, "images", name, "Dockerfile")) as f:
                tags = re.findall(r"\b%s:(\S+)" % re.escape(name), f.read())
            expect(tags and all(t == version for t in tags),
                   "%s: the Dockerfile's `docker build -t` comment tags %s, project %s" % (name, tags, version))
            w = workload(name)
            expect(w is not None, "no %s %s in manifests/base" % (IMAGES[name], name))
            pod = w["spec"]["template"]["spec"]
            c = pod["containers"][0]
            expect(c["image"] == "%s%s:%s" % (REGISTRY_PATH, name, version),
                   "%s: manifests use image %s" % (name, c["image"]))
            entry = [json_array(arg) for ins, arg in final["instructions"] if ins == "ENTRYPOINT"]
            expect(entry and entry[-1][0] == c["command"][0],
                   "%s: ENTRYPOINT %s, the manifests run %s" % (name, entry, c["command"]))
            dests = [d for s, _, d in copies(final) if s]
            expect(c["command"][0] in dests, "%s: %s is not copied into the image" % (name, c["command"][0]))
            users = [arg for ins, arg in final["instructions"] if ins == "USER"]
            sc = dict(pod.get("securityContext") or {}, **(c.get("securityContext") or {}))
            if name == "erdma-webhook":
                expect(users and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1]),
                       "%s: USER must be a numeric non-root uid:gid, got %s" % (name, users))
                uid, gid = (int(x) for x in users[-1].split(":"))
                expect(sc.get("runAsUser") == uid and sc.get("runAsGroup") == gid,
                       "%s: image user %s, the manifests run as %s:%s" %
                       (name, users[-1], sc.get("runAsUser"), sc.get("runAsGroup")))
                pre = (((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
                if pre:
                    # the preStop program must exist in any bookworm image: an Essential package's
                    pkg = package_of(pre[0])
                    essential = subprocess.run(["dpkg-query", "-W", "-f=${Essential}", pkg or "-"],
                                               capture_output=True, text=True).stdout.strip()
                    expect(essential == "yes", "preStop %s comes from %s, not an Essential package" % (pre[0], pkg))
            else:
                expect(not users or users[-1] in ("0", "0:0", "root"), "%s: runs as root, USER %s" % (name, users))
        suite.check("%s: version, image name, command and user agree with the manifests" % name,
                    agrees_with_manifests)

    def one_base():
        expect(len(bases) == 1, "the images use different bases: %s" % bases)
    suite.check("both images share one base", one_base)

    def dockerignore():
        with open(os.path.join(SOURCE_DIR, ".dockerignore")) as f:
            lines = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        expect({".git", "build*/"} <= lines, "the build context must leave out .git and build trees: %s" % lines)
    suite.check(".dockerignore keeps build trees and .git out of the context", dockerignore)
    suite.finish()


if __name__ == "__main__":
    main()
