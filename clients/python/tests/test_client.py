"""The Python client itself, against a scripted peer on a socketpair (no server needed)."""

import json
import socket
import time
import unittest

from support import ScriptedPeer as Peer
from xhrpc import Client, ConnectionClosed, MalformedMessage, RPCError


class ClientTests(unittest.TestCase):
    # The peer is a fake on a socket pair that says what each test needs, not xhrpcd.
    CONTRACT_EXEMPT = "fake peer"

    def setUp(self):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.client = Client(a)
        self.peer = Peer(b)
        self.addCleanup(b.close)
        self.addCleanup(self.client.close)

    def answer_next(self, result=None, error=None, before=()):
        req = self.peer.read_line()
        msgs = list(before)
        if error is not None:
            msgs.append({"jsonrpc": "2.0", "error": error, "id": req["id"]})
        else:
            msgs.append({"jsonrpc": "2.0", "result": result, "id": req["id"]})
        self.peer.send(*msgs)
        return req

    def test_request_shape(self):
        self.client.send({"x": 1})
        self.assertEqual(self.peer.read_line(), {"x": 1})
        self.client.notify("ping", {"a": 1})
        self.assertEqual(self.peer.read_line(), {"jsonrpc": "2.0", "method": "ping", "params": {"a": 1}})
        self.client.notify("ping")
        self.assertEqual(self.peer.read_line(), {"jsonrpc": "2.0", "method": "ping"})

    def test_call_demultiplexes_by_id(self):
        import threading
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", self.client.call("m", {"k": 1})))
        t.start()
        req = self.peer.read_line()
        self.assertEqual(req, {"jsonrpc": "2.0", "method": "m", "params": {"k": 1}, "id": req["id"]})
        # A notification, a response to someone else, then ours split in two writes.
        self.peer.send({"jsonrpc": "2.0", "method": "onStateChange", "params": {"state": 1}},
                       {"jsonrpc": "2.0", "result": "other", "id": 999})
        ours = json.dumps({"jsonrpc": "2.0", "result": {"ok": True}, "id": req["id"]}).encode() + b"\n"
        self.peer.write(ours[:10])
        self.peer.write(ours[10:])
        t.join(5)
        self.assertEqual(out["r"], {"ok": True})
        self.assertEqual(self.client.pending(), [
            {"jsonrpc": "2.0", "method": "onStateChange", "params": {"state": 1}},
            {"jsonrpc": "2.0", "result": "other", "id": 999},
        ])

    def test_ids_do_not_match_across_types(self):
        self.peer.send({"jsonrpc": "2.0", "result": "string id", "id": "1"},
                       {"jsonrpc": "2.0", "result": "bool id", "id": True},
                       {"jsonrpc": "2.0", "result": "int id", "id": 1})
        self.assertEqual(self.client.wait_response(1, 5)["result"], "int id")

    def test_rpc_error(self):
        import threading
        box = {}

        def run():
            try:
                self.client.call("m")
            except RPCError as e:
                box["e"] = e

        t = threading.Thread(target=run)
        t.start()
        self.answer_next(error={"code": -32002, "message": "bad state", "data": {"reason": "invalid_state"}})
        t.join(5)
        e = box["e"]
        self.assertEqual((e.code, e.message, e.data, e.reason), (-32002, "bad state", {"reason": "invalid_state"},
                                                                 "invalid_state"))
        self.assertEqual(e.response["id"], 1)

    def test_batch_sorted_in_call_order(self):
        import threading
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", self.client.batch(
            [("a", None), ("b", [1], True), ("c", {"x": 1})])))
        t.start()
        batch = self.peer.read_line()
        self.assertEqual(batch, [
            {"jsonrpc": "2.0", "method": "a", "id": 1},
            {"jsonrpc": "2.0", "method": "b", "params": [1]},
            {"jsonrpc": "2.0", "method": "c", "params": {"x": 1}, "id": 2},
        ])
        self.peer.send([{"jsonrpc": "2.0", "result": "C", "id": 2}, {"jsonrpc": "2.0", "result": "A", "id": 1}])
        t.join(5)
        self.assertEqual(out["r"], [{"jsonrpc": "2.0", "result": "A", "id": 1},
                                    {"jsonrpc": "2.0", "result": "C", "id": 2}])

    def test_all_notification_batch_returns_at_once(self):
        self.assertEqual(self.client.batch([("a", None, True)]), [])
        self.assertEqual(self.peer.read_line(), [{"jsonrpc": "2.0", "method": "a"}])

    def test_notifications(self):
        n = [{"jsonrpc": "2.0", "method": "onProgress", "params": {"i": i}} for i in range(3)]
        self.peer.send(n[0], {"jsonrpc": "2.0", "result": 1, "id": 5}, n[1], n[2])
        got = self.client.wait_notification(lambda m: m["params"]["i"] == 1, 5)
        self.assertEqual(got, n[1])
        self.assertEqual(list(self.client.notifications(0.2)), [n[0], n[2]])
        self.assertEqual(self.client.pending(), [{"jsonrpc": "2.0", "result": 1, "id": 5}])

    def test_read_message_raw_and_order(self):
        self.peer.write(b'{"a":1}\n[1,2]\n"x"\n')
        self.assertEqual(self.client.read_message(5, raw=True), ({"a": 1}, b'{"a":1}'))
        self.assertEqual(self.client.read_message(5), [1, 2])
        self.assertEqual(self.client.read_message(5), "x")
        with self.assertRaises(TimeoutError):
            self.client.read_message(0.1)

    def test_malformed_line(self):
        self.peer.write(b'{"a":\n{"b":2}\n')
        with self.assertRaises(MalformedMessage) as cm:
            self.client.read_message(5)
        self.assertEqual(cm.exception.line, b'{"a":')
        self.assertEqual(self.client.read_message(5), {"b": 2})
        self.assertEqual(self.client.malformed, [b'{"a":'])

    def test_timeout_drops_late_response(self):
        with self.assertRaises(TimeoutError):
            self.client.call("slow", timeout=0.1)
        req = self.peer.read_line()
        self.peer.send({"jsonrpc": "2.0", "result": "late", "id": req["id"]}, {"jsonrpc": "2.0", "method": "onX"})
        self.assertEqual(self.client.read_message(5), {"jsonrpc": "2.0", "method": "onX"})
        self.assertEqual(self.client.pending(), [])

    def test_peer_close(self):
        self.peer.send({"jsonrpc": "2.0", "method": "onBye"})
        self.peer.sock.close()
        self.assertTrue(self.client.wait_closed(5))
        self.assertEqual(self.client.read_message(5), {"jsonrpc": "2.0", "method": "onBye"})
        with self.assertRaises(ConnectionClosed):
            self.client.read_message(5)
        with self.assertRaises((ConnectionClosed, OSError)):
            self.client.call("m", timeout=5)

    def test_unterminated_last_line_is_reported(self):
        self.peer.write(b'{"a":1}')
        self.peer.sock.close()
        self.assertTrue(self.client.wait_closed(5))
        with self.assertRaises(MalformedMessage):
            self.client.read_message(5)

    def test_half_close(self):
        self.client.send({"q": 1})
        self.client.shutdown_write()
        self.assertEqual(self.peer.read_line(), {"q": 1})
        with self.assertRaises(EOFError):
            self.peer.read_line()
        self.peer.send({"jsonrpc": "2.0", "result": 1, "id": 1})
        self.assertEqual(self.client.wait_response(1, 5), {"jsonrpc": "2.0", "result": 1, "id": 1})


if __name__ == "__main__":
    unittest.main()
