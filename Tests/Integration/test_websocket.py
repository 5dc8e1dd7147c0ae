"""The WebSocket transport (``--listen ws:HOST:PORT`` and ``wss:HOST:PORT``) through the
real xhrpcd, with a real WebSocket client (the ``websockets`` package, installed in the
test virtual environment by ``make test-deps``): one JSON-RPC message or batch per text
frame, principals and ``auth``, notifications, server → client requests, the ``Origin``
allowlist, close codes 1003 (binary) and 1009 (too big), fragmented messages, ping/pong,
and a client that goes mid-stream leaving the server serving others.

Every wait has a deadline; no test sleeps to let something happen.
"""

import json
import socket
import ssl
import time
import unittest

from support import ServerTestCase, free_tcp_ports
from test_request_object import proc_kib
from test_principals import ALICE, BOB

import certs  # Tests/Fixtures, on sys.path once support is imported  # noqa: E402

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

WAIT = 10
ORIGIN = "http://dashboard.example:8080"
MAX_MESSAGE = 64 * 1024


def msg(method, params, id):
    """A JSON-RPC call as a dict."""
    m = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        m["params"] = params
    return m


class WebSocketTestCase(ServerTestCase):
    """One server with a ws: and a wss: listener on loopback, principals alice and bob
    (so clients must ``auth``), an allowed origin and a small message limit."""

    UPSTREAM = True
    PRINCIPALS = (ALICE, BOB)
    ws_port = None
    wss_port = None
    cert_dir = None

    @classmethod
    def server_args(cls):
        import tempfile
        cls.cert_dir = tempfile.mkdtemp(prefix="xhrpc-ws-certs-", dir="/tmp")
        cls.certs = certs.make_all(cls.cert_dir)
        cls.ws_port, cls.wss_port = free_tcp_ports(2)
        return ("--listen", "ws:127.0.0.1:%d" % cls.ws_port, "--listen", "wss:127.0.0.1:%d" % cls.wss_port,
                "--tls-cert", cls.certs["good_cert"], "--tls-key", cls.certs["good_key"],
                "--ws-origin", ORIGIN, "--max-message-bytes", str(MAX_MESSAGE))

    def ws(self, token=None, secure=False, **kw):
        """A WebSocket client (closed at cleanup); with ``token``, authenticated with it."""
        if secure:
            context = ssl.create_default_context(cafile=self.certs["ca"])
            c = self.enterContext(connect("wss://localhost:%d/" % self.wss_port, ssl=context, open_timeout=WAIT,
                                          close_timeout=2, max_size=None, **kw))
        else:
            c = self.enterContext(connect("ws://127.0.0.1:%d/rpc" % self.ws_port, open_timeout=WAIT,
                                          close_timeout=2, max_size=None, **kw))
        if token is not None:
            self.assertEqual(self.call(c, "auth", {"token": token}, 1)["result"]["principal"], token.split("-")[0])
        return c

    def call(self, c, method, params=None, id=1):
        """Sends one call in one text frame; returns its response (notifications skipped)."""
        c.send(json.dumps(msg(method, params, id)))
        return self.response(c, id)

    def response(self, c, id):
        deadline = time.monotonic() + WAIT
        while True:
            m = json.loads(c.recv(timeout=max(0.01, deadline - time.monotonic())))
            if isinstance(m, list) or m.get("id") == id:
                return m

    def closed_with(self, c):
        """The close code the server sent, reading until the connection closes."""
        deadline = time.monotonic() + WAIT
        try:
            while time.monotonic() < deadline:
                c.recv(timeout=max(0.01, deadline - time.monotonic()))
        except ConnectionClosed as e:
            return e.rcvd.code if e.rcvd else None
        self.fail("the server did not close the WebSocket")

    def test_calls_and_batches_after_auth(self):
        c = self.ws()
        # Unauthenticated: only auth is served.
        refused = self.call(c, "server.info", None, 7)
        self.assertIn("error", refused)
        self.assertEqual(self.call(c, "auth", {"token": ALICE["token"]}, 8)["result"]["principal"], "alice")
        self.assertIn("version", self.call(c, "server.info", None, 9)["result"])
        # A batch in one frame gets one batch back in one frame.
        c.send(json.dumps([msg("server.info", None, 10), msg("server.info", None, 11)]))
        batch = json.loads(c.recv(timeout=WAIT))
        self.assertEqual(sorted(m["id"] for m in batch), [10, 11])

    def test_large_replies_come_one_per_frame_among_small_ones(self):
        # rpc.discover's reply (about 100 KB) is written from its own memory, apart from
        # the replies queued around it (RPCConnection.directWriteBytes): each reply is
        # still one text frame, in order, over ws and wss.
        for secure in (False, True):
            c = self.ws(token=ALICE["token"], secure=secure)
            c.send("\n".join(json.dumps(msg(m, None, i)) for i, m in
                              enumerate(["server.info", "rpc.discover", "server.info", "rpc.discover"], 20)))
            frames = [c.recv(timeout=WAIT) for _ in range(4)]
            replies = [json.loads(f) for f in frames]
            self.assertEqual([r["id"] for r in replies], [20, 21, 22, 23])
            self.assertGreater(len(frames[1]), 65536)
            self.assertEqual(replies[1]["result"]["openrpc"], replies[3]["result"]["openrpc"])
            self.assertIn("version", replies[2]["result"])

    def test_wss_with_the_test_ca(self):
        c = self.ws(token=BOB["token"], secure=True)
        self.assertIn("version", self.call(c, "server.info", None, 2)["result"])

    def test_notifications_reach_the_ws_client(self):
        c = self.ws(token=ALICE["token"])
        url = self.upstream.url("/bytes/6")
        c.send(json.dumps([msg("create", {"request": "w1"}, 2),
                           msg("open", {"request": "w1", "method": "GET", "url": url}, 3),
                           msg("send", {"request": "w1"}, 4)]))
        states = []
        deadline = time.monotonic() + WAIT
        while 5 not in states and time.monotonic() < deadline:
            m = json.loads(c.recv(timeout=max(0.01, deadline - time.monotonic())))
            if isinstance(m, dict) and m.get("method") == "onStateChange":
                states.append(m["params"]["state"])
        self.assertEqual(states, [1, 2, 3, 4, 5])

    def test_server_to_client_requests_reach_a_ws_interceptor(self):
        icp = self.ws(token=ALICE["token"])
        reg = self.call(icp, "intercept.register", {"events": ["willSendRequest"]}, 2)
        self.assertTrue(reg["result"]["interceptor"].startswith("icp_"))
        other = self.ws(token=ALICE["token"])
        url = self.upstream.url("/bytes/6")
        other.send(json.dumps(msg("fetch", {"url": url}, 5)))
        question = json.loads(icp.recv(timeout=WAIT))
        self.assertEqual(question["method"], "willSendRequest")
        self.assertTrue(str(question["id"]).startswith("srv-"))
        self.assertEqual(question["params"]["url"], url)
        icp.send(json.dumps({"jsonrpc": "2.0", "result": True, "id": question["id"]}))
        fetched = self.response(other, 5)
        self.assertEqual(fetched["result"]["status"], 200)
        self.assertTrue(self.call(icp, "intercept.unregister", {"interceptor": reg["result"]["interceptor"]}, 6)["result"])

    def test_a_disallowed_origin_is_refused_with_403(self):
        with self.assertRaises(InvalidStatus) as raised:
            connect("ws://127.0.0.1:%d/" % self.ws_port, origin="http://evil.example", open_timeout=WAIT)
        self.assertEqual(raised.exception.response.status_code, 403)

    def test_an_allowed_origin_works(self):
        c = self.ws(token=ALICE["token"], origin=ORIGIN)
        self.assertIn("version", self.call(c, "server.info", None, 3)["result"])

    def test_a_binary_frame_closes_with_1003(self):
        c = self.ws(token=ALICE["token"])
        c.send(b'{"jsonrpc":"2.0","method":"server.info","id":1}')
        self.assertEqual(self.closed_with(c), 1003)

    def test_an_oversize_message_closes_with_1009(self):
        c = self.ws(token=ALICE["token"])
        c.send(json.dumps(msg("server.info", {"pad": "x" * (MAX_MESSAGE + 10)}, 4)))
        self.assertEqual(self.closed_with(c), 1009)

    def test_a_fragmented_message_is_reassembled(self):
        c = self.ws(token=ALICE["token"])
        text = json.dumps(msg("server.info", None, 21))
        c.send([text[:5], text[5:17], text[17:]])
        self.assertIn("version", self.response(c, 21)["result"])

    def test_a_frame_of_incomplete_json_is_a_parse_error_of_its_own(self):
        # Issue 41: a text frame is one message. One that holds incomplete JSON is
        # answered -32700 alone, and is never joined to the next frame (it was: the
        # next frame's call then failed with it, unanswered).
        c = self.ws(token=ALICE["token"])
        text = json.dumps(msg("server.info", None, 30))
        for cut in (1, len(text) // 2, len(text) - 1):
            c.send(text[:cut])
            got = json.loads(c.recv(timeout=WAIT))
            self.assertEqual((got["id"], got["error"]["code"]), (None, -32700), text[:cut])
            # The next frame is read afresh: a whole call is answered.
            self.assertIn("version", self.call(c, "server.info", None, 31)["result"])
        # A bare number is complete at the end of its frame (it waited for a delimiter).
        c.send("42")
        got = json.loads(c.recv(timeout=WAIT))
        self.assertEqual((got["id"], got["error"]["code"]), (None, -32600))

    def test_ping_is_answered_with_pong(self):
        c = self.ws()
        self.assertTrue(c.ping(b"are you there").wait(WAIT))

    def test_a_client_that_pings_and_never_reads_is_held_back(self):
        # Every ping is answered with a pong; a client that sends pings and never reads
        # made the server queue pongs without bound (hundreds of MB in seconds), below
        # the connection's back-pressure, which sees messages only. Now the server stops
        # reading it while about 1 MiB waits to be sent: the client's sends block.
        import base64
        import os
        import struct
        s = socket.create_connection(("127.0.0.1", self.ws_port), timeout=WAIT)
        self.addCleanup(s.close)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        self.assertIn(b" 101 ", head.split(b"\r\n")[0])

        def frame(opcode, payload):
            mask = os.urandom(4)
            return (bytes([0x80 | opcode, 0x80 | len(payload)]) + mask
                    + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        auth = json.dumps(msg("auth", {"token": ALICE["token"]}, 1)).encode()
        assert len(auth) < 126
        s.sendall(frame(1, auth))
        before = proc_kib(self.server.proc.pid, "VmRSS")
        ping = frame(9, b"p" * 125)
        burst = ping * 1000  # 131 KB of pings, 125 KB of pongs
        s.settimeout(2)
        sent = 0
        blocked = False
        for _ in range(512):  # at most 64 MiB of pings
            try:
                s.sendall(burst)
            except socket.timeout:
                blocked = True
                break
            sent += len(burst)
        grown = proc_kib(self.server.proc.pid, "VmRSS") - before
        self.assertTrue(blocked, "the server read %d bytes of pings from a client that never reads" % sent)
        self.assertLess(grown, 32 * 1024, "RSS grew %d KiB" % grown)
        # The server still serves others.
        c = self.ws(ALICE["token"])
        self.assertEqual(self.call(c, "server.info")["result"]["name"], "xhrpcd")

    def test_a_client_that_goes_mid_stream_leaves_the_server_serving(self):
        # Half a frame, then the socket closes without a close frame.
        s = socket.create_connection(("127.0.0.1", self.ws_port), timeout=WAIT)
        self.addCleanup(s.close)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            self.assertTrue(chunk, "the server closed during the upgrade")
            head += chunk
        self.assertIn(b" 101 ", head.split(b"\r\n")[0])
        self.assertIn(b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n", head)
        s.sendall(bytes([0x81, 0xFE, 0x01, 0x00, 1, 2, 3, 4]) + b"{" * 20)  # 256 bytes announced, 20 sent
        s.close()
        # A client in the middle of a fragmented message goes too (TCP closed, no close frame).
        c = self.ws(token=BOB["token"])
        c.socket.sendall(bytes([0x01, 0x85, 9, 9, 9, 9]) + bytes(b ^ 9 for b in b'{"jso'))
        c.socket.close()
        # The server still serves a new client and one that was already there.
        other = self.ws(token=ALICE["token"])
        self.assertIn("version", self.call(other, "server.info", None, 30)["result"])
        self.assertIn("version", self.call(self.ws(token=BOB["token"], secure=True), "server.info", None, 31)["result"])

    def test_plain_http_on_a_ws_listener_is_answered_426(self):
        with socket.create_connection(("127.0.0.1", self.ws_port), timeout=WAIT) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        self.assertTrue(data.startswith(b"HTTP/1.1 426 "), data[:100])


if __name__ == "__main__":
    unittest.main()
