"""The egress policy (docs/security/egress.md) against the real xhrpcd: --allow/--deny and their
config keys, the default policy's special-purpose ranges, IP literals in every spelling
libcurl accepts, names checked per resolved address, and every redirect hop.

Only loopback is ever contacted. Private and link-local literals (10.x, 192.168.x,
169.254.169.254) are denied before any connection is attempted, so nothing leaves
the machine. A destination the policy must keep the server away from is a
"sentinel": a listening socket nobody accepts on; a connection would complete into
its backlog, so a non-blocking accept afterwards shows whether one ever arrived.

libcurl resolves ``localhost`` and ``*.localhost`` itself, to 127.0.0.1 and ::1,
whatever /etc/hosts says: that gives names with one IPv4 and one IPv6 address.
"""

import base64
import json
import os
import socket
import subprocess
import tempfile
import unittest
import urllib.parse

from support import ServerTestCase, XhrpcServer, require_binary
from test_daemon import run_briefly

DENIED = "Denied by egress policy: "


class Sentinel:
    """A listening socket on 127.0.0.1 or ::1 that nobody serves."""

    def __init__(self, host="127.0.0.1", port=0, listening=True):
        self.host = host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.sock.bind((host, port))
        if listening:
            self.sock.listen(16)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def url(self, path="/"):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "http://%s:%d%s" % (host, self.port, path)

    def accepted_nothing(self):
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return True
        conn.close()
        return False

    def close(self):
        self.sock.close()


def redirect(upstream, target, status=302):
    return upstream.url("/redirect-to?url=%s&status=%d" % (urllib.parse.quote(target, safe=""), status))


class EgressCase(ServerTestCase):
    UPSTREAM = True

    def sentinel(self, host="127.0.0.1", **kw):
        s = Sentinel(host, **kw)
        self.addCleanup(s.close)
        return s

    def fetch(self, url):
        with self.connect() as c:
            return c.call("fetch", {"url": url}, timeout=20)

    def assertDenied(self, reply, reason=None, contains=()):
        self.assertEqual(reply["status"], 0, reply)
        text = reply["statusText"]
        self.assertTrue(text.startswith(DENIED), text)
        if reason is not None:
            self.assertEqual(text, DENIED + reason)
        for part in contains:
            self.assertIn(part, text)


class DefaultPolicy(EgressCase):
    """No --allow or --deny: loopback, private and the other special ranges are denied."""

    DEFAULT_POLICY = True

    def test_loopback_literals_in_every_spelling(self):
        v4, v6 = self.sentinel(), self.sentinel("::1")
        p, q = v4.port, v6.port
        loop = "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."
        for url, reason in [
            ("http://127.0.0.1:%d/" % p, loop),
            ("http://0177.0.0.1:%d/" % p, "0177.0.0.1 means 127.0.0.1; " + loop),
            ("http://2130706433:%d/" % p, "2130706433 means 127.0.0.1; " + loop),
            ("http://0x7f.1:%d/" % p, "0x7f.1 means 127.0.0.1; " + loop),
            ("http://127.1:%d/" % p, "127.1 means 127.0.0.1; " + loop),
            ("http://%%31%%32%%37.0.0.1:%d/" % p, loop),
            ("http://[::1]:%d/" % q, "::1 is in the special-purpose range ::1 (loopback)."),
            ("http://[0:0:0:0:0:0:0:1]:%d/" % q, "::1 is in the special-purpose range ::1 (loopback)."),
            ("http://[::ffff:127.0.0.1]:%d/" % p,
             "::ffff:127.0.0.1 embeds 127.0.0.1, which is in the special-purpose range 127.0.0.0/8 (loopback)."),
        ]:
            with self.subTest(url=url):
                self.assertDenied(self.fetch(url), reason)
        self.assertTrue(v4.accepted_nothing())
        self.assertTrue(v6.accepted_nothing())

    def test_private_and_metadata_literals(self):
        for url, reason in [
            ("http://10.1.2.3/", "10.1.2.3 is in the special-purpose range 10.0.0.0/8 (private, RFC 1918)."),
            ("http://192.168.0.1:8080/", "192.168.0.1 is in the special-purpose range 192.168.0.0/16 (private, RFC 1918)."),
            ("http://169.254.169.254/latest/meta-data/",
             "169.254.169.254 is in the special-purpose range 169.254.0.0/16 (link-local, cloud metadata)."),
            ("https://[fd12::1]/", "fd12::1 is in the special-purpose range fc00::/7 (unique local, ULA)."),
        ]:
            with self.subTest(url=url):
                self.assertDenied(self.fetch(url), reason)

    def test_localhost_is_denied_at_each_address(self):
        v4 = self.sentinel()
        reply = self.fetch("http://localhost:%d/" % v4.port)
        self.assertDenied(reply, contains=(
            "every address tried for localhost:%d is denied: " % v4.port,
            "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback).",
            "::1 is in the special-purpose range ::1 (loopback)."))
        self.assertTrue(v4.accepted_nothing())

    def test_object_api_reports_the_denial_in_done(self):
        with self.connect() as c:
            c.call("create", {"request": "r"})
            c.call("open", {"request": "r", "method": "GET", "url": self.upstream.url("/bytes/5")})
            c.call("send", {"request": "r"})
            states = []
            while not states or states[-1]["stateName"] != "DONE":
                states.append(c.wait_notification(lambda m: m.get("method") == "onStateChange", timeout=20)["params"])
            self.assertEqual([s["stateName"] for s in states], ["OPENED", "SENT", "DONE"])
            self.assertEqual(states[-1]["status"], 0)
            self.assertEqual(states[-1]["statusText"],
                             DENIED + "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback).")
            self.assertEqual(c.call("getStatusText", {"request": "r"}), states[-1]["statusText"])


class AllowIPv4Only(EgressCase):
    """--allow 127.0.0.1 --allow localhost: the name passes, only its IPv4 address does."""

    SERVER_ARGS = ("--allow", "127.0.0.1", "--allow", "localhost")
    DEFAULT_POLICY = True

    def test_literal_and_name_reach_the_ipv4_upstream(self):
        self.assertEqual(self.fetch(self.upstream.url("/bytes/3"))["status"], 200)
        self.assertEqual(self.fetch("http://localhost:%d/bytes/3" % self.upstream.port)["status"], 200)

    def test_a_literal_with_a_trailing_dot_is_the_address_it_names(self):
        # Issue 41: `127.0.0.1.` passed the host rules as 127.0.0.1, then went to DNS as
        # a name (and failed). It is connected to at 127.0.0.1, directly and as a
        # redirect's target, as are the other spellings of it.
        port = self.upstream.port
        for host in ("127.0.0.1.", "127.1.", "0x7f.1"):
            with self.subTest(host=host):
                reply = self.fetch("http://%s:%d/bytes/3" % (host, port))
                self.assertEqual((reply["status"], len(base64.b64decode(reply["body"]))), (200, 3), reply)
                reply = self.fetch(redirect(self.upstream, "http://%s:%d/bytes/4" % (host, port)))
                self.assertEqual((reply["status"], len(base64.b64decode(reply["body"]))), (200, 4), reply)
        # Judged as the address it names, the rules apply to that address.
        v4 = self.sentinel("127.0.0.1")
        self.assertDenied(self.fetch("http://127.0.0.2.:%d/" % v4.port),
                          "127.0.0.2.:%d matches no allow pattern." % v4.port)
        self.assertTrue(v4.accepted_nothing())

    def test_ipv6_address_of_the_name_stays_out(self):
        v6 = self.sentinel("::1")
        self.sentinel("127.0.0.1", port=v6.port, listening=False)  # 127.0.0.1 refuses at once
        reply = self.fetch("http://localhost:%d/" % v6.port)
        self.assertEqual(reply["status"], 0)
        self.assertFalse(reply["statusText"].startswith(DENIED), reply)  # 127.0.0.1 was tried, and refused
        self.assertTrue(v6.accepted_nothing())
        self.assertDenied(self.fetch(v6.url()), "[::1]:%d matches no allow pattern." % v6.port)
        self.assertTrue(v6.accepted_nothing())


class DenyWinsAndPorts(EgressCase):
    """A deny pattern beats an allow pattern; patterns with a port match that port only."""

    DEFAULT_POLICY = True

    @classmethod
    def server_args(cls):
        return ["--allow", "127.0.0.0/8", "--deny", "127.0.0.2",
                "--deny", "127.0.0.1:%d" % cls.upstream.port]

    def test_deny_beats_allow_on_the_port_it_names(self):
        up = self.upstream.port
        self.assertDenied(self.fetch(self.upstream.url("/bytes/3")),
                          "127.0.0.1:%d matches the deny pattern 127.0.0.1:%d." % (up, up))
        self.assertDenied(self.fetch("http://127.0.0.2:%d/" % up),
                          "127.0.0.2:%d matches the deny pattern 127.0.0.2." % up)

    def test_other_ports_are_allowed(self):
        closed = self.sentinel(listening=False)
        reply = self.fetch(closed.url())
        self.assertEqual(reply["status"], 0)
        self.assertFalse(reply["statusText"].startswith(DENIED), reply)


class WildcardNames(EgressCase):
    SERVER_ARGS = ("--allow", "*.localhost", "--allow", "127.0.0.1", "--deny", "*.evil.localhost")
    DEFAULT_POLICY = True

    def test_subdomains_only(self):
        up = self.upstream.port
        self.assertEqual(self.fetch("http://api.localhost:%d/bytes/2" % up)["status"], 200)
        self.assertDenied(self.fetch("http://localhost:%d/" % up), "localhost:%d matches no allow pattern." % up)
        self.assertDenied(self.fetch("http://x.Evil.localhost:%d/" % up),
                          "x.evil.localhost:%d matches the deny pattern *.evil.localhost." % up)


class InternationalNames(EgressCase):
    """A name in Unicode is checked, and sent, in its ASCII (xn--) form, the only form
    a pattern may be written in; libcurl resolves *.localhost itself, so no DNS."""

    SERVER_ARGS = ("--allow", "xn--bcher-kva.localhost", "--allow", "127.0.0.1",
                   "--deny", "xn--mnchen-3ya.localhost")
    DEFAULT_POLICY = True

    def test_unicode_names_match_their_xn_form(self):
        up = self.upstream.port
        reply = self.fetch("http://bücher.localhost:%d/headers" % up)
        self.assertEqual(reply["status"], 200, reply)
        self.assertIn("xn--bcher-kva.localhost", reply["body"])  # the Host header libcurl sent
        self.assertDenied(self.fetch("http://münchen.localhost:%d/" % up),
                          "xn--mnchen-3ya.localhost:%d matches the deny pattern xn--mnchen-3ya.localhost." % up)
        self.assertDenied(self.fetch("http://straße.localhost:%d/" % up),
                          "xn--strae-oqa.localhost:%d matches no allow pattern." % up)


class Redirects(EgressCase):
    """Both checks on every hop; only http and https; the denied hop is never contacted."""

    DEFAULT_POLICY = True
    LOG_LEVEL = "debug"  # denials are logged at notice: the log must not show passwords either

    @classmethod
    def server_args(cls):
        # The fixture's redirect target travels in the request's own `url` query
        # parameter, which the access log shows: the operator names it secret, as
        # --redact-query is for, so that only what the redirect itself shows is tested.
        return ["--allow", "127.0.0.1:%d" % cls.upstream.port, "--allow", "localhost",
                "--allow", "*.localhost", "--deny", "evil.localhost", "--redact-query", "url"]

    def test_redirect_to_a_denied_address(self):
        v4, v6 = self.sentinel(), self.sentinel("::1")
        for target, why in [(v4.url("/x"), "127.0.0.1:%d matches no allow pattern." % v4.port),
                            (v6.url("/x"), "[::1]:%d matches no allow pattern." % v6.port)]:
            with self.subTest(target=target):
                self.assertDenied(self.fetch(redirect(self.upstream, target)),
                                  "the redirect to %s was refused: %s" % (target, why))
        self.assertTrue(v4.accepted_nothing())
        self.assertTrue(v6.accepted_nothing())

    def test_refused_redirect_never_shows_its_password(self):
        v4 = self.sentinel()
        target = "http://mallory:s3cret-pw@127.0.0.1:%d/x" % v4.port
        reply = self.fetch(redirect(self.upstream, target))
        self.assertDenied(reply, "the redirect to http://127.0.0.1:%d/x was refused: "
                                 "127.0.0.1:%d matches no allow pattern." % (v4.port, v4.port))
        self.assertNotIn("s3cret-pw", self.server.stderr_text())
        self.assertTrue(v4.accepted_nothing())

    def test_the_refusal_text_and_notice_never_show_the_locations_password(self):
        # The Location's own password, in what the server writes about the refusal: the
        # status text and the "redirect refused" notice. (The caller's URL carries the
        # target in its query here, and the access log shows that URL as written.)
        v4 = self.sentinel()
        shown = "http://127.0.0.1:%d/x" % v4.port
        reply = self.fetch(redirect(self.upstream, "http://mallory:s3cret-pw@127.0.0.1:%d/x" % v4.port))
        self.assertDenied(reply, "the redirect to %s was refused: 127.0.0.1:%d matches no allow pattern."
                                 % (shown, v4.port))
        notices = [l for l in self.server.stderr_text().splitlines() if "redirect refused: the redirect to" in l
                   and "127.0.0.1:%d/x" % v4.port in l]
        self.assertEqual(len(notices), 1, notices)
        self.assertIn(shown, notices[0])
        self.assertNotIn("s3cret-pw", notices[0])
        self.assertTrue(v4.accepted_nothing())

    def test_redirect_to_a_name_with_only_denied_addresses(self):
        v4 = self.sentinel()
        reply = self.fetch(redirect(self.upstream, "http://localhost:%d/" % v4.port))
        self.assertDenied(reply, contains=("every address tried for localhost:%d is denied: " % v4.port,))
        self.assertTrue(v4.accepted_nothing())

    def test_names_on_every_hop(self):
        up = self.upstream.port
        last = "http://b.localhost:%d/bytes/4" % up
        first = "http://a.localhost:%d/redirect-to?url=%s" % (up, urllib.parse.quote(last, safe=""))
        self.assertEqual(self.fetch(redirect(self.upstream, first))["status"], 200)
        evil = "http://evil.localhost:%d/bytes/4" % up
        self.assertDenied(self.fetch(redirect(self.upstream, evil)),
                          "the redirect to %s was refused: evil.localhost:%d matches the deny pattern evil.localhost."
                          % (evil, up))

    def test_other_schemes_are_refused(self):
        for target in ["ftp://127.0.0.1/x", "file:///etc/passwd"]:
            with self.subTest(target=target):
                scheme = target.split(":")[0]
                self.assertDenied(self.fetch(redirect(self.upstream, target)),
                                  'the redirect to %s uses the scheme "%s"; only http and https are spoken.'
                                  % (target, scheme))

    def test_unfollowed_redirect_is_the_result(self):
        with self.connect() as c:
            c.call("create", {"request": "n"})
            c.call("open", {"request": "n", "method": "GET", "async": False, "subscribe": False,
                            "url": redirect(self.upstream, "http://10.0.0.1/", status=301)})
            c.call("disableFollowLocation", {"request": "n"})
            summary = c.call("send", {"request": "n"}, timeout=20)
            self.assertEqual(summary["status"], 301)
            self.assertEqual(c.call("getResponseHeader", {"request": "n", "header": "location"}), "http://10.0.0.1/")


class Flags(unittest.TestCase):
    """--allow/--deny at start: bad patterns stop the server with the pattern quoted;
    the config keys allow/deny are arrays of strings, and flags replace them."""

    def test_bad_patterns_are_refused_at_start(self):
        for flag, pattern, words in [
            ("--allow", "010.0.0.1", 'The egress pattern "010.0.0.1" is not a valid IP address'),
            ("--deny", "http://example.com/", 'The egress pattern "http://example.com/" is a URL'),
            ("--allow", "10.0.0.1/8", "write the range as 10.0.0.0/8"),
            ("--deny", "*bad.example", 'The egress pattern "*bad.example" is not a valid wildcard'),
        ]:
            with self.subTest(pattern=pattern):
                d = tempfile.mkdtemp(prefix="xhrpc-py-", dir="/tmp")
                code, err = run_briefly(["--listen", "unix:%s/s.sock" % d, flag, pattern])
                self.assertNotEqual(code, 0)
                self.assertIn(words, err)
                self.assertFalse(os.path.exists(d + "/s.sock"))

    def test_config_keys(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"allow": ["127.0.0.1"], "deny": ["127.0.0.1:1"]}, f)
        self.addCleanup(os.unlink, f.name)
        srv = XhrpcServer(args=["--config", f.name], default_policy=True).start()
        try:
            with srv.connect() as c:
                reply = c.call("fetch", {"url": "http://127.0.0.1:1/"}, timeout=20)
                self.assertEqual(reply["statusText"], DENIED + "127.0.0.1:1 matches the deny pattern 127.0.0.1:1.")
                reply = c.call("fetch", {"url": "http://localhost:1/"}, timeout=20)
                self.assertEqual(reply["statusText"], DENIED + "localhost:1 matches no allow pattern.")
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_config_with_a_non_string_pattern_is_refused(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"allow": ["127.0.0.1", 10]}, f)
        self.addCleanup(os.unlink, f.name)
        d = tempfile.mkdtemp(prefix="xhrpc-py-", dir="/tmp")
        code, err = run_briefly(["--listen", "unix:%s/s.sock" % d, "--config", f.name])
        self.assertNotEqual(code, 0)
        self.assertIn("the config key 'allow' must hold only strings", err)

    def test_help_lists_the_flags_and_their_config_keys(self):
        p = subprocess.run([require_binary(), "--help"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        out = p.stdout.decode()
        self.assertEqual(p.returncode, 0)
        for words in ["--allow <pattern>", "--deny <pattern>", 'config key "allow"', 'config key "deny"']:
            self.assertIn(words, " ".join(out.split()))


if __name__ == "__main__":
    unittest.main()
