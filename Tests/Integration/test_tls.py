"""The TLS listener (``--listen tls:HOST:PORT --tls-cert --tls-key``) through the real
xhrpcd: the same protocol with the server's certificate verified, refused handshakes
that leave the server serving others, plaintext and silent clients closed, a TLS
half-close, a 32 MiB body byte-exact, and a client that never reads closed with the
server's memory given back.

Certificates are made at test time (Tests/Fixtures/certs.py) by support.XhrpcServer
with ``tls=True``, in the server's temporary directory.
"""

import json
import os
import select
import shutil
import socket
import ssl
import struct
import tempfile
import time
import unittest

from support import SERVER_INFO, ServerTestCase, Upstream, XhrpcServer, free_tcp_port, line, req, result
from test_daemon import run_briefly
from test_request_object import MIB, ObjectTestCase, note, poll_until, proc_kib
from xhrpc import Client, ConnectionClosed, RPCError

import certs  # Tests/Fixtures, on sys.path once support is imported  # noqa: E402

INFO = "server.info"


def info(id):
    return result(SERVER_INFO, id)


def read_until_closed(sock, timeout):
    """Everything ``sock`` receives until the peer closes it (or ``timeout`` s pass)."""
    deadline = time.monotonic() + timeout
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("the server did not close the connection within %s s (got %r)" % (timeout, data[:100]))
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            continue
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


# A ClientHello built by hand (RFC 5246 §7.4.1.2, RFC 8422 for the EC extensions), so
# that a test can offer a version its own OpenSSL refuses to offer.
TLS_1_1 = 0x0302
TLS_1_2 = 0x0303
# ECDHE-ECDSA and ECDHE-RSA with AES-CBC-SHA, and RSA with AES-CBC-SHA: what a TLS 1.1
# client offers (the server's certificate is ECDSA P-256).
TLS_1_1_SUITES = (0xC009, 0xC00A, 0xC013, 0xC014, 0x002F, 0x0035)
# ECDHE with AES-GCM and ChaCha20-Poly1305, the suites the listener allows for TLS 1.2.
TLS_1_2_SUITES = (0xC02B, 0xC02C, 0xC02F, 0xC030, 0xCCA9, 0xCCA8)


def client_hello(version, suites, server_name="localhost"):
    """One TLS record holding a ClientHello for ``version`` offering ``suites``: SNI,
    supported_groups (x25519, P-256, P-384), ec_point_formats (uncompressed) and
    signature_algorithms (ECDSA, RSA-PSS, RSA PKCS#1 with SHA-256/384, and SHA-1)."""
    def ext(kind, data):
        return struct.pack("!HH", kind, len(data)) + data

    name = server_name.encode()
    groups = struct.pack("!3H", 0x001D, 0x0017, 0x0018)
    sigalgs = struct.pack("!8H", 0x0403, 0x0503, 0x0804, 0x0805, 0x0401, 0x0501, 0x0203, 0x0201)
    extensions = (ext(0x0000, struct.pack("!HBH", len(name) + 3, 0, len(name)) + name)
                  + ext(0x000A, struct.pack("!H", len(groups)) + groups)
                  + ext(0x000B, b"\x01\x00")
                  + ext(0x000D, struct.pack("!H", len(sigalgs)) + sigalgs))
    cipher_suites = struct.pack("!%dH" % len(suites), *suites)
    body = (struct.pack("!H", version) + os.urandom(32) + b"\x00"
            + struct.pack("!H", len(cipher_suites)) + cipher_suites + b"\x01\x00"
            + struct.pack("!H", len(extensions)) + extensions)
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    # The record layer says TLS 1.0, as clients do for the first flight.
    return struct.pack("!BHH", 22, 0x0301, len(handshake)) + handshake


def first_tls_answer(sock, timeout):
    """What the server answers a ClientHello with: ``("alert", level, description)``,
    ``("server_hello", version)``, ``("closed",)`` when it closes first, or
    ``("other", content type, first bytes)``."""
    deadline = time.monotonic() + timeout
    data = b""

    def need(n):
        nonlocal data
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no TLS answer within %s s (got %r)" % (timeout, data[:64]))
            ready, _, _ = select.select([sock], [], [], left)
            if not ready:
                continue
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return False
            data += chunk
        return True

    if not need(5):
        return ("closed",)
    kind, _, length = struct.unpack("!BHH", data[:5])
    if not need(5 + length):
        return ("closed",)
    fragment = data[5:5 + length]
    if kind == 21 and length == 2:
        return ("alert", fragment[0], fragment[1])
    if kind == 22 and length >= 6 and fragment[0] == 2:
        return ("server_hello", struct.unpack("!H", fragment[4:6])[0])
    return ("other", kind, fragment[:16])


class Startup(unittest.TestCase):
    """A tls: listener that cannot work stops the server at start, saying why."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="xhrpc-tls-start-")
        cls.certs = certs.make_all(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def refused(self, *argv):
        code, err = run_briefly(["--listen", "tls:127.0.0.1:%d" % free_tcp_port()] + list(argv))
        self.assertNotEqual(code, 0, argv)
        return err

    def test_without_certificate_and_key(self):
        self.assertIn("TLS needs a certificate and its key (--tls-cert FILE and --tls-key FILE", self.refused())

    def test_certificate_without_key(self):
        self.assertIn("--tls-cert and --tls-key go together", self.refused("--tls-cert", self.certs["good_cert"]))

    def test_missing_certificate_file(self):
        missing = os.path.join(self.dir, "missing.pem")
        err = self.refused("--tls-cert", missing, "--tls-key", self.certs["good_key"])
        self.assertIn("cannot read the TLS certificate file %s: No such file or directory" % missing, err)

    def test_key_of_another_certificate(self):
        err = self.refused("--tls-cert", self.certs["good_cert"], "--tls-key", self.certs["untrusted_key"])
        self.assertIn("the TLS key file %s does not belong to the certificate in %s"
                      % (self.certs["untrusted_key"], self.certs["good_cert"]), err)

    def test_non_loopback_is_refused_like_tcp(self):
        code, err = run_briefly(["--listen", "tls:0.0.0.0:%d" % free_tcp_port(),
                                 "--tls-cert", self.certs["good_cert"], "--tls-key", self.certs["good_key"]])
        self.assertNotEqual(code, 0)
        self.assertIn("non-loopback", err)


def first_admitted(connect):
    """The first client of ``connect()`` that a server with --max-connections 1 serves.
    The start-up probes (plain connects to each port) hold the slot until the server
    has seen them go, so it retries until one is in."""
    def admitted():
        c = connect()
        try:
            c.request(INFO, None, id=1)
            return c
        except (ConnectionClosed, OSError):  # refused, or closed before we wrote
            c.close()
            return None
    return poll_until(admitted, 10, "one client admitted")


class TLSServer:
    """Mixed into a test case: a server with a TLS listener too, and ``connect()``
    gives a verified TLS client."""

    TLS = True
    # Short, so the deadline test is quick; a loopback handshake takes milliseconds.
    HANDSHAKE_TIMEOUT_MS = 1500

    @classmethod
    def server_args(cls):
        return tuple(super().server_args()) + ("--tls-handshake-timeout", str(cls.HANDSHAKE_TIMEOUT_MS))

    def connect(self):
        c = self.server.connect_tls()
        self.addCleanup(c.close)
        return c

    def raw_tcp(self, timeout=10):
        """A plain TCP socket to the TLS port."""
        s = socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=timeout)
        self.addCleanup(s.close)
        return s

    def assertStillServing(self, id="after"):
        self.assertMessage(info(id), self.connect().request(INFO, None, id=id))


class Handshakes(TLSServer, ServerTestCase):
    """Who gets in, who does not, and that the others keep being served."""

    def test_server_info_with_verification(self):
        c = self.connect()
        self.assertIn(c.tls.version, ("TLSv1.2", "TLSv1.3"))
        self.assertMessage(info(1), c.request(INFO, None, id=1))
        got = c.batch([(INFO, None), (INFO, None)])
        self.assertEqual(len(got), 2)
        for m in got:
            self.assertMessage(info(m["id"]), m)

    def test_by_name_localhost(self):
        c = self.server.connect_tls(server_hostname="localhost")
        self.addCleanup(c.close)
        self.assertMessage(info(1), c.request(INFO, None, id=1))

    def test_tls_1_2_only_client(self):
        ctx = ssl.create_default_context(cafile=self.server.certs["ca"])
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        c = self.server.connect_tls(context=ctx)
        self.addCleanup(c.close)
        self.assertEqual(c.tls.version, "TLSv1.2")
        self.assertMessage(info(1), c.request(INFO, None, id=1))

    def test_tls_1_1_client_is_refused(self):
        # Python's OpenSSL 3 will not offer TLS 1.1 at its default security level, so
        # the hello is built by hand and goes out whole: the server must answer it with
        # the protocol_version alert. A server without its TLS 1.2 floor would still
        # refuse (its cipher list has no suite TLS 1.1 can use) but with
        # handshake_failure (40): the description tells the floor from the cipher list.
        s = self.raw_tcp()
        s.sendall(client_hello(TLS_1_1, TLS_1_1_SUITES))
        self.assertEqual(first_tls_answer(s, 10), ("alert", 2, 70),
                         "a TLS 1.1 ClientHello is answered with a fatal protocol_version alert")
        self.assertStillServing()

    def test_the_hand_built_hello_is_valid_as_tls_1_2(self):
        # The probe of the test above, with only the version and the suites changed,
        # gets a ServerHello for TLS 1.2: the hello itself is well formed, so the
        # refusal above is for the version alone.
        s = self.raw_tcp()
        s.sendall(client_hello(TLS_1_2, TLS_1_2_SUITES))
        self.assertEqual(first_tls_answer(s, 10), ("server_hello", TLS_1_2))
        self.assertStillServing()

    def test_the_hand_built_tls_1_1_hello_is_accepted_where_tls_1_1_is(self):
        # The same TLS 1.1 hello, sent to the fixture upstream made to speak TLS 1.1
        # only (at OpenSSL security level 0), gets a ServerHello for TLS 1.1: it is a
        # hello a TLS 1.1 server takes, so the test above would fail against a listener
        # that accepted TLS 1.1.
        certs_ = self.server.certs
        up = Upstream(args=("--tls-cert", certs_["good_cert"], "--tls-key", certs_["good_key"],
                            "--tls-min", "1.1", "--tls-max", "1.1")).start()
        self.addCleanup(up.stop)
        s = socket.create_connection(("127.0.0.1", up.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(client_hello(TLS_1_1, TLS_1_1_SUITES))
        self.assertEqual(first_tls_answer(s, 10), ("server_hello", TLS_1_1))

    def test_wrong_ca_fails_and_the_server_keeps_serving(self):
        with self.assertRaises(ssl.SSLCertVerificationError):
            self.server.connect_tls(cafile=self.server.certs["untrusted_ca"]).close()
        self.assertStillServing()

    def test_wrong_name_fails(self):
        with self.assertRaises(ssl.SSLCertVerificationError) as caught:
            self.server.connect_tls(server_hostname="wrong.example").close()
        self.assertIn("wrong.example", str(caught.exception))
        self.assertStillServing()

    def test_plaintext_client_is_closed_and_the_server_keeps_serving(self):
        s = self.raw_tcp()
        s.sendall(line(req(INFO, 1)))
        got = read_until_closed(s, 10)
        # At most a TLS alert record (content type 21), never a JSON-RPC reply.
        self.assertTrue(got == b"" or got[0] == 21, "plaintext answered with %r" % got[:100])
        self.assertStillServing()

    def test_silent_client_is_closed_at_the_handshake_deadline(self):
        s = self.raw_tcp()
        t0 = time.monotonic()
        self.assertEqual(read_until_closed(s, 10 + self.HANDSHAKE_TIMEOUT_MS / 1000), b"")
        note("a silent TCP client was closed after %.2f s (deadline %d ms)"
             % (time.monotonic() - t0, self.HANDSHAKE_TIMEOUT_MS))
        self.assertStillServing()

    def test_half_handshake_then_silence_is_closed(self):
        # The first bytes of a ClientHello, then nothing: the record never completes.
        s = self.raw_tcp()
        s.sendall(bytes([22, 3, 1, 0x02, 0x00, 1, 0, 1]))
        self.assertEqual(read_until_closed(s, 10 + self.HANDSHAKE_TIMEOUT_MS / 1000), b"")
        self.assertStillServing()


class Framing(TLSServer, ServerTestCase):
    """The NDJSON framing and the half-close, through TLS."""

    def test_values_split_across_writes_and_records(self):
        c = self.connect()
        c.send_raw(b'{"jsonrpc":"2.0",')
        c.send_raw(b'"method":"server.info","id":1}{"jsonrpc"')
        c.send_raw(b':"2.0","method":"server.info","id":2}\n')
        self.assertNextMessages(c, [info(1), info(2)])

    def test_half_close_still_gets_replies(self):
        # shutdown_write sends close_notify and half-closes; the replies still come.
        c = self.connect()
        c.send_raw(line(req(INFO, 1)) + line([req(INFO, 2), req(INFO, 3)]))
        c.shutdown_write()
        self.assertNextMessages(c, [info(1), [info(2), info(3)]])
        self.assertTrue(c.wait_closed(10), "server did not close after answering a half-closed TLS client")
        self.assertEqual(c.pending(), [])
        self.assertEqual(c.malformed, [])


class LargeBody(TLSServer, ObjectTestCase):
    """A 32 MiB response body through getReceiveBuffer over TLS, byte-exact."""

    SIZE = 32 * MIB

    def test_32_mib_byte_exact(self):
        self.need("create", "open", "send", "getReceiveBuffer")
        c = self.connect()
        self.start_request(c, "big", self.url("/bytes/%d?seed=5" % self.SIZE))
        self.assertBody(c, "big", self.SIZE, seed=5, timeout=120)


class NeverReadingClient(TLSServer, ObjectTestCase):
    """A TLS client that asks for more than the out-queue limit (64 MiB) and does not
    read is held to about 4 MiB of queued replies: the server runs its further calls only
    as it reads, so it is neither closed nor a cost; the others are served meanwhile,
    every reply arrives once it reads, and the server's memory comes back afterwards."""

    BODIES = 8
    BODY = 7 * MIB  # under the default --max-buffer-bytes (8 MiB): each body is buffered whole

    def test_held_to_its_queue_and_memory_given_back(self):
        self.need("create", "open", "send", "getReceiveBuffer", "release", "list")
        pid = self.server.proc.pid
        c = self.connect()
        names = ["lazy%d" % i for i in range(self.BODIES)]
        for i, name in enumerate(names):
            c.send_raw(line([req("create", 1, {"request": name}),
                             req("open", 2, {"request": name, "method": "GET",
                                             "url": self.url("/bytes/%d?seed=%d" % (self.BODY, i))}),
                             req("send", 3, {"request": name})]))

        def all_done():
            items = c.call("list")
            return len(items) == self.BODIES and all(it["state"] == 5 for it in items)
        poll_until(all_done, 60, "all %d bodies downloaded" % self.BODIES)
        rss_before = proc_kib(pid, "VmRSS")

        # A raw TLS socket that asks for every body (~9.3 MiB of base64 each, 75 MiB in
        # all) and reads nothing for a while.
        ctx = ssl.create_default_context(cafile=self.server.certs["ca"])
        lazy = ctx.wrap_socket(self.raw_tcp(), server_hostname="127.0.0.1")
        self.addCleanup(lazy.close)
        lazy.sendall(b"".join(line(req("getReceiveBuffer", i, {"request": n})) for i, n in enumerate(names)))
        time.sleep(1)  # room for a server that would encode every reply at once to do so
        self.assertMessage(info("during"), c.request(INFO, None, id="during"))
        self.assertEqual(c.call(INFO)["connections"], 2, "the client that does not read is still connected")
        held = proc_kib(pid, "VmRSS") - rss_before
        # Two replies at most are encoded ahead of the client (the queue passes 4 MiB
        # within the second): far below the 75 MiB it asked for.
        self.assertLess(held, 40 * 1024, "the server grew by %d KiB for a client that does not read" % held)

        # Now it reads: every reply arrives, in order, each a whole body.
        lazy.settimeout(30)
        buf = bytearray()
        got = []
        # A hang guard, not a speed test: the debug build moves 75 MiB through TLS in
        # 20-60 s on a loaded 2-core box, which passed 60 s once under `make test`.
        deadline = time.monotonic() + 180
        while len(got) < self.BODIES:
            self.assertLess(time.monotonic(), deadline, "%d of %d replies within 180 s" % (len(got), self.BODIES))
            chunk = lazy.recv(1 << 20)
            self.assertTrue(chunk, "closed after %d replies" % len(got))
            buf += chunk
            *lines, tail = buf.split(b"\n")
            buf = bytearray(tail)
            got += [json.loads(raw) for raw in lines]
        self.assertEqual([(m["id"], m["result"]["bytes"]) for m in got], [(i, self.BODY) for i in range(self.BODIES)])
        lazy.close()
        poll_until(lambda: c.call(INFO)["connections"] == 1, 30, "the lazy client's connection gone")
        for name in names:
            c.call("release", {"request": name})
        rss_after = poll_until(lambda: (lambda r: r if r <= rss_before + 16 * 1024 else None)(proc_kib(pid, "VmRSS")),
                               30, "VmRSS back within 16 MiB of its level before the lazy client")
        peak = proc_kib(pid, "VmHWM")
        note("TLS client asking %d x %d MiB without reading: held, %d KiB more while it did not read; xhrpcd VmRSS "
             "%.1f MiB before, %.1f MiB after, peak (VmHWM) %.1f MiB"
             % (self.BODIES, self.BODY // MIB, held, rss_before / 1024, rss_after / 1024, peak / 1024))
        self.assertLess(peak, rss_before + 200 * 1024, "peak RSS beyond what the limits explain")


class RefusedOverTLS(TLSServer, ServerTestCase):
    """Past --max-connections a TLS client still gets the error, after its handshake,
    and is then closed (the refused connection waits for its flush, not forever)."""

    SERVER_ARGS = ("--max-connections", "1")

    def test_refusal_arrives_then_close(self):
        first = first_admitted(self.server.connect_tls)
        self.addCleanup(first.close)
        second = self.connect()
        refusal = second.read_message(10)
        self.assertEqual(refusal["id"], None)
        self.assertEqual(refusal["error"]["data"]["reason"], "limit_exceeded")
        self.assertTrue(second.wait_closed(10), "the refused TLS connection was not closed")
        self.assertMessage(info(2), first.request(INFO, None, id=2))


class RefusedMidHandshake(unittest.TestCase):
    """A refused TLS connection that never finishes its handshake does not hold up a
    shutdown: with a one-minute handshake timeout the server still exits 0 at once."""

    def test_shutdown_closes_it_without_waiting_for_the_handshake(self):
        server = XhrpcServer(tls=True, args=("--max-connections", "1", "--tls-handshake-timeout", "60000"),
                             log_level="info").start()
        self.addCleanup(server.kill)

        holder = first_admitted(server.connect)  # a Unix client takes the one slot
        silent = socket.create_connection(("127.0.0.1", server.tls_port), timeout=10)
        self.addCleanup(silent.close)
        # Refused; the refusal waits for a handshake that never comes.
        poll_until(lambda: "refusing connection" in server.stderr_text(), 10, "the refusal logged")
        holder.close()
        started = time.monotonic()
        # STOP_DEADLINE (15 s) is far below the 60 s handshake timeout: a server that
        # waited for the handshake would be killed and stop() would answer None.
        self.assertEqual(server.stop(), 0)
        self.assertEqual(silent.recv(1), b"")
        note("stopped %.2f s after SIGTERM with a refused connection mid-handshake" % (time.monotonic() - started))


class PrincipalsOverTLS(TLSServer, ServerTestCase):
    """A TLS listener with principals: ``connect_tls(token=...)`` authenticates before
    it returns; a wrong token raises and leaves the connection closed."""

    PRINCIPALS = ({"name": "carol", "token": "carol-" + "c" * 40},)

    def test_token_argument_authenticates_and_a_wrong_one_raises(self):
        kwargs = {"cafile": self.server.certs["ca"]}
        with Client.connect_tls("127.0.0.1", self.server.tls_port, token="carol-" + "c" * 40, **kwargs) as c:
            self.assertEqual(c.auth_result, {"principal": "carol", "admin": False})
            self.assertEqual(c.call("list"), [])
        with self.assertRaises(RPCError) as e:
            Client.connect_tls("127.0.0.1", self.server.tls_port, token="not-carol", **kwargs)
        self.assertEqual(e.exception.reason, "unauthenticated")
        with self.server.connect_tls() as anonymous:
            with self.assertRaises(RPCError) as e:
                anonymous.call("list")
            self.assertEqual(e.exception.reason, "unauthenticated")
