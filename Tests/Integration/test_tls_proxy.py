"""TLS policy, proxies, server authentication and secure communication through the RPC
methods (issue 4): the exact status text of every TLS failure, proxies with Basic,
Digest and NTLM, the egress proxy switched per principal, credentials for servers, and
passwords kept out of replies, errors and logs.

Certificates are made at test time (Tests/Fixtures/certs.py) in a temporary directory
that is the server's --cert-root; every upstream and proxy is started here, on
127.0.0.1, and stopped by the class that started it.
"""

import base64
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from support import FIXTURES, START_DEADLINE, STOP_DEADLINE, XhrpcServer, require_binary
from test_requests import _server_args

import certs  # Tests/Fixtures, on sys.path through support

CERTS = {}
CERT_DIR = None


def setUpModule():
    global CERT_DIR
    CERT_DIR = tempfile.mkdtemp(prefix="xhrpc-tls-")
    CERTS.update(certs.make_all(CERT_DIR))


def tearDownModule():
    if CERT_DIR:
        shutil.rmtree(CERT_DIR, ignore_errors=True)


class Fixture:
    """upstream.py or proxy.py with arguments; READY line read with a deadline."""

    def __init__(self, script, *args):
        self.argv = [sys.executable, str(FIXTURES / script), "--host", "127.0.0.1", "--port", "0"] + list(args)

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_DEADLINE
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()
                raise RuntimeError("%s did not print READY" % self.argv[1])
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 256)
                if not chunk:
                    raise RuntimeError("%s exited before READY" % self.argv[1])
                line += chunk
        self.port = int(line.split()[1])
        return self

    def url(self, path, scheme="http"):
        return "%s://127.0.0.1:%d%s" % (scheme, self.port, path)

    def https(self, path):
        return self.url(path, "https")

    def log(self):
        """The proxy's record of requests (proxy.py only), read directly, and cleared."""
        with urllib.request.urlopen(self.url("/log?clear=1"), timeout=10) as r:
            return json.loads(r.read())

    def stop(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_DEADLINE)
        self.proc.stdout.close()


def tls_upstream(cert, *extra):
    return Fixture("upstream.py", "--tls-cert", CERTS[cert + "_cert"], "--tls-key", CERTS[cert + "_key"], *extra)


def client_required(*extra):
    return tls_upstream("good", "--client-ca", CERTS["client_ca"], "--client-cert", "required", *extra)


class TLSProxyCase(unittest.TestCase):
    """One xhrpcd (trusting the test CA, certificates below --cert-root) and the
    fixtures a class names in FIXTURES, started once per class."""

    FIXTURES = {}
    EXTRA_ARGS = ()
    LOG_LEVEL = "warning"

    @classmethod
    def setUpClass(cls):
        require_binary()
        cls.fx = {}
        try:
            for name, make in cls.FIXTURES.items():
                cls.fx[name] = make().start()
            args = list(_server_args()) + ["--ca-file", CERTS["ca"], "--cert-root", CERT_DIR]
            args += list(cls.server_args())
            cls.server = XhrpcServer(args=args, log_level=cls.LOG_LEVEL, env=cls.server_env()).start()
        except BaseException:
            cls._stop_fixtures()
            raise
        cls.c = cls.server.connect()

    @classmethod
    def server_args(cls):
        return cls.EXTRA_ARGS

    @classmethod
    def server_env(cls):
        """Environment variables added for the server."""
        return None

    @classmethod
    def _stop_fixtures(cls):
        for f in cls.fx.values():
            f.stop()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        code = cls.server.stop()
        cls._stop_fixtures()
        if code != 0:
            raise AssertionError("xhrpcd exited with %r\n%s" % (code, cls.server.stderr_text()))

    def fetch(self, url, options=(), method="GET", user=None, password=None, auth=None):
        """create, open (sync), the pre-send options as (method, params), send; the summary."""
        r = self.c.call("create")["request"]
        opened = {"request": r, "method": method, "url": url, "async": False, "subscribe": False}
        if user is not None:
            opened.update(user=user, password=password)
        if auth is not None:
            opened["auth"] = auth
        for name, params in options:
            self.c.call(name, dict(params, request=r))
        self.c.call("open", opened)
        summary = self.c.call("send", {"request": r}, timeout=30)
        body = base64.b64decode(self.c.call("getReceiveBuffer", {"request": r})["data"])
        self.c.call("release", {"request": r})
        return summary, body

    def assertFailed(self, summary, text):
        """DONE, status 0, and the status text: exact, or matching a compiled pattern."""
        self.assertEqual((summary["state"], summary["stateName"], summary["status"]), (5, "DONE", 0), summary)
        if isinstance(text, str):
            self.assertEqual(summary["statusText"], text)
        else:
            self.assertRegex(summary["statusText"], text)
        print("\n  TLS case → %s" % summary["statusText"], file=sys.stderr)


OPENSSL = r"OpenSSL/[0-9.]+: error:[0-9A-F]{8}:SSL routines::"


class TLSFailureTexts(TLSProxyCase):
    """Each TLS failure ends in DONE, status 0, with this exact status text."""

    FIXTURES = {
        "good": lambda: tls_upstream("good"),
        "wrong_host": lambda: tls_upstream("wrong_host"),
        "expired": lambda: tls_upstream("expired"),
        "not_yet_valid": lambda: tls_upstream("not_yet_valid"),
        "self_signed": lambda: tls_upstream("self_signed"),
        "untrusted": lambda: tls_upstream("untrusted"),
        "client13": lambda: client_required(),
        "client12": lambda: client_required("--tls-max", "1.2"),
    }

    def test_certificate_failures(self):
        cases = [
            ("wrong_host", "SSL: no alternative certificate subject name matches target host name '127.0.0.1'"),
            ("expired", "SSL certificate problem: certificate has expired"),
            ("not_yet_valid", "SSL certificate problem: certificate is not yet valid"),
            ("self_signed", "SSL certificate problem: self-signed certificate"),
            ("untrusted", "SSL certificate problem: unable to get local issuer certificate"),
        ]
        for name, text in cases:
            with self.subTest(name):
                summary, _ = self.fetch(self.fx[name].https("/bytes/10"))
                self.assertFailed(summary, text)

    def test_good_certificate_passes(self):
        summary, body = self.fetch(self.fx["good"].https("/echo"))
        self.assertEqual(summary["status"], 200)
        self.assertEqual(json.loads(body)["tls"]["version"], "TLSv1.3")

    def test_switches_relax_verification(self):
        peer = [("disablePeerVerification", {})]
        host = [("disableHostVerification", {})]
        for name in ("wrong_host", "expired", "not_yet_valid", "self_signed", "untrusted"):
            with self.subTest(name):
                self.assertEqual(self.fetch(self.fx[name].https("/bytes/10"), peer)[0]["status"], 200)
        self.assertEqual(self.fetch(self.fx["wrong_host"].https("/bytes/10"), host)[0]["status"], 200)
        self.assertFailed(self.fetch(self.fx["self_signed"].https("/bytes/10"), host)[0],
                          "SSL certificate problem: self-signed certificate")

    def test_pins(self):
        url = self.fx["good"].https("/bytes/10")
        good = [("setPinnedPublicKey", {"sha256": CERTS["bad_pin_value"] + ";" + CERTS["good_pin_value"]})]
        self.assertEqual(self.fetch(url, good)[0]["status"], 200)
        bad = [("setPinnedPublicKey", {"sha256": CERTS["bad_pin_value"]})]
        self.assertFailed(self.fetch(url, bad)[0], "SSL: public key does not match pinned public key")

    def test_client_certificate_missing(self):
        self.assertFailed(self.fetch(self.fx["client13"].https("/echo"))[0],
                          re.compile("^SSL: OpenSSL SSL_read: " + OPENSSL + "tlsv13 alert certificate required, errno 0$"))
        self.assertFailed(self.fetch(self.fx["client12"].https("/echo"))[0],
                          re.compile("^SSL: " + OPENSSL + "sslv3 alert handshake failure$"))

    def test_client_certificate_and_key_password(self):
        url = self.fx["client13"].https("/echo")
        plain = [("setClientCertificate", {"cert": "client.pem", "key": "client.key"})]
        summary, body = self.fetch(url, plain)
        self.assertEqual(summary["status"], 200)
        self.assertEqual(json.loads(body)["clientCertCN"], "xhrpc-client")
        right = [("setClientCertificate", {"cert": "client.pem", "key": "client-enc.key",
                                           "password": CERTS["client_key_password"]})]
        self.assertEqual(self.fetch(url, right)[0]["status"], 200)
        wrong = [("setClientCertificate", {"cert": "client.pem", "key": "client-enc.key", "password": "pw-not-it"})]
        key = os.path.realpath(CERTS["client_enc_key"])
        self.assertFailed(self.fetch(url, wrong)[0], "SSL: unable to set private key file: '%s' type PEM" % key)

    def test_close_switches_verification_back_on(self):
        r = self.c.call("create")["request"]
        url = self.fx["self_signed"].https("/bytes/10")
        self.c.call("disablePeerVerification", {"request": r})
        self.c.call("open", {"request": r, "method": "GET", "url": url, "async": False, "subscribe": False})
        self.assertEqual(self.c.call("send", {"request": r}, timeout=30)["status"], 200)
        self.assertIs(self.c.call("close", {"request": r}), True)
        self.c.call("open", {"request": r, "method": "GET", "url": url, "async": False, "subscribe": False})
        self.assertFailed(self.c.call("send", {"request": r}, timeout=30),
                          "SSL certificate problem: self-signed certificate")
        self.c.call("release", {"request": r})


class TLSMinimumVersion(TLSProxyCase):
    """--tls-min 1.3 refuses a server that offers TLS 1.2 at most."""

    FIXTURES = {"tls12": lambda: tls_upstream("good", "--tls-max", "1.2")}
    EXTRA_ARGS = ("--tls-min", "1.3")

    def test_tls12_server_refused(self):
        self.assertFailed(self.fetch(self.fx["tls12"].https("/echo"))[0],
                          re.compile("^SSL: " + OPENSSL + "tlsv1 alert protocol version$"))


class OptionChecks(TLSProxyCase):
    """Pre-send options: their state rule, and what they refuse."""

    FIXTURES = {"http": lambda: Fixture("upstream.py")}

    def error(self, method, params):
        with self.assertRaises(Exception) as cm:
            self.c.call(method, params)
        return cm.exception

    def test_options_only_before_send(self):
        summary, _ = self.fetch(self.fx["http"].url("/bytes/1"))
        r = self.c.call("create")["request"]
        self.c.call("open", {"request": r, "method": "GET", "url": self.fx["http"].url("/bytes/1"), "async": False,
                             "subscribe": False})
        self.c.call("send", {"request": r})
        for method, params in [("disablePeerVerification", {}), ("disableHostVerification", {}),
                               ("setPinnedPublicKey", {"sha256": CERTS["good_pin_value"]}),
                               ("setClientCertificate", {"cert": "client.pem", "key": "client.key"}),
                               ("enableHttpProxy", {"host": "127.0.0.1", "port": 1}), ("disableHttpProxy", {})]:
            with self.subTest(method):
                e = self.error(method, dict(params, request=r))
                self.assertEqual((e.code, e.reason, e.data["stateName"]), (-32002, "invalid_state", "DONE"))
        self.c.call("release", {"request": r})

    def test_pins_must_be_sha256_strings(self):
        r = self.c.call("create")["request"]
        for bad in ["/etc/passwd", CERTS["good_pin"], "sha256//", "sha256//AAAA", CERTS["good_pin_value"] + ";",
                    "sha1//" + CERTS["good_pin_value"][8:]]:
            with self.subTest(bad):
                self.assertEqual(self.error("setPinnedPublicKey", {"request": r, "sha256": bad}).code, -32602)
        self.c.call("release", {"request": r})

    def test_client_certificate_files_are_confined(self):
        r = self.c.call("create")["request"]
        os.makedirs(os.path.join(CERT_DIR, "a-directory"), exist_ok=True)
        os.symlink("/etc/hostname", os.path.join(CERT_DIR, "escape.pem"))
        try:
            cases = [({"cert": "/etc/hostname", "key": "client.key"}, "forbidden"),
                     ({"cert": "../../etc/hostname", "key": "client.key"}, "forbidden"),
                     ({"cert": "escape.pem", "key": "client.key"}, "forbidden"),
                     ({"cert": "client.pem", "key": "a-directory"}, "file_error"),
                     ({"cert": "client.pem", "key": "missing.key"}, "file_error")]
            for params, reason in cases:
                with self.subTest(params):
                    self.assertEqual(self.error("setClientCertificate", dict(params, request=r)).reason, reason)
        finally:
            os.unlink(os.path.join(CERT_DIR, "escape.pem"))
        self.c.call("release", {"request": r})

    def test_proxy_parameters(self):
        r = self.c.call("create")["request"]
        for params in [{"host": "", "port": 8080}, {"host": "a b", "port": 8080}, {"host": "u@h", "port": 8080},
                       {"host": "h", "port": 0}, {"host": "h", "port": 65536},
                       {"host": "h", "port": 8080, "auth": "NEGOTIATE"}]:
            with self.subTest(params):
                self.assertEqual(self.error("enableHttpProxy", dict(params, request=r)).code, -32602)
        self.assertIs(self.c.call("enableHttpProxy", {"request": r, "host": "[::1]", "port": 3128}), True)
        self.c.call("release", {"request": r})

    def test_secure_communication_needs_an_egress_proxy(self):
        self.assertIs(self.c.call("isSecureCommunicationEnabled"), False)
        e = self.error("enableSecureCommunication", {})
        self.assertEqual((e.code, e.reason), (-32006, "forbidden"))
        self.assertIn("--egress-proxy", e.message)
        self.assertIs(self.c.call("isSecureCommunicationEnabled"), False)
        self.assertIs(self.c.call("disableSecureCommunication"), True)


class CertRootRequired(unittest.TestCase):
    """Without --cert-root, setClientCertificate is refused."""

    def test_refused(self):
        server = XhrpcServer(args=list(_server_args())).start()
        try:
            with server.connect() as c:
                r = c.call("create")["request"]
                with self.assertRaises(Exception) as cm:
                    c.call("setClientCertificate", {"request": r, "cert": "/etc/hostname", "key": "/etc/hostname"})
                self.assertEqual((cm.exception.code, cm.exception.reason), (-32006, "forbidden"))
                self.assertIn("--cert-root", cm.exception.message)
        finally:
            self.assertEqual(server.stop(), 0)


def auth_proxy(scheme, *extra):
    return Fixture("proxy.py", "--user", "pu", "--password", "proxy-pw-1", "--auth", scheme, *extra)


class Proxies(TLSProxyCase):
    """enableHttpProxy with each scheme; secure communication through --egress-proxy."""

    FIXTURES = {
        "http": lambda: Fixture("upstream.py"),
        "https": lambda: tls_upstream("good"),
        "basic": lambda: auth_proxy("basic"),
        "digest": lambda: auth_proxy("digest", "--digest-algorithm", "SHA-256"),
        "ntlm": lambda: auth_proxy("ntlm"),
        "egress": lambda: Fixture("proxy.py", "--user", "eu", "--password", "egress-pw-1"),
    }

    @classmethod
    def server_args(cls):
        return ("--egress-proxy", "http://eu:egress-pw-1@127.0.0.1:%d" % cls.fx["egress"].port)

    def proxy(self, name, password="proxy-pw-1"):
        return ("enableHttpProxy", {"host": "127.0.0.1", "port": self.fx[name].port, "user": "pu",
                                    "password": password, "auth": name.upper()})

    def test_each_scheme_for_http_and_https(self):
        for name in ("basic", "digest", "ntlm"):
            with self.subTest(name):
                summary, body = self.fetch(self.fx["http"].url("/echo"), [self.proxy(name)])
                self.assertEqual(summary["status"], 200)
                self.assertEqual(json.loads(body)["headers"]["via"], "1.1 xhrpc-proxy")
                summary, body = self.fetch(self.fx["https"].https("/echo"), [self.proxy(name)])
                self.assertEqual(summary["status"], 200)
                self.assertEqual(json.loads(body)["tls"]["version"], "TLSv1.3")
                log = self.fx[name].log()
                self.assertEqual([(e["method"], e["authenticated"]) for e in log if e["status"] != 407],
                                 [("GET", True), ("CONNECT", True)])

    def test_refusals(self):
        wrong = [self.proxy("basic", password="not-it")]
        summary, _ = self.fetch(self.fx["http"].url("/echo"), wrong)
        self.assertEqual((summary["status"], summary["statusText"]), (407, "Proxy Authentication Required"))
        summary, _ = self.fetch(self.fx["https"].https("/echo"), wrong)
        self.assertFailed(summary, "CONNECT tunnel failed, response 407 (Proxy Authentication Required): "
                                   "the proxy refused to open a tunnel to the server")
        summary, _ = self.fetch("https://127.0.0.1:1/", [self.proxy("basic")])
        self.assertFailed(summary, "CONNECT tunnel failed, response 502 (Bad Gateway): "
                                   "the proxy refused to open a tunnel to the server")

    def test_disable_http_proxy(self):
        summary, body = self.fetch(self.fx["http"].url("/echo"), [self.proxy("basic"), ("disableHttpProxy", {})])
        self.assertEqual(summary["status"], 200)
        self.assertNotIn("via", json.loads(body)["headers"])

    def test_secure_communication(self):
        egress = self.fx["egress"]
        egress.log()
        self.fx["basic"].log()
        url = self.fx["http"].url("/echo")
        self.assertIs(self.c.call("isSecureCommunicationEnabled"), False)
        self.assertNotIn("via", json.loads(self.fetch(url)[1])["headers"])
        self.assertIs(self.c.call("enableSecureCommunication"), True)
        try:
            self.assertIs(self.c.call("isSecureCommunicationEnabled"), True)
            # Another connection of the same principal sees the same routing.
            with self.server.connect() as other:
                self.assertIs(other.call("isSecureCommunicationEnabled"), True)
            self.assertEqual(json.loads(self.fetch(url)[1])["headers"]["via"], "1.1 xhrpc-proxy")
            self.assertEqual(self.fetch(self.fx["https"].https("/echo"))[0]["status"], 200)
            self.assertEqual([(e["method"], e["authenticated"], e["user"]) for e in egress.log() if e["status"] != 407],
                             [("GET", True, "eu"), ("CONNECT", True, "eu")])
            # The request's own proxy wins.
            self.assertEqual(self.fetch(url, [self.proxy("basic")])[0]["status"], 200)
            self.assertEqual(egress.log(), [])
            self.assertEqual([e["method"] for e in self.fx["basic"].log() if e["status"] != 407], ["GET"])
        finally:
            self.assertIs(self.c.call("disableSecureCommunication"), True)
        self.assertIs(self.c.call("isSecureCommunicationEnabled"), False)
        self.assertNotIn("via", json.loads(self.fetch(url)[1])["headers"])
        self.assertEqual(egress.log(), [])


class EnvironmentProxiesIgnored(TLSProxyCase):
    """libcurl on its own routes through http_proxy, https_proxy and all_proxy from the
    environment, and around a proxy for the hosts no_proxy names; xhrpcd does neither:
    only --egress-proxy and enableHttpProxy decide whether a request goes through a
    proxy."""

    FIXTURES = {"http": lambda: Fixture("upstream.py"), "proxy": lambda: Fixture("proxy.py")}

    @classmethod
    def server_env(cls):
        url = "http://127.0.0.1:%d" % cls.fx["proxy"].port
        env = {name: url for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                      "all_proxy", "ALL_PROXY")}
        env.update(no_proxy="*", NO_PROXY="*")
        return env

    def test_requests_go_direct(self):
        self.fx["proxy"].log()
        summary, body = self.fetch(self.fx["http"].url("/echo"))
        self.assertEqual(summary["status"], 200)
        self.assertNotIn("via", json.loads(body)["headers"])
        self.assertEqual(self.fx["proxy"].log(), [])

    def test_no_proxy_does_not_skip_a_chosen_proxy(self):
        proxy = self.fx["proxy"]
        proxy.log()
        summary, body = self.fetch(self.fx["http"].url("/echo"),
                                   [("enableHttpProxy", {"host": "127.0.0.1", "port": proxy.port})])
        self.assertEqual(summary["status"], 200)
        self.assertEqual(json.loads(body)["headers"]["via"], "1.1 xhrpc-proxy")
        self.assertEqual([e["method"] for e in proxy.log()], ["GET"])


class ServerAuthentication(TLSProxyCase):
    """open's user, password and auth against the upstream's Basic and Digest."""

    FIXTURES = {"http": lambda: Fixture("upstream.py"), "https": lambda: tls_upstream("good")}
    # NEGOTIATE is granted, so that the scheme, not the grant, is what meets the 401.
    EXTRA_ARGS = ("--allow-negotiate",)

    def test_basic_and_digest(self):
        cases = [("/basic-auth/alice/pw-1", "BASIC"), ("/basic-auth/alice/pw-1", None),
                 ("/digest-auth/alice/pw-1", "DIGEST"), ("/digest-auth/alice/pw-1?algorithm=SHA-256", "DIGEST")]
        for path, auth in cases:
            for fx in (self.fx["http"], self.fx["https"]):
                url = fx.url(path, "https" if fx is self.fx["https"] else "http")
                with self.subTest(url=url, auth=auth):
                    summary, body = self.fetch(url, user="alice", password="pw-1", auth=auth)
                    self.assertEqual((summary["status"], json.loads(body)), (200, {"authenticated": True, "user": "alice"}))
                    summary, body = self.fetch(url, user="alice", password="wrong", auth=auth)
                    self.assertEqual((summary["status"], summary["statusText"], json.loads(body)),
                                     (401, "Unauthorized", {"authenticated": False}))

    def test_schemes_the_server_does_not_offer_end_in_401(self):
        for auth in ("NEGOTIATE", "NTLM"):
            with self.subTest(auth):
                summary, _ = self.fetch(self.fx["http"].url("/basic-auth/alice/pw-1"), user="alice",
                                        password="pw-1", auth=auth)
                self.assertEqual(summary["status"], 401)


class PasswordsStaySecret(TLSProxyCase):
    """Passwords of open, enableHttpProxy, setClientCertificate and the egress proxy are
    in no reply, no error and no log line (the server logs at debug here)."""

    FIXTURES = {"http": lambda: Fixture("upstream.py"), "basic": lambda: auth_proxy("basic")}
    LOG_LEVEL = "trace"
    SECRETS = ("open-secret-7", "proxy-secret-7", "key-secret-7", "egress-secret-7")

    @classmethod
    def server_args(cls):
        return ("--egress-proxy", "http://eu:egress-secret-7@127.0.0.1:%d" % cls.fx["basic"].port)

    def assertNoSecret(self, text):
        for s in self.SECRETS:
            self.assertNotIn(s, text)

    def test_list_errors_and_logs(self):
        r = self.c.call("create")["request"]
        url = "http://user:open-secret-7@127.0.0.1:%d/basic-auth/alice/pw" % self.fx["http"].port
        self.c.call("open", {"request": r, "method": "GET", "url": url, "user": "alice",
                             "password": "open-secret-7", "async": False, "subscribe": False})
        self.c.call("enableHttpProxy", {"request": r, "host": "127.0.0.1", "port": self.fx["basic"].port,
                                        "user": "pu", "password": "proxy-secret-7"})
        self.c.call("setClientCertificate", {"request": r, "cert": "client.pem", "key": "client-enc.key",
                                             "password": "key-secret-7"})
        self.assertIs(self.c.call("enableSecureCommunication"), True)
        replies = [self.c.call("list"), self.c.call("server.info"),
                   self.c.request("setClientCertificate", {"request": r, "cert": "client.pem", "key": "missing",
                                                           "password": "key-secret-7"})]
        replies.append(self.c.call("send", {"request": r}, timeout=30))
        replies.append(self.c.call("list"))
        # Error paths that carry a password in their parameters.
        for method, params in [
                ("enableHttpProxy", {"request": r, "host": "127.0.0.1", "port": 0, "password": "proxy-secret-7"}),
                ("setClientCertificate", {"request": "nope", "cert": "c", "key": "k", "password": "key-secret-7"}),
                ("open", {"request": r, "method": "GET", "url": "ftp://x:open-secret-7@h/", "password": "open-secret-7"})]:
            replies.append(self.c.request(method, params))
            self.assertIn("error", replies[-1])
        self.c.call("disableSecureCommunication")
        self.c.call("release", {"request": r})
        self.assertNoSecret(json.dumps(replies))
        self.assertIn("127.0.0.1", json.dumps(replies[0]))
        self.assertEqual(replies[2]["error"]["data"]["reason"], "file_error")
        self.assertNoSecret(self.server.stderr_text(limit=10 ** 7))

    def test_egress_proxy_flag_errors_do_not_echo_it(self):
        out = subprocess.run([require_binary(), "--egress-proxy", "http://eu:egress-secret-7@host-without-port",
                              "--listen", "unix:/nonexistent/x.sock"], capture_output=True, text=True, timeout=20)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("--egress-proxy", out.stderr)
        self.assertNoSecret(out.stdout + out.stderr)
