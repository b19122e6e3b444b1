#!/usr/bin/python3
"""The images the examples and the documented apply commands deploy: each one runs, or the
documentation says the reader must replace it.

A newcomer applies what the docs show. An image that no registry serves, under a name that looks
real (registry.example.com/db/redis:7.2.5), ends in ImagePullBackOff with nothing to say why. The
rule, checked on the tree:

1. Examples. Every image of a container, init container or ephemeral container in any document of
   examples/**/*.yaml is one of:
   a. the project's workload image, exactly the reference images/build-images.sh gives it
      (WORKLOAD, localhost/erdma-controller/workload:1). The file's header (its leading comment
      lines) names that reference and points to examples/README.md, "Images", which must exist and
      says how to import the image on the nodes or push it and rename it with kustomize `images:`;
   b. a placeholder YOUR-<WORDS>-IMAGE (upper-case letters, digits, '-'). Upper case is not
      allowed in an image reference, so the kubelet stops at InvalidImageName and pulls nothing:
      it cannot be mistaken for a real image. The file's header names the placeholder and says to
      replace it.
   Anything else fails: in particular an image under a placeholder registry (PLACEHOLDER_DOMAINS:
   example.com, example.net, example.org and the reserved top-level domains .example, .invalid,
   .test) and public images, which this project neither builds nor vouches for.
2. Documented commands: every line of a fenced code block (a line ending in a backslash joined
   with the next) and every inline code span of DOC_PAGES that runs `kubectl apply` or
   `kubectl create`, comments stripped.
   a. A file or directory of this repository on that line (`-f examples/x.yaml`, or the input of
      `sed ... examples/x.yaml | kubectl apply -f -`): each YOUR-...-IMAGE placeholder in it
      appears on the same line (the command replaces it, as `sed "s|YOUR-...-IMAGE|...|"` does);
      no image of it is under a placeholder registry; and when it runs the workload image, the
      page links examples/README.md#images (examples/README.md itself: has the "Images" section).
   b. `-k DIR` with DIR a directory of this repository (manifests/...): fails when an image it
      deploys is under a placeholder registry. Its images are read from the kustomizations it
      reaches (resources, components and patches, recursively), renamed by the `images:` of each
      kustomization on the way. The shipped manifests name registry.example.com/erdma-controller/...,
      so the docs apply an overlay of the reader's instead.
   c. `-k DIR` with DIR not in this repository (site/, site-cleanup/, site-examples/: the reader's
      own overlay): the page says where that overlay's images come from, by linking
      install.md#images or examples/README.md#images, or by showing an `images:` entry with
      `newName:` itself.
3. A documented `--image=REF` (kubectl debug, run): never under the registry the manifests name
   (SHIPPED_REGISTRY, build-images.sh's default: its images do not exist); under another
   placeholder registry (the docs' "registry.mycorp.example", standing for the reader's), only on a
   page that links install.md#images.
Each rule also runs on deliberately broken copies, to show it fails.

Runs with Debian's /usr/bin/python3 (python3-yaml); reads the tree, writes nothing.
"""

import glob
import os
import re
import shlex
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/webhook/server/integration"))
from harness import Suite, expect  # noqa: E402

BUILD_IMAGES = "images/build-images.sh"
PLACEHOLDER = re.compile(r"YOUR-[A-Z0-9]+(?:-[A-Z0-9]+)*-IMAGE")
PLACEHOLDER_DOMAINS = ("example.com", "example.net", "example.org")
PLACEHOLDER_TLDS = ("example", "invalid", "test")
IMAGES_SECTION = "examples/README.md#images"
INSTALL_IMAGES = "install.md#images"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def read(path, root=SOURCE_DIR):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def build_script_refs(text):
    """(the workload image's reference, the registry the agent and webhook images default to)."""
    workload = re.search(r'--ref "(localhost/erdma-controller/workload:[^"]+)"', text)
    registry = re.search(r'^build_dir="" out_dir="" registry="([^"]+)"', text, re.M)
    if not workload or not registry:
        raise SystemExit("%s: no workload --ref or default registry found; update %s" % (BUILD_IMAGES, __file__))
    return workload.group(1), registry.group(1).split("/")[0]


WORKLOAD, SHIPPED_REGISTRY = build_script_refs(read(BUILD_IMAGES))


def registry_host(ref):
    """The registry of an image reference, as the kubelet resolves it (docker.io when the first
    component is not a host name)."""
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first.split(":")[0].lower()
    return "docker.io"


def placeholder_registry(ref):
    host = registry_host(ref)
    return (any(host == d or host.endswith("." + d) for d in PLACEHOLDER_DOMAINS) or
            host.rsplit(".", 1)[-1] in PLACEHOLDER_TLDS)


def pod_images(obj):
    """Every container image in a parsed object, at any depth (pods, templates, patches)."""
    out = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k in CONTAINER_LISTS and isinstance(v, list):
                    out.extend(c["image"] for c in v if isinstance(c, dict) and isinstance(c.get("image"), str))
                walk(v)
        elif isinstance(o, list):
            for x in o:
                walk(x)
    walk(obj)
    return out


def text_images(text):
    return [img for doc in yaml.safe_load_all(text) for img in pod_images(doc)]


def header(text):
    """The file's leading comment lines (blank lines and document separators included)."""
    out = []
    for line in text.split("\n"):
        s = line.strip()
        if s and not s.startswith("#") and s != "---":
            break
        out.append(line)
    return "\n".join(out)


def example_files(root=SOURCE_DIR):
    paths = glob.glob(os.path.join(root, "examples/**/*.yaml"), recursive=True)
    return {os.path.relpath(p, root): read(p, root) for p in sorted(paths)}


def check_examples(examples):
    """Rule 1 on {path: text}."""
    p = []
    for path, text in examples.items():
        try:
            images = text_images(text)
        except yaml.YAMLError as e:
            p.append("%s: not YAML: %s" % (path, e))
            continue
        head = header(text)
        for img in sorted(set(images)):
            if img == WORKLOAD:
                if WORKLOAD not in head or "examples/README.md" not in head or '"Images"' not in head:
                    p.append('%s runs %s, and its header does not name it and point to examples/README.md, "Images"' %
                             (path, img))
            elif PLACEHOLDER.fullmatch(img):
                if img not in head or "replace" not in head.lower():
                    p.append("%s names the placeholder %s, and its header does not name it and say to replace it" %
                             (path, img))
            elif placeholder_registry(img):
                p.append("%s names %s, under a placeholder registry that serves nothing: run the workload image "
                         "(%s) or name a YOUR-...-IMAGE placeholder the header explains" % (path, img, WORKLOAD))
            else:
                p.append("%s names %s: examples run the workload image (%s) or a YOUR-...-IMAGE placeholder" %
                         (path, img, WORKLOAD))
    return p


def commands(text):
    """(line number, command) for each line of a fenced code block, a trailing backslash joining
    the next line, and for each inline code span (with markdown tables' \\| unescaped)."""
    out, fenced, pending = [], False, None
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith("```"):
            fenced, pending = not fenced, None
            continue
        if fenced:
            start, cmd = pending if pending else (n, "")
            cmd = (cmd + " " + line.strip()).strip()
            if cmd.endswith("\\"):
                pending = (start, cmd[:-1])
                continue
            pending = None
            out.append((start, cmd))
        else:
            out.extend((n, m.group(1).replace("\\|", "|")) for m in re.finditer(r"`([^`\n]+)`", line))
    return out


def words(cmd):
    """The command's words, its comment (from a '#' that starts a word) left out."""
    cmd = re.sub(r"(^|\s)#.*$", "", cmd)
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()


SEPARATORS = {"|", "||", "&&", ";"}


def applies(ws):
    """The -f and -k arguments of each `kubectl apply|create` in the words: [(flag, value)]."""
    out = []
    i = 0
    while i < len(ws):
        if os.path.basename(ws[i]) != "kubectl":
            i += 1
            continue
        j, sub, args = i + 1, None, []
        while j < len(ws) and ws[j] not in SEPARATORS:
            w = ws[j].rstrip(";")
            if sub is None and w in ("apply", "create"):
                sub = w
            m = re.fullmatch(r"(-f|--filename|-k|--kustomize)(?:=(.+))?", w)
            if m:
                value = m.group(2)
                if value is None and j + 1 < len(ws):
                    j += 1
                    value = ws[j].rstrip(";")
                if value is not None:
                    args.append(("-k" if m.group(1) in ("-k", "--kustomize") else "-f", value))
            if ws[j].endswith(";"):
                break
            j += 1
        if sub:
            out.extend(args)
        i = j + 1
    return out


def repo_path(path, root):
    """The path relative to the repository when it names something in it (or under one of its
    top-level directories), else None."""
    path = os.path.normpath(path.lstrip("./") if path.startswith("./") else path)
    if path.startswith(("/", "..")) or path in (".", "-"):
        return None
    top = path.split(os.sep)[0]
    if os.path.exists(os.path.join(root, path)) or (top and os.path.isdir(os.path.join(root, top)) and "/" in path):
        return path
    return None


def load_kustomization(d):
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            with open(p, encoding="utf-8") as f:
                return yaml.safe_load(f) or {}
    return None


def split_ref(ref):
    """(name, tag, digest) of an image reference."""
    name, _, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = ""
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest


def rename(ref, entries):
    name, tag, digest = split_ref(ref)
    for e in entries or []:
        if e.get("name") == name:
            name = e.get("newName", name)
            if "newTag" in e:
                tag, digest = str(e["newTag"]), ""
            if "digest" in e:
                digest = e["digest"]
    return name + (":" + tag if tag else "") + ("@" + digest if digest else "")


def kustomize_images(d, seen=None):
    """The images a kustomization directory deploys, as kustomize's images transformer leaves them."""
    seen = set() if seen is None else seen
    d = os.path.normpath(d)
    if d in seen:
        return []
    seen.add(d)
    k = load_kustomization(d)
    if k is None:
        raise AssertionError("%s has no kustomization.yaml" % d)
    out = []
    for r in (k.get("resources") or []) + (k.get("components") or []) + (k.get("bases") or []):
        p = os.path.join(d, r)
        if os.path.isdir(p):
            out += kustomize_images(p, seen)
        elif os.path.isfile(p):
            with open(p, encoding="utf-8") as f:
                out += text_images(f.read())
    for patch in (k.get("patches") or []) + (k.get("patchesStrategicMerge") or []):
        if isinstance(patch, dict) and "path" in patch:
            with open(os.path.join(d, patch["path"]), encoding="utf-8") as f:
                out += text_images(f.read())
        elif isinstance(patch, dict) and "patch" in patch:
            out += text_images(patch["patch"])
        elif isinstance(patch, str):
            p = os.path.join(d, patch)
            if os.path.isfile(p):
                with open(p, encoding="utf-8") as f:
                    out += text_images(f.read())
            else:
                out += text_images(patch)
    return [rename(img, k.get("images")) for img in out]


def says_where_images_come_from(page, text):
    return (INSTALL_IMAGES in text or IMAGES_SECTION in text or re.search(r"^\s*newName:", text, re.M) or
            (page == "examples/README.md" and "(#images)" in text))


def links_examples_images(page, text):
    return IMAGES_SECTION in text or (page == "examples/README.md" and re.search(r"^## Images$", text, re.M))


def check_docs(docs, examples, root=SOURCE_DIR):
    """Rules 2 and 3 on {page: text}; repository files are read from `examples` ({path: text}) when
    there, else from root."""
    p = []

    def file_text(path):
        if path in examples:
            return examples[path]
        return read(path, root)

    for page, text in docs.items():
        for n, cmd in commands(text):
            ws = words(cmd)
            where = "%s:%d" % (page, n)
            for i, w in enumerate(ws):
                m = re.fullmatch(r"--image=(.+)", w) or (w == "--image" and i + 1 < len(ws) and
                                                         re.fullmatch(r"(.+)", ws[i + 1]))
                if not m:
                    continue
                ref = m.group(1)
                if registry_host(ref) == SHIPPED_REGISTRY:
                    p.append("%s: --image=%s names the manifests' placeholder registry, whose images do not exist" %
                             (where, ref))
                elif placeholder_registry(ref) and INSTALL_IMAGES not in text:
                    p.append("%s: --image=%s stands for the reader's registry, and %s does not link %s" %
                             (where, ref, page, INSTALL_IMAGES))
            args = applies(ws)
            if not args:
                continue
            # 2a: every repository file on the line (an -f argument, or sed's input piped to -f -).
            files = set()
            for w in ws:
                rel = repo_path(w, root) if re.search(r"\.ya?ml$", w) or w.rstrip("/") in (
                    v.rstrip("/") for f, v in args if f == "-f") else None
                if rel is None:
                    continue
                if os.path.isdir(os.path.join(root, rel)):
                    files |= {os.path.relpath(x, root) for x in glob.glob(os.path.join(root, rel, "*.yaml"))}
                elif rel in examples or os.path.isfile(os.path.join(root, rel)):
                    files.add(rel)
                else:
                    p.append("%s: %s is not in the repository" % (where, rel))
            for f in sorted(files):
                try:
                    images = text_images(file_text(f))
                except yaml.YAMLError:
                    continue
                for img in sorted(set(images)):
                    if PLACEHOLDER.fullmatch(img) and img not in cmd:
                        p.append("%s: applies %s, whose image %s is a placeholder the command does not replace "
                                 "(e.g. sed \"s|%s|$IMAGE|\" %s | kubectl apply -f -)" % (where, f, img, img, f))
                    elif placeholder_registry(img):
                        p.append("%s: applies %s, which deploys %s from a placeholder registry" % (where, f, img))
                    elif img == WORKLOAD and not links_examples_images(page, text):
                        p.append("%s: applies %s, which runs %s, and %s does not link %s (where it comes from)" %
                                 (where, f, img, page, IMAGES_SECTION))
            # 2b and 2c: -k of a repository directory, or of the reader's overlay.
            for flag, value in args:
                if flag != "-k":
                    continue
                rel = repo_path(value, root)
                if rel is None:
                    if not says_where_images_come_from(page, text):
                        p.append("%s: applies the reader's overlay %s, and %s does not say where its images come "
                                 "from (link %s, or show its images: entry)" % (where, value, page, INSTALL_IMAGES))
                    continue
                if not os.path.isdir(os.path.join(root, rel)):
                    p.append("%s: kubectl apply -k %s: no such directory in the repository" % (where, rel))
                    continue
                bad = sorted({img for img in kustomize_images(os.path.join(root, rel)) if placeholder_registry(img)})
                if bad:
                    p.append("%s: kubectl apply -k %s deploys %s, from a placeholder registry: apply the reader's "
                             "overlay of it (%s)" % (where, rel, ", ".join(bad), INSTALL_IMAGES))
    return p


def doc_pages(root=SOURCE_DIR):
    pages = ["README.md", "examples/README.md", "images/README.md", "charts/erdma-controller/README.md"]
    pages += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs/*.md")))
    return {p: read(p, root) for p in pages if os.path.isfile(os.path.join(root, p))}


def main():
    suite = Suite("example-images")
    examples = example_files()
    docs = doc_pages()

    def examples_rule():
        expect(len(examples) >= 8, "found only %s under examples/" % sorted(examples))
        p = check_examples(examples)
        expect(not p, p)
        expect(re.search(r"^## Images$", docs["examples/README.md"], re.M), 'examples/README.md has no "## Images"')
        used = {img for t in examples.values() for img in text_images(t)}
        expect(WORKLOAD in used, "no example runs %s" % WORKLOAD)
        broken = {
            "examples/a.yaml": "# header\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n"
                               "  - {name: c, image: registry.example.com/db/redis:7.2.5}\n",
            "examples/b.yaml": "# header without the name\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n"
                               "  - {name: c, image: YOUR-NCCL-TESTS-IMAGE}\n",
            "examples/c.yaml": "# a header that says nothing\napiVersion: apps/v1\nkind: Deployment\nspec:\n"
                               "  template:\n    spec:\n      initContainers:\n      - {name: i, image: %s}\n" % WORKLOAD,
            "examples/d.yaml": "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - {name: c, image: redis:7.2.5}\n",
            "examples/e.yaml": "# replace your-image below\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n"
                               "  - {name: c, image: your-image}\n",
        }
        got = check_examples(broken)
        for path in broken:
            expect(any(x.startswith(path + " ") for x in got), "a broken %s is not caught: %s" % (path, got))
    suite.check("every example image is the workload image (%s) or a YOUR-...-IMAGE placeholder its header "
                "explains (and broken copies are caught)" % WORKLOAD, examples_rule)

    def docs_rule():
        p = check_docs(docs, examples)
        expect(not p, p)
        base = kustomize_images(os.path.join(SOURCE_DIR, "manifests/default"))
        expect(any(registry_host(img) == SHIPPED_REGISTRY for img in base),
               "manifests/default deploys %s, none from %s: the overlay reader no longer follows the manifests" %
               (base, SHIPPED_REGISTRY))
        broken = {
            "docs/a.md": "```sh\nkubectl apply -f examples/nccl-two-rank.yaml\n```\n",
            "docs/b.md": "Install: `kubectl apply -k manifests/dra`.\n",
            "docs/c.md": "```sh\nkubectl apply -k site/   # your overlay\n```\n",
            "docs/d.md": "```sh\nkubectl debug node/N \\\n  --image=%s/erdma-controller/erdma-agent:1 -- sh\n```\n" %
                         SHIPPED_REGISTRY,
            "docs/e.md": "```sh\nkubectl -n team-a apply -f examples/smcr-deployment.yaml\n```\n",
            "docs/f.md": "```sh\nkubectl create ns x; kubectl apply -f examples/new.yaml\n```\n",
            "docs/g.md": "```sh\nkubectl debug node/N --image registry.mycorp.example/erdma/erdma-agent:1\n```\n",
        }
        fake = dict(examples)
        fake["examples/new.yaml"] = ("# header\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n"
                                     "  - {name: c, image: registry.example.com/app:1.0}\n")
        got = check_docs(broken, fake)
        for page in broken:
            expect(any(x.startswith(page + ":") for x in got), "a broken %s is not caught: %s" % (page, got))
        fine = {
            "docs/ok.md": "See [images](../examples/README.md#images).\n```sh\n"
                          "sed \"s|YOUR-PYTORCH-NCCL-IMAGE|$IMG|\" examples/nccl-two-rank.yaml | kubectl apply -f -\n"
                          "kubectl apply -f examples/smcr-deployment.yaml -f examples/smcr-client.yaml\n"
                          "kubectl apply -k site/\n```\n",
        }
        got = check_docs(fine, examples)
        expect(not got, "a correct page is refused: %s" % got)
    suite.check("documented kubectl apply/create and --image commands deploy runnable images or say the reader "
                "replaces them (and broken copies are caught)", docs_rule)
    suite.finish()


if __name__ == "__main__":
    main()
