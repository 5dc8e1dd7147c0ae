"""The access log and URL redaction: one line per finished request at info level, with
its figures and nothing secret in it, and secret values hidden wherever a URL is
shown (`list`, logs, status texts).

Each line has the keys principal, method, url, status, reason (only when no response
came), bytesIn, bytesOut, durationMs and attempts; with ``--log-format json`` it is one
JSON object whose figures are numbers. The URL has no userinfo, and the values of
query parameters named token, access_token, key, api_key, apikey, secret, password,
sig, signature, or named with ``--redact-query``, read ``REDACTED``.
"""

import base64
import json
import socket
import threading
import time
import unittest

from support import ServerTestCase

SECRETS = ("pw-s3cret", "tok-s3cret", "sess-s3cret", "hdr-s3cret", "body-s3cret", "sig-s3cret")
ACCESS_KEYS = {"principal", "method", "url", "status", "bytesIn", "bytesOut", "durationMs", "attempts"}


class AccessLog(ServerTestCase):
    UPSTREAM = True
    LOG_LEVEL = "info"

    @classmethod
    def server_args(cls):
        return ["--log-format", "json", "--redact-query", "Session"]

    def access_lines(self, count, timeout=10):
        """The first ``count`` access-log lines, once that many are in the log."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [json.loads(l) for l in self.server.stderr_text(10 ** 7).splitlines() if l.startswith("{")]
            access = [l for l in lines if l.get("logger") == "xhrpc.access"]
            if len(access) >= count or time.monotonic() > deadline:
                return access, lines
            time.sleep(0.02)

    def test_one_line_per_finished_request_with_nothing_secret(self):
        c = self.connect()
        base = self.upstream.base
        secret_url = base.replace("http://", "http://bob:pw-s3cret@") + \
            "/bytes/10?token=tok-s3cret&session=sess-s3cret&x=1"
        r = c.call("fetch", {"url": secret_url, "headers": {"Authorization": "Bearer hdr-s3cret"}})
        self.assertEqual(r["status"], 200)
        c.call("create", {"request": "post"})
        c.call("open", {"request": "post", "method": "POST", "url": base + "/echo?sig=sig-s3cret",
                        "async": False, "user": "bob", "password": "pw-s3cret"})
        c.call("setRequestHeader", {"request": "post", "header": "X-Api", "value": "hdr-s3cret"})
        c.call("send", {"request": "post", "body": "body-s3cret"}, timeout=20)
        refused = c.call("fetch", {"url": "http://127.0.0.1:1/?key=k"})
        self.assertEqual(refused["status"], 0)
        access, lines = self.access_lines(3)
        self.assertEqual(len(access), 3, access)
        first, post, failed = access
        for line in access:
            self.assertEqual(line["level"], "info")
            self.assertEqual(line["message"], "request finished")
            self.assertTrue(ACCESS_KEYS <= set(line), line)
            for k in ("status", "bytesIn", "bytesOut", "durationMs", "attempts"):
                self.assertIsInstance(line[k], int, "%s is a number: %r" % (k, line))
            self.assertEqual(line["principal"], "local")
            self.assertEqual(line["attempts"], 1)
        self.assertEqual((first["method"], first["status"], first["bytesIn"], first["bytesOut"]), ("GET", 200, 10, 0))
        self.assertEqual(first["url"], base + "/bytes/10?token=REDACTED&session=REDACTED&x=1")
        self.assertNotIn("reason", first)
        self.assertEqual((post["method"], post["status"], post["bytesOut"]), ("POST", 200, len("body-s3cret")))
        self.assertEqual(post["url"], base + "/echo?sig=REDACTED")
        self.assertEqual((failed["status"], failed["url"]), (0, "http://127.0.0.1:1/?key=REDACTED"))
        self.assertIn("Connection refused", failed["reason"])
        log = self.server.stderr_text(10 ** 7)
        for secret in SECRETS:
            self.assertNotIn(secret, log)
        # No line when a request starts: the log is one line per request.
        self.assertEqual([l for l in lines if "start" in l.get("message", "").lower()], [])

    def test_list_shows_urls_redacted(self):
        c = self.connect()
        c.call("create", {"request": "shown"})
        url = self.upstream.base.replace("http://", "http://u:pw-s3cret@") + \
            "/x?apikey=tok-s3cret&t%6Fken=tok-s3cret&Signature=sig-s3cret&keep=1#frag"
        c.call("open", {"request": "shown", "method": "GET", "url": url})
        entry = [e for e in c.call("list") if e["request"] == "shown"][0]
        self.assertEqual(entry["url"], self.upstream.base +
                         "/x?apikey=REDACTED&t%6Fken=REDACTED&Signature=REDACTED&keep=1#frag")
        c.call("release", {"request": "shown"})


class SocketLines(ServerTestCase):
    """A raw socket writes one line when its stream closes: method SOCKET, the url
    tcp://host:port, the bytes each way and, after an error, its word as reason."""

    LOG_LEVEL = "info"
    SERVER_ARGS = ("--log-format", "json")

    def socket_lines(self, count, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            lines = [json.loads(l) for l in self.server.stderr_text(10 ** 7).splitlines() if l.startswith("{")]
            found = [l for l in lines if l.get("logger") == "xhrpc.access" and l.get("method") == "SOCKET"]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def test_one_line_per_closed_stream(self):
        listener = socket.create_server(("127.0.0.1", 0))
        self.addCleanup(listener.close)
        port = listener.getsockname()[1]

        def peer():
            listener.settimeout(10)
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                data = conn.recv(100)
                conn.sendall(data.upper() + b"!")
        t = threading.Thread(target=peer, daemon=True)
        t.start()
        self.addCleanup(t.join, 10)
        c = self.connect()
        c.call("socket.create", {"host": "127.0.0.1", "port": port, "socket": "logged"})
        c.call("socket.connect", {"socket": "logged"})
        c.wait_notification(lambda m: m["method"] == "socket.onOpen")
        c.call("socket.write", {"socket": "logged", "data": "hello"})
        c.wait_notification(lambda m: m["method"] == "socket.onClose")
        self.assertEqual(base64.b64decode(c.call("socket.read", {"socket": "logged"})["data"]), b"HELLO!")
        c.call("socket.create", {"host": "127.0.0.1", "port": port, "socket": "refused"})
        listener.close()
        c.call("socket.connect", {"socket": "refused"})
        c.wait_notification(lambda m: m["method"] == "socket.onClose" and m["params"]["socket"] == "refused")
        lines = self.socket_lines(2)
        self.assertEqual(len(lines), 2, lines)
        ok, refused = lines
        self.assertEqual(ok["message"], "socket closed")
        self.assertEqual((ok["url"], ok["bytesOut"], ok["bytesIn"], ok["principal"]),
                         ("tcp://127.0.0.1:%d" % port, 5, 6, "local"))
        self.assertNotIn("reason", ok)
        self.assertEqual((refused["url"], refused["reason"], refused["bytesIn"]), ("tcp://127.0.0.1:%d" % port, "refused", 0))


class TextFormat(ServerTestCase):
    UPSTREAM = True
    LOG_LEVEL = "info"

    def test_text_lines_carry_the_same_figures(self):
        c = self.connect()
        c.call("fetch", {"url": self.upstream.url("/status/404?password=pw-s3cret")})
        deadline = time.monotonic() + 10
        while "xhrpc.access" not in self.server.stderr_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        line = [l for l in self.server.stderr_text().splitlines() if "xhrpc.access" in l][0]
        for part in ("status=404", "method=GET", "principal=local", "attempts=1", "password=REDACTED",
                     "request finished"):
            self.assertIn(part, line)
        self.assertNotIn("pw-s3cret", self.server.stderr_text())


class NotAtWarning(ServerTestCase):
    UPSTREAM = True

    def test_no_access_log_below_info(self):
        c = self.connect()
        # The line would be written before the answer (at DONE), so it would be there now.
        self.assertEqual(c.call("fetch", {"url": self.upstream.url("/bytes/1")})["status"], 200)
        self.assertNotIn("xhrpc.access", self.server.stderr_text())


class Flags(unittest.TestCase):
    def test_a_bad_redact_query_name_stops_the_start(self):
        from test_daemon import run_briefly
        code, err = run_briefly(["--redact-query", "a=b"])
        self.assertNotEqual(code, 0)
        self.assertIn("--redact-query a=b", err)


if __name__ == "__main__":
    unittest.main()
