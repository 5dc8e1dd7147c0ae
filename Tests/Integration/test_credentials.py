"""Credentials per protection space (``credentials.set``, ``credentials.list``,
``credentials.remove``; docs/guide/cookies-and-credentials.md, docs/security/SECURITY.md).

A stored credential is sent only after a 401 (or a proxy's 407) whose challenge matches
its protection space — scheme, host, port and realm (or any realm) — and only to the
origin that asked; the request is then sent once more (attempt 2) and its answer is the
request's response. The peers are real: the fixture upstream's ``/basic-auth`` and
``/digest-auth`` (Tests/Fixtures/upstream.py, RFC 7616 MD5 and SHA-256),
Tests/Fixtures/recording_origin.py to see exactly which headers each request carried,
and Tests/Fixtures/proxy.py demanding Basic proxy authentication.
"""

import asyncio
import base64
import json
import os
import shutil
import stat
import tempfile
import unittest

from support import ServerTestCase, Upstream, XhrpcServer
from recording_origin import RecordingOrigin  # Tests/Fixtures, on sys.path through support
from test_requests import _server_args, state_change
# The TLS fixtures' certificates are made once for this module too (setUpModule).
from test_tls_proxy import Fixture, TLSProxyCase, auth_proxy, setUpModule, tearDownModule, tls_upstream  # noqa: F401
from xhrpc import RPCError
from xhrpc.aio import AsyncClient

USER, PASSWORD = "u1", "pw-Cr3d-s3cret"
ALICE = {"name": "alice", "token": "alice-" + "a" * 40}
BOB = {"name": "bob", "token": "bob-" + "b" * 40}


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


class CredentialsCase(ServerTestCase):
    UPSTREAM = True
    SERVER_ARGS = _server_args()

    @classmethod
    def setUpClass(cls):
        cls.origin = RecordingOrigin().start()  # first, so that its cleanup runs if the server fails
        cls.addClassCleanup(cls.origin.close)
        cls.origin.script("/challenge", status=401, reason="Unauthorized",
                          headers=['WWW-Authenticate: Newauth realm="apps", type=1, title="Login to \\"apps\\""',
                                   'WWW-Authenticate: Basic realm="R1", charset="UTF-8"'])
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.c = self.connect()
        self.addCleanup(self.c.close)
        for entry in self.c.credentials_list():
            self.c.credentials_remove(entry["host"], entry["port"], entry["scheme"], entry["realm"])

    def up(self, path):
        return self.upstream.url(path)

    def get(self, url, client=None):
        return (client or self.c).fetch(url, timeout=10)

    def test_set_list_remove_with_defaults(self):
        c = self.c
        c.credentials_set("Example.COM", USER, PASSWORD)
        c.credentials_set("[::1]", "v6", "p", port=8080, scheme="http", realm="Zone", auth="DIGEST")
        c.credentials_set("example.com", "u2", "p2", realm="R")
        c.credentials_set("example.com", "u3", "p3")  # replaces the any-realm entry
        listed = c.credentials_list()
        self.assertEqual(listed, [
            {"scheme": "http", "host": "::1", "port": 8080, "realm": "Zone", "auth": "DIGEST", "user": "v6"},
            {"scheme": "https", "host": "example.com", "port": 443, "realm": None, "auth": None, "user": "u3"},
            {"scheme": "https", "host": "example.com", "port": 443, "realm": "R", "auth": None, "user": "u2"},
        ])
        self.assertNotIn("p3", json.dumps(listed))
        self.assertFalse(c.credentials_remove("example.com", user="someone-else"))
        self.assertTrue(c.credentials_remove("example.com", 443, "https"))
        self.assertFalse(c.credentials_remove("example.com"))
        self.assertTrue(c.credentials_remove("::1", 8080, "http", "Zone", user="v6"))
        self.assertEqual([e["realm"] for e in c.credentials_list()], ["R"])
        # The wire forms the client methods wrap.
        self.assertEqual(c.call("credentials.list"), {"credentials": [
            {"scheme": "https", "host": "example.com", "port": 443, "realm": "R", "auth": None, "user": "u2"}]})
        self.assertEqual(c.call("credentials.remove", {"host": "EXAMPLE.com", "realm": "R"}), {"removed": True})
        self.assertEqual(c.call("credentials.remove", {"host": "example.com", "realm": "R"}), {"removed": False})

    def test_the_async_client_has_the_same_calls(self):
        url = self.up("/basic-auth/%s/%s" % (USER, PASSWORD))

        async def run():
            c = await AsyncClient.connect_unix(self.server.socket_path)
            try:
                await c.credentials_set("127.0.0.1", USER, PASSWORD, port=self.upstream.port, scheme="http")
                listed = await c.credentials_list()
                status = (await c.fetch(url, timeout=10))["status"]
                removed = await c.credentials_remove("127.0.0.1", self.upstream.port, "http")
                return listed, status, removed, await c.credentials_list()
            finally:
                await c.close()

        listed, status, removed, after = asyncio.run(asyncio.wait_for(run(), 30))
        self.assertEqual(listed, [{"scheme": "http", "host": "127.0.0.1", "port": self.upstream.port, "realm": None,
                                   "auth": None, "user": USER}])
        self.assertEqual((status, removed, after), (200, True, []))

    def test_bad_parameters_are_invalid_params(self):
        for params in ({"host": "a.test", "user": "u"},
                       {"host": "a.test", "user": "u", "password": "p\r\nX: y"},
                       {"host": "a/b", "user": "u", "password": "p"},
                       {"host": "a.test", "user": "u", "password": "p", "scheme": "ftp"},
                       {"host": "a.test", "user": "u", "password": "p", "port": 0},
                       {"host": "a.test", "user": "u", "password": "p", "auth": "BEARER"},
                       {"host": "a.test", "user": "u", "password": "p" * 4097}):
            with self.assertRaises(RPCError, msg=str(params)) as e:
                self.c.call("credentials.set", params)
            self.assertEqual(e.exception.code, -32602, params)
        self.assertEqual(self.c.credentials_list(), [])

    def test_basic_challenge_matched_gives_200_on_attempt_2(self):
        self.c.credentials_set("127.0.0.1", USER, PASSWORD, port=self.upstream.port, scheme="http", realm="xhrpc")
        c = self.c
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "GET", "url": self.up("/basic-auth/%s/%s" % (USER, PASSWORD))})
        c.call("send", {"request": r})
        changes = [m["params"] for m in self.state_changes(r)]
        self.assertEqual([(p["stateName"], p["attempt"]) for p in changes],
                         [("OPENED", 0), ("SENT", 1), ("SENT", 2), ("HEADERS_RECEIVED", 2), ("LOADING", 2), ("DONE", 2)])
        self.assertEqual(changes[-1]["status"], 200)
        body = c.call("getReceiveBuffer", {"request": r, "encoding": "utf8"})
        self.assertEqual(json.loads(body["data"]), {"authenticated": True, "user": USER})

    def state_changes(self, r, timeout=20):
        got = []
        for _ in range(12):
            m = self.c.wait_notification(lambda m: m.get("method") == "onStateChange"
                                         and m["params"]["request"] == r, timeout)
            got.append(m)
            if m["params"]["state"] == 5:
                break
        return got

    def test_digest_md5_and_sha256(self):
        self.c.credentials_set("127.0.0.1", USER, PASSWORD, port=self.upstream.port, scheme="http")
        for query in ("", "?algorithm=SHA-256"):
            got = self.get(self.up("/digest-auth/%s/%s%s" % (USER, PASSWORD, query)))
            self.assertEqual(got["status"], 200, query)
            self.assertEqual(json.loads(got["body"]), {"authenticated": True, "user": USER}, query)

    def test_wrong_password_returns_the_401(self):
        self.c.credentials_set("127.0.0.1", USER, "wrong", port=self.upstream.port, scheme="http")
        self.assertEqual(self.get(self.up("/basic-auth/%s/%s" % (USER, PASSWORD)))["status"], 401)

    def test_no_entry_for_the_space_returns_the_401(self):
        port = self.upstream.port
        url = self.up("/basic-auth/%s/%s" % (USER, PASSWORD))
        for label, args in (("https entry on an http URL (scheme default)", dict(port=port)),
                            ("another port", dict(port=port + 1 if port < 65535 else port - 1, scheme="http")),
                            ("another host", dict(port=port, scheme="http", host="localhost")),
                            ("another realm", dict(port=port, scheme="http", realm="other")),
                            ("realm compared exactly", dict(port=port, scheme="http", realm="XHRPC")),
                            ("a scheme not challenged", dict(port=port, scheme="http", auth="DIGEST"))):
            host = args.pop("host", "127.0.0.1")
            self.c.credentials_set(host, USER, PASSWORD, **args)
            self.assertEqual(self.get(url)["status"], 401, label)
            self.assertTrue(self.c.credentials_remove(host, args.get("port"), args.get("scheme"), args.get("realm")))

    def test_exact_realm_wins_over_any_realm(self):
        port = self.upstream.port
        self.c.credentials_set("127.0.0.1", "nobody", "nothing", port=port, scheme="http")
        self.c.credentials_set("127.0.0.1", USER, PASSWORD, port=port, scheme="http", realm="xhrpc")
        self.assertEqual(self.get(self.up("/basic-auth/%s/%s" % (USER, PASSWORD)))["status"], 200)
        self.c.credentials_remove("127.0.0.1", port, "http", "xhrpc")
        self.assertEqual(self.get(self.up("/basic-auth/%s/%s" % (USER, PASSWORD)))["status"], 401)

    def test_credentials_are_sent_only_after_a_challenge_from_the_same_origin(self):
        o = self.origin
        o.script("/open", status=200, body=b"open")
        self.c.credentials_set("127.0.0.1", USER, PASSWORD, port=o.port, scheme="http")
        mark = o.mark()
        self.assertEqual(self.get(o.url("/open"))["status"], 200)
        got = self.get(o.url("/challenge"))
        self.assertEqual(got["status"], 401, "the origin answers 401 whatever it receives")
        records = o.since(mark)
        self.assertEqual([r.path for r in records], ["/open", "/challenge", "/challenge"])
        self.assertEqual([r.values("authorization") for r in records], [[], [], [basic(USER, PASSWORD)]])

    def test_a_challenge_after_a_redirect_to_another_origin_is_not_answered(self):
        o = self.origin
        target = self.up("/basic-auth/%s/%s" % (USER, PASSWORD))
        o.script("/hop", status=302, reason="Found", headers=["Location: " + target])
        # Entries for both origins: the challenge comes from the redirect's target, not
        # from the origin the request was sent to, so neither is used.
        self.c.credentials_set("127.0.0.1", USER, PASSWORD, port=self.upstream.port, scheme="http")
        self.c.credentials_set("127.0.0.1", USER, PASSWORD, port=o.port, scheme="http")
        mark = o.mark()
        self.assertEqual(self.get(o.url("/hop"))["status"], 401)
        records = o.since(mark)
        self.assertEqual([r.values("authorization") for r in records], [[]])

    def test_explicit_credentials_win_over_the_store(self):
        o = self.origin
        self.c.credentials_set("127.0.0.1", USER, PASSWORD, port=o.port, scheme="http")
        c = self.c
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "GET", "url": o.url("/challenge"), "user": "own", "password": "mine",
                        "async": False, "subscribe": False})
        mark = o.mark()
        self.assertEqual(c.call("send", {"request": r, "timeout": 10}, timeout=20)["status"], 401)
        auths = [r.values("authorization") for r in o.since(mark)]
        self.assertEqual(auths, [[basic("own", "mine")]])

    def test_a_body_is_sent_again_with_the_credentials(self):
        self.c.credentials_set("127.0.0.1", USER, PASSWORD, port=self.origin.port, scheme="http")
        mark = self.origin.mark()
        got = self.c.fetch(self.origin.url("/challenge"), method="POST", body="payload-1", timeout=10)
        self.assertEqual(got["status"], 401)
        records = self.origin.since(mark)
        self.assertEqual([(r.method, r.body) for r in records], [("POST", b"payload-1"), ("POST", b"payload-1")])
        self.assertEqual(records[1].values("authorization"), [basic(USER, PASSWORD)])


class CredentialsPerPrincipal(ServerTestCase):
    UPSTREAM = True
    TCP = True
    PRINCIPALS = (ALICE, BOB)
    SERVER_ARGS = _server_args()

    def test_another_principal_cannot_list_use_or_remove_them(self):
        alice = self.server.connect_as("alice")
        self.addCleanup(alice.close)
        bob = self.server.connect_as("bob")
        self.addCleanup(bob.close)
        url = self.upstream.url("/basic-auth/%s/%s" % (USER, PASSWORD))
        alice.credentials_set("127.0.0.1", USER, PASSWORD, port=self.upstream.port, scheme="http")
        self.assertEqual(bob.credentials_list(), [])
        self.assertEqual(bob.fetch(url, timeout=10)["status"], 401)
        self.assertFalse(bob.credentials_remove("127.0.0.1", self.upstream.port, "http"))
        self.assertEqual(alice.fetch(url, timeout=10)["status"], 200)
        self.assertEqual(len(alice.credentials_list()), 1)


class ProxyCredentials(ServerTestCase):
    UPSTREAM = True
    SERVER_ARGS = _server_args()

    @classmethod
    def setUpClass(cls):
        cls.proxy = Fixture("proxy.py", "--user", "pu", "--password", "proxy-s3cret").start()
        cls.addClassCleanup(cls.proxy.stop)
        cls.digest_proxy = Fixture("proxy.py", "--user", "pu", "--password", "proxy-s3cret", "--auth", "digest",
                                   "--digest-algorithm", "SHA-256").start()
        cls.addClassCleanup(cls.digest_proxy.stop)
        cls.ntlm_proxy = Fixture("proxy.py", "--user", "pu", "--password", "proxy-s3cret", "--auth", "ntlm").start()
        cls.addClassCleanup(cls.ntlm_proxy.stop)
        super().setUpClass()

    def test_digest_and_ntlm_proxies(self):
        with self.connect() as c:
            for proxy, auth in ((self.digest_proxy, None), (self.ntlm_proxy, "NTLM")):
                self.assertEqual(self.through_proxy(c, proxy), 407, auth)
                c.credentials_set("127.0.0.1", "pu", "proxy-s3cret", port=proxy.port, scheme="http", auth=auth)
                self.assertEqual(self.through_proxy(c, proxy), 200, auth)

    def through_proxy(self, c, proxy=None):
        r = c.call("create")["request"]
        c.call("enableHttpProxy", {"request": r, "host": "127.0.0.1", "port": (proxy or self.proxy).port})
        c.call("open", {"request": r, "method": "GET", "url": self.upstream.url("/bytes/5"), "async": False,
                        "subscribe": False})
        return c.call("send", {"request": r, "timeout": 10}, timeout=20)["status"]

    def test_a_407_is_answered_with_the_proxy_space_credential(self):
        with self.connect() as c:
            self.assertEqual(self.through_proxy(c), 407)
            # An entry for the origin is not one for the proxy.
            c.credentials_set("127.0.0.1", "pu", "proxy-s3cret", port=self.upstream.port, scheme="http")
            self.assertEqual(self.through_proxy(c), 407)
            c.credentials_set("127.0.0.1", "pu", "proxy-s3cret", port=self.proxy.port, scheme="http",
                              realm="xhrpc-proxy")
            self.proxy.log()
            self.assertEqual(self.through_proxy(c), 200)
            self.assertEqual([r.get("status") for r in self.proxy.log()], [407, 200])


class TunnelCredentials(TLSProxyCase):
    """An https URL through a proxy that refuses the CONNECT tunnel with 407: libcurl
    shows the offered schemes but not the realm, so the proxy's any-realm entry answers."""

    FIXTURES = {
        "https": lambda: tls_upstream("good"),
        "basic": lambda: auth_proxy("basic"),
    }

    def through(self):
        proxy = ("enableHttpProxy", {"host": "127.0.0.1", "port": self.fx["basic"].port})
        return self.fetch(self.fx["https"].https("/bytes/7"), [proxy])[0]

    def test_the_tunnel_is_opened_with_the_proxy_space_credential(self):
        port = self.fx["basic"].port
        self.assertTrue(self.through()["statusText"].startswith("CONNECT tunnel failed, response 407"))
        self.c.credentials_set("127.0.0.1", "pu", "proxy-pw-1", port=port, scheme="http", realm="xhrpc-proxy")
        self.assertEqual(self.through()["status"], 0, "a realm-bound entry cannot match a realm no one saw")
        self.c.credentials_set("127.0.0.1", "pu", "proxy-pw-1", port=port, scheme="http")
        self.fx["basic"].log()
        self.assertEqual(self.through()["status"], 200)
        self.assertEqual([(e["method"], e["status"]) for e in self.fx["basic"].log()], [("CONNECT", 407), ("CONNECT", 200)])
        self.c.credentials_set("127.0.0.1", "pu", "wrong", port=port, scheme="http")
        self.assertEqual(self.through()["status"], 0, "a refused credential is tried once")
        self.assertEqual([(e["method"], e["status"]) for e in self.fx["basic"].log()], [("CONNECT", 407), ("CONNECT", 407)])


class CredentialStoreFile(unittest.TestCase):
    """--state-dir: credentials-<principal>.json 0600, atomic, reloaded; leftovers removed."""

    @classmethod
    def setUpClass(cls):
        cls.upstream = Upstream().start()
        cls.addClassCleanup(cls.upstream.stop)
        cls.origin = RecordingOrigin().start()
        cls.addClassCleanup(cls.origin.close)
        cls.origin.script("/challenge", status=401, reason="Unauthorized", headers=['WWW-Authenticate: Basic realm="R"'])

    def setUp(self):
        base = tempfile.mkdtemp(prefix="xhrpc-creds-")
        self.addCleanup(shutil.rmtree, base, True)
        self.state = os.path.join(base, "state")
        self.store = os.path.join(self.state, "credentials-local.json")

    def start(self, log_level="warning"):
        server = XhrpcServer(args=_server_args() + ("--state-dir", self.state), log_level=log_level).start()
        self.addCleanup(server.kill)
        c = server.connect()
        self.addCleanup(c.close)
        return server, c

    def stop(self, server):
        text = server.stderr_text()
        code = server.stop()
        self.assertEqual(code, 0, "xhrpcd exited with %r\n%s" % (code, text))
        return text

    def test_saved_0600_reloaded_after_a_restart_and_never_logged(self):
        server, c = self.start(log_level="debug")
        url = self.upstream.url("/basic-auth/%s/%s" % (USER, PASSWORD))
        c.credentials_set("127.0.0.1", USER, PASSWORD, port=self.upstream.port, scheme="http")
        self.assertEqual(stat.S_IMODE(os.stat(self.store).st_mode), 0o600)
        self.assertEqual(sorted(os.listdir(self.state)), ["credentials-local.json"])
        with open(self.store) as f:
            saved = json.load(f)["credentials"]
        self.assertEqual(saved, [{"scheme": "http", "host": "127.0.0.1", "port": self.upstream.port, "realm": None,
                                  "auth": None, "user": USER, "password": PASSWORD}])
        # The recording origin answers 401 whatever it gets, so the credential is sent
        # (the URL of /basic-auth holds the password itself; this one does not).
        c.credentials_set("127.0.0.1", USER, PASSWORD, port=self.origin.port, scheme="http")
        mark = self.origin.mark()
        self.assertEqual(c.fetch(self.origin.url("/challenge"), timeout=10)["status"], 401)
        self.assertEqual([r.values("authorization") for r in self.origin.since(mark)], [[], [basic(USER, PASSWORD)]])
        c.close()
        log = self.stop(server)
        self.assertIn("attempts=2", log, "the access log was on")
        self.assertNotIn(PASSWORD, log)
        self.assertNotIn(basic(USER, PASSWORD).split()[1], log)

        server, c = self.start()
        self.assertEqual(c.credentials_list(), [
            {"scheme": "http", "host": "127.0.0.1", "port": port, "realm": None, "auth": None, "user": USER}
            for port in sorted([self.upstream.port, self.origin.port])])
        self.assertEqual(c.fetch(url, timeout=10)["status"], 200)
        self.assertTrue(c.credentials_remove("127.0.0.1", self.upstream.port, "http"))
        self.assertTrue(c.credentials_remove("127.0.0.1", self.origin.port, "http"))
        with open(self.store) as f:
            self.assertEqual(json.load(f)["credentials"], [])
        c.close()
        self.stop(server)

    def test_leftover_temporary_files_are_removed_at_start(self):
        os.makedirs(self.state, mode=0o700)
        leftovers = [".cookies-tmp-4242-deadbeef", ".credentials-tmp-4242-cafe"]
        kept = ["cookies-local.txt", "notes.txt"]
        for name in leftovers + kept:
            with open(os.path.join(self.state, name), "w") as f:
                f.write("# Netscape HTTP Cookie File\n")
            os.chmod(os.path.join(self.state, name), 0o600)
        server, c = self.start()
        self.assertEqual(sorted(os.listdir(self.state)), kept)
        c.close()
        self.stop(server)

    def test_a_store_others_could_read_is_not_loaded(self):
        os.makedirs(self.state, mode=0o700)
        with open(self.store, "w") as f:
            json.dump({"credentials": [{"scheme": "https", "host": "a.test", "port": 443, "realm": None,
                                        "auth": None, "user": "u", "password": "p"}]}, f)
        os.chmod(self.store, 0o644)
        server, c = self.start()
        self.assertEqual(c.credentials_list(), [])
        c.close()
        self.assertIn("wider than 0600", self.stop(server))


if __name__ == "__main__":
    unittest.main()
