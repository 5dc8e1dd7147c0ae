"""The egress policy when a request goes through a proxy (docs/security/egress.md: "When a
proxy carries a request, check (2) sees the proxy's address ..."): the proxy's own
address must be allowed, an IP-literal destination is checked against the ranges before
anything is sent (the proxy would connect to it for us), and a name is left to the
proxy to resolve.

The server runs its default policy (loopback denied) with one proxy's address allowed,
the name ``localhost``, and ``::ffff:0:0/96`` (IPv4-mapped addresses, which lifts no
special-purpose range of the IPv4 address inside: ``[::ffff:127.0.0.1]`` passes the
host patterns and is still loopback). A second proxy, on a port no pattern allows,
stands for a proxy the policy refuses. Only loopback is ever contacted.
"""

import unittest

from test_egress import DENIED, EgressCase
from test_tls_proxy import Fixture


class EgressThroughProxies(EgressCase):
    DEFAULT_POLICY = True

    @classmethod
    def setUpClass(cls):
        cls.allowed_proxy = Fixture("proxy.py").start()
        cls.addClassCleanup(cls.allowed_proxy.stop)
        cls.other_proxy = Fixture("proxy.py").start()
        cls.addClassCleanup(cls.other_proxy.stop)
        super().setUpClass()

    @classmethod
    def server_args(cls):
        return ["--allow", "127.0.0.1:%d" % cls.allowed_proxy.port, "--allow", "localhost",
                "--allow", "::ffff:0:0/96"]

    def through(self, proxy, url):
        """The summary of a synchronous GET of ``url`` through ``proxy`` (5 s at most)."""
        with self.connect() as c:
            r = c.call("create")["request"]
            c.call("enableHttpProxy", {"request": r, "host": "127.0.0.1", "port": proxy.port})
            c.call("open", {"request": r, "method": "GET", "url": url, "async": False, "subscribe": False})
            summary = c.call("send", {"request": r, "timeout": 5}, timeout=20)
            c.call("release", {"request": r})
            return summary

    def test_a_name_is_resolved_by_an_allowed_proxy(self):
        # The control: the proxy's address is allowed and the name passes check (1),
        # so the request goes through, although a direct one to localhost is denied.
        self.allowed_proxy.log()
        summary = self.through(self.allowed_proxy, "http://localhost:%d/bytes/5" % self.upstream.port)
        self.assertEqual(summary["status"], 200, summary)
        self.assertEqual([e["method"] for e in self.allowed_proxy.log()], ["GET"])
        self.assertDenied(self.fetch("http://localhost:%d/bytes/5" % self.upstream.port))

    def test_the_proxys_own_address_is_checked(self):
        self.other_proxy.log()
        summary = self.through(self.other_proxy, "http://localhost:%d/bytes/5" % self.upstream.port)
        self.assertDenied(summary, contains=("127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback).",))
        self.assertEqual(self.other_proxy.log(), [], "nothing reached the refused proxy")

    def test_an_ip_literal_behind_the_proxy_is_checked_before_sending(self):
        # The literal passes the host patterns (an allow range covers it), so only the
        # address check of (1) stands between it and the proxy, which would connect to
        # 127.0.0.1 for us: check (2) sees the proxy's address alone.
        self.allowed_proxy.log()
        inside = self.sentinel()
        summary = self.through(self.allowed_proxy, "http://[::ffff:127.0.0.1]:%d/x" % inside.port)
        self.assertDenied(summary, "::ffff:127.0.0.1 embeds 127.0.0.1, which is in the special-purpose range "
                                   "127.0.0.0/8 (loopback).")
        self.assertEqual(self.allowed_proxy.log(), [], "the refused request never reached the proxy")
        self.assertTrue(inside.accepted_nothing())


if __name__ == "__main__":
    unittest.main()
