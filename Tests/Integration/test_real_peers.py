"""The request object against real third-party peers (``real_peers.py``).

- httpbin under waitress: ``/anything`` (method, headers, raw body, form from
  ``setPostValue``, a multipart body), ``/basic-auth``, ``/digest-auth`` (MD5 and
  SHA-256), ``/cookies`` through the principal's jar, ``/drip`` (a body that arrives a
  byte at a time), ``/range`` (206 with the exact slice).
- hypercorn over TLS with ALPN h2: several requests in flight at once share one
  connection as concurrent HTTP/2 streams; with ``setPipelining {enabled: false}`` each
  goes out as HTTP/1.1 on a connection of its own; ``close`` turns pipelining back on.
- NTLM at the origin, against pyspnego's NTLM acceptor: the three legs on one
  keep-alive connection, the user the server verified, a wrong password refused.
- Negotiate against a real KDC (k5test, krb5-kdc): libcurl's GSS-API with a ticket
  cache obtained by kinit; the server's GSS acceptor names the client's principal.

Each peer is started once per class; every wait is bounded.
"""

import json
import os
import shutil
import tempfile
import unittest

from support import ServerTestCase, XhrpcServer  # first: puts Tests/Fixtures on sys.path
from xhrpc import RPCError  # noqa: E402
import certs  # noqa: E402
from real_peers import (OwnServerTestCase, exchange, kerberos_realm, peer_log, start_h2_peer, start_httpbin,  # noqa: E402
                        start_negotiate_peer, start_ntlm_peer)


class HttpbinTest(ServerTestCase):
    """httpbin (PyPI) under waitress."""

    @classmethod
    def setUpClass(cls):
        cls.httpbin = start_httpbin()
        cls.addClassCleanup(cls.httpbin.stop)
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.c = self.server.connect()
        self.addCleanup(self.c.close)
        self.c.call("create", {"request": "jar"})
        self.c.call("clearCookies", {"request": "jar"})
        self.c.call("release", {"request": "jar"})

    def url(self, path):
        return self.httpbin.url(path)

    def json_exchange(self, method, path, **kw):
        summary, body = exchange(self.c, method, self.url(path), **kw)
        return summary, json.loads(body) if body else None

    def test_anything_echoes_method_headers_and_a_raw_body(self):
        summary, got = self.json_exchange("PUT", "/anything/x?a=1&a=2", headers=[("X-Test", "yes")],
                                          send_params={"body": "hello, httpbin"})
        self.assertEqual((summary["status"], summary["statusText"]), (200, "OK"))
        self.assertEqual(got["method"], "PUT")
        self.assertEqual(got["args"], {"a": ["1", "2"]})
        self.assertEqual(got["data"], "hello, httpbin")
        self.assertEqual(got["headers"]["X-Test"], "yes")
        self.assertEqual(got["headers"]["Content-Length"], str(len("hello, httpbin")))

    def test_post_values_arrive_as_a_form(self):
        summary, got = self.json_exchange("POST", "/anything", before_send=[
            ("setPostValue", {"key": "name", "value": "Zoë & co"}),
            ("setPostValue", {"key": "n", "value": "1"}),
            ("setPostValue", {"key": "n", "value": "2"})])
        self.assertEqual(summary["status"], 200)
        self.assertEqual(got["headers"]["Content-Type"], "application/x-www-form-urlencoded")
        self.assertEqual(got["form"], {"name": "Zoë & co", "n": ["1", "2"]})

    def test_a_multipart_body_is_parsed_by_the_server(self):
        boundary = "xhrpc-boundary-42"
        body = ("--%s\r\nContent-Disposition: form-data; name=\"field\"\r\n\r\nvalue one\r\n"
                "--%s\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"a.txt\"\r\n"
                "Content-Type: text/plain\r\n\r\nfile body\r\n--%s--\r\n") % (boundary, boundary, boundary)
        summary, got = self.json_exchange("POST", "/anything", headers=[
            ("Content-Type", "multipart/form-data; boundary=" + boundary)], send_params={"body": body})
        self.assertEqual(summary["status"], 200)
        self.assertEqual(got["form"], {"field": "value one"})
        self.assertEqual(got["files"], {"upload": "file body"})

    def test_basic_auth(self):
        summary, got = self.json_exchange("GET", "/basic-auth/ann/pw1", open_params={"user": "ann", "password": "pw1"})
        self.assertEqual((summary["status"], got), (200, {"authenticated": True, "user": "ann"}))
        summary, _ = self.json_exchange("GET", "/basic-auth/ann/pw1", open_params={"user": "ann", "password": "bad"})
        self.assertEqual(summary["status"], 401)

    def test_digest_auth_md5_and_sha256(self):
        for path in ("/digest-auth/auth/dan/pw2", "/digest-auth/auth/dan/pw2/SHA-256"):
            with self.subTest(path=path):
                summary, got = self.json_exchange("GET", path, open_params={
                    "user": "dan", "password": "pw2", "auth": "DIGEST"})
                self.assertEqual((summary["status"], got), (200, {"authenticated": True, "user": "dan"}))
        summary, _ = self.json_exchange("GET", "/digest-auth/auth/dan/pw2", open_params={
            "user": "dan", "password": "wrong", "auth": "DIGEST"})
        self.assertEqual(summary["status"], 401)

    def test_cookies_set_by_a_redirect_are_sent_by_the_next_request(self):
        # /cookies/set answers 302 to /cookies with Set-Cookie; the redirect is followed
        # and the hop already carries the cookie.
        summary, got = self.json_exchange("GET", "/cookies/set?flavour=oat&n=1")
        self.assertEqual((summary["status"], got), (200, {"cookies": {"flavour": "oat", "n": "1"}}))
        summary, got = self.json_exchange("GET", "/cookies")
        self.assertEqual(got, {"cookies": {"flavour": "oat", "n": "1"}})
        summary, got = self.json_exchange("GET", "/cookies", before_send=[("disableCookieHandling", {})])
        self.assertEqual(got, {"cookies": {}})

    def test_drip_delivers_every_byte(self):
        summary, body = exchange(self.c, "GET", self.url("/drip?numbytes=40&duration=0.2&delay=0&code=200"))
        self.assertEqual(summary["status"], 200)
        self.assertEqual(body, b"*" * 40)

    def test_range_gives_the_exact_slice(self):
        summary, body = exchange(self.c, "GET", self.url("/range/100"), headers=[("Range", "bytes=10-35")])
        self.assertEqual((summary["status"], summary["statusText"]), (206, "PARTIAL CONTENT"))
        alphabet = b"abcdefghijklmnopqrstuvwxyz"
        self.assertEqual(body, bytes(alphabet[i % 26] for i in range(10, 36)))
        c = self.c
        c.call("create", {"request": "r"})
        self.addCleanup(c.call, "release", {"request": "r"})
        c.call("open", {"request": "r", "method": "GET", "url": self.url("/range/100"), "async": False,
                        "subscribe": False})
        c.call("setRequestHeader", {"request": "r", "header": "Range", "value": "bytes=90-"})
        c.call("send", {"request": "r"}, timeout=30)
        self.assertEqual(c.call("getResponseHeader", {"request": "r", "header": "Content-Range"}), "bytes 90-99/100")


class H2Test(OwnServerTestCase):
    """hypercorn over TLS with ALPN h2, and xhrpcd trusting the test CA."""

    N = 4

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="xhrpc-h2-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.certs = certs.make_all(cls.dir)
        cls.peer = start_h2_peer(cls.certs)
        cls.addClassCleanup(cls.peer.stop)
        cls.server = XhrpcServer(args=("--ca-file", cls.certs["ca"])).start()
        cls.addClassCleanup(cls.server.kill)

    def setUp(self):
        self.c = self.server.connect()
        self.addCleanup(self.c.close)

    def url(self, path, host="localhost"):
        return "https://%s:%d%s" % (host, self.peer.port, path)

    # Tests that make HTTP/1.1 connections use the other name of the peer. libcurl 7.88
    # keeps one "bundle" of connections per host name and port and marks it as not
    # multiplexing once an HTTP/1.1 connection in it is set up; until a new HTTP/2
    # connection marks it again, a request that could multiplex opens a connection of
    # its own instead of joining a busy HTTP/2 one. So a request with pipelining off
    # makes the next burst of requests to the same host open new (HTTP/2) connections
    # rather than share one; each request is still correct.
    H1_HOST = "127.0.0.1"

    def concurrent(self, group, pipelining=None, host="localhost"):
        """N requests to /hold (answered only once all N are in flight), sent at once;
        returns their records."""
        c = self.c
        handles = ["%s-%d" % (group, i) for i in range(self.N)]
        for h in handles:
            c.call("create", {"request": h})
            self.addCleanup(c.call, "release", {"request": h})
            c.call("open", {"request": h, "method": "GET", "subscribe": False,
                            "url": self.url("/hold?group=%s&n=%d" % (group, self.N), host)})
            if pipelining is not None:
                c.call("setPipelining", {"request": h, "enabled": pipelining})
        c.batch([("send", {"request": h}) for h in handles])
        records = []
        for h in handles:
            summary = wait_done(c, h)
            self.assertEqual(summary["status"], 200, "%s: %r" % (h, summary))
            records.append(json.loads(c.call("getReceiveBuffer", {"request": h, "encoding": "utf8"})["data"]))
        return records

    def test_requests_in_flight_together_share_one_connection_as_streams(self):
        records = self.concurrent("mux")
        self.assertEqual({r["httpVersion"] for r in records}, {"2"})
        self.assertEqual(len({r["connection"] for r in records}), 1, records)
        streams = [r["streamId"] for r in records]
        self.assertEqual(len(set(streams)), self.N, records)
        self.assertTrue(all(s % 2 == 1 for s in streams), streams)

    def test_pipelining_off_sends_each_on_its_own_http11_connection(self):
        # An HTTP/2 connection from the test above may still be open: it must not be used.
        self.concurrent("warm", host=self.H1_HOST)
        records = self.concurrent("off", pipelining=False, host=self.H1_HOST)
        self.assertEqual({r["httpVersion"] for r in records}, {"1.1"})
        self.assertEqual(len({r["connection"] for r in records}), self.N, records)
        # libcurl would give an idle HTTP/1.1 connection to a later request that may
        # multiplex (reuse wins over a new HTTP/2 connection): `close` drops them.
        for i in range(self.N):
            self.assertIs(self.c.call("close", {"request": "off-%d" % i}), True)

    def test_close_turns_pipelining_back_on(self):
        c = self.c
        c.call("create", {"request": "p"})
        self.addCleanup(c.call, "release", {"request": "p"})

        def whoami():
            c.call("open", {"request": "p", "method": "GET", "url": self.url("/whoami", self.H1_HOST), "async": False,
                            "subscribe": False})
            self.assertEqual(c.call("send", {"request": "p"}, timeout=30)["status"], 200)
            return json.loads(c.call("getReceiveBuffer", {"request": "p", "encoding": "utf8"})["data"])

        c.call("setPipelining", {"request": "p", "enabled": False})
        self.assertEqual(whoami()["httpVersion"], "1.1")
        self.assertEqual(whoami()["httpVersion"], "1.1", "the option is kept across open")
        self.assertIs(c.call("close", {"request": "p"}), True)
        self.assertEqual(whoami()["httpVersion"], "2")
        self.assertIs(c.call("close", {"request": "p"}), True)


    def test_close_of_an_http2_connection_breaks_no_later_request(self):
        # `close` used to shut the reading side of the HTTP/2 connection; libcurl 7.88
        # kept it as alive and failed every later request on it.
        c = self.c
        for i in range(3):
            summary, body = exchange(c, "GET", self.url("/whoami?group=close"), handle="h%d" % i, release=False)
            self.addCleanup(c.call, "release", {"request": "h%d" % i})
            self.assertEqual(summary["status"], 200, "request %d, after %d closes: %r" % (i, i, summary))
            self.assertEqual(json.loads(body)["httpVersion"], "2")
            self.assertIs(c.call("close", {"request": "h%d" % i}), True)
        records = self.concurrent("after-close")
        self.assertEqual(len({r["connection"] for r in records}), 1, records)


    def test_a_relaxed_http2_connection_never_carries_a_verifying_request(self):
        # close leaves an HTTP/2 connection in libcurl's cache (see above); libcurl
        # gives it only to transfers whose TLS settings match.
        c = self.c
        url = self.url("/whoami?group=relaxed", host="localhost")
        _, body = exchange(c, "GET", url, handle="lax", release=False,
                           before_send=[("disablePeerVerification", {})])
        self.addCleanup(c.call, "release", {"request": "lax"})
        relaxed = json.loads(body)
        self.assertEqual(relaxed["httpVersion"], "2")
        self.assertIs(c.call("close", {"request": "lax"}), True)
        for i in range(2):
            _, body = exchange(c, "GET", url, handle="strict")
            strict = json.loads(body)
            self.assertEqual(strict["httpVersion"], "2")
            self.assertNotEqual(strict["connection"], relaxed["connection"])


def wait_done(c, handle, timeout=30):
    """The summary of ``handle`` once it is DONE (onStateChange is off: poll getState)."""
    import time
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        st = c.call("getState", {"request": handle})
        if st["stateName"] == "DONE":
            return {"status": c.call("getStatus", {"request": handle}),
                    "statusText": c.call("getStatusText", {"request": handle})}
        if time.monotonic() > deadline:
            raise AssertionError("%s not DONE within %ss (%r)" % (handle, timeout, st))
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


class NTLMTest(ServerTestCase):
    """NTLM at the origin, against pyspnego's acceptor."""

    @classmethod
    def setUpClass(cls):
        cls.ntlm = start_ntlm_peer()
        cls.addClassCleanup(cls.ntlm.stop)
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.c = self.server.connect()
        self.addCleanup(self.c.close)

    def test_the_handshake_runs_on_one_connection_and_names_the_user(self):
        before = len(self.ntlm.log())
        summary, body = exchange(self.c, "POST", self.ntlm.url("/ntlm"), open_params={
            "user": self.ntlm.user, "password": self.ntlm.password, "auth": "ntlm"}, send_params={"body": "payload"})
        self.assertEqual(summary["status"], 200, summary)
        got = json.loads(body)
        self.assertEqual((got["authenticated"], got["user"], got["method"]), (True, self.ntlm.user, "POST"))
        log = self.ntlm.log()[before:]
        # Type 1 → 401 with the challenge, type 3 → 200, all on one connection.
        self.assertEqual([(e["authorization"], e["status"]) for e in log], [("NTLM", 401), ("NTLM", 200)], log)
        self.assertEqual(len({e["connection"] for e in log}), 1, log)

    def test_a_stored_credential_answers_the_ntlm_challenge(self):
        port = int(self.ntlm.url("/").split(":")[2].split("/")[0])
        self.c.credentials_set("127.0.0.1", self.ntlm.user, self.ntlm.password, port=port, scheme="http")
        self.addCleanup(self.c.credentials_remove, "127.0.0.1", port=port, scheme="http")
        before = len(self.ntlm.log())
        summary, body = exchange(self.c, "GET", self.ntlm.url("/ntlm"), handle="stored", release=False)
        # NTLM authenticates the connection: close drops it, so no later test reuses it.
        self.assertTrue(self.c.call("close", {"request": "stored"}))
        self.c.call("release", {"request": "stored"})
        self.assertEqual(summary["status"], 200, summary)
        self.assertEqual(json.loads(body)["user"], self.ntlm.user)
        # Nothing sent before the challenge; then the NTLM handshake of the second attempt.
        log = self.ntlm.log()[before:]
        self.assertEqual([(e["authorization"], e["status"]) for e in log],
                         [(None, 401), ("NTLM", 401), ("NTLM", 200)], log)

    def test_a_wrong_password_is_refused(self):
        summary, _ = exchange(self.c, "GET", self.ntlm.url("/ntlm"), open_params={
            "user": self.ntlm.user, "password": "not-" + self.ntlm.password, "auth": "NTLM"})
        self.assertEqual(summary["status"], 401)


class NegotiateTest(OwnServerTestCase):
    """Negotiate (SPNEGO/Kerberos) against a KDC on loopback; xhrpcd runs with the
    realm's environment, so libcurl's GSS-API finds the ticket cache kinit filled, and
    with --allow-negotiate, which grants Negotiate to the socket owner."""

    @classmethod
    def setUpClass(cls):
        cls.realm = cls.enterClassContext(kerberos_realm())
        cls.peer = start_negotiate_peer(cls.realm)
        cls.addClassCleanup(cls.peer.stop)
        cls.server = XhrpcServer(env=cls.realm.env, args=["--allow-negotiate"]).start()
        cls.addClassCleanup(cls.server.kill)

    def setUp(self):
        self.c = self.server.connect()
        self.addCleanup(self.c.close)

    def url(self, path):
        # The host name, not the address: the service principal is HTTP/localhost.
        return "http://localhost:%d%s" % (self.peer.port, path)

    def test_the_ticket_authenticates_the_principal(self):
        before = len(peer_log(self.peer))
        summary, body = exchange(self.c, "GET", self.url("/krb"), open_params={"auth": "negotiate"})
        self.assertEqual(summary["status"], 200, summary)
        got = json.loads(body)
        self.assertEqual((got["authenticated"], got["user"], got["scheme"]), (True, self.realm.principal, "negotiate"))
        # Negotiate alone: libcurl sends the token with the first request, no 401 first.
        log = peer_log(self.peer)[before:]
        self.assertEqual([(e["authorization"], e["status"]) for e in log], [("Negotiate", 200)], log)

    def test_a_stored_negotiate_credential_answers_the_challenge(self):
        self.c.credentials_set("localhost", "-", "-", port=self.peer.port, scheme="http", auth="NEGOTIATE")
        self.addCleanup(self.c.credentials_remove, "localhost", port=self.peer.port, scheme="http")
        before = len(peer_log(self.peer))
        summary, body = exchange(self.c, "GET", self.url("/krb"))
        self.assertEqual(summary["status"], 200, summary)
        self.assertEqual(json.loads(body)["user"], self.realm.principal)
        log = peer_log(self.peer)[before:]
        self.assertEqual([(e["authorization"], e["status"]) for e in log], [(None, 401), ("Negotiate", 200)], log)

    def test_an_empty_user_is_the_same_as_none(self):
        summary, body = exchange(self.c, "GET", self.url("/krb"), open_params={"auth": "NEGOTIATE", "user": "",
                                                                            "password": ""})
        self.assertEqual((summary["status"], json.loads(body)["user"]), (200, self.realm.principal))

    def test_without_a_ticket_the_challenge_is_the_answer(self):
        other = dict(self.realm.env, KRB5CCNAME=os.path.join(self.realm.k5.tmpdir, "empty-ccache"))
        server = XhrpcServer(env=other, args=["--allow-negotiate"]).start()
        try:
            c = server.connect()
            try:
                summary, _ = exchange(c, "GET", self.url("/krb"), open_params={"auth": "negotiate"})
                self.assertEqual(summary["status"], 401)
            finally:
                c.close()
        finally:
            self.assertEqual(server.stop(), 0, server.stderr_text())

    def test_without_negotiate_the_challenge_is_the_answer(self):
        summary, _ = exchange(self.c, "GET", self.url("/krb"))
        self.assertEqual(summary["status"], 401)


class NegotiateNeedsAGrant(OwnServerTestCase):
    """Negotiate answers with xhrpcd's own Kerberos identity whichever client asks, so a
    principal uses it only when granted: --allow-negotiate for the socket owner,
    "negotiate": true for a principal of the config file. The ticket is there (the
    realm's environment); only the grant is missing."""

    GRANTED = {"name": "kerb", "token": "kerb-" + "k" * 40, "negotiate": True}
    PLAIN = {"name": "plain", "token": "plain-" + "p" * 40}

    @classmethod
    def setUpClass(cls):
        cls.realm = cls.enterClassContext(kerberos_realm())
        cls.peer = start_negotiate_peer(cls.realm)
        cls.addClassCleanup(cls.peer.stop)
        cls.server = XhrpcServer(env=cls.realm.env, tcp=True, principals=[cls.GRANTED, cls.PLAIN]).start()
        cls.addClassCleanup(cls.server.kill)

    def url(self, path):
        return "http://localhost:%d%s" % (self.peer.port, path)

    def assertForbidden(self, c, method, params):
        with self.assertRaises(RPCError) as raised:
            c.call(method, params)
        self.assertEqual(raised.exception.reason, "forbidden", raised.exception.message)
        self.assertIn("--allow-negotiate", raised.exception.message)

    def test_a_principal_without_the_grant_cannot_ask_for_negotiate(self):
        before = len(peer_log(self.peer))
        with self.server.connect_as("plain") as c:
            c.call("create", {"request": "n"})
            self.assertForbidden(c, "open", {"request": "n", "method": "GET", "url": self.url("/krb"),
                                             "auth": "NEGOTIATE"})
            self.assertForbidden(c, "fetch", {"url": self.url("/krb"), "credential": {"user": "", "password": "",
                                                                                     "auth": "NEGOTIATE"}})
            self.assertForbidden(c, "credentials.set", {"host": "localhost", "port": self.peer.port, "scheme": "http",
                                                        "user": "-", "password": "-", "auth": "NEGOTIATE"})
            # A stored credential that leaves the scheme open is not answered with
            # Negotiate either: the peer's 401 stands.
            c.credentials_set("localhost", "u", "p", port=self.peer.port, scheme="http")
            summary, _ = exchange(c, "GET", self.url("/krb"))
            self.assertEqual(summary["status"], 401)
        self.assertNotIn("Negotiate", [e["authorization"] for e in peer_log(self.peer)[before:]])

    def test_a_granted_principal_authenticates_with_the_ticket(self):
        with self.server.connect_as("kerb") as c:
            summary, body = exchange(c, "GET", self.url("/krb"), open_params={"auth": "negotiate"})
            self.assertEqual((summary["status"], json.loads(body)["user"]), (200, self.realm.principal))


if __name__ == "__main__":
    unittest.main()
