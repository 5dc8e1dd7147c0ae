#!/usr/bin/env python3
"""Check the TLS and proxy fixtures with the curl command line.

Usage::

    python3 Tests/Fixtures/selfcheck.py [--verbose]

Makes certificates (certs.py) in a temporary directory, starts HTTPS
upstreams (upstream.py) and proxies (proxy.py) on 127.0.0.1, runs curl against
them and compares curl's exit code and error message with what is expected.
Prints one line per check (the message curl printed, which is libcurl's error
buffer) and exits 0 when all pass, 1 otherwise.  Needs ``curl`` and
``openssl``; every process it starts is stopped (stdin closed, then SIGKILL by
pid after 5 s); every curl run is bounded by --max-time.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import certs  # noqa: E402
from pattern import pattern_sha256  # noqa: E402

VERBOSE = "--verbose" in sys.argv


class Fixture:
    def __init__(self, script, *args):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), "--port", "0"]
                                     + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=None if VERBOSE else subprocess.DEVNULL)
        # READY arrives within a second; a stuck start is killed by stop_all's bound.
        line = self.proc.stdout.readline().decode()
        if not line.startswith("READY "):
            raise RuntimeError("%s %s did not start: %r" % (script, args, line))
        self.port = int(line.split()[1])

    def stop(self):
        try:
            self.proc.stdin.close()
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            return "killed"


def curl(*args, stdin=None):
    cmd = ["curl", "-sS", "--max-time", "20"] + list(args)
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    msg = p.stderr.decode("utf-8", "replace").splitlines()
    return p.returncode, (msg[0] if msg else ""), p.stdout


def main():
    tmp = tempfile.mkdtemp(prefix="xhrpc-selfcheck-")
    started = []
    failures = 0

    def start(script, *args):
        f = Fixture(script, *args)
        started.append(f)
        return f.port

    def check(name, args, code, message=None, body=None):
        nonlocal failures
        got_code, got_msg, out = curl(*args)
        ok = got_code == code and (message is None or message in got_msg)
        if ok and body is not None:
            ok = body(out)
        failures += not ok
        print("%s %-44s exit %-3d %s" % ("ok  " if ok else "FAIL", name, got_code, got_msg))
        if not ok:
            print("     expected exit %d%s" % (code, ", message containing %r" % message
                                               if message else ""))

    def echo(key, value):
        def test(out):
            d = json.loads(out)
            for k in key.split("."):
                d = d[k]
            return d == value
        return test

    try:
        c = certs.make_all(tmp)
        ca = ["--cacert", c["ca"]]
        plain = start("upstream.py")
        good = start("upstream.py", "--tls-cert", c["good_cert"], "--tls-key", c["good_key"])
        ports = {}
        for name in ("wrong_host", "expired", "not_yet_valid", "self_signed", "untrusted"):
            ports[name] = start("upstream.py", "--tls-cert", c[name + "_cert"],
                                "--tls-key", c[name + "_key"])
        mtls = start("upstream.py", "--tls-cert", c["good_cert"], "--tls-key", c["good_key"],
                     "--client-ca", c["client_ca"])
        mtls12 = start("upstream.py", "--tls-cert", c["good_cert"], "--tls-key", c["good_key"],
                       "--client-ca", c["client_ca"], "--tls-max", "1.2")
        tls11 = start("upstream.py", "--tls-cert", c["good_cert"], "--tls-key", c["good_key"],
                      "--tls-max", "1.1")
        tls12 = start("upstream.py", "--tls-cert", c["good_cert"], "--tls-key", c["good_key"],
                      "--tls-max", "1.2")
        open_proxy = start("proxy.py")
        basic = start("proxy.py", "--user", "u", "--password", "p")
        digest = start("proxy.py", "--user", "u", "--password", "p", "--auth", "digest")
        ntlm = start("proxy.py", "--user", "u", "--password", "p", "--auth", "ntlm")
        https_proxy = start("proxy.py", "--user", "u", "--password", "p",
                            "--tls-cert", c["good_cert"], "--tls-key", c["good_key"])
        u = "https://localhost:%d" % good
        sha10k = pattern_sha256(10000)

        def sha_is(expected):
            return lambda out: hashlib.sha256(out).hexdigest() == expected

        print("-- TLS verification")
        check("good leaf, --cacert", ca + [u + "/bytes/10000"], 0, body=sha_is(sha10k))
        check("good leaf by 127.0.0.1", ca + ["https://127.0.0.1:%d/bytes/10000" % good], 0)
        check("good leaf, system CAs only (unknown CA)", [u + "/"], 60,
              "SSL certificate problem: unable to get local issuer certificate")
        check("wrong host", ca + ["https://localhost:%d/" % ports["wrong_host"]], 60,
              "SSL: no alternative certificate subject name matches target host name "
              "'localhost'")
        check("wrong host, -k", ca + ["-k", "https://localhost:%d/bytes/1" % ports["wrong_host"]],
              0)
        check("expired", ca + ["https://localhost:%d/" % ports["expired"]], 60,
              "SSL certificate problem: certificate has expired")
        check("not yet valid", ca + ["https://localhost:%d/" % ports["not_yet_valid"]], 60,
              "SSL certificate problem: certificate is not yet valid")
        check("self-signed", ca + ["https://localhost:%d/" % ports["self_signed"]], 60,
              "SSL certificate problem: self-signed certificate")
        check("unknown CA", ca + ["https://localhost:%d/" % ports["untrusted"]], 60,
              "SSL certificate problem: unable to get local issuer certificate")
        check("pin match", ca + ["--pinnedpubkey", c["good_pin_value"], u + "/bytes/1"], 0)
        check("pin match (public key file)", ca + ["--pinnedpubkey", c["good_pubkey_pem"],
                                                   u + "/bytes/1"], 0)
        check("pin mismatch", ca + ["--pinnedpubkey", c["bad_pin_value"], u + "/bytes/1"], 90,
              "SSL: public key does not match pinned public key")
        check("pin mismatch, -k, self-signed", ["-k", "--pinnedpubkey", c["good_pin_value"],
              "https://localhost:%d/" % ports["self_signed"]], 90,
              "SSL: public key does not match pinned public key")
        print("-- client certificates")
        m = "https://localhost:%d/echo" % mtls
        check("client cert", ca + ["--cert", c["client_cert"], "--key", c["client_key"], m], 0,
              body=echo("clientCertCN", "xhrpc-client"))
        check("client cert, encrypted key", ca + ["--cert", c["client_cert"], "--key",
              c["client_enc_key"], "--pass", "secret", m], 0,
              body=echo("clientCertCN", "xhrpc-client"))
        check("client cert, PKCS#12", ca + ["--cert-type", "P12", "--cert",
              c["client_p12"] + ":secret", m], 0, body=echo("clientCertCN", "xhrpc-client"))
        check("client cert, wrong key password", ca + ["--cert", c["client_cert"], "--key",
              c["client_enc_key"], "--pass", "wrong", m], 58,
              "unable to set private key file: '%s' type PEM" % c["client_enc_key"])
        check("no client cert (TLS 1.3)", ca + [m], 56,
              "error:0A00045C:SSL routines::tlsv13 alert certificate required")
        check("no client cert (TLS 1.2)", ca + ["https://localhost:%d/echo" % mtls12], 35,
              "error:0A000410:SSL routines::sslv3 alert handshake failure")
        check("client cert from another CA (TLS 1.3)", ca + ["--cert", c["rogue_client_cert"],
              "--key", c["rogue_client_key"], m], 56,
              "error:0A000418:SSL routines::tlsv1 alert unknown ca")
        check("client cert from another CA (TLS 1.2)", ca + ["--cert", c["rogue_client_cert"],
              "--key", c["rogue_client_key"], "https://localhost:%d/echo" % mtls12], 35,
              "error:0A000418:SSL routines::tlsv1 alert unknown ca")
        print("-- TLS versions")
        check("--tls-max 1.2 server", ca + ["https://localhost:%d/echo" % tls12], 0,
              body=echo("tls.version", "TLSv1.2"))
        check("--tls-max 1.2 server, client --tlsv1.3", ca + ["--tlsv1.3",
              "https://localhost:%d/" % tls12], 35,
              "error:0A00042E:SSL routines::tlsv1 alert protocol version")
        check("--tls-max 1.1 server, client default", ca + ["https://localhost:%d/" % tls11], 35,
              "error:0A00014D:SSL routines::legacy sigalg disallowed or unsupported")
        check("--tls-max 1.1 server, client --tlsv1.2", ca + ["--tlsv1.2",
              "https://localhost:%d/" % tls11], 35,
              "error:0A00042E:SSL routines::tlsv1 alert protocol version")
        check("--tls-max 1.1 server, client SECLEVEL=0", ca + ["--tlsv1.1", "--ciphers",
              "DEFAULT:@SECLEVEL=0", "https://localhost:%d/echo" % tls11], 0,
              body=echo("tls.version", "TLSv1.1"))
        print("-- proxies")
        pe = "http://127.0.0.1:%d/echo" % plain
        check("open proxy, http", ["-x", "http://127.0.0.1:%d" % open_proxy, pe], 0,
              body=echo("headers.via", "1.1 xhrpc-proxy"))
        check("basic proxy, no credentials", ["-x", "http://127.0.0.1:%d" % basic, "-w",
              "%{http_code}", "-o", os.devnull, pe], 0, body=lambda out: out == b"407")
        check("basic proxy, http", ["-x", "http://127.0.0.1:%d" % basic, "--proxy-user", "u:p",
              pe], 0, body=echo("method", "GET"))
        check("basic proxy, wrong password", ["-x", "http://127.0.0.1:%d" % basic,
              "--proxy-user", "u:x", "-w", "%{http_code}", "-o", os.devnull, pe], 0,
              body=lambda out: out == b"407")
        check("basic proxy, CONNECT", ca + ["-x", "http://127.0.0.1:%d" % basic, "--proxy-user",
              "u:p", u + "/bytes/10000"], 0, body=sha_is(sha10k))
        check("basic proxy, CONNECT, no credentials", ca + ["-x", "http://127.0.0.1:%d" % basic,
              u + "/"], 56, "CONNECT tunnel failed, response 407")
        check("basic proxy, CONNECT, client cert", ca + ["-x", "http://127.0.0.1:%d" % basic,
              "--proxy-user", "u:p", "--cert", c["client_cert"], "--key", c["client_key"], m], 0,
              body=echo("clientCertCN", "xhrpc-client"))
        check("basic proxy, CONNECT, expired upstream", ca + ["-x", "http://127.0.0.1:%d" % basic,
              "--proxy-user", "u:p", "https://localhost:%d/" % ports["expired"]], 60,
              "SSL certificate problem: certificate has expired")
        check("basic proxy, CONNECT to a closed port", ["-x", "http://127.0.0.1:%d" % basic,
              "--proxy-user", "u:p", "https://127.0.0.1:1/"], 56,
              "CONNECT tunnel failed, response 502")
        check("digest proxy, http", ["-x", "http://127.0.0.1:%d" % digest, "--proxy-digest",
              "--proxy-user", "u:p", pe], 0, body=echo("method", "GET"))
        check("digest proxy, POST", ["-x", "http://127.0.0.1:%d" % digest, "--proxy-digest",
              "--proxy-user", "u:p", "--data-binary", "hello", pe], 0,
              body=echo("bodyLength", 5))
        check("digest proxy, CONNECT", ca + ["-x", "http://127.0.0.1:%d" % digest,
              "--proxy-digest", "--proxy-user", "u:p", u + "/bytes/10000"], 0,
              body=sha_is(sha10k))
        check("digest proxy, wrong password", ["-x", "http://127.0.0.1:%d" % digest,
              "--proxy-digest", "--proxy-user", "u:x", "-w", "%{http_code}", "-o", os.devnull,
              pe], 0, body=lambda out: out == b"407")
        check("ntlm proxy, http", ["-x", "http://127.0.0.1:%d" % ntlm, "--proxy-ntlm",
              "--proxy-user", "u:p", pe], 0, body=echo("method", "GET"))
        check("ntlm proxy, CONNECT", ca + ["-x", "http://127.0.0.1:%d" % ntlm, "--proxy-ntlm",
              "--proxy-user", "u:p", u + "/bytes/10000"], 0, body=sha_is(sha10k))
        check("ntlm proxy, wrong password", ["-x", "http://127.0.0.1:%d" % ntlm, "--proxy-ntlm",
              "--proxy-user", "u:x", "-w", "%{http_code}", "-o", os.devnull, pe], 0,
              body=lambda out: out == b"407")
        check("https proxy, CONNECT", ca + ["-x", "https://localhost:%d" % https_proxy,
              "--proxy-cacert", c["ca"], "--proxy-user", "u:p", u + "/bytes/10000"], 0,
              body=sha_is(sha10k))

        def log_ok(out):
            recs = json.loads(out)
            seen = {(r["method"], r["authenticated"], r["status"]) for r in recs}
            return {("GET", True, 200), ("GET", False, 407), ("CONNECT", True, 200),
                    ("CONNECT", False, 407)} <= seen
        check("basic proxy log", ["-x", "http://127.0.0.1:%d" % basic,
                                  "http://proxy.local/log"], 0, body=log_ok)
    finally:
        for f in started:
            rc = f.stop()
            if rc != 0:
                failures += 1
                print("FAIL fixture exited with %r: %s" % (rc, f.proc.args[1:]))
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
