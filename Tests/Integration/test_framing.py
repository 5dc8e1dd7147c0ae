"""Framing and JSON-RPC 2.0 conformance of xhrpcd, over real Unix sockets.

The server reads any whitespace-separated JSON values (split anywhere) and writes one
compact message per line; calls run in arrival order, batches too.  These tests send
exact bytes and compare whole response objects (human-readable ``detail`` texts are
matched by type only, see support.py).  Absence of a reply is proven with a sentinel
call: replies come in order, so if the sentinel's answer is the next message, nothing
was answered before it.
"""

import json
import os
import random
import socket
import threading
import time
import unittest

from support import (
    ANY_STR, SERVER_INFO, ServerTestCase, err, invalid_params, invalid_request,
    is_compact_json_line, line, method_not_found, parse_error, req, result,
)
from xhrpc import ConnectionClosed, RPCError


INFO = "server.info"


def info(id):
    return result(SERVER_INFO, id)


class WireFormat(ServerTestCase):
    """What one call and its reply look like on the wire."""

    def test_reply_is_one_compact_line(self):
        s = self.server.raw_socket()
        self.addCleanup(s.close)
        s.sendall(b'{"jsonrpc":"2.0","method":"server.info","id":1}\n')
        data = b""
        deadline = time.monotonic() + 10
        while not data.endswith(b"\n") and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        self.assertTrue(data.endswith(b"\n"), "reply not terminated by a newline: %r" % data)
        self.assertEqual(data.count(b"\n"), 1, "exactly one line expected: %r" % data)
        self.assertTrue(is_compact_json_line(data[:-1]), "reply is not compact JSON: %r" % data)
        self.assertMessage(info(1), json.loads(data))

    def test_server_info_shape(self):
        c = self.connect()
        got = c.request(INFO, None, id=7)
        self.assertMessage(info(7), got)
        r = got["result"]
        self.assertTrue(r["name"], "name must not be empty")
        self.assertTrue(r["version"], "version must not be empty")
        self.assertGreaterEqual(r["uptimeSeconds"], 0)
        self.assertGreaterEqual(r["connections"], 1)

    def test_server_info_counts_connections(self):
        clients = [self.connect() for _ in range(5)]
        n = clients[0].call(INFO)["connections"]
        self.assertGreaterEqual(n, 5)

    def test_params_forms_accepted(self):
        c = self.connect()
        c.send_raw(line(req(INFO, 1, params={})) + line(req(INFO, 2, params=[])))
        self.assertNextMessages(c, [info(1), info(2)])

    def test_rpc_discover_is_the_openrpc_file(self):
        from support import REPO
        with open(REPO / "api" / "openrpc.json", encoding="utf-8") as f:
            document = json.load(f)
        c = self.connect()
        self.assertMessage(result(document, 3), c.request("rpc.discover", None, id=3))

    def test_ids_echoed_exactly(self):
        c = self.connect()
        ids = [0, -1, 2 ** 31, 9007199254740991, "", "abc", "ünï\u2603😀", 1.5]
        c.send_raw(b"".join(line(req(INFO, i)) for i in ids))
        self.assertNextMessages(c, [info(i) for i in ids])

    def raw_lines(self, payload, count):
        """Sends ``payload`` on a new raw connection; the first ``count`` reply lines, as bytes."""
        s = self.server.raw_socket()
        self.addCleanup(s.close)
        s.settimeout(10)
        s.sendall(payload)
        data = b""
        deadline = time.monotonic() + 10
        while data.count(b"\n") < count and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data.split(b"\n")[:count]

    def test_large_integer_ids_are_echoed_as_their_digits(self):
        # Issue 41: ids past Int64 came back as floats (1.8446744073709552e+19).
        ids = [b"9007199254740993", b"9223372036854775807", b"9223372036854775808", b"18446744073709551616",
               b"-9223372036854775809", b"123456789012345678901234567890123456789"]
        calls = b"".join(b'{"jsonrpc":"2.0","method":"server.info","id":' + i + b"}\n" for i in ids)
        batch = b"[" + b",".join(b'{"jsonrpc":"2.0","method":"nope","id":' + i + b"}" for i in ids) + b"]\n"
        got = self.raw_lines(calls + batch, len(ids) + 1)
        for i, reply in zip(ids, got):
            self.assertTrue(reply.endswith(b',"id":' + i + b"}"), reply[-80:])
        self.assertEqual(got[-1], b"[" + b",".join(
            b'{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found","data":{"method":"nope"}},"id":' + i + b"}"
            for i in ids) + b"]")

    def test_an_id_no_double_holds_is_an_invalid_request_before_the_call_runs(self):
        # Issue 41: `1e400` read as infinity, the call ran, and its answer said id null.
        c = self.connect()
        c.send_raw(b'{"jsonrpc":"2.0","method":"create","params":{"request":"made-by-1e400"},"id":1e400}\n'
                   b'[{"jsonrpc":"2.0","method":"create","params":{"request":"made-by-neg"},"id":-1E999}]\n'
                   + line(req("list", 3)))
        refusal = err(-32600, "Invalid Request", {"detail": "'id' is a number out of a double's range: use a string, "
                                                             "an integer or a smaller number"}, None)
        self.assertNextMessages(c, [refusal, [refusal], result([], 3)])

    def test_unpaired_surrogate_escapes_are_parse_errors_in_ids_and_data(self):
        # Issue 41: a lone surrogate became U+FFFD (an id echoed changed, data sent as EF BF BD).
        detail = "lexical error: unpaired UTF-16 surrogate escape (\\uD800-\\uDFFF without its pair) in string."
        for i, (text, offset) in enumerate([
                (b'{"jsonrpc":"2.0","method":"server.info","id":"\\ud800"}', 48),
                (b'{"jsonrpc":"2.0","method":"server.info","id":"a\\udc00"}', 49),
                (b'{"jsonrpc":"2.0","method":"nope","params":{"x":"\\ud83d\\u0041"},"id":1}', 50),
                (b'{"jsonrpc":"2.0","method":"nope","params":["\\udfff\\ud800"],"id":1}', 46)]):
            c = self.connect()  # offsets count from the connection's first byte
            c.send_raw(text + b"\n" + line(req(INFO, i)))
            self.assertNextMessages(c, [err(-32700, "Parse error", {"detail": detail, "offset": offset}, None), info(i)],
                                    note="input %r" % text)
        # A pair is one character, and an escaped backslash makes no escape.
        c.send_raw(b'{"jsonrpc":"2.0","method":"server.info","id":"\\ud83d\\ude00\\\\ud800"}\n')
        self.assertNextMessages(c, [info("\U0001F600\\ud800")])

    def test_null_id_is_a_request(self):
        # A null id is discouraged but makes a request (it has an id member), not a notification.
        c = self.connect()
        c.send_raw(b'{"jsonrpc":"2.0","method":"server.info","id":null}\n')
        self.assertNextMessages(c, [info(None)])

    def test_replies_in_arrival_order_when_pipelined(self):
        c = self.connect()
        n = 1000
        c.send_raw(b"".join(line(req(INFO, i)) for i in range(1, n + 1)))
        got = [c.read_message(20) for _ in range(n)]
        self.assertEqual([m.get("id") for m in got], list(range(1, n + 1)))
        for m in got:
            self.assertMessage(info(m["id"]), m)

    def test_unicode_round_trip(self):
        c = self.connect()
        name = "ünïcödé \u2603 😀 \"quoted\" back\\slash \t tab \u0001 nul\u0000end"
        c.send_raw(line(req(name, 1)))
        self.assertNextMessages(c, [method_not_found(name, 1)])

    def test_escaped_unicode_in_input(self):
        c = self.connect()
        c.send_raw(b'{"jsonrpc":"2.0","method":"\\u00fc\\ud83d\\ude00\\/x","id":"\\u0041"}\n')
        self.assertNextMessages(c, [method_not_found("ü😀/x", "A")])


class SplitAndConcatenated(ServerTestCase):
    """Values split across writes anywhere, several values in one write."""

    def test_one_byte_at_a_time(self):
        c = self.connect()
        data = line(req(INFO, 1)) + line(req(INFO, 2))
        for i in range(len(data)):
            c.send_raw(data[i:i + 1])
        self.assertNextMessages(c, [info(1), info(2)])

    def test_split_at_every_position(self):
        c = self.connect()
        msg = line(req(INFO, "split", params={}))
        for k in range(1, len(msg)):
            c.send_raw(msg[:k])
            c.send_raw(msg[k:])
            self.assertNextMessages(c, [info("split")], note="split at byte %d" % k)

    def test_split_inside_utf8_sequence(self):
        c = self.connect()
        msg = line(req("é😀", 1))
        cut = msg.index("😀".encode()) + 2  # inside the 4-byte sequence
        c.send_raw(msg[:cut])
        c.send_raw(msg[cut:])
        self.assertNextMessages(c, [method_not_found("é😀", 1)])

    def test_concatenated_without_whitespace(self):
        c = self.connect()
        data = b"".join(json.dumps(req(INFO, i), separators=(",", ":")).encode() for i in (1, 2, 3))
        data += b'[{"jsonrpc":"2.0","method":"server.info","id":4}]' + b'{"jsonrpc":"2.0","method":"server.info","id":5}'
        c.send_raw(data)  # no newline at all, and no separator between the values
        self.assertNextMessages(c, [info(1), info(2), info(3), [info(4)], info(5)])

    def test_concatenated_with_whitespace(self):
        c = self.connect()
        vals = [json.dumps(req(INFO, i)).encode() for i in range(1, 6)]
        data = b"  \t" + vals[0] + b" " + vals[1] + b"\r\n\r\n" + vals[2] + b"\t\t" + vals[3] + b"\n\n\n " + vals[4] + b"   "
        c.send_raw(data)
        self.assertNextMessages(c, [info(i) for i in range(1, 6)])

    def test_pretty_printed_multiline(self):
        c = self.connect()
        c.send_raw(json.dumps(req(INFO, 1, params={}), indent=4).encode() + b"\n" +
                   json.dumps([req(INFO, 2), req(INFO, 3)], indent="\t").encode())
        self.assertNextMessages(c, [info(1), [info(2), info(3)]])

    def test_whitespace_only_gets_no_reply(self):
        c = self.connect()
        c.send_raw(b"\n\n   \t\r\n \n")
        self.assertNoReplyBefore(c)

    def test_top_level_scalars_are_invalid_requests(self):
        c = self.connect()
        c.send_raw(b'1\n"text"\nnull\ntrue\nfalse 2.5 {}\n')
        self.assertNextMessages(c, [invalid_request(None)] * 7)


class Batches(ServerTestCase):

    def test_batch_in_order(self):
        c = self.connect()
        self.assertMessage([info(1), info(2), info(3)],
                           c.batch([(INFO, None), (INFO, {}), (INFO, [])]))

    def test_mixed_batch(self):
        c = self.connect()
        batch = [
            req(INFO, 1),
            req(INFO, notification=True),
            1,
            {"foo": "boo"},
            req("no.such.method", "2"),
            req(INFO, 3, params={"bogus": True}),
            req("no.such.method", notification=True),
            req(INFO, notification=True, params={"bogus": True}),
            {"jsonrpc": "2.0", "method": INFO, "params": "not structured", "id": 4},
            [],
            req(INFO, 5),
        ]
        c.send_raw(line(batch))
        self.assertNextMessages(c, [[
            info(1),
            invalid_request(None),
            invalid_request(None),
            method_not_found("no.such.method", "2"),
            invalid_params(3),
            invalid_request(4),
            invalid_request(None),
            info(5),
        ]])

    def test_all_notification_batch_gets_no_reply(self):
        c = self.connect()
        self.assertEqual(c.batch([(INFO, None, True), ("no.such.method", None, True),
                                  (INFO, {"bogus": 1}, True)]), [])
        self.assertNoReplyBefore(c)

    def test_empty_array(self):
        c = self.connect()
        c.send_raw(b"[]\n[ ]\n")
        self.assertNextMessages(c, [invalid_request(None), invalid_request(None)])

    def test_batch_of_invalid_values(self):
        # Spec examples: [1] and [1,2,3] give one Invalid Request per member, in an array.
        c = self.connect()
        c.send_raw(b"[1]\n[1,2,3]\n[[]]\n")
        self.assertNextMessages(c, [
            [invalid_request(None)],
            [invalid_request(None)] * 3,
            [invalid_request(None)],
        ])

    def test_invalid_json_batch(self):
        # Spec example: a batch that is not valid JSON gets one parse error (not an array).
        c = self.connect()
        c.send_raw(b'[\n  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},\n'
                   b'  {"jsonrpc": "2.0", "method"\n]\n')
        self.assertNextMessages(c, [parse_error()])
        c.send_raw(line(req(INFO, 9)))
        self.assertNextMessages(c, [info(9)])

    def test_large_batch(self):
        c = self.connect()
        n = 500
        got = c.batch([(INFO, None)] * n, timeout=20)
        self.assertEqual([r["id"] for r in got], list(range(got[0]["id"], got[0]["id"] + n)))
        for r in got:
            self.assertMessage(info(r["id"]), r)

    def test_duplicate_ids_in_batch_each_answered(self):
        c = self.connect()
        c.send_raw(line([req(INFO, 1), req(INFO, 1)]))
        self.assertNextMessages(c, [[info(1), info(1)]])

    def test_batch_and_single_calls_interleaved_in_order(self):
        c = self.connect()
        c.send_raw(line(req(INFO, 1)) + line([req(INFO, 2), req(INFO, 3)]) + line(req(INFO, 4)))
        self.assertNextMessages(c, [info(1), [info(2), info(3)], info(4)])


class StandardErrors(ServerTestCase):

    def test_parse_error_then_resync_on_next_line(self):
        # Spec example for -32700, followed by a valid call on the next line.
        c = self.connect()
        c.send_raw(b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]\n' + line(req(INFO, 2)))
        self.assertNextMessages(c, [parse_error(), info(2)])

    def test_parse_error_skips_rest_of_line(self):
        # After a parse error the server resynchronises at the next newline: the
        # call that follows on the same line is skipped, the next line is served.
        c = self.connect()
        c.send_raw(b'{"a":tru} ' + json.dumps(req(INFO, 5)).encode() + b"\n" + line(req(INFO, 6)))
        self.assertNextMessages(c, [parse_error(), info(6)])
        self.assertNoReplyBefore(c)

    def test_parse_errors_of_many_kinds(self):
        c = self.connect()
        # Each error is detected before the end of its line.
        bad = [b"}", b"]", b'{"a" 1}', b"[1,]", b'{"a":1,}', b"'single'", b'{"a":"\\x"}',
               b"\x00", b"nulx", b"[1 2]", b'{"jsonrpc":"2.0",,}', b"@"]
        for i, b in enumerate(bad):
            c.send_raw(b + b"\n" + line(req(INFO, i)))
            self.assertNextMessages(c, [parse_error(), info(i)], note="input %r" % b)

    def test_parse_error_found_at_the_newline_resyncs_there(self):
        # These lines are only known to be wrong when the newline arrives (an
        # unfinished literal, a string cut by a raw newline).  The newline that
        # revealed the error ends the bad line: the next line is a fresh start, as a
        # person typing into socat would expect.
        c = self.connect()
        for i, b in enumerate([b"nul", b"tru", b"-", b'"unterminated', b'{"a":"x']):
            c.send_raw(b + b"\n" + line(req(INFO, i)))
            self.assertNextMessages(c, [parse_error(), info(i)], note="input %r" % b)

    def test_invalid_utf8_is_a_parse_error(self):
        c = self.connect()
        c.send_raw(b'{"jsonrpc":"2.0","method":"\xff\xfe","id":1}\n' + line(req(INFO, 2)))
        self.assertNextMessages(c, [parse_error(), info(2)])

    def test_invalid_request_spec_example(self):
        c = self.connect()
        c.send_raw(b'{"jsonrpc": "2.0", "method": 1, "params": "bar"}\n')
        self.assertNextMessages(c, [invalid_request(None)])

    def test_invalid_requests(self):
        c = self.connect()
        cases = [
            ({"jsonrpc": "1.0", "method": INFO, "id": 1}, 1),
            ({"method": INFO, "id": 2}, 2),
            ({"jsonrpc": 2.0, "method": INFO, "id": 3}, 3),
            ({"jsonrpc": "2.0", "id": 4}, 4),
            ({"jsonrpc": "2.0", "method": None, "id": 5}, 5),
            ({"jsonrpc": "2.0", "method": INFO, "params": "x", "id": 6}, 6),
            ({"jsonrpc": "2.0", "method": INFO, "params": 7, "id": 7}, 7),
            ({"jsonrpc": "2.0", "method": INFO, "params": None, "id": 8}, 8),
            ({"jsonrpc": "2.0", "method": INFO, "id": {"a": 1}}, None),
            ({"jsonrpc": "2.0", "method": INFO, "id": [9]}, None),
            ({"jsonrpc": "2.0", "method": INFO, "id": True}, None),
            ({}, None),
        ]
        c.send_raw(b"".join(line(m) for m, _ in cases))
        self.assertNextMessages(c, [invalid_request(id) for _, id in cases])

    def test_method_not_found(self):
        c = self.connect()
        c.send_raw(b'{"jsonrpc": "2.0", "method": "foobar", "id": "1"}\n'
                   b'{"jsonrpc": "2.0", "method": "rpc.nothing", "id": 2}\n'
                   b'{"jsonrpc": "2.0", "method": "", "id": 3}\n')
        self.assertNextMessages(c, [method_not_found("foobar", "1"), method_not_found("rpc.nothing", 2),
                                    method_not_found("", 3)])

    def test_method_not_found_notification_is_silent(self):
        c = self.connect()
        c.notify("foobar")
        c.notify("foobar", {"x": 1})
        self.assertNoReplyBefore(c)

    def test_invalid_params(self):
        c = self.connect()
        c.send_raw(line(req(INFO, 1, params={"bogus": 1})) + line(req(INFO, 2, params=[1])))
        self.assertNextMessages(c, [invalid_params(1), invalid_params(2)])

    def test_invalid_params_notification_is_silent(self):
        c = self.connect()
        c.notify(INFO, {"bogus": 1})
        self.assertNoReplyBefore(c)

    def test_rpc_error_raised_by_client(self):
        c = self.connect()
        with self.assertRaises(RPCError) as cm:
            c.call("foobar")
        self.assertEqual((cm.exception.code, cm.exception.message, cm.exception.data),
                         (-32601, "Method not found", {"method": "foobar"}))

    @unittest.skip("no method fails with -32603 on purpose; the internal-error path is tested in Swift")
    def test_internal_error(self):
        pass


class Limits(ServerTestCase):
    """Size limits with the default --max-message-bytes (16 MiB)."""

    def test_10_mb_message_is_answered(self):
        c = self.connect()
        pad = "x" * (10 * 1000 * 1000)
        c.send(req(INFO, 1, params={"pad": pad}))
        got = c.read_message(60)
        if "result" in got:
            self.assertMessage(info(1), got)
        else:
            self.assertMessage(invalid_params(1), got)
        # The connection stays open and keeps serving.
        c.send(req(INFO, 2))
        self.assertNextMessages(c, [info(2)])
        self.assertFalse(c.closed_by_peer)

    def test_10_mb_of_whitespace_between_calls(self):
        c = self.connect()
        c.send_raw(line(req(INFO, 1)) + b" " * (10 << 20) + line(req(INFO, 2)))
        self.assertNextMessages(c, [info(1), info(2)], timeout=60)

    def test_over_limit_closes_only_that_connection(self):
        other = self.connect()
        c = self.connect()
        big = b'{"jsonrpc":"2.0","method":"server.info","id":1,"params":{"pad":"' + b"y" * (17 << 20) + b'"}}\n'
        send_error = []

        def push():
            try:
                c.send_raw(big)
            except OSError as e:  # the server may close before it has read everything
                send_error.append(e)

        t = threading.Thread(target=push, daemon=True)
        t.start()
        got = c.read_message(60)
        self.assertMessage(err(-32009, ANY_STR, {"reason": "message_too_large", "limit": 16 << 20}, None), got)
        self.assertTrue(c.wait_closed(30), "connection not closed after an over-limit message")
        t.join(30)
        with self.assertRaises(ConnectionClosed):
            c.read_message(5)
        self.assertMessage(info(2), other.request(INFO, None, id=2))
        fresh = self.connect()
        self.assertMessage(info(3), fresh.request(INFO, None, id=3))


class SmallLimit(ServerTestCase):
    """A server with --max-message-bytes 4096."""

    SERVER_ARGS = ("--max-message-bytes", "4096")

    def test_under_limit_answered(self):
        c = self.connect()
        got = c.request(INFO, {"pad": "z" * 3000}, id=1)
        self.assertMessage(invalid_params(1), got)

    def test_over_limit_closes(self):
        c = self.connect()
        other = self.connect()
        c.send_raw(line(req(INFO, 1, params={"pad": "z" * 5000})) + line(req(INFO, 2)))
        self.assertNextMessages(c, [err(-32009, ANY_STR, {"reason": "message_too_large", "limit": 4096}, None)])
        self.assertTrue(c.wait_closed(10))
        self.assertEqual(c.pending(), [], "nothing may follow the limit error")
        self.assertMessage(info(3), other.request(INFO, None, id=3))

    def test_unterminated_string_over_limit_closes(self):
        c = self.connect()
        c.send_raw(b'{"jsonrpc":"2.0","method":"' + b"m" * 8000)
        self.assertNextMessages(c, [err(-32009, ANY_STR, {"reason": "message_too_large", "limit": 4096}, None)])
        self.assertTrue(c.wait_closed(10))

    def test_many_small_messages_in_one_write_are_not_one_big_message(self):
        c = self.connect()
        n = 200  # about 10 KB in one write, each value far under the limit
        c.send_raw(b"".join(line(req(INFO, i)) for i in range(n)))
        self.assertNextMessages(c, [info(i) for i in range(n)])


class Connections(ServerTestCase):

    def test_50_concurrent_connections(self):
        clients = [self.connect() for _ in range(50)]
        errors = []
        results = {}
        start = threading.Barrier(50, timeout=20)

        def work(k, c):
            try:
                start.wait()
                got = []
                for j in range(20):
                    got.append(c.request(INFO, None, id="%d-%d" % (k, j), timeout=20))
                batch = c.batch([(INFO, None)] * 5, timeout=20)
                results[k] = (got, batch)
            except Exception as e:  # reported below with the connection number
                errors.append((k, repr(e)))

        threads = [threading.Thread(target=work, args=(k, c), daemon=True) for k, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(sorted(results), list(range(50)))
        for k, (got, batch) in results.items():
            for j, m in enumerate(got):
                self.assertMessage(info("%d-%d" % (k, j)), m)
            self.assertEqual(len(batch), 5)
            for m in batch:
                self.assertMessage(info(m["id"]), m)
        self.assertGreaterEqual(clients[0].call(INFO)["connections"], 50)

    def test_random_bytes_do_not_disturb_another_connection(self):
        good = self.connect()
        rng = random.Random(20240611)
        noise_clients = []
        for round_ in range(5):
            bad = self.connect()
            noise_clients.append(bad)
            noise = bytes(rng.getrandbits(8) for _ in range(200_000))
            for off in range(0, len(noise), 4096):
                try:
                    bad.send_raw(noise[off:off + 4096])
                except OSError:
                    break  # the server may close a connection that sends garbage
                if off % 40960 == 0:
                    self.assertMessage(info(off), good.request(INFO, None, id=off), "round %d" % round_)
            try:
                bad.shutdown_write()
            except OSError:
                pass
        for bad in noise_clients:
            self.assertTrue(bad.wait_closed(30), "a connection that sent noise then EOF was not closed")
            while True:
                try:
                    m = bad.read_message(5)
                except ConnectionClosed:
                    break
                # Noise can only earn errors, never a result, and never an id.
                self.assertIn("error", m)
                self.assertIsNone(m["id"])
                self.assertIn(m["error"]["code"], (-32700, -32600, -32009))
            self.assertEqual(bad.malformed, [], "the server wrote a line that is not JSON")
        self.assertMessage(info("after"), good.request(INFO, None, id="after"))

    def test_half_close_still_gets_replies(self):
        c = self.connect()
        c.send_raw(line(req(INFO, 1)) + line([req(INFO, 2), req(INFO, 3)]) + line(req(INFO, 4)))
        c.shutdown_write()
        self.assertNextMessages(c, [info(1), [info(2), info(3)], info(4)])
        self.assertTrue(c.wait_closed(10), "server did not close after answering a half-closed client")
        self.assertEqual(c.pending(), [])

    def test_half_close_inside_a_value_is_a_parse_error(self):
        c = self.connect()
        c.send_raw(line(req(INFO, 1)) + b'{"jsonrpc":"2.0","method":"server.info","id":2')
        c.shutdown_write()
        self.assertNextMessages(c, [info(1), parse_error()])
        self.assertTrue(c.wait_closed(10))

    def test_last_value_without_newline_before_eof(self):
        c = self.connect()
        c.send_raw(json.dumps(req(INFO, 1)).encode())
        c.shutdown_write()
        self.assertNextMessages(c, [info(1)])
        self.assertTrue(c.wait_closed(10))

    def test_abrupt_close_with_pending_calls_does_not_hurt_server(self):
        for _ in range(20):
            s = self.server.raw_socket()
            s.sendall(b"".join(line(req(INFO, i)) for i in range(200)))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        c = self.connect()
        self.assertMessage(info(1), c.request(INFO, None, id=1))

    def test_client_that_never_reads(self):
        # The server must keep serving others while one client does not read its replies.
        lazy = self.server.raw_socket()
        self.addCleanup(lazy.close)
        lazy.setblocking(False)
        msg = line(req(INFO, 1))
        sent = 0
        for _ in range(20000):
            try:
                sent += lazy.send(msg * 100)
            except BlockingIOError:
                break
            except OSError:
                break  # closed by the server for not reading: also fine
        c = self.connect()
        self.assertMessage(info(2), c.request(INFO, None, id=2))

    def test_deeply_nested_value(self):
        c = self.connect()
        depth = 100_000
        c.send_raw(b'{"jsonrpc":"2.0","method":"server.info","id":1,"params":{"a":' +
                   b"[" * depth + b"]" * depth + b"}}\n")
        got = c.read_message(30)
        self.assertIn("error", got, "deep nesting: %r" % (got,))
        self.assertIn(got["error"]["code"], (-32700, -32600, -32602, -32009))
        other = self.connect()
        self.assertMessage(info(2), other.request(INFO, None, id=2))


class TcpListener(ServerTestCase):
    """The same protocol over a loopback TCP listener (port picked free beforehand)."""

    TCP = True

    def test_call_and_batch_over_tcp(self):
        c = self.server.connect_tcp()
        self.addCleanup(c.close)
        self.assertMessage(info(1), c.request(INFO, None, id=1))
        c.send_raw(b'{"jsonrpc":"2.0",' + b'"method":"server.info","id":2}{"jsonrpc"' + b':"2.0","method":"x","id":3}\n')
        self.assertNextMessages(c, [info(2), method_not_found("x", 3)])

    def test_half_close_over_tcp(self):
        c = self.server.connect_tcp()
        self.addCleanup(c.close)
        c.send_raw(line(req(INFO, 1)) + line(req(INFO, 2)))
        c.shutdown_write()
        self.assertNextMessages(c, [info(1), info(2)])
        self.assertTrue(c.wait_closed(10))

    def test_unix_and_tcp_side_by_side(self):
        t = self.server.connect_tcp()
        self.addCleanup(t.close)
        u = self.connect()
        self.assertMessage(info("t"), t.request(INFO, None, id="t"))
        self.assertMessage(info("u"), u.request(INFO, None, id="u"))


if __name__ == "__main__":
    unittest.main()
