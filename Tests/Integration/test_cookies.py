"""Cookies (docs/guide/cookies-and-credentials.md) through the real xhrpcd.

One jar per principal, shared by all of its requests: a cookie set by one request is
sent by the next. ``disableCookieHandling`` takes one request out of it (it neither
sends nor stores). ``clearCookies`` empties the jar at once; with
``includePersistentStore`` the store on disk too. With ``--state-dir`` persistent
cookies (those with Max-Age) survive a restart of xhrpcd, session cookies do not, and
the store is a mode 0600 file in a 0700 directory.

Every wait has a deadline; the store written by the debounce timer is polled for with
a short, growing pause, as the server offers no event for it.
"""

import json
import os
import shutil
import stat
import tempfile
import time
import unittest

from support import ServerTestCase, Upstream, XhrpcServer
from test_requests import _server_args
from xhrpc import RPCError


def get_json(c, url, handle="ck", disable=False, before_send=()):
    """GET ``url`` with the object API (sync send), return the JSON body.

    ``disable`` calls disableCookieHandling first; ``before_send`` is a list of
    (method, params) pre-send calls (params without the request handle).
    """
    c.call("create", {"request": handle})
    try:
        c.call("open", {"request": handle, "method": "GET", "url": url, "async": False, "subscribe": False})
        if disable:
            c.call("disableCookieHandling", {"request": handle})
        for method, params in before_send:
            c.call(method, dict(params, request=handle))
        summary = c.call("send", {"request": handle}, timeout=30)
        if summary["status"] != 200:
            raise AssertionError("GET %s: %r" % (url, summary))
        chunk = c.call("getReceiveBuffer", {"request": handle, "encoding": "utf8"})
        return json.loads(chunk["data"])
    finally:
        c.call("release", {"request": handle})


class CookieJarTest(ServerTestCase):
    """The principal's jar, in memory (no --state-dir)."""

    UPSTREAM = True
    SERVER_ARGS = _server_args()

    def setUp(self):
        super().setUp()
        self.c = self.server.connect()
        self.addCleanup(self.c.close)
        self.clear()

    def url(self, path):
        return self.upstream.url(path)

    def clear(self, include_store=False):
        self.c.call("create", {"request": "clear"})
        self.assertIs(self.c.call("clearCookies", {"request": "clear", "includePersistentStore": include_store}), True)
        self.c.call("release", {"request": "clear"})

    def test_a_cookie_set_by_one_request_is_sent_by_the_next(self):
        got = get_json(self.c, self.url("/set-cookie?name=sid&value=abc"))
        self.assertEqual(got["set"], {"sid": "abc"})
        self.assertEqual(get_json(self.c, self.url("/cookies")), {"sid": "abc"})
        # Another connection of the same principal shares the jar; fetch uses it too.
        other = self.server.connect()
        try:
            self.assertEqual(get_json(other, self.url("/cookies")), {"sid": "abc"})
            got = other.call("fetch", {"url": self.url("/cookies"), "responseType": "json"})
            self.assertEqual(got["body"], {"sid": "abc"})
        finally:
            other.close()

    def test_disable_cookie_handling_neither_sends_nor_stores(self):
        get_json(self.c, self.url("/set-cookie?name=a&value=1"))
        self.assertEqual(get_json(self.c, self.url("/cookies"), disable=True), {})
        get_json(self.c, self.url("/set-cookie?name=b&value=2"), disable=True)
        self.assertEqual(get_json(self.c, self.url("/cookies")), {"a": "1"})
        # A Cookie header set by hand is still sent, as any header.
        self.assertEqual(get_json(self.c, self.url("/cookies"), disable=True,
                                  before_send=[("setRequestHeader", {"header": "Cookie", "value": "own=x"})]),
                         {"own": "x"})

    def test_a_cookie_header_of_the_caller_joins_the_jars_in_one_field(self):
        """RFC 6265 §5.4: one Cookie field, the jar's cookies and then the caller's."""
        get_json(self.c, self.url("/set-cookie?name=jar&value=1"))
        headers = get_json(self.c, self.url("/headers"),
                           before_send=[("setRequestHeader", {"header": "Cookie", "value": "mine=x"})])
        # The fixture joins repeated fields with ", ": two fields would read "jar=1, mine=x".
        self.assertEqual(headers.get("cookie"), "jar=1; mine=x", headers)
        # With an empty jar, the caller's alone.
        self.clear()
        got = self.c.call("fetch", {"url": self.url("/cookies"), "headers": {"Cookie": "mine=x"}, "responseType": "json"})
        self.assertEqual(got["body"], {"mine": "x"})

    def test_clear_cookies_empties_the_jar_at_once(self):
        get_json(self.c, self.url("/set-cookie?name=a&value=1&max_age=3600"))
        get_json(self.c, self.url("/set-cookie?name=b&value=2"))
        self.assertEqual(get_json(self.c, self.url("/cookies")), {"a": "1", "b": "2"})
        self.clear()
        self.assertEqual(get_json(self.c, self.url("/cookies")), {})

    def test_pre_send_rules(self):
        self.c.call("create", {"request": "late"})
        self.c.call("open", {"request": "late", "method": "GET", "url": self.url("/bytes/1"), "async": False,
                             "subscribe": False})
        self.c.call("send", {"request": "late"}, timeout=30)
        for method in ("disableCookieHandling", "clearCookies"):
            with self.assertRaises(RPCError) as e:
                self.c.call(method, {"request": "late"})
            self.assertEqual(e.exception.reason, "invalid_state")
        self.c.call("release", {"request": "late"})
        with self.assertRaises(RPCError) as e:
            self.c.call("clearCookies", {"request": "nope"})
        self.assertEqual(e.exception.reason, "unknown_handle")


class CookiePersistenceTest(unittest.TestCase):
    """--state-dir: persistent cookies survive a restart, session cookies do not."""

    @classmethod
    def setUpClass(cls):
        cls.upstream = Upstream().start()
        cls.addClassCleanup(cls.upstream.stop)

    def setUp(self):
        base = tempfile.mkdtemp(prefix="xhrpc-cookies-")
        self.addCleanup(shutil.rmtree, base, True)
        self.state = os.path.join(base, "state")  # missing: xhrpcd creates it
        self.store = os.path.join(self.state, "cookies-local.txt")

    def start(self):
        server = XhrpcServer(args=_server_args() + ("--state-dir", self.state)).start()
        self.addCleanup(server.kill)
        c = server.connect()
        self.addCleanup(c.close)
        return server, c

    def stop(self, server):
        code = server.stop()
        self.assertEqual(code, 0, "xhrpcd exited with %r\n%s" % (code, server.stderr_text()))

    def url(self, path):
        return self.upstream.url(path)

    def wait_for_store(self, contains, timeout=10):
        """Poll (growing pause, bounded) until the store exists and holds ``contains``."""
        deadline = time.monotonic() + timeout
        pause = 0.01
        while time.monotonic() < deadline:
            try:
                with open(self.store) as f:
                    text = f.read()
                if contains in text:
                    return text
            except FileNotFoundError:
                pass
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
        self.fail("the store never held %r within %ss" % (contains, timeout))

    def test_persistent_cookies_survive_a_restart_and_session_cookies_do_not(self):
        server, c = self.start()
        get_json(c, self.url("/set-cookie?name=keep&value=1&max_age=3600"))
        get_json(c, self.url("/set-cookie?name=session&value=2"))
        self.assertEqual(get_json(c, self.url("/cookies")), {"keep": "1", "session": "2"})
        # Written within the debounce interval, before any shutdown.
        self.wait_for_store("\tkeep\t1")
        self.stop(server)

        self.assertEqual(stat.S_IMODE(os.stat(self.state).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(self.store).st_mode), 0o600)
        with open(self.store) as f:
            text = f.read()
        self.assertIn("\tkeep\t1", text)
        self.assertNotIn("session", text)
        self.assertEqual(os.listdir(self.state), ["cookies-local.txt"])

        server, c = self.start()
        self.assertEqual(get_json(c, self.url("/cookies")), {"keep": "1"})
        self.stop(server)

    def test_a_cookie_set_just_before_shutdown_is_saved(self):
        server, c = self.start()
        get_json(c, self.url("/set-cookie?name=late&value=1&max_age=3600"))
        self.stop(server)  # at once: within the debounce interval
        server, c = self.start()
        self.assertEqual(get_json(c, self.url("/cookies")), {"late": "1"})
        self.stop(server)

    def test_clear_cookies_in_memory_and_on_disk(self):
        server, c = self.start()
        get_json(c, self.url("/set-cookie?name=keep&value=1&max_age=3600"))
        self.wait_for_store("\tkeep\t1")
        # Memory only: gone now, back at the next start (docs/guide/cookies-and-credentials.md).
        get_json(c, self.url("/cookies"), before_send=[("clearCookies", {})])
        self.assertEqual(get_json(c, self.url("/cookies")), {})
        self.stop(server)

        server, c = self.start()
        self.assertEqual(get_json(c, self.url("/cookies")), {"keep": "1"})
        # With the store: the file is emptied before the call returns.
        get_json(c, self.url("/cookies"), before_send=[("clearCookies", {"includePersistentStore": True})])
        with open(self.store) as f:
            self.assertNotIn("keep", f.read())
        self.assertEqual(stat.S_IMODE(os.stat(self.store).st_mode), 0o600)
        self.stop(server)

        server, c = self.start()
        self.assertEqual(get_json(c, self.url("/cookies")), {})
        self.stop(server)

    def test_a_store_others_could_read_is_not_loaded(self):
        os.makedirs(self.state, mode=0o700)
        with open(self.store, "w") as f:
            f.write("127.0.0.1\tFALSE\t/\tFALSE\t%d\tplanted\t1\n" % (time.time() + 3600))
        os.chmod(self.store, 0o644)
        server, c = self.start()
        self.assertEqual(get_json(c, self.url("/cookies")), {})
        self.assertIn("wider than 0600", server.stderr_text())
        self.stop(server)

    def test_a_store_that_is_a_symbolic_link_is_not_loaded(self):
        # Owned by the server's user and 0600, so only the link itself is wrong: whoever
        # can write the state directory could point it at cookies of their choosing.
        os.makedirs(self.state, mode=0o700)
        planted = os.path.join(os.path.dirname(self.state), "planted.txt")
        with open(planted, "w") as f:
            f.write("127.0.0.1\tFALSE\t/\tFALSE\t%d\tplanted\t1\n" % (time.time() + 3600))
        os.chmod(planted, 0o600)
        os.symlink(planted, self.store)
        server, c = self.start()
        self.assertEqual(get_json(c, self.url("/cookies")), {})
        self.assertIn("is a symbolic link", server.stderr_text())
        self.stop(server)

    def test_a_corrupt_store_is_ignored_and_the_server_starts(self):
        os.makedirs(self.state, mode=0o700)
        with open(self.store, "wb") as f:
            f.write(b"\x00\xff\xfe not a cookie file\n127.0.0.1\tFALSE\t/\tFALSE\t%d\tok\t1\n" % (time.time() + 3600))
        os.chmod(self.store, 0o600)
        server, c = self.start()
        self.assertEqual(get_json(c, self.url("/cookies")), {"ok": "1"})
        self.assertIn("skipped", server.stderr_text())
        self.stop(server)


if __name__ == "__main__":
    unittest.main()
