"""Raw sockets through the server's egress proxy (docs/internals/SOCKETS.md, "Connecting").

A principal that enabled secure communication has its sockets tunnelled through
``--egress-proxy`` with ``CONNECT host:port`` and the proxy's Basic credentials; TLS
then runs end to end inside the tunnel, verified against the server's CA file. The
proxy is the real forward proxy of Tests/Fixtures/proxy.py, which logs each request
and whether it was authenticated; the peers are the fixture upstream over HTTP and
HTTPS, spoken to by hand over the socket.
"""

import unittest

from test_tls_proxy import Fixture, TLSProxyCase, setUpModule, tearDownModule, tls_upstream  # noqa: F401 (the certificates)

GET = b"GET /echo HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


class SocketCase(TLSProxyCase):
    def socket_exchange(self, host, port, ssl, send, timeout=10):
        """Connects a socket, writes ``send``, reads until the peer closes; returns
        (onErr params or None, the bytes read)."""
        c = self.c
        h = c.call("socket.create", {"host": host, "port": port, "ssl": ssl})["socket"]
        self.addCleanup(c.call, "socket.release", {"socket": h})
        c.call("socket.connect", {"socket": h, "timeout": timeout})
        first = c.wait_notification(lambda m: m["params"].get("socket") == h and m["method"] in (
            "socket.onOpen", "socket.onErr"), timeout=timeout + 5)
        if first["method"] == "socket.onErr":
            c.wait_notification(lambda m: m["method"] == "socket.onClose" and m["params"]["socket"] == h)
            return first["params"], b""
        c.call("socket.write", {"socket": h, "dataBase64": __import__("base64").b64encode(send).decode()})
        data = bytearray()
        for _ in range(1000):
            got = c.call("socket.read", {"socket": h})
            data += __import__("base64").b64decode(got["data"])
            if got["closed"]:
                return None, bytes(data)
            if got["bytes"] == 0:
                c.wait_notification(lambda m: m["params"].get("socket") == h and m["method"] in (
                    "socket.onRead", "socket.onClose"), timeout=timeout)
        self.fail("the peer never closed")


class ThroughTheEgressProxy(SocketCase):
    FIXTURES = {
        "http": lambda: Fixture("upstream.py"),
        "https": lambda: tls_upstream("good"),
        "egress": lambda: Fixture("proxy.py", "--user", "eu", "--password", "egress-pw-2"),
    }

    @classmethod
    def server_args(cls):
        return ("--egress-proxy", "http://eu:egress-pw-2@127.0.0.1:%d" % cls.fx["egress"].port,
                "--allow", "localhost")

    def setUp(self):
        self.fx["egress"].log()
        self.c.call("enableSecureCommunication")
        self.addCleanup(self.c.call, "disableSecureCommunication")

    def test_tls_runs_end_to_end_inside_the_tunnel(self):
        error, reply = self.socket_exchange("localhost", self.fx["https"].port, True, GET)
        self.assertIsNone(error)
        self.assertTrue(reply.startswith(b"HTTP/1.1 200 "), reply[:200])
        self.assertIn(b'"version": "TLSv1.3"', reply, "the upstream saw TLS from xhrpcd, through the proxy")
        self.assertEqual([(e["method"], e["authenticated"], e["user"]) for e in self.fx["egress"].log()
                          if e["status"] != 407], [("CONNECT", True, "eu")])

    def test_plain_tcp_goes_through_the_tunnel_too(self):
        error, reply = self.socket_exchange("localhost", self.fx["http"].port, False, GET)
        self.assertIsNone(error)
        self.assertTrue(reply.startswith(b"HTTP/1.1 200 "), reply[:200])
        log = [e for e in self.fx["egress"].log() if e["status"] != 407]
        self.assertEqual([e["method"] for e in log], ["CONNECT"])
        self.assertIn("localhost:%d" % self.fx["http"].port, log[0]["target"])

    def test_a_tunnel_the_proxy_cannot_open_is_a_proxy_error(self):
        error, _ = self.socket_exchange("localhost", 1, False, GET)
        self.assertEqual(error["error"], "proxy", error)
        self.assertIn("502", error["message"])

    def test_without_secure_communication_the_socket_goes_direct(self):
        self.c.call("disableSecureCommunication")
        error, _ = self.socket_exchange("localhost", self.fx["http"].port, False, GET)
        self.assertIsNone(error)
        self.assertEqual(self.fx["egress"].log(), [])


class WrongProxyCredentials(SocketCase):
    FIXTURES = {
        "http": lambda: Fixture("upstream.py"),
        "egress": lambda: Fixture("proxy.py", "--user", "eu", "--password", "right"),
    }

    @classmethod
    def server_args(cls):
        return ("--egress-proxy", "http://eu:wrong@127.0.0.1:%d" % cls.fx["egress"].port, "--allow", "localhost")

    def test_a_407_is_a_proxy_error_and_nothing_leaks(self):
        self.c.call("enableSecureCommunication")
        error, _ = self.socket_exchange("localhost", self.fx["http"].port, False, GET)
        self.assertEqual(error["error"], "proxy", error)
        self.assertIn("407", error["message"])
        self.assertNotIn("wrong", error["message"], "the proxy password is never shown")


if __name__ == "__main__":
    unittest.main()
