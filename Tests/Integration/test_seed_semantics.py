"""The request object's semantics, exactly (api/openrpc.json): ``close``, ``sendData``,
``clearPostValues``, ``release`` while in flight, and the internal error.

- ``close`` after DONE puts every pre-send option back at its default, as on a new
  object: each option is set, shown to act on one send, and shown gone after ``close``
  (and kept across ``open`` without it). Pipelining is checked against an HTTP/2 peer in
  ``test_real_peers.py`` (``H2Test.test_close_turns_pipelining_back_on``). Post values
  are dropped by every ``open`` anyway, so only ``close``'s answer is checked for them.
- ``sendData {data}`` sends exactly the decoded bytes.
- ``clearPostValues`` forgets the values set before it, and only those.
- ``release`` of a request in flight: ``true``; the transfer is cancelled (the upstream
  sees its connection closed); no notification about it follows the answer; the
  handle is gone.
- ``-32603 Internal error``: a real failure the client cannot cause by a bad parameter:
  the cookie store cannot be replaced (a directory stands where the file goes), so
  ``clearCookies {includePersistentStore: true}`` cannot keep its promise.
"""

import base64
import json
import os
import shutil
import tempfile
import unittest

from support import ServerTestCase, Upstream, XhrpcServer, line, req, result  # first: Tests/Fixtures on sys.path
import certs  # noqa: E402
import socket_peers  # noqa: E402
from real_peers import OwnServerTestCase, exchange  # noqa: E402
from xhrpc import RPCError  # noqa: E402


class CloseResetsOptionsTest(OwnServerTestCase):
    """One xhrpcd trusting the test CA; a plain upstream, a TLS upstream whose
    certificate names another host, one with the right name that accepts a client
    certificate, and a forward proxy."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="xhrpc-seed-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.certs = certs.make_all(cls.dir)
        cls.plain = cls.started(Upstream())
        cls.wrong_host = cls.started(Upstream(args=["--tls-cert", cls.certs["wrong_host_cert"],
                                                    "--tls-key", cls.certs["wrong_host_key"]]))
        cls.good = cls.started(Upstream(args=["--tls-cert", cls.certs["good_cert"], "--tls-key", cls.certs["good_key"],
                                              "--client-ca", cls.certs["client_ca"], "--client-cert", "optional"]))
        cls.proxy = cls.started(Upstream(script="proxy.py"))
        cls.server = XhrpcServer(args=("--ca-file", cls.certs["ca"], "--cert-root", os.path.dirname(cls.certs["ca"]))).start()
        cls.addClassCleanup(cls.server.kill)

    @classmethod
    def started(cls, fixture):
        fixture.start()
        cls.addClassCleanup(fixture.stop)
        return fixture

    def setUp(self):
        self.c = self.server.connect()
        self.addCleanup(self.c.close)
        self.c.call("create", {"request": "r"})
        self.addCleanup(self.c.call, "release", {"request": "r"})

    def send(self, url, method="GET"):
        """open (sync) + send on ``r``; returns (status, statusText, body)."""
        c = self.c
        c.call("open", {"request": "r", "method": method, "url": url, "async": False, "subscribe": False})
        summary = c.call("send", {"request": "r"}, timeout=30)
        body = base64.b64decode(c.call("getReceiveBuffer", {"request": "r"})["data"])
        return summary["status"], summary["statusText"], body

    def echo(self, url):
        status, text, body = self.send(url)
        self.assertEqual(status, 200, text)
        return json.loads(body)

    def option(self, name, params=None):
        self.assertIs(self.c.call(name, dict(params or {}, request="r")), True)

    def close(self):
        self.assertIs(self.c.call("close", {"request": "r"}), True)

    def test_close_before_any_send_is_false_and_resets_nothing(self):
        self.assertIs(self.c.call("close", {"request": "r"}), False)
        self.option("disableFollowLocation")
        self.assertIs(self.c.call("close", {"request": "r"}), False)
        self.assertEqual(self.send(self.plain.url("/redirect/1"))[0], 302)

    def test_redirects(self):
        self.option("disableFollowLocation")
        self.assertEqual(self.send(self.plain.url("/redirect/1"))[0], 302)
        self.assertEqual(self.send(self.plain.url("/redirect/1"))[0], 302, "kept across open")
        self.close()
        self.assertEqual(self.send(self.plain.url("/redirect/1"))[:3], (200, "OK", b"done"))

    def test_cookies(self):
        exchange(self.c, "GET", self.plain.url("/set-cookie?name=seed&value=1"), handle="set")
        self.addCleanup(lambda: exchange(self.c, "GET", self.plain.url("/set-cookie?name=seed&value=&max_age=0"),
                                         handle="unset"))
        self.option("disableCookieHandling")
        self.assertEqual(self.echo(self.plain.url("/cookies")), {})
        self.close()
        self.assertEqual(self.echo(self.plain.url("/cookies")), {"seed": "1"})

    def test_peer_verification(self):
        url = self.wrong_host.url("/bytes/3").replace("http:", "https:").replace("127.0.0.1", "localhost")
        self.option("disablePeerVerification")
        self.assertEqual(self.send(url)[0], 200)
        self.close()
        status, text, _ = self.send(url)
        self.assertEqual(status, 0)
        self.assertIn("no alternative certificate subject name matches", text)

    def test_host_verification(self):
        url = self.wrong_host.url("/bytes/3").replace("http:", "https:").replace("127.0.0.1", "localhost")
        self.option("disableHostVerification")
        self.assertEqual(self.send(url)[0], 200)
        self.close()
        status, text, _ = self.send(url)
        self.assertEqual(status, 0)
        self.assertIn("no alternative certificate subject name matches", text)

    def test_pinned_public_key(self):
        url = self.good.url("/bytes/3").replace("http:", "https:").replace("127.0.0.1", "localhost")
        self.option("setPinnedPublicKey", {"sha256": self.certs["bad_pin_value"]})
        status, text, _ = self.send(url)
        self.assertEqual(status, 0)
        self.assertIn("pinned public key", text)
        self.close()
        self.assertEqual(self.send(url)[0], 200)

    def test_client_certificate(self):
        url = self.good.url("/echo").replace("http:", "https:").replace("127.0.0.1", "localhost")
        self.option("setClientCertificate", {"cert": "client.pem", "key": "client.key"})
        self.assertEqual(self.echo(url)["clientCertCN"], "xhrpc-client")
        self.close()
        self.assertIsNone(self.echo(url)["clientCertCN"])

    def test_proxy(self):
        self.option("enableHttpProxy", {"host": "127.0.0.1", "port": self.proxy.port})
        self.assertEqual(self.echo(self.plain.url("/echo"))["headers"].get("via"), "1.1 xhrpc-proxy")
        self.close()
        self.assertNotIn("via", self.echo(self.plain.url("/echo"))["headers"])

    def test_retry_policy(self):
        self.option("setRetryPolicy", {"maxAttempts": 3, "initialDelay": 0.01})
        self.assertEqual(self.send(self.plain.url("/status/503"))[0], 503)
        self.assertEqual(self.c.call("getState", {"request": "r"})["attempt"], 3)
        self.close()
        self.assertEqual(self.send(self.plain.url("/status/503"))[0], 503)
        self.assertEqual(self.c.call("getState", {"request": "r"})["attempt"], 1)

    def test_post_values(self):
        c = self.c
        c.call("open", {"request": "r", "method": "POST", "url": self.plain.url("/echo"), "async": False,
                        "subscribe": False})
        self.option("setPostValue", {"key": "a", "value": "1"})
        c.call("send", {"request": "r"}, timeout=30)
        self.close()
        got = self.echo(self.plain.url("/echo"))
        self.assertEqual((got["method"], got["bodyLength"]), ("GET", 0))


class SendAndValuesTest(ServerTestCase):
    """sendData, clearPostValues, release in flight, on the plain upstream."""

    UPSTREAM = True

    def setUp(self):
        super().setUp()
        self.c = self.server.connect()
        self.addCleanup(self.c.close)

    def echo(self, **kw):
        summary, body = exchange(self.c, kw.pop("method", "POST"), self.upstream.url("/echo"), **kw)
        self.assertEqual((summary["state"], summary["stateName"], summary["status"]), (5, "DONE", 200))
        return json.loads(body)

    def test_send_data_sends_exactly_the_decoded_bytes(self):
        data = bytes(range(256)) * 3 + b"\x00\r\n"
        got = self.echo(send="sendData", send_params={"data": base64.b64encode(data).decode()})
        self.assertEqual((got["method"], got["bodyLength"]), ("POST", len(data)))
        self.assertEqual(base64.b64decode(got["bodyBase64"]), data)
        self.assertEqual(got["headers"]["content-length"], str(len(data)))

    def test_send_data_with_no_bytes(self):
        got = self.echo(method="PUT", send="sendData", send_params={"data": ""})
        self.assertEqual((got["method"], got["bodyLength"]), ("PUT", 0))

    def test_send_data_refuses_what_is_not_base64(self):
        self.c.call("create", {"request": "b"})
        self.addCleanup(self.c.call, "release", {"request": "b"})
        self.c.call("open", {"request": "b", "method": "POST", "url": self.upstream.url("/echo")})
        with self.assertRaises(RPCError) as e:
            self.c.call("sendData", {"request": "b", "data": "not base64!"})
        self.assertEqual(e.exception.code, -32602)
        self.assertEqual(self.c.call("getState", {"request": "b"})["stateName"], "OPENED")

    def test_clear_post_values_forgets_the_earlier_ones(self):
        got = self.echo(before_send=[("setPostValue", {"key": "a", "value": "1"}),
                                     ("clearPostValues", {}),
                                     ("setPostValue", {"key": "b", "value": "2 & 3"})])
        self.assertEqual(base64.b64decode(got["bodyBase64"]), b"b=2+%26+3")
        self.assertEqual(got["headers"]["content-type"], "application/x-www-form-urlencoded")

    def test_clear_post_values_leaves_a_get_without_body(self):
        got = self.echo(method="GET", before_send=[("setPostValue", {"key": "a", "value": "1"}), ("clearPostValues", {})])
        self.assertEqual((got["method"], got["bodyLength"]), ("GET", 0))
        self.assertNotIn("content-type", got["headers"])

    def test_clear_post_values_is_refused_in_flight(self):
        c = self.c
        c.call("create", {"request": "f"})
        self.addCleanup(c.call, "release", {"request": "f"})
        c.call("open", {"request": "f", "method": "GET", "url": self.upstream.url("/hang"), "subscribe": False})
        c.call("send", {"request": "f"})
        with self.assertRaises(RPCError) as e:
            c.call("clearPostValues", {"request": "f"})
        self.assertEqual(e.exception.reason, "invalid_state")

    def test_release_in_flight_cancels_the_transfer(self):
        peer = socket_peers.Peer(socket_peers.read_to_eof).start()
        self.addCleanup(peer.stop)
        c = self.c
        c.call("create", {"request": "gone"})
        c.call("open", {"request": "gone", "method": "GET", "url": "http://127.0.0.1:%d/held" % peer.port})
        c.call("send", {"request": "gone"})
        peer.wait_for(lambda p: p.received > 0, 10, "the request to arrive")
        for state in ("OPENED", "SENT"):
            c.wait_notification(lambda m: m.get("method") == "onStateChange" and m["params"]["request"] == "gone"
                                and m["params"]["stateName"] == state, 10)
        # release and a list in one write; every message in arrival order.
        rid, lid = c.next_id(), c.next_id()
        c.send_raw(line(req("release", rid, {"request": "gone"})) + line(req("list", lid)))
        seen = []
        while not (seen and seen[-1].get("id") == lid):
            seen.append(c.read_message(timeout=10))
        answers = [i for i, m in enumerate(seen) if "id" in m]
        self.assertEqual([seen[i] for i in answers], [result(True, rid), result([], lid)], seen)
        about = [i for i, m in enumerate(seen) if "id" not in m and m["params"].get("request") == "gone"]
        # Before release's answer: the abort's DONE (status 0); after it: nothing.
        self.assertEqual([seen[i]["params"]["stateName"] for i in about], ["DONE"], seen)
        self.assertLess(about[-1], answers[0], seen)
        peer.wait_for(lambda p: p.eofs == 1, 10, "the connection to be closed")
        with self.assertRaises(RPCError) as e:
            c.call("getState", {"request": "gone"})
        self.assertEqual(e.exception.reason, "unknown_handle")


class InternalErrorTest(unittest.TestCase):
    """-32603: the cookie store cannot be replaced."""

    def test_a_store_that_cannot_be_written_is_an_internal_error(self):
        base = tempfile.mkdtemp(prefix="xhrpc-seed-state-")
        self.addCleanup(shutil.rmtree, base, True)
        server = XhrpcServer(args=("--state-dir", base)).start()
        self.addCleanup(server.kill)
        c = server.connect()
        self.addCleanup(c.close)
        # A directory (not empty, so rename(2) cannot replace it) where the store goes.
        store = os.path.join(base, "cookies-local.txt")
        os.mkdir(store)
        with open(os.path.join(store, "keep"), "w") as f:
            f.write("x")
        c.call("create", {"request": "k"})
        rid = c.next_id()
        c.send({"jsonrpc": "2.0", "id": rid, "method": "clearCookies",
                "params": {"request": "k", "includePersistentStore": True}})
        got = c.wait_response(rid)
        self.assertEqual(set(got), {"jsonrpc", "error", "id"})
        self.assertEqual(got["error"]["code"], -32603)
        self.assertEqual(got["error"]["message"], "Internal error")
        self.assertEqual(set(got["error"]["data"]), {"detail"})
        self.assertIn("cannot save cookies to %s: renaming" % store, got["error"]["data"]["detail"])
        # Nothing half-done is left behind, and the server goes on serving.
        self.assertEqual(sorted(os.listdir(base)), ["cookies-local.txt"])
        self.assertIs(c.call("clearCookies", {"request": "k"}), True)
        self.assertEqual(c.call("release", {"request": "k"}), True)
        self.assertEqual(server.stop(), 0, server.stderr_text())


if __name__ == "__main__":
    unittest.main()
