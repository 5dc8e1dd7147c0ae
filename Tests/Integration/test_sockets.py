"""Raw TCP/TLS sockets (issue 13): the ``socket.*`` methods of xhrpcd and the client's
``Socket`` / ``AsyncSocket`` helpers, against peers this module starts on 127.0.0.1
and ::1 (Tests/Fixtures/socket_peers.py) and a real redis-server.

Covered: byte-exact round trips (all 256 byte values, UTF-8 text, an incomplete
character held back, invalid UTF-8 refused), create+connect+write in one batch with a
chosen name, every state through ``getState`` and the calls each state refuses, the
peer closing first, refused and unresolvable destinations, a TLS handshake that never
answers timed out, TLS verified against a CA made at test time and refused for a
self-signed certificate, another name or an unknown CA until verification is disabled,
64 MiB from a peer read byte-exact with the server's memory bounded by back-pressure
(its own buffer, and the principal's ``bufferedBytes``), writes to a peer that reads
nothing until ``limit_exceeded`` with nothing lost, ``disconnect`` flushing what is
queued, the egress policy (an address denied without a packet sent, a host denied at
connect), principals (another's handle, ``list``, ``subscribe``, release when the
creating connection closes, detach/attach), ``--request-ttl`` and the ``sockets``
limit.

Every wait has a deadline; nothing sleeps to let something happen.  Where the server
sends no event (a UTF-8 character completed in a buffer that never went empty, a
socket released after its connection closed), the test polls with a short, growing
pause until a deadline.
"""

import asyncio
import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from support import ANY_STR, ServerTestCase, free_tcp_port, pattern
from test_request_object import note, poll_until, proc_kib
from xhrpc import AsyncClient, RPCError, Socket, SocketError

import certs  # Tests/Fixtures, on sys.path once support is imported  # noqa: E402
from socket_peers import (Peer, Silent, echo, hold_then_read, read_to_eof,  # noqa: E402
                          say_then_close, say_then_cut, send_then_close, tls_context)

MIB = 1 << 20
ALICE = {"name": "alice", "token": "alice-" + "a" * 40}
BOB = {"name": "bob", "token": "bob-" + "b" * 40}
DENIED = "Denied by egress policy"
STATE_NAMES = ["Prepared", "Connecting", "Open", "Disconnecting", "Disconnected"]
REDIS = "/usr/bin/redis-server"


def b64(data):
    return base64.b64encode(data).decode("ascii")


def rpc_error(call):
    """The ``RPCError`` that ``call()`` raises (an AssertionError if it returns)."""
    try:
        value = call()
    except RPCError as e:
        return e
    raise AssertionError("expected an RPCError, got the result %r" % (value,))


def reason_of(c, method, params):
    try:
        c.call(method, params)
    except RPCError as e:
        return e.reason
    return None


def about(handle, *methods):
    """A notification predicate: one of ``methods`` (any socket one if none) about ``handle``."""
    def match(m):
        params = m.get("params")
        return (isinstance(params, dict) and params.get("socket") == handle
                and (m["method"] in methods if methods else m["method"].startswith("socket.")))
    return match


def next_event(c, handle, timeout=10):
    """The next socket notification about ``handle`` on ``c``, as ``(method, params)``."""
    n = c.wait_notification(about(handle), timeout)
    return n["method"], n["params"]


def state(c, handle):
    return c.call("socket.getState", {"socket": handle})


def resp(*args):
    """A RESP array of bulk strings: a redis command."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class SocketCase(ServerTestCase):
    """Peers started per test and stopped at its end."""

    def peer(self, serve, **kw):
        p = Peer(serve, **kw).start()
        self.addCleanup(p.stop)
        return p

    def silent(self, host="127.0.0.1"):
        s = Silent(host)
        self.addCleanup(s.close)
        return s

    def open_socket(self, c, host, port, **kw):
        """A ``Socket`` connected to ``host:port`` (Open), released at the end."""
        s = c.socket(host, port, **kw)
        self.addCleanup(s.__exit__)
        s.connect()
        s.wait_open(timeout=10)
        return s

    def create_connect(self, c, host, port, **params):
        """``socket.create`` and ``socket.connect`` in one batch; the handle."""
        name = params.pop("socket", "py-" + os.urandom(6).hex())
        answers = c.batch([("socket.create", dict({"host": host, "port": port, "socket": name}, **params)),
                           ("socket.connect", {"socket": name})])
        self.assertEqual([a.get("result") for a in answers], [{"socket": name}, True], answers)
        return name

    def assertEvent(self, c, handle, method, params=None, timeout=10):
        """The next socket notification about ``handle`` is ``method`` (with exactly
        ``params``, ANY_* allowed, when given); its params are returned."""
        got = next_event(c, handle, timeout)
        self.assertEqual(got[0], method, "notifications about %s: expected %s, got %r" % (handle, method, got))
        if params is not None:
            self.assertMessage(params, got[1], method)
        return got[1]

    def assertState(self, c, handle, number):
        self.assertEqual(state(c, handle), {"state": number, "stateName": STATE_NAMES[number]})

    def assertInvalidState(self, c, method, params, number):
        e = rpc_error(lambda: c.call(method, params))
        self.assertMessage({"code": -32002, "data": {"reason": "invalid_state", "state": number,
                                                     "stateName": STATE_NAMES[number]}},
                           {"code": e.code, "data": e.data}, method)

    def write_pattern(self, s, size):
        """Writes the first ``size`` bytes of the pattern, a MiB a call, each accepted whole."""
        for offset in range(0, size, MIB):
            self.assertEqual(s.write(b"".join(pattern.iter_pattern(MIB, offset=offset))), MIB)
        return size

    def assertClosedWithAllDelivered(self, s, peer, size):
        """``s`` closes without an error and its peer got exactly the pattern's ``size`` bytes."""
        s.wait_closed(timeout=10)
        peer.wait_for(lambda p: p.eofs >= 1, 10, "the peer sees the end")
        self.assertEqual(peer.snapshot()["received"], size)
        with peer.cond:
            self.assertEqual(peer.sha256.hexdigest(), pattern.pattern_sha256(size))
        self.assertIsNone(s.error)

    def assertFailed(self, c, handle, error, message_prefix="", timeout=10):
        """onErr with ``error`` (its message starting with ``message_prefix``), then onClose,
        then state Disconnected; the message is returned."""
        params = self.assertEvent(c, handle, "socket.onErr",
                                  {"socket": handle, "error": error, "message": ANY_STR}, timeout)
        self.assertTrue(params["message"].startswith(message_prefix), params["message"])
        self.assertEvent(c, handle, "socket.onClose", {"socket": handle})
        self.assertState(c, handle, 4)
        return params["message"]

    def assertNoEvents(self, c, handle):
        """Nothing about ``handle`` is waiting, after a call answered now."""
        c.call("server.info")
        self.assertEqual([m for m in c.pending() if isinstance(m, dict) and about(handle)(m)], [])


# ---------------------------------------------------------------------------
# Plain TCP against echo and closing peers.

class Echo(SocketCase):
    # nothing.invalid passes the host rules, so that resolving it is what fails.
    SERVER_ARGS = ("--allow", "nothing.invalid")

    def test_round_trip_is_byte_exact_for_every_byte_value(self):
        c = self.connect()
        peer = self.peer(echo)
        s = self.open_socket(c, "127.0.0.1", peer.port)
        data = bytes(range(256)) * 4096 + bytes(reversed(range(256)))  # 1 MiB + 256
        self.assertEqual(s.write(data), len(data))
        self.assertTrue(s.read_exactly(len(data), timeout=20) == data, "the echo differs")
        self.assertEqual(s.read(), b"")
        self.assertFalse(s.closed)
        self.assertEqual(peer.snapshot()["received"], len(data))

    def test_a_lone_surrogate_in_data_is_refused_and_nothing_is_written(self):
        # Issue 41: "\ud800" went out as EF BF BD. It is a parse error (-32700) now, so the
        # call never runs; a surrogate pair is its one character's four bytes.
        c = self.connect()
        peer = self.peer(echo)
        h = self.create_connect(c, "127.0.0.1", peer.port)
        self.assertEvent(c, h, "socket.onOpen", {"socket": h})
        for data in (b'"\\ud800"', b'"x\\udc00y"', b'"\\ud800\\u0041"'):
            c.send_raw(b'{"jsonrpc":"2.0","method":"socket.write","params":{"socket":"' + h.encode()
                       + b'","data":' + data + b'},"id":"w"}\n')
            got = c.read_message(10)
            self.assertEqual((got["id"], got["error"]["code"], got["error"]["data"]["detail"]),
                             (None, -32700, "lexical error: unpaired UTF-16 surrogate escape (\\uD800-\\uDFFF "
                                            "without its pair) in string."), data)
        c.send_raw(b'{"jsonrpc":"2.0","method":"socket.write","params":{"socket":"' + h.encode()
                   + b'","data":"ok\\ud83d\\ude00"},"id":"w"}\n')
        self.assertEqual(c.read_message(10), {"jsonrpc": "2.0", "result": {"bytes": 6}, "id": "w"})
        self.assertEvent(c, h, "socket.onRead", {"socket": h, "available": 6})
        self.assertEqual(c.call("socket.read", {"socket": h}),
                         {"data": b64(b"ok\xf0\x9f\x98\x80"), "encoding": "base64", "bytes": 6, "closed": False})
        self.assertEqual(peer.snapshot()["received"], 6)

    def test_an_ipv4_literal_with_a_trailing_dot_is_dialled_as_its_address(self):
        # Issue 41: the resolver took `127.0.0.1.` for a name (and failed); it is the
        # address the host rules judged. `list` shows the host as given.
        c = self.connect()
        peer = self.peer(echo)
        for host in ("127.0.0.1.", "127.1."):
            with self.subTest(host=host):
                s = self.open_socket(c, host, peer.port)
                self.assertEqual(s.write(b"dotted"), 6)
                self.assertEqual(s.read_exactly(6, timeout=10), b"dotted")
                (entry,) = [e for e in c.call("list") if e.get("socket") == s.handle]
                self.assertEqual(entry["host"], host)

    def test_utf8_text_both_ways(self):
        c = self.connect()
        peer = self.peer(echo)
        h = self.create_connect(c, "127.0.0.1", peer.port)
        self.assertEvent(c, h, "socket.onOpen", {"socket": h})
        text = "héllo wörld, € and 𝄞, a NUL \u0000 and the end"
        n = len(text.encode("utf-8"))
        self.assertEqual(c.call("socket.write", {"socket": h, "data": text}), {"bytes": n})
        self.assertEvent(c, h, "socket.onRead", {"socket": h, "available": n})
        self.assertEqual(c.call("socket.read", {"socket": h, "encoding": "utf8"}),
                         {"data": text, "encoding": "utf8", "bytes": n, "closed": False})
        self.assertEqual(c.call("socket.read", {"socket": h, "encoding": "utf8"}),
                         {"data": "", "encoding": "utf8", "bytes": 0, "closed": False})
        # Default encoding base64; maxBytes cuts.
        c.call("socket.write", {"socket": h, "dataBase64": b64(b"\x00\xff\x80abc")})
        self.assertEvent(c, h, "socket.onRead", {"socket": h, "available": 6})
        self.assertEqual(c.call("socket.read", {"socket": h, "maxBytes": 2}),
                         {"data": b64(b"\x00\xff"), "encoding": "base64", "bytes": 2, "closed": False})
        self.assertEqual(c.call("socket.read", {"socket": h}),
                         {"data": b64(b"\x80abc"), "encoding": "base64", "bytes": 4, "closed": False})

    def test_utf8_holds_back_an_incomplete_character_and_refuses_invalid_bytes(self):
        c = self.connect()
        peer = self.peer(echo)
        h = self.create_connect(c, "127.0.0.1", peer.port)
        self.assertEvent(c, h, "socket.onOpen")
        euro = "€".encode("utf-8")
        c.call("socket.write", {"socket": h, "dataBase64": b64(euro[:2])})
        self.assertEvent(c, h, "socket.onRead", {"socket": h, "available": 2})
        self.assertEqual(c.call("socket.read", {"socket": h, "encoding": "utf8"}),
                         {"data": "", "encoding": "utf8", "bytes": 0, "closed": False})
        c.call("socket.write", {"socket": h, "dataBase64": b64(euro[2:])})
        # The buffer never went empty, so no onRead comes: poll until the third byte is in.
        got = poll_until(lambda: c.call("socket.read", {"socket": h, "encoding": "utf8"})["data"], 10,
                         "the completed character")
        self.assertEqual(got, "€")
        # Invalid UTF-8 is refused and stays readable as base64.
        c.call("socket.write", {"socket": h, "dataBase64": b64(b"ok\xff")})
        self.assertEvent(c, h, "socket.onRead", {"socket": h, "available": 3})
        self.assertEqual(reason_of(c, "socket.read", {"socket": h, "encoding": "utf8"}), "invalid_state")
        self.assertEqual(c.call("socket.read", {"socket": h}),
                         {"data": b64(b"ok\xff"), "encoding": "base64", "bytes": 3, "closed": False})

    def test_utf8_read_shorter_than_the_next_character_is_refused(self):
        """Not answered with no bytes for ever: the € waits for a read that can take it."""
        c = self.connect()
        peer = self.peer(echo)
        h = self.create_connect(c, "127.0.0.1", peer.port)
        self.assertEvent(c, h, "socket.onOpen")
        c.call("socket.write", {"socket": h, "dataBase64": b64("€!".encode("utf-8"))})
        self.assertEvent(c, h, "socket.onRead", {"socket": h, "available": 4})
        for short in (1, 2):
            with self.assertRaises(RPCError) as e:
                c.call("socket.read", {"socket": h, "encoding": "utf8", "maxBytes": short})
            self.assertEqual(e.exception.code, -32602)
            self.assertIn("shorter than the next character", e.exception.data["detail"])
        self.assertEqual(c.call("socket.read", {"socket": h, "encoding": "utf8", "maxBytes": 0}),
                         {"data": "", "encoding": "utf8", "bytes": 0, "closed": False})
        self.assertEqual(c.call("socket.read", {"socket": h, "encoding": "utf8", "maxBytes": 3}),
                         {"data": "€", "encoding": "utf8", "bytes": 3, "closed": False})
        self.assertEqual(c.call("socket.read", {"socket": h, "encoding": "utf8", "maxBytes": 1}),
                         {"data": "!", "encoding": "utf8", "bytes": 1, "closed": False})

    def test_create_connect_write_in_one_batch_with_a_chosen_name(self):
        c = self.connect()
        peer = self.peer(echo)
        name = "py.batch_1:x-y"
        answers = c.batch([
            ("socket.create", {"host": "127.0.0.1", "port": peer.port, "socket": name}),
            ("socket.connect", {"socket": name}),
            ("socket.write", {"socket": name, "data": "early"}),
            ("socket.getState", {"socket": name}),
        ])
        # docs/guide/sockets.md: connect answers at once with the state Connecting, and write is for
        # Open only: the write of the same batch is refused, nothing of it queued.
        self.assertMessage([
            {"jsonrpc": "2.0", "result": {"socket": name}, "id": answers[0]["id"]},
            {"jsonrpc": "2.0", "result": True, "id": answers[1]["id"]},
            {"jsonrpc": "2.0", "id": answers[2]["id"],
             "error": {"code": -32002, "message": ANY_STR,
                       "data": {"reason": "invalid_state", "state": 1, "stateName": "Connecting"}}},
            {"jsonrpc": "2.0", "result": {"state": 1, "stateName": "Connecting"}, "id": answers[3]["id"]},
        ], answers)
        self.assertEvent(c, name, "socket.onOpen", {"socket": name})
        s = Socket(c, name)
        self.assertEqual(s.write("after open"), 10)
        self.assertEqual(s.read_exactly(10, timeout=10), b"after open")
        self.assertEqual(peer.snapshot()["received"], 10, "the refused write sent nothing")
        # The name is taken now; names are checked.
        e = rpc_error(lambda: c.call("socket.create", {"host": "127.0.0.1", "port": peer.port, "socket": name}))
        self.assertEqual((e.code, e.reason), (-32007, "already_exists"))
        for bad in ("", "a" * 129, "req_0123", "with space", "slash/no", "ü"):
            with self.subTest(name=bad):
                e = rpc_error(lambda: c.call("socket.create", {"host": "127.0.0.1", "port": 1, "socket": bad}))
                self.assertEqual(e.code, -32602, e)
        self.assertEqual(c.call("socket.create", {"host": "127.0.0.1", "port": 1, "socket": "a" * 128}),
                         {"socket": "a" * 128})

    def test_bad_hosts_and_ports_are_invalid_params(self):
        c = self.connect()
        for params in ({"host": "", "port": 80}, {"host": "a" * 254, "port": 80},
                       {"host": "a b", "port": 80}, {"host": "a\r\nb", "port": 80},
                       {"host": "a\u0000b", "port": 80}, {"host": "a/b", "port": 80},
                       {"host": "127.0.0.1:80", "port": 80}, {"host": "%", "port": 80}, {"host": ":::::", "port": 80},
                       {"host": "example.com", "port": 0}, {"host": "example.com", "port": 65536},
                       {"host": "example.com", "port": -1}, {"host": "example.com"}, {"port": 80}):
            with self.subTest(params=params):
                self.assertEqual(rpc_error(lambda: c.call("socket.create", params)).code, -32602)
        self.assertEqual(c.call("list"), [])

    def test_a_connect_given_up_while_under_way_ends_quietly(self):
        """A connect the peer never answers (its SYN dropped: a listener whose backlog
        is full), given up by disconnect, release, the connection closing, or its own
        timeout: the server stays up (each of them once crashed it) and says so."""
        hole = socket.socket()
        self.addCleanup(hole.close)
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        fillers = []
        for _ in range(3):  # fill the backlog: from here on SYNs get no answer
            f = socket.socket()
            self.addCleanup(f.close)
            f.setblocking(False)
            f.connect_ex(hole.getsockname())
            fillers.append(f)
        port = hole.getsockname()[1]
        for how in ("disconnect", "release", "close", "timeout"):
            with self.subTest(how=how):
                c = self.server.connect()
                h = c.call("socket.create", {"host": "127.0.0.1", "port": port})["socket"]
                c.call("socket.connect", {"socket": h, "timeout": 0.5 if how == "timeout" else 30})
                time.sleep(0.2)
                self.assertState(c, h, 1)
                if how == "disconnect":
                    self.assertIs(c.call("socket.disconnect", {"socket": h}), True)
                    self.assertEvent(c, h, "socket.onClose", {"socket": h})
                    self.assertState(c, h, 4)
                elif how == "release":
                    self.assertIs(c.call("socket.release", {"socket": h}), True)
                elif how == "timeout":
                    self.assertFailed(c, h, "timeout")
                time.sleep(0.3)  # the cancelled connect's answer comes on the loop's next turns
                c.close()
                self.assertTrue(self.server.alive(), self.server.stderr_text())
        c = self.connect()
        self.assertEqual(c.call("list"), [])

    def test_every_state_and_what_each_refuses(self):
        c = self.connect()
        peer = self.peer(echo)
        h = c.call("socket.create", {"host": "127.0.0.1", "port": peer.port})["socket"]
        self.assertRegex(h, r"^req_[0-9a-f]{32}$")
        self.assertState(c, h, 0)
        self.assertInvalidState(c, "socket.write", {"socket": h, "data": "x"}, 0)
        self.assertInvalidState(c, "socket.disconnect", {"socket": h}, 0)
        answers = c.batch([("socket.connect", {"socket": h}), ("socket.getState", {"socket": h}),
                           ("socket.read", {"socket": h})])
        self.assertEqual([a.get("result") for a in answers],
                         [True, {"state": 1, "stateName": "Connecting"},
                          {"data": "", "encoding": "base64", "bytes": 0, "closed": False}])
        self.assertEvent(c, h, "socket.onOpen", {"socket": h})
        self.assertState(c, h, 2)
        self.assertInvalidState(c, "socket.disableHostVerification", {"socket": h}, 2)
        self.assertInvalidState(c, "socket.disablePeerVerification", {"socket": h}, 2)
        self.assertInvalidState(c, "socket.connect", {"socket": h}, 2)
        self.assertEqual(c.call("socket.write", {"socket": h, "data": "abc"}), {"bytes": 3})
        self.assertEvent(c, h, "socket.onRead", {"socket": h, "available": 3})
        self.assertEqual(c.call("socket.read", {"socket": h})["data"], b64(b"abc"))
        answers = c.batch([("socket.disconnect", {"socket": h}), ("socket.getState", {"socket": h})])
        self.assertEqual([a.get("result") for a in answers], [True, {"state": 3, "stateName": "Disconnecting"}])
        self.assertEvent(c, h, "socket.onClose", {"socket": h})
        self.assertState(c, h, 4)
        self.assertInvalidState(c, "socket.disconnect", {"socket": h}, 4)
        self.assertInvalidState(c, "socket.write", {"socket": h, "data": "x"}, 4)
        self.assertEqual(c.call("socket.read", {"socket": h}),
                         {"data": "", "encoding": "base64", "bytes": 0, "closed": True})
        peer.wait_for(lambda p: p.eofs >= 1, 10, "the peer sees the disconnect")
        # Disconnected allows the settings and a new stream.
        self.assertEqual(c.call("socket.disableHostVerification", {"socket": h}), True)
        self.assertEqual(c.call("socket.connect", {"socket": h}), True)
        self.assertEvent(c, h, "socket.onOpen", {"socket": h})
        self.assertState(c, h, 2)
        s = Socket(c, h)
        self.assertEqual(s.write(b"again"), 5)
        self.assertEqual(s.read_exactly(5, timeout=10), b"again")
        self.assertEqual(peer.snapshot()["accepted"], 2)
        self.assertEqual(c.call("socket.release", {"socket": h}), True)
        self.assertEvent(c, h, "socket.onClose", {"socket": h})
        peer.wait_for(lambda p: p.eofs >= 2, 10, "the peer sees the release")
        for method in ("socket.getState", "socket.read", "socket.connect", "socket.release"):
            self.assertEqual(reason_of(c, method, {"socket": h}), "unknown_handle", method)

    def test_a_prepared_socket_is_not_closed(self):
        # docs/guide/sockets.md: `closed` is true "once the stream has ended"; a socket never connected
        # has had no stream to end, and bytes may still come after connect.
        c = self.connect()
        h = c.call("socket.create", {"host": "127.0.0.1", "port": 9})["socket"]
        self.assertEqual(c.call("socket.read", {"socket": h}),
                         {"data": "", "encoding": "base64", "bytes": 0, "closed": False})

    def test_disconnect_flushes_the_queued_writes(self):
        c = self.connect()
        peer = self.peer(read_to_eof)
        s = self.open_socket(c, "127.0.0.1", peer.port)
        size = self.write_pattern(s, 4 * MIB)
        s.disconnect()
        self.assertClosedWithAllDelivered(s, peer, size)

    def test_a_peer_that_shuts_its_writing_side_still_gets_every_queued_byte(self):
        """Its FIN ends the socket as a disconnect does: what the client queued goes out
        first. (It was dropped, and the peer saw a clean end of a half-sent upload.)"""
        def shut_then_read(conn, peer):
            if not peer.release.wait(10):
                raise AssertionError("never released")
            conn.shutdown(socket.SHUT_WR)
            read_to_eof(conn, peer)
        c = self.connect()
        peer = self.peer(shut_then_read)
        s = self.open_socket(c, "127.0.0.1", peer.port)
        size = self.write_pattern(s, 4 * MIB)
        peer.release.set()
        self.assertClosedWithAllDelivered(s, peer, size)

    def test_queued_bytes_a_closing_peer_never_takes_are_reported(self):
        """A peer that shuts its writing side and reads nothing: after the flush's 2 s,
        onErr says how much was dropped, then onClose."""
        gone = threading.Event()

        def shut_and_sit(conn, peer):
            if not peer.release.wait(10):
                raise AssertionError("never released")
            conn.shutdown(socket.SHUT_WR)
            gone.wait(20)
        c = self.connect()
        peer = self.peer(shut_and_sit, rcvbuf=4096)
        self.addCleanup(gone.set)  # before the peer stops (cleanups run last first)
        h = self.create_connect(c, "127.0.0.1", peer.port)
        self.assertEvent(c, h, "socket.onOpen")
        answers = c.batch([("socket.write", {"socket": h, "dataBase64": b64(b"x" * MIB)}) for _ in range(4)])
        self.assertTrue(all("result" in a for a in answers), answers)
        peer.release.set()
        message = self.assertFailed(c, h, "timeout", timeout=15)
        self.assertIn("bytes queued for 127.0.0.1:%d were not taken" % peer.port, message)

    def test_a_tls_handshake_that_never_answers_times_out(self):
        c = self.connect()
        peer = self.peer(hold_then_read)  # accepts, then says nothing
        h = c.call("socket.create", {"host": "127.0.0.1", "port": peer.port, "ssl": True})["socket"]
        started = time.monotonic()
        self.assertEqual(c.call("socket.connect", {"socket": h, "timeout": 0.5}), True)
        self.assertFailed(c, h, "timeout")
        elapsed = time.monotonic() - started
        self.assertGreater(elapsed, 0.4)
        self.assertLess(elapsed, 5)
        self.assertEqual(peer.snapshot()["accepted"], 1)

    def test_request_and_socket_handles_do_not_mix(self):
        c = self.connect()
        c.call("create", {"request": "a-request"})
        c.call("socket.create", {"host": "127.0.0.1", "port": 9, "socket": "a-socket"})
        self.assertEqual(reason_of(c, "socket.getState", {"socket": "a-request"}), "unknown_handle")
        self.assertEqual(reason_of(c, "socket.release", {"socket": "a-request"}), "unknown_handle")
        self.assertEqual(reason_of(c, "getState", {"request": "a-socket"}), "unknown_handle")
        self.assertEqual(reason_of(c, "release", {"request": "a-socket"}), "unknown_handle")
        # One namespace: a request name is taken for sockets and the other way round.
        self.assertEqual(reason_of(c, "socket.create", {"host": "127.0.0.1", "port": 9, "socket": "a-request"}),
                         "already_exists")
        self.assertEqual(reason_of(c, "create", {"request": "a-socket"}), "already_exists")
        self.assertMessage([
            {"request": "a-request", "kind": "request", "state": 0, "stateName": "UNSENT"},
            {"socket": "a-socket", "kind": "socket", "host": "127.0.0.1", "port": 9, "ssl": False,
             "state": 0, "stateName": "Prepared"},
        ], sorted((_known_keys(e) for e in c.call("list")), key=lambda e: e["kind"]))

    def test_peer_closing_first_leaves_its_bytes_readable(self):
        c = self.connect()
        peer = self.peer(say_then_close(b"bye"))
        h = self.create_connect(c, "127.0.0.1", peer.port)
        self.assertEvent(c, h, "socket.onOpen", {"socket": h})
        self.assertEvent(c, h, "socket.onRead", {"socket": h, "available": 3})
        self.assertEvent(c, h, "socket.onClose", {"socket": h})
        self.assertState(c, h, 4)
        first = c.call("socket.read", {"socket": h})
        self.assertEqual((first["data"], first["bytes"]), (b64(b"bye"), 3))
        self.assertEqual(c.call("socket.read", {"socket": h}),
                         {"data": "", "encoding": "base64", "bytes": 0, "closed": True})
        self.assertNoEvents(c, h)  # no onErr for a clean close

    def test_the_helper_loses_nothing_when_the_stream_ends_early(self):
        c = self.connect()
        peer = self.peer(say_then_close(b"bye"))
        s = self.open_socket(c, "127.0.0.1", peer.port)
        with self.assertRaises(EOFError):
            s.read_exactly(10, timeout=10)
        self.assertFalse(s.closed, "three bytes are still to be read")
        self.assertEqual(s.read(2), b"by")
        self.assertEqual(s.read(), b"e")
        self.assertTrue(s.closed)
        self.assertEqual(s.read_until_closed(timeout=5), b"")
        s.wait_closed(timeout=10)
        self.assertEqual(s.state(), "Disconnected")
        self.assertIsNone(s.error)

    def test_refused(self):
        c = self.connect()
        port = free_tcp_port()
        h = self.create_connect(c, "127.0.0.1", port)
        self.assertFailed(c, h, "refused")
        self.assertEqual(c.call("socket.read", {"socket": h}),
                         {"data": "", "encoding": "base64", "bytes": 0, "closed": True})
        # The helper: SocketError carrying the word and the message.
        s = c.socket("127.0.0.1", port)
        s.connect()
        with self.assertRaises(SocketError) as caught:
            s.wait_open(timeout=10)
        self.assertEqual((caught.exception.socket, caught.exception.error), (s.handle, "refused"))
        self.assertIsInstance(caught.exception.message, str)
        s.wait_closed(timeout=10)
        self.assertEqual(s.state(), "Disconnected")
        s.release()

    def test_a_name_that_does_not_resolve(self):
        c = self.connect()
        h = self.create_connect(c, "nothing.invalid", 80)
        self.assertFailed(c, h, "resolve", timeout=20)

    def test_ipv6_loopback(self):
        c = self.connect()
        peer = self.peer(echo, hosts=("::1",))
        s = self.open_socket(c, "::1", peer.port)
        self.assertEqual(s.write(b"six"), 3)
        self.assertEqual(s.read_exactly(3, timeout=10), b"six")

    def test_async_helpers(self):
        peer = self.peer(echo)
        refused = free_tcp_port()

        async def main():
            async with await AsyncClient.connect_unix(self.server.socket_path) as c:
                async with await c.socket("127.0.0.1", peer.port, name="async-1") as s:
                    self.assertEqual(s.handle, "async-1")
                    self.assertEqual(await s.state(), "Prepared")
                    await s.connect()
                    await s.wait_open(timeout=10)
                    data = bytes(range(256)) * 300
                    self.assertEqual(await s.write(data), len(data))
                    self.assertTrue(await s.read_exactly(len(data), timeout=10) == data)
                    await s.write("one\ntwo\n")
                    self.assertEqual(await s.read_until(b"\n", timeout=10), b"one\n")
                    self.assertEqual(await s.read_until(b"\n", timeout=10), b"two\n")
                    await s.disconnect()
                    await s.wait_closed(timeout=10)
                    self.assertEqual(await s.read_until_closed(timeout=10), b"")
                    self.assertTrue(s.closed)
                    self.assertEqual(await s.state(), "Disconnected")
                s = await c.socket("127.0.0.1", refused)
                await s.connect()
                with self.assertRaises(SocketError) as caught:
                    await s.wait_open(timeout=10)
                self.assertEqual(caught.exception.error, "refused")
                await s.release()
                self.assertEqual(await c.call("list"), [])

        asyncio.run(main())


def _known_keys(entry):
    """A ``list`` entry without keys these tests do not pin (a request's may grow)."""
    keys = ("socket", "request", "kind", "host", "port", "ssl", "state", "stateName")
    return {k: v for k, v in entry.items() if k in keys}


# ---------------------------------------------------------------------------
# Buffers and back-pressure.

class LargeStream(SocketCase):
    """64 MiB from a peer, read in steps: byte-exact, and the server's memory bounded
    because it stops reading the peer while its 1 MiB inbound buffer is full."""

    SERVER_ARGS = ("--max-buffer-bytes", str(MIB))
    SIZE = 64 * MIB
    RSS_LIMIT_KIB = 200 * 1024
    LEAD_LIMIT = 32 * MIB  # the server's 1 MiB plus what loopback's kernel buffers hold

    def test_64_mib_then_close(self):
        c = self.connect()
        peer = self.peer(send_then_close(self.SIZE))
        s = self.open_socket(c, "127.0.0.1", peer.port)
        pid = self.server.proc.pid
        digest = hashlib.sha256()
        total = 0
        max_rss = 0
        max_lead = 0
        started = time.monotonic()
        for _ in range(self.SIZE // MIB):  # bounded: one MiB a step
            chunk = s.read_exactly(MIB, timeout=30)
            digest.update(chunk)
            total += len(chunk)
            max_rss = max(max_rss, proc_kib(pid, "VmRSS"))
            max_lead = max(max_lead, peer.snapshot()["sent"] - total)
        elapsed = time.monotonic() - started
        self.assertEqual(s.read_until_closed(timeout=10), b"")
        self.assertTrue(s.closed)
        s.wait_closed(timeout=10)
        self.assertEqual(s.state(), "Disconnected")
        self.assertEqual(total, self.SIZE)
        self.assertEqual(digest.hexdigest(), pattern.pattern_sha256(self.SIZE), "the stream differs")
        self.assertEqual(peer.snapshot()["sent"], self.SIZE)
        peak = proc_kib(pid, "VmHWM")
        note("64 MiB through a socket in %.2f s; xhrpcd VmRSS max %d KiB, VmHWM %d KiB; "
             "the peer at most %.1f MiB ahead of the reader" % (elapsed, max_rss, peak, max_lead / MIB))
        self.assertLess(max_rss, self.RSS_LIMIT_KIB)
        self.assertLess(peak, self.RSS_LIMIT_KIB)
        self.assertLess(max_lead, self.LEAD_LIMIT, "the server kept reading the peer past its buffer")


class PrincipalBudget(SocketCase):
    """The principal's bufferedBytes budget (1 MiB here) pauses a socket's reading
    before its own --max-buffer-bytes (8 MiB) would; reading frees the budget and
    resumes it."""

    SERVER_ARGS = ("--limit", "bufferedBytes=%d" % MIB)
    SIZE = 8 * MIB

    def test_a_socket_pauses_at_the_principals_budget_and_resumes_when_read(self):
        c = self.connect()
        peer = self.peer(send_then_close(self.SIZE))
        s = self.open_socket(c, "127.0.0.1", peer.port)
        # Nothing read yet: once the peer is stuck, the server holds the budget and at
        # most one read more (64 KiB), not its own 8 MiB buffer.
        last, still = -1, 0
        for _ in range(200):  # bounded: 10 s
            sent = peer.snapshot()["sent"]
            still = still + 1 if sent == last else 0
            if still >= 6:
                break
            last = sent
            time.sleep(0.05)
        held = c.call("server.stats")["bufferedBytes"]
        self.assertLessEqual(held, MIB + 64 * 1024, "the socket kept reading past the principal's budget")
        self.assertGreater(held, 0)
        digest = hashlib.sha256()
        total = 0
        max_lead = 0
        for _ in range(self.SIZE // (256 * 1024)):  # bounded: 256 KiB a step
            chunk = s.read_exactly(256 * 1024, timeout=30)
            digest.update(chunk)
            total += len(chunk)
            max_lead = max(max_lead, peer.snapshot()["sent"] - total)
        self.assertEqual(s.read_until_closed(timeout=10), b"")
        self.assertTrue(s.closed)
        self.assertEqual(digest.hexdigest(), pattern.pattern_sha256(self.SIZE), "the stream differs")
        note("the peer at most %.1f MiB ahead under a 1 MiB principal budget" % (max_lead / MIB))
        self.assertLess(max_lead, LargeStream.LEAD_LIMIT)


    def test_writes_queued_for_peers_that_do_not_read_count_in_the_budget(self):
        """Each socket's queue is bounded by --max-buffer-bytes (8 MiB here); together
        they are bounded by the principal's budget (1 MiB), not sockets × 8 MiB."""
        c = self.connect()
        peer = self.peer(hold_then_read, rcvbuf=4096)
        self.addCleanup(peer.release.set)
        handles = []
        for _ in range(4):
            h = self.create_connect(c, "127.0.0.1", peer.port)
            self.assertEvent(c, h, "socket.onOpen")
            handles.append(h)
        accepted, refusal = 0, None
        for i in range(64):  # bounded: 16 MiB offered, far past the budget
            try:
                accepted += c.call("socket.write", {"socket": handles[i % 4], "dataBase64": b64(b"y" * (256 * 1024))})["bytes"]
            except RPCError as e:
                refusal = e
                break
        self.assertIsNotNone(refusal, "every write was accepted")
        self.assertEqual(refusal.data["limit"], "bufferedBytes", refusal.data)
        held = c.call("server.stats")["bufferedBytes"]
        self.assertLessEqual(held, MIB)
        # What the kernels' buffers took is not held: accepted can pass the budget by that.
        note("%.2f MiB accepted, %.2f MiB held under a 1 MiB budget" % (accepted / MIB, held / MIB))
        # Once the peer reads, the queues drain and the budget comes back.
        peer.release.set()
        poll_until(lambda: c.call("server.stats")["bufferedBytes"] == 0, 10, "the budget given back")
        for h in handles:
            self.assertEqual(c.call("socket.write", {"socket": h, "data": "more"}), {"bytes": 4})


class WriteLimit(SocketCase):
    SERVER_ARGS = ("--max-buffer-bytes", str(MIB))
    PIECE = 256 * 1024
    MAX_WRITES = 256  # 64 MiB: far past what the kernel's buffers and 1 MiB can take

    def test_writes_to_a_peer_that_reads_nothing_until_limit_exceeded_and_nothing_is_lost(self):
        c = self.connect()
        peer = self.peer(hold_then_read, rcvbuf=64 * 1024)
        s = self.open_socket(c, "127.0.0.1", peer.port)
        offset = 0
        refused = None
        for _ in range(self.MAX_WRITES):
            chunk = b"".join(pattern.iter_pattern(self.PIECE, offset=offset))
            try:
                n = s.write(chunk)
            except RPCError as e:
                refused = e
                break
            self.assertEqual(n, self.PIECE)
            offset += n
        else:
            self.fail("no limit_exceeded within %d writes of %d bytes" % (self.MAX_WRITES, self.PIECE))
        self.assertEqual((refused.code, refused.data),
                         (-32004, {"reason": "limit_exceeded", "limit": "maxBufferBytes", "max": MIB}))
        self.assertGreater(offset, 0)
        note("%d writes of 256 KiB accepted before limit_exceeded" % (offset // self.PIECE))
        # The refused write queued nothing: once the peer reads, it gets exactly the
        # accepted bytes, and a write is accepted again.
        peer.release.set()
        peer.wait_for(lambda p: p.received >= offset, 20, "the peer reads the %d accepted bytes" % offset)
        tail = pattern.pattern_slice(offset, 1000)
        self.assertEqual(s.write(tail), 1000)
        offset += 1000
        s.disconnect()
        s.wait_closed(timeout=10)
        peer.wait_for(lambda p: p.eofs >= 1, 10, "the peer sees the end")
        got = peer.snapshot()["received"]
        self.assertEqual(got, offset, "bytes accepted %d, bytes the peer received %d" % (offset, got))
        with peer.cond:
            self.assertEqual(peer.sha256.hexdigest(), pattern.pattern_sha256(offset), "the bytes differ")


    def test_a_write_larger_than_the_buffer_is_told_it_can_never_fit(self):
        # Issue 41: one write past --max-buffer-bytes was told "Wait and write again",
        # which can never help. It is limit_exceeded still, with data.neverFits and its size.
        c = self.connect()
        peer = self.peer(echo)
        s = self.open_socket(c, "127.0.0.1", peer.port)
        e = rpc_error(lambda: c.call("socket.write", {"socket": s.handle, "dataBase64": b64(b"z" * (MIB + 1))}))
        self.assertEqual((e.code, e.data), (-32004, {"reason": "limit_exceeded", "limit": "maxBufferBytes", "max": MIB,
                                                      "bytes": MIB + 1, "neverFits": True}))
        self.assertEqual(e.message, "A write of %d bytes can never fit: at most %d bytes can be queued "
                                    "(--max-buffer-bytes). Split it into writes of at most %d bytes." % (MIB + 1, MIB, MIB))
        # A write of exactly the limit fits, and nothing of the refused one was queued.
        self.assertEqual(s.write(b"w" * MIB), MIB)
        self.assertEqual(s.read_exactly(MIB, timeout=30), b"w" * MIB)


class ReadLimit(SocketCase):
    """Issue 41: the bytes a socket holds unread stay within --max-buffer-bytes, over TCP
    and TLS alike: reads are sized to the room left, so reading pauses exactly at the
    limit (it passed it by up to one 64 KiB read, over TLS by part of a record)."""

    LIMIT = 1000
    SIZE = 100_000
    certs = None

    @classmethod
    def setUpClass(cls):
        cls.cert_dir = tempfile.mkdtemp(prefix="xhrpc-sockets-certs-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.cert_dir, True)
        cls.certs = certs.make_all(cls.cert_dir)
        super().setUpClass()

    @classmethod
    def server_args(cls):
        return ("--ca-file", cls.certs["ca"], "--max-buffer-bytes", str(cls.LIMIT))

    def available(self, c, h):
        (entry,) = [e for e in c.call("list") if e.get("socket") == h]
        return entry["available"]

    def assertHeldAtTheLimitThenAllRead(self, c, s):
        # The peer sends far more than the limit at once; once the socket holds the limit
        # it has stopped reading, and holds no more however long it waits.
        held = poll_until(lambda: (lambda n: n if n >= self.LIMIT else None)(self.available(c, s.handle)), 10,
                          "the socket fills its buffer")
        self.assertEqual(held, self.LIMIT)
        digest = hashlib.sha256()
        total = 0
        for _ in range(self.SIZE):  # bounded: at least one byte a step
            if total == self.SIZE:
                break
            chunk = s.read_exactly(min(self.LIMIT, self.SIZE - total), timeout=10)
            self.assertLessEqual(self.available(c, s.handle), self.LIMIT)
            digest.update(chunk)
            total += len(chunk)
        self.assertEqual(digest.hexdigest(), pattern.pattern_sha256(self.SIZE), "the stream differs")

    def test_tcp_holds_at_most_the_limit(self):
        c = self.connect()
        peer = self.peer(send_then_close(self.SIZE))
        self.assertHeldAtTheLimitThenAllRead(c, self.open_socket(c, "127.0.0.1", peer.port))

    def test_tls_holds_at_most_the_limit(self):
        c = self.connect()
        peer = self.peer(send_then_close(self.SIZE), context=tls_context(self.certs["good_cert"], self.certs["good_key"]))
        self.assertHeldAtTheLimitThenAllRead(c, self.open_socket(c, "127.0.0.1", peer.port, ssl=True))


# ---------------------------------------------------------------------------
# TLS.

class Tls(SocketCase):
    """Certificates from Tests/Fixtures/certs.py, made for this class; xhrpcd trusts
    the test CA through --ca-file."""

    certs = None

    @classmethod
    def setUpClass(cls):
        cls.cert_dir = tempfile.mkdtemp(prefix="xhrpc-sockets-certs-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.cert_dir, True)
        cls.certs = certs.make_all(cls.cert_dir)
        super().setUpClass()

    @classmethod
    def server_args(cls):
        return ("--ca-file", cls.certs["ca"])

    def tls_peer(self, cert):
        return self.peer(echo, hosts=("127.0.0.1", "::1"),
                         context=tls_context(self.certs[cert + "_cert"], self.certs[cert + "_key"]))

    def assertEchoes(self, s, data=b"over tls \x00\xff"):
        self.assertEqual(s.write(data), len(data))
        self.assertEqual(s.read_exactly(len(data), timeout=10), data)

    def test_verified_against_the_ca(self):
        c = self.connect()
        peer = self.tls_peer("good")
        for host in ("localhost", "127.0.0.1"):
            with self.subTest(host=host):
                s = self.open_socket(c, host, peer.port, ssl=True)
                self.assertEqual(s.state(), "Open")
                self.assertEchoes(s)
                s.release()
        self.assertEqual(peer.handshake_errors, [])

    def test_a_self_signed_certificate_is_refused_until_peer_verification_is_off(self):
        c = self.connect()
        peer = self.tls_peer("self_signed")
        h = self.create_connect(c, "localhost", peer.port, ssl=True)
        message = self.assertFailed(c, h, "tls", "SSL")
        note("self-signed: %s" % message)
        self.assertEqual(c.call("socket.disablePeerVerification", {"socket": h}), True)
        self.assertEqual(c.call("socket.connect", {"socket": h}), True)
        self.assertEvent(c, h, "socket.onOpen", {"socket": h})
        self.assertEchoes(Socket(c, h))

    def test_a_certificate_for_another_name_is_refused_until_host_verification_is_off(self):
        c = self.connect()
        peer = self.tls_peer("wrong_host")  # DNS:wrong.example only, signed by the CA
        s = c.socket("localhost", peer.port, ssl=True)
        self.addCleanup(s.__exit__)
        s.connect()
        with self.assertRaises(SocketError) as caught:
            s.wait_open(timeout=10)
        self.assertEqual(caught.exception.error, "tls")
        self.assertTrue(caught.exception.message.startswith("SSL"), caught.exception.message)
        note("wrong name: %s" % caught.exception.message)
        s.wait_closed(timeout=10)
        self.assertEqual(s.state(), "Disconnected")
        s.disable_host_verification()
        s.connect()
        s.wait_open(timeout=10)
        self.assertEchoes(s)

    def test_host_verification_off_still_refuses_an_unknown_ca(self):
        c = self.connect()
        peer = self.tls_peer("untrusted")  # localhost, signed by a CA nobody trusts
        s = c.socket("localhost", peer.port, ssl=True)
        self.addCleanup(s.__exit__)
        s.disable_host_verification()
        s.connect()
        with self.assertRaises(SocketError) as caught:
            s.wait_open(timeout=10)
        self.assertEqual(caught.exception.error, "tls")
        self.assertTrue(caught.exception.message.startswith("SSL"), caught.exception.message)
        s.wait_closed(timeout=10)
        s.disable_peer_verification()
        s.connect()
        s.wait_open(timeout=10)
        self.assertEchoes(s)

    def test_a_plain_tcp_peer_fails_the_handshake(self):
        c = self.connect()
        peer = self.peer(say_then_close(b"this is not TLS\r\n" * 10))
        h = self.create_connect(c, "127.0.0.1", peer.port, ssl=True)
        params = self.assertEvent(c, h, "socket.onErr", {"socket": h, "error": ANY_STR, "message": ANY_STR})
        self.assertIn(params["error"], ("tls", "reset", "io"), params)
        self.assertEvent(c, h, "socket.onClose", {"socket": h})


class TlsTruncation(SocketCase):
    """A TLS peer that ends the TCP stream with no close_notify may have been cut short
    (by itself, or by anyone on the path who can send a FIN): the client hears
    ``onErr`` ``tls`` before the close, what came stays readable, and the access log's
    line says ``truncated``. A peer that ends with close_notify closes cleanly."""

    LOG_LEVEL = "info"
    certs = None

    @classmethod
    def setUpClass(cls):
        cls.cert_dir = tempfile.mkdtemp(prefix="xhrpc-sockets-certs-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.cert_dir, True)
        cls.certs = certs.make_all(cls.cert_dir)
        super().setUpClass()

    @classmethod
    def server_args(cls):
        return ("--ca-file", cls.certs["ca"], "--log-format", "json")

    def tls_peer(self, serve):
        return self.peer(serve, context=tls_context(self.certs["good_cert"], self.certs["good_key"]))

    def socket_line(self, url, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            lines = [json.loads(l) for l in self.server.stderr_text(10 ** 7).splitlines() if l.startswith("{")]
            found = [l for l in lines if l.get("logger") == "xhrpc.access" and l.get("url") == url]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.02)  # polling the log file, bounded above

    def events_until_closed(self, c, h):
        events = []
        while not events or events[-1][0] != "socket.onClose":
            events.append(next_event(c, h))
        return events

    def test_an_end_without_close_notify_is_reported_as_truncated(self):
        c = self.connect()
        data = b"the first half of the answer"
        peer = self.tls_peer(say_then_cut(data))
        h = self.create_connect(c, "127.0.0.1", peer.port, ssl=True)
        events = self.events_until_closed(c, h)
        endpoint = "127.0.0.1:%d" % peer.port
        self.assertEqual([m for m, _ in events], ["socket.onOpen", "socket.onRead", "socket.onErr", "socket.onClose"])
        self.assertEqual(events[2][1], {"socket": h, "error": "tls", "message":
                                        "SSL: %s closed the connection without a TLS close_notify: "
                                        "the stream may be truncated" % endpoint})
        self.assertEqual(Socket(c, h).read(), data)
        [line] = self.socket_line("tls://" + endpoint)
        self.assertEqual((line["reason"], line["truncated"], line["bytesIn"]), ("tls", "true", len(data)))

    def test_an_end_with_close_notify_is_clean(self):
        c = self.connect()
        data = b"the whole answer"
        peer = self.tls_peer(say_then_close(data))
        h = self.create_connect(c, "127.0.0.1", peer.port, ssl=True)
        events = self.events_until_closed(c, h)
        self.assertEqual([m for m, _ in events], ["socket.onOpen", "socket.onRead", "socket.onClose"])
        self.assertEqual(Socket(c, h).read(), data)
        [line] = self.socket_line("tls://127.0.0.1:%d" % peer.port)
        self.assertNotIn("reason", line)
        self.assertNotIn("truncated", line)


# ---------------------------------------------------------------------------
# The egress policy.

class Egress(SocketCase):
    """The server's own policy (loopback denied), and a deny pattern for a name."""

    DEFAULT_POLICY = True
    SERVER_ARGS = ("--deny", "blocked.test")

    def test_a_denied_address_gets_no_packet(self):
        # A name is resolved and each address checked before any connect: onErr.
        c = self.connect()
        sentinel = self.silent("127.0.0.1")
        h = self.create_connect(c, "localhost", sentinel.port)
        self.assertFailed(c, h, "policy_denied", DENIED)
        self.assertFalse(sentinel.attempted(0.3), "the denied address received a connection")

    def test_a_denied_literal_is_refused_by_connect_itself(self):
        # An IP literal is its own address: the host rules see its range at once, as for
        # an http URL, so connect answers the denial and nothing is looked up or sent.
        c = self.connect()
        for host in ("127.0.0.1", "::1", "[::1]"):
            with self.subTest(host=host):
                sentinel = self.silent("::1" if ":" in host else "127.0.0.1")
                h = c.call("socket.create", {"host": host, "port": sentinel.port})["socket"]
                e = rpc_error(lambda: c.call("socket.connect", {"socket": h}))
                self.assertEqual((e.code, e.reason), (-32003, "policy_denied"))
                self.assertIn("special-purpose range", e.message)
                self.assertState(c, h, 0)
                self.assertNoEvents(c, h)
                self.assertFalse(sentinel.attempted(0.3), "the denied address received a connection")

    def test_a_denied_host_is_refused_at_connect(self):
        c = self.connect()
        h = c.call("socket.create", {"host": "blocked.test", "port": 443, "ssl": True})["socket"]
        e = rpc_error(lambda: c.call("socket.connect", {"socket": h}))
        self.assertEqual((e.code, e.reason), (-32003, "policy_denied"))
        self.assertState(c, h, 0)
        self.assertNoEvents(c, h)
        s = Socket(c, h)
        with self.assertRaises(RPCError) as caught:
            s.connect()
        self.assertEqual(caught.exception.reason, "policy_denied")


# ---------------------------------------------------------------------------
# A real service: redis.

class Redis(SocketCase):
    """redis-server (Debian package redis-server) on 127.0.0.1, no persistence."""

    @classmethod
    def setUpClass(cls):
        if not (os.path.isfile(REDIS) and os.access(REDIS, os.X_OK)):
            raise AssertionError("%s is missing: install the Debian package redis-server "
                                 "(apt-get install redis-server; make test-deps does)" % REDIS)
        cls.redis_dir = tempfile.mkdtemp(prefix="xhrpc-redis-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.redis_dir, True)
        cls.redis_port = free_tcp_port()
        cls.redis_log = open(os.path.join(cls.redis_dir, "redis.log"), "wb")
        cls.addClassCleanup(cls.redis_log.close)
        cls.redis = subprocess.Popen(
            [REDIS, "--port", str(cls.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", cls.redis_dir, "--daemonize", "no", "--logfile", ""],
            stdin=subprocess.DEVNULL, stdout=cls.redis_log, stderr=subprocess.STDOUT)
        cls.addClassCleanup(cls._stop_redis)
        cls._wait_redis()
        super().setUpClass()

    @classmethod
    def _wait_redis(cls):
        deadline = time.monotonic() + 15
        while True:
            if cls.redis.poll() is not None:
                raise AssertionError("redis-server exited with %s at start" % cls.redis.returncode)
            try:
                with socket.create_connection(("127.0.0.1", cls.redis_port), timeout=2) as s:
                    s.sendall(resp("PING"))
                    if s.recv(64) == b"+PONG\r\n":
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("redis-server did not answer PING within 15 s")
            try:
                cls.redis.wait(0.02)
            except subprocess.TimeoutExpired:
                pass

    @classmethod
    def _stop_redis(cls):
        if cls.redis.poll() is None:
            os.kill(cls.redis.pid, signal.SIGTERM)
            try:
                cls.redis.wait(10)
            except subprocess.TimeoutExpired:
                cls.redis.kill()
                cls.redis.wait(10)

    def test_ping_set_get(self):
        c = self.connect()
        s = self.open_socket(c, "127.0.0.1", self.redis_port)
        s.write(resp("PING"))
        self.assertEqual(s.read_until(b"\r\n", timeout=10), b"+PONG\r\n")
        s.write(resp("SET", "k", "v"))
        self.assertEqual(s.read_until(b"\r\n", timeout=10), b"+OK\r\n")
        s.write(resp("GET", "k"))
        self.assertEqual(s.read_until(b"\r\n", timeout=10), b"$1\r\n")
        self.assertEqual(s.read_exactly(3, timeout=10), b"v\r\n")
        # A binary value and three commands in one write.
        value = bytes(range(256)) * 64
        s.write(resp("SET", "bin", value) + resp("GET", "bin") + resp("DEL", "k", "bin"))
        self.assertEqual(s.read_until(b"\r\n", timeout=10), b"+OK\r\n")
        self.assertEqual(s.read_until(b"\r\n", timeout=10), b"$%d\r\n" % len(value))
        self.assertTrue(s.read_exactly(len(value) + 2, timeout=10) == value + b"\r\n", "the value differs")
        self.assertEqual(s.read_until(b"\r\n", timeout=10), b":2\r\n")
        # QUIT: redis answers and closes; the socket ends cleanly.
        s.write(resp("QUIT"))
        self.assertEqual(s.read_until(b"\r\n", timeout=10), b"+OK\r\n")
        self.assertEqual(s.read_until_closed(timeout=10), b"")
        s.wait_closed(timeout=10)
        self.assertIsNone(s.error)
        self.assertEqual(s.state(), "Disconnected")


# ---------------------------------------------------------------------------
# Principals, connections and limits.

class Principals(SocketCase):
    TCP = True
    PRINCIPALS = (ALICE, BOB)

    def as_(self, name):
        c = self.server.connect_as(name)
        self.addCleanup(c.close)
        return c

    def test_another_principals_handle_is_unknown(self):
        a, b = self.as_("alice"), self.as_("bob")
        peer = self.peer(echo)
        s = self.open_socket(a, "127.0.0.1", peer.port, name="alices")
        for method, params in (
                ("socket.getState", {}), ("socket.read", {}), ("socket.write", {"data": "x"}),
                ("socket.write", {"dataBase64": "eA=="}), ("socket.connect", {}), ("socket.disconnect", {}),
                ("socket.disableHostVerification", {}), ("socket.disablePeerVerification", {}),
                ("socket.release", {}), ("subscribe", {})):
            with self.subTest(method=method):
                self.assertEqual(reason_of(b, method, dict(params, socket="alices")), "unknown_handle")
        # Bob may use the same name: handles are per principal.
        self.assertEqual(b.call("socket.create", {"host": "127.0.0.1", "port": 9, "socket": "alices"}),
                         {"socket": "alices"})
        self.assertEqual(peer.snapshot()["received"], 0, "bob's write reached alice's peer")
        self.assertEqual(s.state(), "Open")
        self.assertEqual(s.write("still mine"), 10)
        self.assertEqual(s.read_exactly(10, timeout=10), b"still mine")

    def test_list_shows_sockets_per_principal(self):
        a, b = self.as_("alice"), self.as_("bob")
        peer = self.peer(echo)
        a.call("create", {"request": "r1"})
        self.open_socket(a, "127.0.0.1", peer.port, name="listed")
        a.call("socket.create", {"host": "localhost", "port": 443, "ssl": True, "socket": "idle"})
        self.assertMessage([
            {"socket": "idle", "kind": "socket", "host": "localhost", "port": 443, "ssl": True,
             "state": 0, "stateName": "Prepared"},
            {"socket": "listed", "kind": "socket", "host": "127.0.0.1", "port": peer.port, "ssl": False,
             "state": 2, "stateName": "Open"},
            {"request": "r1", "kind": "request", "state": 0, "stateName": "UNSENT"},
        ], sorted((_known_keys(e) for e in a.call("list")), key=lambda e: e.get("socket") or "~" + e["request"]))
        self.assertEqual(b.call("list"), [])

    def test_a_subscriber_on_another_connection_gets_the_sockets_notifications(self):
        a, a2, everything, b = self.as_("alice"), self.as_("alice"), self.as_("alice"), self.as_("bob")
        everything.call("subscribe", {"all": True})
        peer = self.peer(echo)
        s = a.socket("127.0.0.1", peer.port, name="watched")
        self.addCleanup(s.__exit__)
        sub = a2.call("subscribe", {"socket": "watched"})
        self.assertIsInstance(sub["subscription"], str)
        self.assertEqual(reason_of(b, "subscribe", {"socket": "watched"}), "unknown_handle")
        s.connect()
        s.wait_open(timeout=10)
        self.assertEvent(a2, "watched", "socket.onOpen", {"socket": "watched"})
        s.write("ping")
        self.assertEvent(a2, "watched", "socket.onRead", {"socket": "watched", "available": 4})
        self.assertEqual(s.read_exactly(4, timeout=10), b"ping")
        s.disconnect()
        s.wait_closed(timeout=10)
        self.assertEvent(a2, "watched", "socket.onClose", {"socket": "watched"})
        self.assertEqual([m for m, _ in (next_event(everything, "watched") for _ in range(3))],
                         ["socket.onOpen", "socket.onRead", "socket.onClose"])
        self.assertNoEvents(b, "watched")

    def test_closing_the_creating_connection_releases_the_socket(self):
        a = self.as_("alice")
        peer = self.peer(echo)
        s = a.socket("127.0.0.1", peer.port, name="short-lived")
        s.connect()
        s.wait_open(timeout=10)
        s.write("x")
        self.assertEqual(s.read_exactly(1, timeout=10), b"x")
        a.close()
        peer.wait_for(lambda p: p.eofs >= 1, 10, "the peer sees EOF when alice's connection closes")
        other = self.as_("alice")
        poll_until(lambda: not any(e.get("socket") == "short-lived" for e in other.call("list")), 10,
                   "the socket released")
        self.assertEqual(reason_of(other, "socket.getState", {"socket": "short-lived"}), "unknown_handle")

    def test_detach_and_attach_carry_a_socket_to_a_new_connection(self):
        first = self.server.connect_as("alice")
        self.addCleanup(first.close)
        peer = self.peer(echo)
        s = first.socket("127.0.0.1", peer.port, name="carried")
        s.connect()
        s.wait_open(timeout=10)
        detached = first.call("detach")
        self.assertRegex(detached["token"], r"^att_[0-9a-f]{32}$")
        self.assertIn("carried", detached.get("sockets", []) + detached.get("requests", []), detached)
        first.close()
        second = self.as_("alice")
        attached = second.call("attach", {"token": detached["token"]})
        self.assertIn("carried", attached.get("sockets", []) + attached.get("requests", []), attached)
        self.assertEqual(peer.snapshot()["eofs"], 0, "the stream was closed while detached")
        carried = Socket(second, "carried")
        self.assertEqual(carried.state(), "Open")
        carried.write("across")
        self.assertEvent(second, "carried", "socket.onRead", {"socket": "carried", "available": 6})
        self.assertEqual(carried.read_exactly(6, timeout=10), b"across")
        carried.release()
        peer.wait_for(lambda p: p.eofs >= 1, 10, "the peer sees the release")


class SocketTtl(SocketCase):
    SERVER_ARGS = ("--request-ttl", "0.5")

    def test_an_unused_prepared_socket_expires_and_an_open_one_stays(self):
        c = self.connect()
        peer = self.peer(echo)
        c.call("socket.create", {"host": "127.0.0.1", "port": 9, "socket": "idle"})
        s = self.open_socket(c, "127.0.0.1", peer.port, name="busy")
        poll_until(lambda: not any(e.get("socket") == "idle" for e in c.call("list")), 10, "idle released")
        self.assertEqual(reason_of(c, "socket.getState", {"socket": "idle"}), "unknown_handle")
        self.assertEqual(peer.snapshot()["eofs"], 0)
        self.assertEqual(s.state(), "Open")
        self.assertEqual(s.write("alive"), 5)
        self.assertEqual(s.read_exactly(5, timeout=10), b"alive")


class SocketLimit(SocketCase):
    SERVER_ARGS = ("--limit", "sockets=2")

    def test_the_third_socket_is_refused(self):
        c = self.connect()
        first = c.socket("127.0.0.1", 9)
        c.socket("127.0.0.1", 9, name="second")
        e = rpc_error(lambda: c.call("socket.create", {"host": "127.0.0.1", "port": 9}))
        self.assertEqual((e.code, e.data), (-32004, {"reason": "limit_exceeded", "limit": "sockets", "max": 2}))
        # Named or not, on this connection or another of the principal.
        with self.server.connect() as other:
            self.assertEqual(reason_of(other, "socket.create", {"host": "127.0.0.1", "port": 9, "socket": "x"}),
                             "limit_exceeded")
        # Requests are counted apart; a released socket frees its place.
        self.assertIn("request", c.call("create"))
        first.release()
        self.assertEqual(c.call("socket.create", {"host": "127.0.0.1", "port": 9, "socket": "third"}),
                         {"socket": "third"})
