#!/usr/bin/python3
"""Writes one container image as an OCI image-layout archive, with no container engine.

The image is one gzip layer made from installed Debian packages (their files as `dpkg -L` lists
them, documentation left out), files from the build tree and a few generated files. The archive
(`oci-layout`, `index.json`, `blobs/sha256/`) imports with `ctr -n k8s.io images import` and copies
to a registry with `skopeo copy oci-archive:...`. Same inputs, same digests: entries are sorted,
owned by 0:0 and dated SOURCE_DATE_EPOCH (0 when unset), and gzip carries no name or time.

Before writing, every ELF file in the image has its interpreter and DT_NEEDED libraries looked up
inside the image the way the dynamic loader would, so a missing runtime package is an error here
and not at container start.

Standard library only; runs with Debian's /usr/bin/python3 (or any python3 >= 3.9).
Used by images/build-images.sh; `oci_image.py --help` lists the flags.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
import time

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_LAYER_PLAIN = "application/vnd.oci.image.layer.v1.tar"
# ERDMA_IMAGE_LAYER=tar writes the layer uncompressed: larger archives, but an importer on a slow
# (emulated) CPU unpacks them much faster. The default is gzip, as registries expect.
LAYER_FORMAT = os.environ.get("ERDMA_IMAGE_LAYER", "gzip")

# Package paths that an image does not need.
SKIPPED_PREFIXES = ("usr/share/doc/", "usr/share/doc-base/", "usr/share/man/", "usr/share/info/",
                    "usr/share/lintian/", "usr/share/bug/", "usr/share/gdb/", "usr/share/gcc/")
# Debian 12 merges /bin, /sbin, /lib and /lib64 into /usr: packages still list the old paths.
MERGED = ("bin", "sbin", "lib", "lib64")
# Where the loader looks when neither RUNPATH nor /etc/ld.so.cache names a directory.
LOADER_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib", "lib64", "usr/lib64")


class ImageError(Exception):
    """A problem with the inputs; the message says how to fix it."""


class Entry:
    """One path in the image: a directory, a regular file (from a host path or bytes) or a symlink."""

    def __init__(self, kind, mode, source=None, data=None, target=None, origin=""):
        self.kind, self.mode, self.source, self.data, self.target, self.origin = \
            kind, mode, source, data, target, origin

    def same_as(self, other):
        if self.kind != other.kind:
            return False
        if self.kind == "link":
            return self.target == other.target
        if self.kind == "file":
            return self.content() == other.content() and self.mode == other.mode
        return True

    def content_starts_with(self, magic):
        if self.data is not None:
            return self.data.startswith(magic)
        with open(self.source, "rb") as f:
            return f.read(len(magic)) == magic

    def content(self):
        if self.data is not None:
            return self.data
        with open(self.source, "rb") as f:
            return f.read()


class Rootfs:
    """The image's file tree, keyed by path without the leading '/'."""

    def __init__(self, merged_usr):
        self.entries = {}
        self.merged_usr = merged_usr
        if merged_usr:
            for d in MERGED:
                self.entries[d] = Entry("link", 0o777, target="usr/" + d, origin="merged /usr")

    def canonical(self, path):
        path = os.path.normpath("/" + path).lstrip("/")
        first = path.split("/", 1)[0]
        if self.merged_usr and first in MERGED:
            path = "usr/" + path
        return path

    def add(self, path, entry):
        path = self.canonical(path)
        if not path:
            return
        old = self.entries.get(path)
        if old is not None and old.kind == "dir" and entry.kind == "dir":
            if entry.origin != "parent":
                old.mode = entry.mode
            return
        if old is not None and not old.same_as(entry):
            raise ImageError("/%s comes from both %s and %s with different contents" %
                             (path, old.origin, entry.origin))
        self.entries[path] = entry

    def add_parents(self):
        for path in list(self.entries):
            parts = path.split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                if parent not in self.entries:
                    self.entries[parent] = Entry("dir", 0o755, origin="parent")
                elif self.entries[parent].kind != "dir":
                    raise ImageError("/%s is a %s (from %s), but /%s needs it to be a directory" %
                                     (parent, self.entries[parent].kind, self.entries[parent].origin, path))

    def resolve(self, path, depth=0):
        """Follows symlinks inside the image; returns the canonical path of a regular file or None."""
        if depth > 40:
            return None
        parts = path.strip("/").split("/")
        cur = ""
        for i, part in enumerate(parts):
            nxt = part if not cur else cur + "/" + part
            e = self.entries.get(nxt)
            if e is None:
                return None
            if e.kind == "link":
                target = e.target if e.target.startswith("/") else os.path.join("/" + cur, e.target)
                rest = "/".join(parts[i + 1:])
                return self.resolve(os.path.normpath(target + ("/" + rest if rest else "")), depth + 1)
            cur = nxt
        e = self.entries.get(cur)
        return cur if e is not None and e.kind == "file" else None


def installed_version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", pkg],
                       capture_output=True, text=True, timeout=60)
    status, _, version = r.stdout.partition("\t")
    if r.returncode != 0 or status != "install ok installed":
        raise ImageError("Debian package %s is not installed; run scripts/install-deps.sh as root "
                         "(or apt-get install %s)" % (pkg, pkg))
    return version


def add_package(rootfs, pkg):
    """Adds the files and symlinks of an installed package. Returns its version."""
    version = installed_version(pkg)
    r = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise ImageError("dpkg -L %s failed: %s" % (pkg, r.stderr.strip()))
    for path in r.stdout.splitlines():
        if not path.startswith("/") or path == "/.":
            continue
        rel = rootfs.canonical(path)
        if rootfs.merged_usr and path.lstrip("/") in MERGED:
            continue  # /lib and friends: already the merged-/usr symlinks
        if rel.startswith(SKIPPED_PREFIXES) or rel + "/" in SKIPPED_PREFIXES:
            continue
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise ImageError("%s lists %s, which is missing on this machine; reinstall it: "
                             "apt-get install --reinstall %s" % (pkg, path, pkg)) from None
        if stat.S_ISLNK(st.st_mode):
            rootfs.add(path, Entry("link", 0o777, target=os.readlink(path), origin=pkg))
        elif stat.S_ISREG(st.st_mode):
            rootfs.add(path, Entry("file", stat.S_IMODE(st.st_mode), source=path, origin=pkg))
        elif stat.S_ISDIR(st.st_mode):
            # Directories the package owns exist even when empty (/etc/ld.so.conf.d and the like);
            # a path that is a symlink here (a merged /lib) was already added as one.
            if rootfs.entries.get(rel) is None or rootfs.entries[rel].kind == "dir":
                rootfs.add(path, Entry("dir", 0o755, origin="parent"))
    return version


def elf_info(data):
    """(interpreter or None, [DT_NEEDED], [RUNPATH/RPATH dirs]) of a 64-bit little-endian ELF file,
    or None when data is not one."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic, interp = [], None, None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dynamic = (p_offset, p_filesz)
        elif p_type == 3:
            interp = data[p_offset:p_offset + p_filesz].rstrip(b"\0").decode()
    if dynamic is None:
        return interp, [], []
    tags = []
    for off in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, val = struct.unpack_from("<qQ", data, off)
        if tag == 0:
            break
        tags.append((tag, val))
    strtab = next((v for t, v in tags if t == 5), None)
    strtab_off = next((o + strtab - a for a, o, s in loads if strtab is not None and a <= strtab < a + s), None)
    if strtab_off is None:
        return interp, [], []

    def string(i):
        end = data.index(b"\0", strtab_off + i)
        return data[strtab_off + i:end].decode()
    needed = [string(v) for t, v in tags if t == 1]
    runpath = [d for t, v in tags if t in (15, 29) for d in string(v).split(":") if d]
    return interp, needed, runpath


def ld_so_conf_dirs(rootfs):
    dirs = []
    for path in sorted(rootfs.entries):
        e = rootfs.entries[path]
        if path.startswith("etc/ld.so.conf.d/") and path.endswith(".conf") and e.kind == "file":
            for line in e.content().decode().splitlines():
                line = line.split("#", 1)[0].strip()
                if line.startswith("/"):
                    dirs.append(line.lstrip("/"))
    return dirs


def check_libraries(rootfs, image, roots):
    """Follows the interpreter and DT_NEEDED libraries of every ELF file in roots (image paths)
    through the image, the way the dynamic loader searches; raises ImageError naming each one
    missing. Libraries nothing in roots loads are not checked: a runtime package may carry files
    for other users (libgrpc++'s protoc plugin support needs libprotoc, which the agent never loads)."""
    conf_dirs = ld_so_conf_dirs(rootfs)
    problems, seen, queue = [], set(), []
    for root in roots:
        path = rootfs.resolve(root)
        if path is None:
            problems.append("%s is not a file in the image" % root)
        elif path not in seen:
            seen.add(path)
            queue.append(path)
    while queue:
        path = queue.pop(0)
        e = rootfs.entries[path]
        if not e.content_starts_with(b"\x7fELF"):
            continue
        info = elf_info(e.content())
        if info is None:
            continue
        interp, needed, runpath = info
        if interp and rootfs.resolve(interp) is None:
            problems.append("/%s: its loader %s is not in the image (package libc6)" % (path, interp))
        origin = "/" + os.path.dirname(path)
        dirs = [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin).lstrip("/")
                for d in runpath] + conf_dirs + list(LOADER_DIRS)
        for lib in needed:
            found = next((f for f in (rootfs.resolve(d + "/" + lib) for d in dirs) if f), None)
            if found is None:
                problems.append("/%s needs %s, which the image lacks" % (path, lib))
            elif found not in seen:
                seen.add(found)
                queue.append(found)
    if problems:
        raise ImageError("image %s: shared libraries missing (add the Debian package that ships each, "
                         "`dpkg -S LIBRARY`, to the image's runtime list in scripts/install-deps.sh):\n  %s" %
                         (image, "\n  ".join(problems)))
    return len(seen)


class HashingWriter:
    """A write-only file object that hashes and counts what passes through to an optional sink."""

    def __init__(self, sink=None):
        self.sink, self.sha, self.size = sink, hashlib.sha256(), 0

    def write(self, b):
        self.sha.update(b)
        self.size += len(b)
        if self.sink is not None:
            self.sink.write(b)
        return len(b)

    def flush(self):
        pass

    def digest(self):
        return "sha256:" + self.sha.hexdigest()


def tar_info(name, kind, mode, mtime, size=0, target=""):
    ti = tarfile.TarInfo(name)
    ti.type = {"dir": tarfile.DIRTYPE, "file": tarfile.REGTYPE, "link": tarfile.SYMTYPE}[kind]
    ti.mode, ti.mtime, ti.size, ti.linkname = mode, mtime, size, target
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    return ti


class _NoClose:
    """A file object whose close() leaves the underlying file open (for the uncompressed layer)."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        return self._f.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def write_layer(rootfs, path, mtime):
    """Writes the layer (gzip, or plain tar with ERDMA_IMAGE_LAYER=tar) to path; returns (diff_id,
    digest, size)."""
    if LAYER_FORMAT not in ("gzip", "tar"):
        raise SystemExit("oci_image: ERDMA_IMAGE_LAYER must be gzip or tar, got %r" % LAYER_FORMAT)
    with open(path, "wb") as out:
        compressed = HashingWriter(out)
        opener = (_NoClose(compressed) if LAYER_FORMAT == "tar" else
                  gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=compressed, mtime=0))
        with opener as gz:
            plain = HashingWriter(gz)
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for name in sorted(rootfs.entries, key=lambda p: p.split("/")):
                    e = rootfs.entries[name]
                    if e.kind == "file":
                        data = e.content()
                        tar.addfile(tar_info(name, "file", e.mode, mtime, len(data)), io.BytesIO(data))
                    else:
                        tar.addfile(tar_info(name, e.kind, e.mode, mtime, target=e.target or ""))
    return plain.digest(), compressed.digest(), compressed.size


def canonical_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def split_ref(ref):
    """(name, tag) of a reference like registry.example.com/a/b:1.0."""
    name, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag or not name:
        raise ImageError("image reference %r has no tag (want NAME:TAG)" % ref)
    return name, tag


def build(args):
    t0 = time.time() if args.since is None else args.since
    image = os.path.basename(args.out)
    if image.endswith(".tar"):
        image = image[:-4]
    _, tag = split_ref(args.ref)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))

    rootfs = Rootfs(args.merged_usr)
    packages, roots = [], []
    for pkg in args.package:
        packages.append("%s=%s" % (pkg, add_package(rootfs, pkg)))
    for spec in args.from_package:
        pkg, sep, path = spec.partition("=")
        if not sep or not path.startswith("/"):
            raise ImageError("--from-package %r: want PACKAGE=/PATH" % spec)
        version = installed_version(pkg)
        r = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True, timeout=60)
        if path not in r.stdout.splitlines() or not os.path.isfile(path):
            raise ImageError("Debian package %s does not ship %s (dpkg -L %s)" % (pkg, path, pkg))
        rootfs.add(path, Entry("file", stat.S_IMODE(os.stat(path).st_mode), source=path, origin=pkg))
        packages.append("%s=%s(%s)" % (pkg, version, path))
        roots.append(path)
    for spec in args.file:
        src, sep, dest = spec.partition("=")
        if not sep or not dest.startswith("/"):
            raise ImageError("--file %r: want SOURCE=/DEST" % spec)
        if not os.path.isfile(src):
            raise ImageError("%s (for %s) does not exist" % (src, dest))
        mode = 0o755 if os.stat(src).st_mode & 0o111 else 0o644
        rootfs.add(dest, Entry("file", mode, source=src, origin=src))
    for spec in args.symlink:
        dest, sep, target = spec.partition("=")
        if not sep or not dest.startswith("/") or not target:
            raise ImageError("--symlink %r: want /PATH=TARGET" % spec)
        rootfs.add(dest, Entry("link", 0o777, target=target, origin="--symlink"))
    for spec in args.dir:
        dest, _, mode = spec.partition(":")
        rootfs.add(dest, Entry("dir", int(mode or "755", 8), origin="--dir"))
    rootfs.add_parents()
    roots += [dest for _, _, dest in (f.partition("=") for f in args.file)]
    for d in args.dlopen_dir:
        prefix = rootfs.canonical(d) + "/"
        roots += ["/" + p for p, e in rootfs.entries.items() if p.startswith(prefix) and e.kind == "file"]
    check_libraries(rootfs, image, roots)

    out_dir = os.path.dirname(os.path.abspath(args.out))
    work = args.out + ".partial.d"
    os.makedirs(work, exist_ok=True)
    try:
        layer_path = os.path.join(work, "layer")
        diff_id, layer_digest, layer_size = write_layer(rootfs, layer_path, epoch)

        def json_list(text, flag):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ImageError("%s %r: want a JSON array of strings" % (flag, text))
            return value

        cfg = {"Env": list(args.env)}
        if args.entrypoint:
            cfg["Entrypoint"] = json_list(args.entrypoint, "--entrypoint")
        if args.cmd:
            cfg["Cmd"] = json_list(args.cmd, "--cmd")
        if args.user:
            cfg["User"] = args.user
        if args.workdir:
            cfg["WorkingDir"] = args.workdir
        if args.expose:
            cfg["ExposedPorts"] = {p: {} for p in args.expose}
        labels = dict(l.partition("=")[::2] for l in args.label)
        if labels:
            cfg["Labels"] = labels
        config = canonical_json({
            "created": created,
            "architecture": "amd64",
            "os": "linux",
            "config": cfg,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": created,
                         "created_by": "images/build-images.sh %s" % image,
                         "comment": "Debian packages: %s" % (" ".join(packages) or "none")}],
        })
        config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        manifest = canonical_json({
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": MEDIA_LAYER if LAYER_FORMAT == "gzip" else MEDIA_LAYER_PLAIN,
                        "digest": layer_digest, "size": layer_size}],
        })
        manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        index = canonical_json({
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [{
                "mediaType": MEDIA_MANIFEST, "digest": manifest_digest, "size": len(manifest),
                "platform": {"architecture": "amd64", "os": "linux"},
                # ctr import names the image after this annotation; with only the OCI ref.name
                # (a bare tag) it would call it import-<date>.
                "annotations": {"io.containerd.image.name": args.ref,
                                "org.opencontainers.image.ref.name": tag},
            }],
        })

        partial = args.out + ".partial"
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            def add_bytes(name, data):
                tar.addfile(tar_info(name, "file", 0o644, epoch, len(data)), io.BytesIO(data))
            tar.addfile(tar_info("blobs", "dir", 0o755, epoch))
            tar.addfile(tar_info("blobs/sha256", "dir", 0o755, epoch))
            blobs = sorted([(config_digest, config, None), (manifest_digest, manifest, None),
                            (layer_digest, None, layer_path)])
            for digest, data, path in blobs:
                name = "blobs/sha256/" + digest.split(":", 1)[1]
                if data is not None:
                    add_bytes(name, data)
                else:
                    with open(path, "rb") as f:
                        tar.addfile(tar_info(name, "file", 0o644, epoch, layer_size), f)
            add_bytes("index.json", index)
            add_bytes("oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"}))
        os.replace(partial, args.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(args.out + ".partial"):
            os.unlink(args.out + ".partial")

    size = os.path.getsize(args.out)
    files = sum(1 for e in rootfs.entries.values() if e.kind == "file")
    print("%-18s %-62s %7.1f MiB  layer %s  %d files  %.1f s" %
          (os.path.relpath(args.out, out_dir), args.ref, size / 1048576.0, layer_digest, files,
           time.time() - t0))
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description="Write one OCI image-layout archive (one layer).")
    p.add_argument("--out", required=True, help="archive to write, e.g. out/erdma-agent.tar")
    p.add_argument("--ref", required=True, help="full image reference, e.g. localhost/x/pause:1")
    p.add_argument("--merged-usr", action="store_true",
                   help="Debian 12 layout: /bin, /sbin, /lib, /lib64 are symlinks into /usr")
    p.add_argument("--package", action="append", default=[], help="installed Debian package to copy")
    p.add_argument("--from-package", action="append", default=[], metavar="PACKAGE=/PATH",
                   help="one file of an installed Debian package")
    p.add_argument("--file", action="append", default=[], metavar="SRC=/DEST")
    p.add_argument("--dlopen-dir", action="append", default=[], metavar="/DIR",
                   help="a directory whose libraries get loaded at run time: check them too")
    p.add_argument("--symlink", action="append", default=[], metavar="/PATH=TARGET")
    p.add_argument("--dir", action="append", default=[], metavar="/PATH[:MODE]")
    p.add_argument("--entrypoint", help="JSON array")
    p.add_argument("--cmd", help="JSON array")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--user")
    p.add_argument("--workdir")
    p.add_argument("--expose", action="append", default=[], metavar="PORT/PROTO")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--since", type=float, metavar="UNIX_TIME",
                   help="when this image's build started (its preparation counts in the time printed)")
    args = p.parse_args()
    try:
        build(args)
    except ImageError as e:
        print("oci_image: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
