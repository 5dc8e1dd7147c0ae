"""Which connection a request uses: ``close`` after DONE makes the next send open a new
one, and ``setPipelining`` decides between HTTP/2 (multiplexed) and HTTP/1.1.

``close`` is seen by Tests/Fixtures/recording_origin.py, which numbers the TCP
connections it accepts and records the number with each request. ``setPipelining``
needs an HTTP/2 server, which the Python fixtures are not (HTTP/1.1 only): nginx (a
test dependency of the Makefile) serves TLS with ALPN h2 on 127.0.0.1, and answers
each request with its protocol and nginx's serial number of the connection.
"""

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest

from support import ServerTestCase, XhrpcServer, free_tcp_port
from recording_origin import RecordingOrigin  # Tests/Fixtures, on sys.path through support
from test_request_object import poll_until

import certs  # Tests/Fixtures, on sys.path once support is imported  # noqa: E402

NGINX = "/usr/sbin/nginx"
DONE_200 = {"state": 5, "stateName": "DONE", "status": 200, "statusText": "OK"}


def body_of(c, r, timeout=10):
    """The whole body of a DONE request, as bytes (bounded in calls)."""
    out = b""
    for _ in range(1000):
        chunk = c.call("getReceiveBuffer", {"request": r}, timeout)
        out += base64.b64decode(chunk["data"])
        if chunk["done"]:
            return out
    raise AssertionError("the body of %s never said done" % r)


class Close(ServerTestCase):
    """``close`` after DONE: the connection the request used is closed, so its next send
    connects anew; before DONE it answers false and changes nothing."""

    @classmethod
    def setUpClass(cls):
        cls.origin = RecordingOrigin().start()
        cls.addClassCleanup(cls.origin.close)
        super().setUpClass()

    def send(self, c, r, path):
        """Opens ``r`` on ``path`` (sync), sends it, and returns the origin's record of it."""
        c.call("open", {"request": r, "method": "GET", "url": self.origin.url(path), "async": False,
                        "subscribe": False})
        mark = self.origin.mark()
        self.assertEqual(c.call("send", {"request": r}, timeout=30), DONE_200)
        (record,) = self.origin.since(mark)
        return record

    def test_close_after_done_makes_the_next_send_connect_anew(self):
        c = self.connect()
        r = c.call("create")["request"]
        first = self.send(c, r, "/1")
        # Without close the pooled connection is reused: the baseline the test needs.
        self.assertEqual(self.send(c, r, "/2").connection, first.connection)
        accepted = self.origin.connections_accepted()
        self.assertIs(c.call("close", {"request": r}), True)
        third = self.send(c, r, "/3")
        self.assertNotEqual(third.connection, first.connection)
        self.assertEqual(self.origin.connections_accepted(), accepted + 1)
        # And the new connection is pooled as usual.
        self.assertEqual(self.send(c, r, "/4").connection, third.connection)

    def test_another_request_does_not_get_the_closed_connection(self):
        c = self.connect()
        r = c.call("create")["request"]
        used = self.send(c, r, "/a").connection
        self.assertIs(c.call("close", {"request": r}), True)
        other = c.call("create")["request"]
        self.assertNotEqual(self.send(c, other, "/b").connection, used)

    def test_false_before_done(self):
        c = self.connect()
        r = c.call("create")["request"]
        self.assertIs(c.call("close", {"request": r}), False)  # UNSENT
        c.call("open", {"request": r, "method": "GET", "url": self.origin.url("/x"), "async": False,
                        "subscribe": False})
        self.assertIs(c.call("close", {"request": r}), False)  # OPENED
        self.assertEqual(c.call("getState", {"request": r}), {"state": 1, "stateName": "OPENED", "attempt": 0})
        got = c.request("close", {"request": "no-such-request"})
        self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32001, "unknown_handle"))


class HTTP2Origin:
    """nginx on 127.0.0.1 with TLS, ALPN h2 and http/1.1, answering every request with
    ``<protocol> <connection serial>``."""

    def __init__(self, cert, key):
        self.dir = tempfile.mkdtemp(prefix="xhrpc-py-nginx-", dir="/tmp")
        self.port = free_tcp_port()  # nginx cannot report a port 0 back
        d = self.dir
        conf = """
            daemon off; worker_processes 1; pid %(d)s/nginx.pid; error_log %(d)s/error.log error;
            events { worker_connections 64; }
            http {
                access_log off;
                client_body_temp_path %(d)s; proxy_temp_path %(d)s; fastcgi_temp_path %(d)s;
                uwsgi_temp_path %(d)s; scgi_temp_path %(d)s;
                server {
                    listen 127.0.0.1:%(port)d ssl http2;
                    ssl_certificate %(cert)s; ssl_certificate_key %(key)s;
                    location / { default_type text/plain; return 200 "$server_protocol $connection"; }
                }
            }
            """ % {"d": d, "port": self.port, "cert": cert, "key": key}
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen([NGINX, "-c", os.path.join(d, "nginx.conf"), "-p", d, "-e", "stderr"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def accepting():
            if self.proc.poll() is not None:
                raise AssertionError("nginx exited with %s: %s" % (self.proc.returncode, self.proc.stderr.read()))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False
        poll_until(accepting, 20, "nginx accepting on 127.0.0.1:%d" % self.port)

    def url(self, path="/"):
        return "https://localhost:%d%s" % (self.port, path)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # nginx's fast shutdown
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Pipelining(unittest.TestCase):
    """``setPipelining``: true (the default) offers HTTP/2 and multiplexes requests to one
    server on one connection; false forces HTTP/1.1 on a connection of its own.

    Each test has a server of its own: libcurl may reuse any idle connection a request
    can use, so an HTTP/1.1 connection left in the pool by one test would serve the next
    test's HTTP/2 request."""

    @classmethod
    def setUpClass(cls):
        if not os.access(NGINX, os.X_OK):
            raise AssertionError("%s is needed (the Makefile installs nginx-light for the tests)" % NGINX)
        cls.cert_dir = tempfile.mkdtemp(prefix="xhrpc-py-h2-certs-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.cert_dir, True)
        cls.certs = certs.make_all(cls.cert_dir)
        cls.nginx = HTTP2Origin(cls.certs["good_cert"], cls.certs["good_key"])
        cls.addClassCleanup(cls.nginx.stop)

    def setUp(self):
        self.server = XhrpcServer(args=("--ca-file", self.certs["ca"])).start()
        self.addCleanup(self.stop_server)

    def stop_server(self):
        code = self.server.stop()
        self.assertEqual(code, 0, "xhrpcd exited with %r after SIGTERM\n%s" % (code, self.server.stderr_text()))

    def connect(self):
        c = self.server.connect()
        self.addCleanup(c.close)
        return c

    def exchange(self, c, r, pipelining=None):
        """Opens ``r`` (sync), sets pipelining if given, sends; returns (protocol, connection)."""
        c.call("open", {"request": r, "method": "GET", "url": self.nginx.url("/"), "async": False,
                        "subscribe": False})
        if pipelining is not None:
            self.assertIs(c.call("setPipelining", {"request": r, "enabled": pipelining}), True)
        self.assertEqual(c.call("send", {"request": r}, timeout=30), DONE_200)
        protocol, connection = body_of(c, r).decode().split()
        return protocol, int(connection)

    def test_true_and_the_default_speak_http2_false_speaks_http11(self):
        c = self.connect()
        r = c.call("create")["request"]
        self.assertEqual(self.exchange(c, r)[0], "HTTP/2.0")
        self.assertEqual(self.exchange(c, r, pipelining=True)[0], "HTTP/2.0")
        self.assertEqual(self.exchange(c, r, pipelining=False)[0], "HTTP/1.1")

    def test_false_does_not_share_the_http2_connection(self):
        c = self.connect()
        a, b, d = (c.call("create")["request"] for _ in range(3))
        h2 = self.exchange(c, a)
        # The HTTP/2 connection idles in the pool; an HTTP/1.1-only request opens its own,
        # and a request that allows HTTP/2 goes back to the shared one.
        h1 = self.exchange(c, b, pipelining=False)
        self.assertEqual(h1[0], "HTTP/1.1")
        self.assertNotEqual(h1[1], h2[1])
        self.assertEqual(self.exchange(c, d, pipelining=True), h2)

    def test_requests_in_flight_together_share_one_http2_connection(self):
        c = self.connect()
        names = [c.call("create")["request"] for _ in range(4)]
        calls = []
        for r in names:
            calls += [("open", {"request": r, "method": "GET", "url": self.nginx.url("/"), "subscribe": False}),
                      ("send", {"request": r})]
        for reply in c.batch(calls, timeout=30):
            self.assertIs(reply.get("result"), True, reply)
        poll_until(lambda: all(c.call("getState", {"request": r})["state"] == 5 for r in names), 30,
                   "the four requests DONE")
        answers = {body_of(c, r) for r in names}
        self.assertEqual(len(answers), 1, "not all on one HTTP/2 connection: %r" % answers)
        self.assertTrue(answers.pop().startswith(b"HTTP/2.0 "))

    def test_only_before_send(self):
        c = self.connect()
        r = c.call("create")["request"]
        self.assertIs(c.call("setPipelining", {"request": r, "enabled": False}), True)  # UNSENT
        self.assertEqual(self.exchange(c, r, pipelining=False)[0], "HTTP/1.1")
        got = c.request("setPipelining", {"request": r, "enabled": True})  # DONE
        self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32002, "invalid_state"))
        got = c.request("setPipelining", {"request": r})
        self.assertEqual(got["error"]["code"], -32602)
        got = c.request("setPipelining", {"request": "no-such-request", "enabled": True})
        self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32001, "unknown_handle"))


if __name__ == "__main__":
    unittest.main()
