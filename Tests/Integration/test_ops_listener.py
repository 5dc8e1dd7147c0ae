"""The HTTP operations listener (--http-listen): /healthz, /readyz, /metrics.

The real xhrpcd with the listener on 127.0.0.1 and the fixture upstream. /metrics is
parsed by prometheus_client's text parser (PyPI, in the test virtual environment), and
the counters are compared before and after what a test did: they must move by exactly
that. Every wait is bounded.
"""

import http.client
import signal
import socket
import time
import unittest

from prometheus_client.parser import text_string_to_metric_families

from support import XhrpcServer, Upstream, free_tcp_port

HTTP_TIMEOUT = 10.0
# The server's httpTimeoutMs: a client has this long from connect to close.
SERVER_HTTP_TIMEOUT = 5.0


def http_get(port, path, method="GET", headers=None):
    """(status, headers dict with lower-case names, body bytes) of one exchange."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        conn.close()


def raw_exchange(port, data, timeout=HTTP_TIMEOUT):
    """Sends ``data`` and reads until the server closes; returns what came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def scrape(port):
    """The samples of /metrics as {(name, frozenset(labels.items())): value}."""
    status, headers, body = http_get(port, "/metrics")
    assert status == 200, (status, body)
    assert headers["content-type"].startswith("text/plain; version=0.0.4"), headers
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before, after):
    """The samples that changed, as {(name, labels): delta}, without the gauges and
    histograms that move by themselves (the loop's lag, durations)."""
    out = {}
    for key in set(before) | set(after):
        name = key[0]
        if name.startswith("xhrpc_event_loop_lag") or name.startswith("xhrpc_request_duration"):
            continue
        d = after.get(key, 0.0) - before.get(key, 0.0)
        if d:
            out[(name, tuple(sorted(key[1])))] = d
    return out


class OpsListenerTestCase(unittest.TestCase):
    ARGS = ()

    def setUp(self):
        self.upstream = Upstream().start()
        self.addCleanup(self.upstream.stop)
        # Picked after the upstream has its port, so that the two cannot be given the same one.
        self.http_port = free_tcp_port()
        self.server = XhrpcServer(args=["--http-listen", "tcp:127.0.0.1:%d" % self.http_port] + list(self.ARGS))
        self.server.start()
        self.addCleanup(self.server.stop)
        self.wait_http()

    def wait_http(self, deadline=10.0):
        end = time.monotonic() + deadline
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.http_port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.02)


class Endpoints(OpsListenerTestCase):
    def test_healthz_and_readyz_answer_200_and_close(self):
        for path, body in (("/healthz", b"ok\n"), ("/readyz", b"ready\n")):
            status, headers, got = http_get(self.http_port, path)
            self.assertEqual((status, got), (200, body), path)
            self.assertEqual(headers["connection"], "close")
            self.assertEqual(headers["content-length"], str(len(body)))

    def test_head_has_the_headers_and_no_body(self):
        reply = raw_exchange(self.http_port, b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % self.http_port)
        head, _, rest = reply.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200 OK\r\n"), reply)
        self.assertIn(b"Content-Length: 3\r\n", head + b"\r\n")
        self.assertEqual(rest, b"")

    def test_unknown_path_404_other_methods_405(self):
        self.assertEqual(http_get(self.http_port, "/nothing")[0], 404)
        self.assertEqual(http_get(self.http_port, "/favicon.ico")[0], 404)
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            status, headers, _ = http_get(self.http_port, "/metrics", method=method)
            self.assertEqual(status, 405, method)
            self.assertEqual(headers["allow"], "GET, HEAD")

    def test_query_string_is_ignored(self):
        self.assertEqual(http_get(self.http_port, "/healthz?verbose=1")[0], 200)

    def test_head_over_8_kib_is_431(self):
        big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Fill: " + b"a" * 9000 + b"\r\n\r\n"
        reply = raw_exchange(self.http_port, big)
        self.assertTrue(reply.startswith(b"HTTP/1.1 431 "), reply[:80])
        # Just under the limit is served.
        fits = b"GET /healthz HTTP/1.1\r\nX-Fill: " + b"a" * 8000 + b"\r\n\r\n"
        self.assertTrue(raw_exchange(self.http_port, fits).startswith(b"HTTP/1.1 200 "))

    def test_not_http_is_400(self):
        for junk in (b"hello\r\n\r\n", b"GET healthz HTTP/1.1\r\n\r\n", b"GET /healthz SPDY/3\r\n\r\n"):
            reply = raw_exchange(self.http_port, junk)
            self.assertTrue(reply.startswith(b"HTTP/1.1 400 "), (junk, reply[:80]))

    def test_a_client_that_stalls_mid_head_is_closed(self):
        with socket.create_connection(("127.0.0.1", self.http_port), timeout=SERVER_HTTP_TIMEOUT + 5) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            t0 = time.monotonic()
            self.assertEqual(s.recv(100), b"")  # closed with no answer
            waited = time.monotonic() - t0
        self.assertGreater(waited, SERVER_HTTP_TIMEOUT - 1)
        self.assertLess(waited, SERVER_HTTP_TIMEOUT + 4)
        # Meanwhile, and after, others are served: the stall blocked nothing.
        self.assertEqual(http_get(self.http_port, "/healthz")[0], 200)

    def test_a_stalled_client_does_not_block_others(self):
        with socket.create_connection(("127.0.0.1", self.http_port), timeout=10) as s:
            s.sendall(b"GET /hea")
            t0 = time.monotonic()
            self.assertEqual(http_get(self.http_port, "/healthz")[0], 200)
            self.assertLess(time.monotonic() - t0, 2)


class Metrics(OpsListenerTestCase):
    # A deny pattern wins over the suite's loopback allow: localhost URLs are denied.
    ARGS = ("--deny", "localhost")

    def test_names_and_types(self):
        _, _, body = http_get(self.http_port, "/metrics")
        # A list, not a dict: the parser names a counter's family without its _total, so
        # xhrpc_connections_total's family and the gauge xhrpc_connections share a name.
        families = [(f.name, f.type) for f in text_string_to_metric_families(body.decode())]
        for name, kind in [("xhrpc_connections", "gauge"), ("xhrpc_connections_total", "counter"),
                           ("xhrpc_body_bytes_total", "counter"), ("xhrpc_requests_in_flight", "gauge"),
                           ("xhrpc_sockets_open", "gauge"), ("xhrpc_transfers_paused", "gauge"),
                           ("xhrpc_request_duration_seconds", "histogram"),
                           ("xhrpc_event_loop_lag_seconds", "histogram")]:
            # The parser names a counter's family without its _total.
            key = name[:-len("_total")] if kind == "counter" else name
            self.assertIn((key, kind), families, name)
        # The loop's lag is measured every 250 ms.
        deadline = time.monotonic() + 10
        while scrape(self.http_port).get(("xhrpc_event_loop_lag_seconds_count", frozenset()), 0) < 2:
            self.assertLess(time.monotonic(), deadline, "the loop's lag was never measured")
            time.sleep(0.05)

    def test_counters_move_by_exactly_what_was_done(self):
        before = scrape(self.http_port)
        c = self.server.connect()
        try:
            ok = c.fetch(self.upstream.url("/bytes/1000"))
            self.assertEqual(ok["status"], 200)
            sent = c.fetch(self.upstream.url("/echo"), method="POST", body="x" * 300)
            self.assertEqual(sent["status"], 200)
            missing = c.fetch(self.upstream.url("/status/404"))
            self.assertEqual(missing["status"], 404)
            closed_port = free_tcp_port()
            failed = c.fetch("http://127.0.0.1:%d/" % closed_port)
            self.assertEqual(failed["status"], 0)
            denied = c.fetch("http://localhost:%d/headers" % self.upstream.port)
            self.assertEqual(denied["status"], 0)
            self.assertIn("egress policy", denied["statusText"])
            self.assertEqual(c.request("no.such.method")["error"]["code"], -32601)
            c.call("server.info")
        finally:
            c.close()
        # The connection's close is seen by the server on its next turn.
        deadline = time.monotonic() + 10
        while True:
            after = scrape(self.http_port)
            if value(after, "xhrpc_connections", transport="unix") == value(before, "xhrpc_connections", transport="unix"):
                break
            self.assertLess(time.monotonic(), deadline, "the connection's close was never counted")
            time.sleep(0.02)
        got = moved(before, after)
        out_bytes = got.pop(("xhrpc_body_bytes_total", (("direction", "out"),)), 0)
        in_bytes = got.pop(("xhrpc_body_bytes_total", (("direction", "in"),)), 0)
        self.assertEqual(out_bytes, 300)
        self.assertGreaterEqual(in_bytes, 1000)  # /bytes/1000, then the echo and the 404
        self.assertEqual(got, {
            ("xhrpc_rpc_calls_total", (("method", "fetch"), ("outcome", "ok"))): 5,
            ("xhrpc_rpc_calls_total", (("method", "unknown"), ("outcome", "method_not_found"))): 1,
            ("xhrpc_rpc_calls_total", (("method", "server.info"), ("outcome", "ok"))): 1,
            ("xhrpc_connections_total", (("transport", "unix"),)): 1,
            ("xhrpc_requests_total", (("outcome", "2xx"),)): 2,
            ("xhrpc_requests_total", (("outcome", "4xx"),)): 1,
            ("xhrpc_requests_total", (("outcome", "connect"),)): 1,
            ("xhrpc_requests_total", (("outcome", "policy_denied"),)): 1,
        })
        # Five requests timed.
        self.assertEqual(after[("xhrpc_request_duration_seconds_count", frozenset())]
                         - before.get(("xhrpc_request_duration_seconds_count", frozenset()), 0), 5)

    def test_in_flight_gauge_and_open_connections(self):
        c = self.server.connect()
        try:
            rid = c.next_id()
            c.send({"jsonrpc": "2.0", "method": "fetch", "id": rid, "params": {"url": self.upstream.url("/delay/1500")}})
            deadline = time.monotonic() + 10
            while value(scrape(self.http_port), "xhrpc_requests_in_flight") != 1:
                self.assertLess(time.monotonic(), deadline, "the fetch never showed in flight")
                time.sleep(0.02)
            s = scrape(self.http_port)
            self.assertEqual(value(s, "xhrpc_connections", transport="unix"), 1)
            self.assertEqual(c.wait_response(rid, timeout=15)["result"]["status"], 200)
            self.assertEqual(value(scrape(self.http_port), "xhrpc_requests_in_flight"), 0)
        finally:
            c.close()


class Drain(OpsListenerTestCase):
    def test_readyz_503_and_healthz_200_while_draining(self):
        c = self.server.connect()
        try:
            rid = c.next_id()
            c.send({"jsonrpc": "2.0", "method": "fetch", "id": rid, "params": {"url": self.upstream.url("/delay/2500")}})
            deadline = time.monotonic() + 10
            while value(scrape(self.http_port), "xhrpc_requests_in_flight") != 1:
                self.assertLess(time.monotonic(), deadline, "the fetch never showed in flight")
                time.sleep(0.02)
            self.server.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 10
            while True:
                status, _, body = http_get(self.http_port, "/readyz")
                if status == 503:
                    break
                self.assertEqual(status, 200)
                self.assertLess(time.monotonic(), deadline, "/readyz never turned 503")
                time.sleep(0.02)
            self.assertEqual(body, b"draining\n")
            self.assertEqual(http_get(self.http_port, "/healthz")[:3:2], (200, b"ok\n"))
            self.assertEqual(scrape(self.http_port)[("xhrpc_requests_in_flight", frozenset())], 1)
            # The fetch in flight finishes; then the server stops, and the listener with it.
            self.assertEqual(c.wait_response(rid, timeout=15)["result"]["status"], 200)
        finally:
            c.close()
        self.assertEqual(self.server.proc.wait(timeout=15), 0)
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", self.http_port), timeout=2).close()


class Rebinding(OpsListenerTestCase):
    """Without tokens (a loopback listener), a request must name the listener in Host: a
    page whose name was rebound to 127.0.0.1 is same-origin with it to the browser, and
    could otherwise read /metrics and the dashboard."""

    ARGS = ("--ws-origin", "http://ops.example:8080")

    def status(self, host, path="/metrics"):
        head = b"GET %s HTTP/1.1\r\n" % path.encode()
        if host is not None:
            head += b"Host: %s\r\n" % host.encode()
        reply = raw_exchange(self.http_port, head + b"\r\n")
        return int(reply.split(b" ", 2)[1]), reply

    def test_a_foreign_host_is_misdirected(self):
        for host in ("evil.example:%d" % self.http_port, "evil.example", "127.0.0.2:%d" % self.http_port,
                     "[::1]:%d" % self.http_port, "localhost.evil.example:%d" % self.http_port, "127.0.0.1.evil.example"):
            for path in ("/metrics", "/", "/healthz", "/rpc"):
                status, reply = self.status(host, path)
                self.assertEqual(status, 421, (host, path, reply))
        self.assertIn(b"421 Misdirected Request", self.status("evil.example")[1])
        self.assertIn(b"(127.0.0.1, localhost, ops.example)", self.status("evil.example")[1])

    def test_the_listeners_own_names_are_served(self):
        # The name decides, not the port: a tool may leave it out (Host: 127.0.0.1).
        for host in ("127.0.0.1:%d" % self.http_port, "LOCALHOST:%d" % self.http_port, "127.0.0.1", "localhost",
                     "ops.example:8080", "ops.example", None):
            status, reply = self.status(host)
            self.assertEqual(status, 200, (host, reply))
            self.assertIn(b"xhrpc_connections_total", reply)


class ConnectionLimit(OpsListenerTestCase):
    """At most --http-max-connections clients at once: more are answered 503 and closed
    at once, and the listener serves again as soon as one goes."""

    ARGS = ("--http-max-connections", "4")

    def read_all(self, s):
        """What the server sends on ``s`` until it closes; "reset" if it resets."""
        got = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return got
                got += chunk
        except ConnectionResetError:
            return "reset"

    def wait_served(self):
        deadline = time.monotonic() + HTTP_TIMEOUT
        while http_get(self.http_port, "/healthz")[0] != 200:
            self.assertLess(time.monotonic(), deadline, "the listener serves again")
            time.sleep(0.02)

    def test_clients_past_the_limit_get_503_and_are_closed_at_once(self):
        # Four clients that connect and wait hold the four places, and a fifth is
        # answered at accept and closed. The held four are then served. A client the
        # test closed just before (setUp's probe, the last round's) may not have been
        # seen to close yet and take a place: then one of the four is refused, and the
        # round is played again once that client is gone.
        for _ in range(3):
            idle = [socket.create_connection(("127.0.0.1", self.http_port), timeout=HTTP_TIMEOUT) for _ in range(4)]
            try:
                with socket.create_connection(("127.0.0.1", self.http_port), timeout=HTTP_TIMEOUT) as fifth:
                    reply = self.read_all(fifth)
                self.assertTrue(reply.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), reply)
                self.assertIn(b"\r\nRetry-After: 1\r\n", reply)
                statuses = []
                for s in idle:
                    try:
                        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    except OSError:
                        pass
                    got = self.read_all(s)
                    statuses.append(got if got == "reset" else got.split(b"\r\n", 1)[0].decode())
            finally:
                for s in idle:
                    s.close()
            if statuses == ["HTTP/1.1 200 OK"] * 4:
                break
            self.wait_served()
        self.assertEqual(statuses, ["HTTP/1.1 200 OK"] * 4)
        # Once they are gone, so is the refusal.
        self.wait_served()


class DescriptorLimit(unittest.TestCase):
    """Under a small descriptor limit (RLIMIT_NOFILE), 200 clients of the operations
    listener that connect and say nothing leave the daemon descriptors to serve its
    JSON-RPC clients: the listener holds its 64 (the default --http-max-connections)
    and closes the others at once."""

    def test_idle_clients_cannot_use_up_the_descriptors(self):
        import resource
        port = free_tcp_port()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        # The daemon inherits the limit: room for what it opens at start, for its
        # 64 operations clients, and a few more, far from 200.
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
        try:
            server = XhrpcServer(args=["--http-listen", "tcp:127.0.0.1:%d" % port]).start()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        self.addCleanup(server.stop)
        idle = []
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=HTTP_TIMEOUT)
            self.addCleanup(s.close)
            idle.append(s)
        # One more is refused at accept: so every one before it has been accepted (or
        # refused) by then, in order, and the descriptors they hold are taken.
        with socket.create_connection(("127.0.0.1", port), timeout=HTTP_TIMEOUT) as probe:
            self.assertTrue(probe.recv(65536).startswith(b"HTTP/1.1 503 "))
        with server.connect() as c:
            self.assertIn("version", c.call("server.info"))


class Exposure(unittest.TestCase):
    """Off the loopback only with principals that hold tokens; /metrics then needs an
    admin's token."""

    def run_briefly(self, args, config=None):
        srv = XhrpcServer(args=args, config=config)
        try:
            srv.start()
        except RuntimeError as e:
            return str(e)
        srv.stop()
        self.fail("xhrpcd started with %s" % args)

    def test_non_loopback_without_tokens_is_refused(self):
        err = self.run_briefly(["--http-listen", "tcp:0.0.0.0:%d" % free_tcp_port()])
        self.assertIn("non-loopback", err)

    def test_not_tcp_is_refused(self):
        err = self.run_briefly(["--http-listen", "unix:/tmp/x.sock"])
        self.assertIn("expected tcp:HOST:PORT", err)

    def test_metrics_need_an_admin_token_and_the_page_a_token_when_principals_have_tokens(self):
        port = free_tcp_port()
        srv = XhrpcServer(args=["--http-listen", "tcp:0.0.0.0:%d" % port],
                          principals=[{"name": "ops", "token": "admin-token-1", "admin": True},
                                      {"name": "app", "token": "app-token-2"}])
        srv.start()
        self.addCleanup(srv.stop)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.02)
        self.assertEqual(http_get(port, "/healthz")[0], 200)
        self.assertEqual(http_get(port, "/readyz")[0], 200)
        # With tokens the bearer token guards it, whatever name it was reached by.
        self.assertEqual(http_get(port, "/healthz", headers={"Host": "ops.internal.example"})[0], 200)
        status, headers, _ = http_get(port, "/metrics")
        self.assertEqual(status, 401)
        self.assertIn("Bearer", headers["www-authenticate"])
        self.assertEqual(http_get(port, "/metrics", headers={"Authorization": "Bearer wrong"})[0], 401)
        self.assertEqual(http_get(port, "/metrics", headers={"Authorization": "Bearer app-token-2"})[0], 403)
        status, _, body = http_get(port, "/metrics", headers={"Authorization": "Bearer admin-token-1"})
        self.assertEqual(status, 200)
        self.assertIn(b"xhrpc_connections_total", body)
        # The dashboard's files on a non-loopback listener need any principal's token.
        for path in ("/", "/dashboard.js", "/dashboard.css"):
            status, headers, _ = http_get(port, path)
            self.assertEqual(status, 401, path)
            self.assertIn("Bearer", headers["www-authenticate"])
            self.assertEqual(http_get(port, path, headers={"Authorization": "Bearer wrong"})[0], 401, path)
            self.assertEqual(http_get(port, path, headers={"Authorization": "Bearer app-token-2"})[0], 200, path)


if __name__ == "__main__":
    unittest.main()
