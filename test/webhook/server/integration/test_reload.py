#!/usr/bin/python3
"""Certificate and config rotation the way Kubernetes does it: the files live in a directory laid
out like a Secret/ConfigMap volume and change by an atomic rename of the `..data` symlink. A
client keeps sending requests all along (new connections and one kept-alive connection); none
may fail, and new connections must see the new certificate within 2 s. Bad pairs and bad
configs are refused, counted in the metrics, and the last good ones keep serving."""

import base64
import json
import os
import shutil
import ssl
import threading
import time

from harness import (Server, Suite, Volume, cert_sha256, expect, generate_certs, pod, post_review, read, review,
                     wait_until)


class Load:
    """Sends requests until stopped: alternately on a fresh connection and on one kept-alive
    connection. Records failures and, per fresh connection, when it saw which certificate."""

    def __init__(self, server):
        self.server = server
        self.stop = threading.Event()
        self.failures = []
        self.seen = []  # (monotonic time, sha256 of the served leaf)
        self.kept_sha = None
        self.requests = 0
        self.body = review(pod(), uid="load")
        self.thread = threading.Thread(target=self.run)

    def run(self):
        kept = self.server.connect()
        while not self.stop.is_set():
            try:
                conn = self.server.connect()
                status, _, _ = post_review(conn, self.body)
                if status != 200:
                    self.failures.append("fresh: status %d" % status)
                self.seen.append((time.monotonic(), conn.peer_sha256()))
                conn.close()
                status, _, _ = post_review(kept, self.body)
                if status != 200:
                    self.failures.append("kept: status %d" % status)
                if self.kept_sha is None:
                    self.kept_sha = kept.peer_sha256()
                elif kept.peer_sha256() != self.kept_sha:
                    self.failures.append("the kept-alive connection changed certificate")
                self.requests += 2
            except Exception as e:  # every failure is a test failure, reported at the end
                self.failures.append(repr(e))
            time.sleep(0.005)  # paces the load between rounds; waits for nothing
        kept.close()

    def first_seen_after(self, sha, since):
        for t, s in self.seen:
            if t >= since and s == sha:
                return t - since
        return None

    def __enter__(self):
        self.thread.start()
        # The load is on once its first pair of requests came back (or failed).
        wait_until(lambda: self.seen or self.failures, "the load's first requests", EVENT_WAIT_S)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)


# Every wait is for an event, bounded far above what it takes on a loaded machine: the file watch
# (inotify) is what must pick changes up, because the periodic re-check (--reload-interval) is set
# to an hour, so a change seen at all was seen by the watch. The times are printed, never asserted.
EVENT_WAIT_S = 120


def main():
    suite = Suite("reload")
    w = suite.workdir
    ca_dir = os.path.join(w, "issuer")  # where erdma-certs keeps the CA; leaves are copied out
    generate_certs(ca_dir)
    tls = Volume(os.path.join(w, "secret"))
    tls.update({"tls.crt": read(os.path.join(ca_dir, "tls.crt")), "tls.key": read(os.path.join(ca_dir, "tls.key"))})
    cfg = Volume(os.path.join(w, "configmap"))
    cfg.update({"config.yaml": b"erdmaEnv:\n- {name: NCCL_IB_HCA, value: erdma}\n- {name: NCCL_IB_GID_INDEX, value: '1'}\n"})
    server = Server(w, cert_dir=ca_dir, config=cfg.file("config.yaml"),
                    extra_args=["--tls-cert", tls.file("tls.crt"), "--tls-key", tls.file("tls.key"),
                                "--reload-interval", "1h"])
    metric = lambda kind, result: server.metrics()[("erdma_webhook_reloads_total",
                                                   (("kind", kind), ("result", result)))]
    results = {}

    def rotate_under_load():
        first_sha = cert_sha256(tls.file("tls.crt"))
        generate_certs(ca_dir)  # a new leaf from the same CA, as cert-manager renews
        new_sha = cert_sha256(os.path.join(ca_dir, "tls.crt"))
        expect(new_sha != first_sha, "the generator made the same certificate")
        with Load(server) as load:
            expect(load.seen and load.seen[-1][1] == first_sha, "not serving the first certificate")
            t_swap = time.monotonic()
            tls.update({"tls.crt": read(os.path.join(ca_dir, "tls.crt")),
                        "tls.key": read(os.path.join(ca_dir, "tls.key"))})
            wait_until(lambda: load.first_seen_after(new_sha, t_swap) is not None, "the new certificate served",
                       EVENT_WAIT_S)
            served = load.requests
            wait_until(lambda: load.requests >= served + 20, "20 more requests on the new certificate", EVENT_WAIT_S)
        delay = load.first_seen_after(new_sha, t_swap)
        results["swap_s"] = delay
        print("  %d requests, %d failures; new certificate on new connections after %s s"
              % (load.requests, len(load.failures), "%.3f" % delay if delay is not None else "never"))
        expect(not load.failures, load.failures[:5])
        expect(delay is not None, "new certificate never served")
        expect(load.kept_sha == first_sha, "the connection opened before the swap should finish on the old cert")
        expect(metric("cert", "success") == 1, "reloads_total cert success")
        out = server.metrics()[("erdma_webhook_tls_cert_not_after_seconds", ())]
        import subprocess
        end = subprocess.run(["openssl", "x509", "-in", tls.file("tls.crt"), "-noout", "-enddate"],
                             capture_output=True, text=True, check=True).stdout.strip().split("=", 1)[1]
        expect(out == ssl.cert_time_to_seconds(end), "not_after metric not updated")

    def bad_pairs_refused():
        good_sha = cert_sha256(tls.file("tls.crt"))
        good_key = read(tls.file("tls.key"))
        other = os.path.join(w, "other")
        generate_certs(other)  # another CA and pair: its key does not match our cert
        expired = os.path.join(w, "expired")
        shutil.copytree(ca_dir, expired)
        generate_certs(expired, "--days", "-1")
        cases = [
            ("garbage", {"tls.crt": b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
                         "tls.key": good_key}),
            ("key mismatch", {"tls.crt": read(tls.file("tls.crt")), "tls.key": read(os.path.join(other, "tls.key"))}),
            ("expired", {"tls.crt": read(os.path.join(expired, "tls.crt")),
                         "tls.key": read(os.path.join(expired, "tls.key"))}),
            ("empty", {"tls.crt": b"", "tls.key": b""}),
        ]
        errors_before = metric("cert", "error")
        with Load(server) as load:
            for i, (name, files) in enumerate(cases):
                tls.update(files)
                wait_until(lambda: metric("cert", "error") >= errors_before + i + 1, "%s refused" % name,
                           EVENT_WAIT_S)
                expect(metric("cert", "error") == errors_before + i + 1, "%s not refused (counted)" % name)
        print("  %d requests during 4 bad swaps, %d failures" % (load.requests, len(load.failures)))
        expect(not load.failures, load.failures[:5])
        expect(all(sha == good_sha for _, sha in load.seen), "a bad certificate was served")
        refusals = [l for l in server.log_lines() if l["msg"].startswith("certificate reload refused")]
        expect(len(refusals) == 4, refusals)
        expect(any("does not match" in l["error"] for l in refusals), refusals)
        expect(any("expired" in l["error"] for l in refusals), refusals)
        # Putting a good pair back is picked up again.
        generate_certs(ca_dir)
        tls.update({"tls.crt": read(os.path.join(ca_dir, "tls.crt")), "tls.key": read(os.path.join(ca_dir, "tls.key"))})
        wait_until(lambda: metric("cert", "success") >= 2, "the good pair after the bad ones", EVENT_WAIT_S)
        expect(metric("cert", "success") == 2, "good pair after bad ones")

    def gid_index_in_patch():
        conn = server.connect()
        status, _, data = post_review(conn, review(pod(smcr=False, erdma=True), uid="cfg"))
        conn.close()
        expect(status == 200, status)
        patch = json.loads(base64.b64decode(json.loads(data)["response"]["patch"]))
        for op in patch:
            values = op["value"] if isinstance(op["value"], list) else [op["value"]]
            for v in values:
                if isinstance(v, dict) and v.get("name") == "NCCL_IB_GID_INDEX":
                    return v["value"]
        raise AssertionError("no NCCL_IB_GID_INDEX in %s" % patch)

    def config_reload():
        expect(gid_index_in_patch() == "1", "initial config")
        cfg.update({"config.yaml": b"erdmaEnv:\n- {name: NCCL_IB_HCA, value: erdma}\n- {name: NCCL_IB_GID_INDEX, value: '3'}\n"})
        t0 = time.monotonic()
        wait_until(lambda: gid_index_in_patch() == "3", "the new config in effect", EVENT_WAIT_S)
        print("  new config in effect after %.3f s" % (time.monotonic() - t0))
        expect(metric("config", "success") == 1, "reloads_total config success")
        cfg.update({"config.yaml": b"smcr: {mountPath: relative/path}\n"})
        wait_until(lambda: metric("config", "error") >= 1, "the bad config refused", EVENT_WAIT_S)
        expect(metric("config", "error") == 1, "bad config not counted")
        expect(gid_index_in_patch() == "3", "bad config replaced the good one")
        refused = [l for l in server.log_lines() if l["msg"].startswith("config reload refused")]
        expect(len(refused) == 1 and "mountPath" in refused[0]["error"], refused)

    suite.check("cert rotated by ..data swap under load: no failures, the new cert picked up by the watch", rotate_under_load)
    suite.check("bad pairs (garbage, mismatch, expired, empty) refused and counted", bad_pairs_refused)
    suite.check("config rotated by ..data swap (picked up by the watch); a bad config refused", config_reload)
    code = server.terminate()
    suite.check("exit status 0 after SIGTERM", lambda: expect(code == 0, code))
    suite.finish()


if __name__ == "__main__":
    main()
