#!/usr/bin/python3
"""certs/erdma-certs end to end, with no cluster: generate, rotate (serving certificate and a
full CA change), finish, apply --dry-run, check; apply and check --cluster against a stand-in
kubectl that records what it is asked; and every refusal (missing tools, bad files, mismatched
keys, out-of-order steps, a bundle that would not trust the cluster's certificate).

Runs with Debian's /usr/bin/python3 (python3-yaml). Keys are made at test time in a temporary
directory; no network."""

import base64
import json
import os
import stat
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/webhook/server/integration"))
from harness import Suite, expect  # noqa: E402  (the shared runner of the Python suites)

TOOL = os.path.join(SOURCE_DIR, "certs/erdma-certs")


def run(*args, env=None, stdin=None):
    """(exit status, stdout, stderr) of erdma-certs ARGS."""
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60, env=env, input=stdin)
    return r.returncode, r.stdout, r.stderr


def ok(*args, env=None):
    code, out, err = run(*args, env=env)
    if code != 0:
        raise AssertionError("erdma-certs %s exited %d: %s" % (" ".join(args), code, err))
    return out


def ok_err(*args, env=None):
    """Like ok, returning what the tool said on standard error."""
    code, _, err = run(*args, env=env)
    if code != 0:
        raise AssertionError("erdma-certs %s exited %d: %s" % (" ".join(args), code, err))
    return err


def fails(code_wanted, text, *args, env=None):
    """Runs and expects exit status code_wanted and `text` in stderr (or stdout)."""
    code, out, err = run(*args, env=env)
    expect(code == code_wanted, "erdma-certs %s: exit %d, want %d (%s)" % (" ".join(args), code, code_wanted, err))
    expect(text in err + out, "erdma-certs %s: %r not in %r" % (" ".join(args), text, err + out))
    return err


def openssl(*args, data=None):
    r = subprocess.run(["openssl", *args], capture_output=True, input=data, timeout=30)
    if r.returncode != 0:
        raise AssertionError("openssl %s: %s" % (" ".join(args), r.stderr.decode()))
    return r.stdout.decode()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def pem_blocks(data):
    text = data.decode() if isinstance(data, bytes) else data
    out, start = [], text.find("-----BEGIN CERTIFICATE-----")
    while start >= 0:
        end = text.index("-----END CERTIFICATE-----", start) + len("-----END CERTIFICATE-----")
        out.append(text[start:end] + "\n")
        start = text.find("-----BEGIN CERTIFICATE-----", end)
    return out


def fingerprint(pem):
    return openssl("x509", "-noout", "-fingerprint", "-sha256", data=pem.encode()).strip().split("=", 1)[1]


def issuer_of(pem_file):
    return openssl("x509", "-in", pem_file, "-noout", "-issuer").strip()


def without(tool, workdir):
    """An environment whose PATH has every program of /usr/bin and /bin except `tool`."""
    bindir = os.path.join(workdir, "bin-without-" + tool)
    if not os.path.isdir(bindir):
        os.makedirs(bindir)
        for d in ("/usr/local/bin", "/usr/bin", "/bin"):
            if not os.path.isdir(d):
                continue
            for name in os.listdir(d):
                link = os.path.join(bindir, name)
                if name != tool and not os.path.lexists(link):
                    os.symlink(os.path.join(d, name), link)
    env = dict(os.environ)
    env["PATH"] = bindir
    return env


FAKE_KUBECTL = r"""#!/bin/bash
# Stand-in kubectl: records each call (one JSON line: args and stdin) and answers from files.
set -euo pipefail
log="$FAKE_KUBECTL_DIR/calls.jsonl"
stdin=""
if [[ " $* " == *" -f - "* ]]; then stdin=$(cat); fi
/usr/bin/python3 -c 'import json,sys; print(json.dumps({"args": sys.argv[2:], "stdin": sys.argv[1]}))' "$stdin" "$@" >>"$log"
case "$*" in
  *"get mutatingwebhookconfiguration"*caBundle*)
    cat "$FAKE_KUBECTL_DIR/cabundle.b64" ;;
  *"get mutatingwebhookconfiguration"*)
    [ -e "$FAKE_KUBECTL_DIR/no-mwc" ] && { echo 'Error from server (NotFound): mutatingwebhookconfigurations.admissionregistration.k8s.io "erdma-webhook" not found' >&2; exit 1; }
    printf '%s' "$(cat "$FAKE_KUBECTL_DIR/webhook-names")" ;;
  *"get secret"*)
    if [ -e "$FAKE_KUBECTL_DIR/secret-tls.b64" ]; then cat "$FAKE_KUBECTL_DIR/secret-tls.b64"; fi ;;
  *patch*|*apply*) echo "ok" ;;
  *) echo "fake kubectl: unexpected call: $*" >&2; exit 1 ;;
esac
"""


class FakeKubectl:
    def __init__(self, workdir, names=("pods.erdma-webhook.erdma-system.svc",)):
        self.dir = os.path.join(workdir, "fake-kubectl-%d" % len(os.listdir(workdir)))
        os.makedirs(os.path.join(self.dir, "bin"))
        path = os.path.join(self.dir, "bin", "kubectl")
        with open(path, "w") as f:
            f.write(FAKE_KUBECTL)
        os.chmod(path, 0o755)
        with open(os.path.join(self.dir, "webhook-names"), "w") as f:
            f.write(" ".join(names))
        self.env = dict(os.environ)
        self.env["PATH"] = os.path.join(self.dir, "bin") + ":" + os.environ["PATH"]
        self.env["FAKE_KUBECTL_DIR"] = self.dir

    def set_secret_cert(self, pem_bytes):
        with open(os.path.join(self.dir, "secret-tls.b64"), "w") as f:
            f.write(base64.b64encode(pem_bytes).decode())

    def set_cabundle(self, pem_bytes):
        with open(os.path.join(self.dir, "cabundle.b64"), "w") as f:
            f.write(base64.b64encode(pem_bytes).decode())

    def calls(self):
        path = os.path.join(self.dir, "calls.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f]

    def writes(self):
        return [c for c in self.calls() if "patch" in c["args"] or "apply" in c["args"]]


def dry_run_docs(d, *extra, env=None):
    docs = [x for x in yaml.safe_load_all(ok("apply", "--dir", d, "--dry-run", *extra, env=env)) if x]
    expect(len(docs) == 2, "apply --dry-run printed %d documents" % len(docs))
    return docs


def main():
    suite = Suite("erdma-certs")
    w = suite.workdir
    main_dir = os.path.join(w, "pki")
    ok("generate", "--dir", os.path.join(w, "other"))  # an unrelated CA and pair

    def generate_defaults():
        err = ok_err("generate", "--dir", main_dir, "--san", "127.0.0.1", "--san", "webhook.local")
        expect(os.stat(main_dir).st_mode & 0o777 == 0o700, "directory mode")
        for name in ("ca.key", "tls.key"):
            expect(stat.S_IMODE(os.stat(os.path.join(main_dir, name)).st_mode) == 0o600, name + " mode")
        text = openssl("x509", "-in", os.path.join(main_dir, "tls.crt"), "-noout", "-text")
        expect("prime256v1" in text or "P-256" in text, "ECDSA P-256 by default")
        for san in ("DNS:erdma-webhook,", "DNS:erdma-webhook.erdma-system,", "DNS:erdma-webhook.erdma-system.svc,",
                    "DNS:erdma-webhook.erdma-system.svc.cluster.local", "IP Address:127.0.0.1", "DNS:webhook.local"):
            expect(san in text.replace(" ", "").replace("IPAddress", "IP Address"), "SAN %s missing" % san)
        expect(read(os.path.join(main_dir, "ca-bundle.crt")) == read(os.path.join(main_dir, "ca.crt")),
               "a new CA's bundle is the CA alone")
        ca_text = openssl("x509", "-in", os.path.join(main_dir, "ca.crt"), "-noout", "-text")
        expect("CA:TRUE" in ca_text, "CA basicConstraints")
        openssl("verify", "-CAfile", os.path.join(main_dir, "ca.crt"), os.path.join(main_dir, "tls.crt"))
        expect("new CA" in err, err)

    def generate_rsa():
        d = os.path.join(w, "rsa")
        ok("generate", "--dir", d, "--key-type", "rsa")
        text = openssl("x509", "-in", os.path.join(d, "tls.crt"), "-noout", "-text")
        expect("rsaEncryption" in text and "3072 bit" in text, "RSA 3072")
        # rotate keeps the key type of the certificate it replaces
        ok("rotate", "--dir", d)
        expect("rsaEncryption" in openssl("x509", "-in", os.path.join(d, "tls.crt"), "-noout", "-text"), "rotate kept RSA")

    def rotate_serving():
        before_crt = read(os.path.join(main_dir, "tls.crt"))
        before_key = read(os.path.join(main_dir, "tls.key"))
        bundle = read(os.path.join(main_dir, "ca-bundle.crt"))
        err = ok_err("rotate", "--dir", main_dir)
        after = read(os.path.join(main_dir, "tls.crt"))
        expect(after != before_crt and read(os.path.join(main_dir, "tls.key")) != before_key, "new certificate and key")
        expect(read(os.path.join(main_dir, "ca-bundle.crt")) == bundle, "bundle unchanged by a serving rotation")
        text = openssl("x509", "-in", os.path.join(main_dir, "tls.crt"), "-noout", "-text").replace(" ", "")
        expect("IPAddress:127.0.0.1" in text and "DNS:webhook.local" in text, "extra SANs carried over")
        expect("subject=CN=erdma-webhook.erdma-system.svc" in openssl(
            "x509", "-in", os.path.join(main_dir, "tls.crt"), "-noout", "-subject").replace(" ", ""), "subject")
        openssl("verify", "-CAfile", os.path.join(main_dir, "ca.crt"), os.path.join(main_dir, "tls.crt"))
        expect("next: 'erdma-certs apply" in err, err)

    def ca_change():
        d = os.path.join(w, "change")
        ok("generate", "--dir", d)
        old_ca = read(os.path.join(d, "ca.crt")).decode()
        old_tls = read(os.path.join(d, "tls.crt"))
        err = ok_err("finish", "--dir", d)
        expect("no CA change in progress" in err, err)
        err = ok_err("rotate", "--dir", d, "--new-ca")
        expect("step 1 of 3" in err, err)
        bundle = pem_blocks(read(os.path.join(d, "ca-bundle.crt")))
        new_ca = read(os.path.join(d, "ca.crt")).decode()
        expect(len(bundle) == 2 and fingerprint(bundle[0]) == fingerprint(old_ca) and
               fingerprint(bundle[1]) == fingerprint(new_ca) and fingerprint(new_ca) != fingerprint(old_ca),
               "bundle = old CA, new CA")
        expect(read(os.path.join(d, "tls.crt")) == old_tls, "step 1 leaves the serving certificate alone")
        # apply prints the whole bundle during the overlap, never one CA
        patch, secret = dry_run_docs(d)
        expect(len(pem_blocks(base64.b64decode(patch["webhooks"][0]["clientConfig"]["caBundle"]))) == 2,
               "caBundle during the overlap holds both CAs")
        expect(base64.b64decode(secret["data"]["ca.crt"]) == read(os.path.join(d, "ca-bundle.crt")), "Secret ca.crt")
        fails(2, "already in progress", "rotate", "--dir", d, "--new-ca")
        fails(2, "not signed by the current CA yet", "finish", "--dir", d)
        err = ok_err("rotate", "--dir", d)
        expect("step 2 of 3" in err, err)
        expect("erdma-webhook-ca " in issuer_of(os.path.join(d, "tls.crt")), "issued by the new CA")
        openssl("verify", "-CAfile", os.path.join(d, "ca.crt"), os.path.join(d, "tls.crt"))
        expect(len(pem_blocks(read(os.path.join(d, "ca-bundle.crt")))) == 2, "bundle still both after step 2")
        err = ok_err("finish", "--dir", d)
        expect("step 3 of 3" in err, err)
        bundle = pem_blocks(read(os.path.join(d, "ca-bundle.crt")))
        expect(len(bundle) == 1 and fingerprint(bundle[0]) == fingerprint(new_ca), "bundle = new CA")
        patch, _ = dry_run_docs(d)
        expect(fingerprint(base64.b64decode(patch["webhooks"][0]["clientConfig"]["caBundle"]).decode()) ==
               fingerprint(new_ca), "caBundle after finish")
        # a second CA change may start now
        ok("rotate", "--dir", d, "--new-ca")

    def dry_run_without_cluster():
        env = without("kubectl", w)
        patch, secret = dry_run_docs(main_dir, env=env)
        expect(patch["apiVersion"] == "admissionregistration.k8s.io/v1" and
               patch["kind"] == "MutatingWebhookConfiguration" and patch["metadata"]["name"] == "erdma-webhook", patch)
        expect([x["name"] for x in patch["webhooks"]] == ["pods.erdma-webhook.erdma-system.svc"], patch["webhooks"])
        expect(base64.b64decode(patch["webhooks"][0]["clientConfig"]["caBundle"]) ==
               read(os.path.join(main_dir, "ca-bundle.crt")), "caBundle is the bundle file")
        expect(secret["apiVersion"] == "v1" and secret["kind"] == "Secret" and secret["type"] == "kubernetes.io/tls",
               secret)
        expect(secret["metadata"]["name"] == "erdma-webhook-tls" and secret["metadata"]["namespace"] == "erdma-system",
               secret["metadata"])
        for key, path in (("tls.crt", "tls.crt"), ("ca.crt", "ca-bundle.crt")):
            expect(base64.b64decode(secret["data"][key]) == read(os.path.join(main_dir, path)), key)
        # The private key is not printed unless asked for, in no form.
        out = ok("apply", "--dir", main_dir, "--dry-run", env=env)
        key = read(os.path.join(main_dir, "tls.key"))
        expect("tls.key" not in secret["data"] and base64.b64encode(key).decode() not in out and
               key.decode() not in out and "--with-key prints it" in out, "the dry run printed the private key")
        _, secret = dry_run_docs(main_dir, "--with-key", env=env)
        expect(base64.b64decode(secret["data"]["tls.key"]) == key, "--with-key: tls.key")
        fails(2, "--with-key only goes with --dry-run", "apply", "--dir", main_dir, "--with-key")
        patch, secret = dry_run_docs(main_dir, "--namespace", "other", "--secret", "s", "--webhook-config", "c",
                                     "--webhook-name", "a.b.c", env=env)
        expect(patch["metadata"]["name"] == "c" and patch["webhooks"][0]["name"] == "a.b.c", patch)
        expect(secret["metadata"] == dict(secret["metadata"], name="s", namespace="other"), secret["metadata"])

    def check_reports():
        out = ok("check", "--dir", main_dir)
        expect(out.count("\n") >= 4 and "serving" in out and "ca[1]" in out and "verifies" in out and ": yes" in out, out)
        code, out, _ = run("check", "--dir", main_dir, "--warn-days", "400")
        expect(code == 1 and "EXPIRES SOON" in out, (code, out))
        expired = os.path.join(w, "expired")
        ok("generate", "--dir", expired, "--days", "-1")
        code, out, _ = run("check", "--dir", expired)
        expect(code == 1 and "EXPIRED" in out, (code, out))
        d = os.path.join(w, "change")  # after ca_change: a second change in progress
        code, out, _ = run("check", "--dir", d)
        expect(code == 0 and "ca[2]" in out and "CA change is in progress" in out, (code, out))
        # --cert alone takes the CAs after the leaf; --bundle names another file
        ok("check", "--cert", os.path.join(main_dir, "tls.crt"))
        other = os.path.join(w, "other")
        code, out, _ = run("check", "--cert", os.path.join(main_dir, "tls.crt"),
                           "--bundle", os.path.join(other, "ca.crt"))
        expect(code == 1 and ": NO" in out, (code, out))

    def apply_with_kubectl():
        fake = FakeKubectl(w, names=("pods.erdma-webhook.erdma-system.svc", "second.erdma-webhook.erdma-system.svc"))
        err = ok_err("apply", "--dir", main_dir, env=fake.env)
        writes = fake.writes()
        expect(len(writes) == 2, writes)
        patch_call, apply_call = writes
        expect("patch" in patch_call["args"] and "apply" in apply_call["args"], "caBundle patched before the Secret")
        expect("--server-side" in apply_call["args"], "Secret by server-side apply (no last-applied copy of the key)")
        body = json.loads(patch_call["args"][patch_call["args"].index("-p") + 1])
        bundle = read(os.path.join(main_dir, "ca-bundle.crt"))
        expect([x["name"] for x in body["webhooks"]] == ["pods.erdma-webhook.erdma-system.svc",
                                                        "second.erdma-webhook.erdma-system.svc"], body)
        expect(all(base64.b64decode(x["clientConfig"]["caBundle"]) == bundle for x in body["webhooks"]), "caBundle")
        secret = yaml.safe_load(apply_call["stdin"])
        expect(secret["type"] == "kubernetes.io/tls" and
               base64.b64decode(secret["data"]["tls.key"]) == read(os.path.join(main_dir, "tls.key")), "Secret")
        expect("caBundle of mutatingwebhookconfiguration erdma-webhook" in err, err)

    def apply_refuses_untrusting_bundle():
        d = os.path.join(w, "replace")
        ok("generate", "--dir", d)
        fake = FakeKubectl(w)
        fake.set_secret_cert(read(os.path.join(d, "tls.crt")))  # the cluster serves this one
        ok("generate", "--dir", d, "--new-ca")  # the replace-instead-of-overlap mistake
        fails(2, "does not trust the certificate the webhook serves now", "apply", "--dir", d, env=fake.env)
        expect(fake.writes() == [], "nothing written after the refusal")
        ok("apply", "--dir", d, "--force", env=fake.env)
        expect(len(fake.writes()) == 2, "--force applies")
        # the overlap passes the same check
        d2 = os.path.join(w, "overlap")
        ok("generate", "--dir", d2)
        fake2 = FakeKubectl(w)
        fake2.set_secret_cert(read(os.path.join(d2, "tls.crt")))
        ok("rotate", "--dir", d2, "--new-ca")
        ok("apply", "--dir", d2, env=fake2.env)
        fake2.set_secret_cert(read(os.path.join(d2, "tls.crt")))
        ok("rotate", "--dir", d2)
        ok("apply", "--dir", d2, env=fake2.env)
        fake2.set_secret_cert(read(os.path.join(d2, "tls.crt")))
        ok("finish", "--dir", d2)
        ok("apply", "--dir", d2, env=fake2.env)
        expect(len(fake2.writes()) == 6, fake2.writes())

    def apply_without_manifests():
        fake = FakeKubectl(w)
        open(os.path.join(fake.dir, "no-mwc"), "w").close()
        fails(2, "install the manifests first", "apply", "--dir", main_dir, env=fake.env)
        expect(fake.writes() == [], "nothing written")

    def check_cluster():
        fake = FakeKubectl(w)
        fake.set_secret_cert(read(os.path.join(main_dir, "tls.crt")))
        fake.set_cabundle(read(os.path.join(main_dir, "ca-bundle.crt")))
        out = ok("check", "--cluster", env=fake.env)
        expect(": yes" in out, out)
        fake.set_cabundle(read(os.path.join(w, "other", "ca.crt")))
        code, out, _ = run("check", "--cluster", env=fake.env)
        expect(code == 1 and ": NO" in out, (code, out))

    def missing_tools():
        fails(2, "openssl not found", "generate", "--dir", os.path.join(w, "x"), env=without("openssl", w))
        fails(2, "kubectl not found", "apply", "--dir", main_dir, env=without("kubectl", w))
        fails(2, "kubectl not found", "check", "--cluster", env=without("kubectl", w))

    def bad_input():
        bad = os.path.join(w, "bad")
        ok("generate", "--dir", bad)
        other = os.path.join(w, "other")
        # usage errors
        fails(2, "unknown command", "frobnicate")
        fails(2, "unknown flag --nope", "rotate", "--dir", bad, "--nope")
        fails(2, "--dir DIR is required", "rotate")
        fails(2, "--days must be a positive integer", "rotate", "--dir", bad, "--days", "x")
        fails(2, "--key-type must be ecdsa or rsa", "generate", "--dir", bad, "--key-type", "dsa")
        fails(2, "--dir needs a value", "apply", "--dir")
        fails(2, "exactly one of --dir, --cert or --cluster", "check")
        fails(2, "is not a directory", "rotate", "--dir", os.path.join(w, "missing"))
        fails(2, "--warn-days must be", "check", "--dir", bad, "--warn-days", "-3")
        # mismatched keys
        saved = read(os.path.join(bad, "tls.key"))
        with open(os.path.join(bad, "tls.key"), "wb") as f:
            f.write(read(os.path.join(other, "tls.key")))
        fails(2, "does not match the certificate", "rotate", "--dir", bad)
        fails(2, "does not match the certificate", "apply", "--dir", bad, "--dry-run")
        fails(2, "does not match the certificate", "check", "--dir", bad)
        with open(os.path.join(bad, "tls.key"), "wb") as f:
            f.write(saved)
        saved_ca_key = read(os.path.join(bad, "ca.key"))
        with open(os.path.join(bad, "ca.key"), "wb") as f:
            f.write(read(os.path.join(other, "ca.key")))
        fails(2, "does not match the certificate", "generate", "--dir", bad)
        fails(2, "does not match the certificate", "rotate", "--dir", bad, "--new-ca")
        with open(os.path.join(bad, "ca.key"), "wb") as f:
            f.write(saved_ca_key)
        # files that are not what they claim
        saved_crt = read(os.path.join(bad, "tls.crt"))
        for content, text in ((b"", "is empty"), (b"hello\n", "is not a PEM certificate"),
                              (b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
                               "is not a PEM certificate")):
            with open(os.path.join(bad, "tls.crt"), "wb") as f:
                f.write(content)
            fails(2, text, "rotate", "--dir", bad)
            fails(2, text, "apply", "--dir", bad, "--dry-run")
        with open(os.path.join(bad, "tls.crt"), "wb") as f:
            f.write(saved_crt)
        with open(os.path.join(bad, "tls.key"), "wb") as f:
            # PEM armour around a body that is no key, assembled here rather than kept in the tree.
            dashes, kind = b"-----", b"PRIVATE KEY"
            f.write(dashes + b"BEGIN " + kind + dashes + b"\nAAAA\n" + dashes + b"END " + kind + dashes + b"\n")
        fails(2, "is not an unencrypted PEM private key", "rotate", "--dir", bad)
        with open(os.path.join(bad, "tls.key"), "wb") as f:
            f.write(saved)
        with open(os.path.join(bad, "ca-bundle.crt"), "wb") as f:
            f.write(b"garbage\n")
        fails(2, "holds no PEM certificate", "apply", "--dir", bad, "--dry-run")
        # a bundle that lacks the serving certificate's CA is never applied
        with open(os.path.join(bad, "ca-bundle.crt"), "wb") as f:
            f.write(read(os.path.join(other, "ca.crt")))
        fails(2, "does not verify against", "apply", "--dir", bad, "--dry-run")
        with open(os.path.join(bad, "ca.crt"), "wb") as f:
            f.write(read(os.path.join(bad, "tls.crt")).split(b"-----END CERTIFICATE-----")[0] +
                    b"-----END CERTIFICATE-----\n")
        fails(2, "does not match the certificate", "rotate", "--dir", bad)

    suite.check("generate: ECDSA P-256, the service SANs, private modes, bundle = CA", generate_defaults)
    suite.check("generate --key-type rsa, and rotate keeps the key type", generate_rsa)
    suite.check("rotate: new serving certificate and key, same CA, names carried over", rotate_serving)
    suite.check("CA change: rotate --new-ca, rotate, finish, each step checked and out-of-order refused", ca_change)
    suite.check("apply --dry-run with no kubectl: caBundle patch and kubernetes.io/tls Secret, its key only with "
                "--with-key", dry_run_without_cluster)
    suite.check("check: days left, thresholds, expired, every CA, verification", check_reports)
    suite.check("apply: caBundle patched on every webhook before the Secret (kubectl stand-in)", apply_with_kubectl)
    suite.check("apply refuses a bundle that does not trust the cluster's certificate; overlap passes",
                apply_refuses_untrusting_bundle)
    suite.check("apply without the manifests installed says so", apply_without_manifests)
    suite.check("check --cluster: the Secret's certificate against the caBundle", check_cluster)
    suite.check("missing openssl or kubectl: a clear error", missing_tools)
    suite.check("bad flags, files and mismatched keys: exit 2 naming the problem", bad_input)
    suite.finish()


if __name__ == "__main__":
    main()
