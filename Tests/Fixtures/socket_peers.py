"""Loopback peers for the raw-socket tests (Tests/Integration/test_sockets.py).

A ``Peer`` listens on 127.0.0.1 (or ::1, or both on one port) with a port the kernel
picks, accepts on a thread of its own and runs one ``serve(conn, peer)`` per
connection, each on its own thread; with ``context`` (an ``ssl.SSLContext`` for a
server) the connection is TLS and a refused handshake is counted in
``handshake_errors``.  ``Silent`` listens and never accepts, to show that nothing ever
tried to connect.

The ``serve`` functions here: ``echo`` (every byte back until EOF), ``send_then_close(n)``
(n pattern bytes, then FIN; ``Tests/Fixtures/pattern.py``), ``say_then_close(data)``,
``say_then_cut(data)`` (over TLS: data, then FIN without close_notify), ``hold_then_read``
(reads nothing until ``release_readers()``, then counts and hashes everything until EOF)
and ``read_to_eof`` (counts until EOF).  A TLS connection otherwise ends with
close_notify.

Standard library only.  Every wait has a deadline, and ``stop()`` ends every thread it
started (closing their sockets), so a failing test leaves nothing behind.
"""

import hashlib
import os
import select
import socket
import ssl
import threading

import pattern

HANDSHAKE_TIMEOUT = 10.0
IO_TIMEOUT = 30.0     # a peer blocked this long on one send or receive gives up
JOIN_TIMEOUT = 5.0


class Peer:
    """A listener on loopback serving each connection with ``serve(conn, peer)``.

    ``hosts``: the addresses to listen on, all with one port (``("127.0.0.1", "::1")``
    for a peer reached as ``localhost`` whichever address a resolver gives first).
    ``rcvbuf``: SO_RCVBUF for the accepted connections (set on the listener, which they
    inherit), to keep the kernel from taking in much for a peer that does not read.
    Counters and events are read by the test thread: ``accepted``, ``eofs`` (connections
    whose client closed or reset), ``received`` and ``sent`` (bytes, all connections),
    ``handshake_errors`` (TLS), and ``errors`` (anything a serve function raised).
    """

    def __init__(self, serve, hosts=("127.0.0.1",), context=None, rcvbuf=None):
        self.serve = serve
        self.hosts = tuple(hosts)
        self.context = context
        self.rcvbuf = rcvbuf
        self.port = None
        self.listeners = []
        self.accepted = 0
        self.eofs = 0
        self.received = 0
        self.sent = 0
        self.sha256 = hashlib.sha256()  # of what hold_then_read / read_to_eof received
        self.handshake_errors = []
        self.errors = []
        self.cond = threading.Condition()
        self.release = threading.Event()   # hold_then_read starts reading once set
        self._stop = threading.Event()
        self._conns = []
        self._threads = []
        self._wake_r, self._wake_w = socket.socketpair()

    # ---- life ---------------------------------------------------------------

    def start(self):
        for attempt in range(20):
            try:
                self._listen()
                break
            except OSError:
                # The first host's port was taken on another address: try a new one.
                for s in self.listeners:
                    s.close()
                self.listeners = []
                if attempt == 19:
                    raise
        t = threading.Thread(target=self._accept_loop, name="peer-accept", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def _listen(self):
        port = 0
        for host in self.hosts:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM)
            self.listeners.append(s)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if self.rcvbuf is not None:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
            s.bind((host, port))
            s.listen(64)
            port = s.getsockname()[1]
        self.port = port

    def stop(self):
        """Close the listeners and every connection; join the threads (bounded)."""
        self._stop.set()
        self.release.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        for s in self.listeners:
            s.close()
        with self.cond:
            conns = list(self._conns)
        for c in conns:
            _close_quietly(c)
        for t in self._threads:
            t.join(JOIN_TIMEOUT)
        self._wake_r.close()
        self._wake_w.close()
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            raise AssertionError("peer threads still running after stop: %s" % alive)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- accepting ------------------------------------------------------------

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select(self.listeners + [self._wake_r], [], [])
            except (OSError, ValueError):
                return
            for s in ready:
                if s is self._wake_r or self._stop.is_set():
                    return
                try:
                    conn, _ = s.accept()
                except OSError:
                    continue
                with self.cond:
                    self.accepted += 1
                    self._conns.append(conn)
                    self.cond.notify_all()
                t = threading.Thread(target=self._run, args=(conn,), name="peer-conn", daemon=True)
                self._threads.append(t)
                t.start()

    def _run(self, conn):
        conn.settimeout(HANDSHAKE_TIMEOUT)
        if self.context is not None:
            try:
                tls = self.context.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError) as e:
                with self.cond:
                    self.handshake_errors.append(e)
                    self.cond.notify_all()
                _close_quietly(conn)
                return
            with self.cond:
                self._conns.append(tls)
            conn = tls
        conn.settimeout(IO_TIMEOUT)
        try:
            self.serve(conn, self)
        except Exception as e:  # noqa: BLE001 -- reported to the test, not lost
            if not self._stop.is_set():
                with self.cond:
                    self.errors.append(e)
                    self.cond.notify_all()
        finally:
            _close_quietly(conn)

    # ---- for serve functions ----------------------------------------------------

    def recv(self, conn, size=65536, digest=False):
        """Bytes from ``conn``; ``b""`` at its end (EOF, reset or a TLS end without
        close_notify), which is counted in ``eofs``.  ``digest``: add them to
        ``sha256`` (with the count, under one lock)."""
        try:
            data = conn.recv(size)
        except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
            data = b""
        with self.cond:
            if data:
                self.received += len(data)
                if digest:
                    self.sha256.update(data)
            else:
                self.eofs += 1
            self.cond.notify_all()
        return data

    def send(self, conn, data):
        conn.sendall(data)
        with self.cond:
            self.sent += len(data)
            self.cond.notify_all()

    # ---- for the test ---------------------------------------------------------------

    def wait_for(self, predicate, timeout, what):
        """Wait until ``predicate(peer)`` holds (checked at each change); raise
        ``AssertionError`` naming ``what`` after ``timeout`` s."""
        with self.cond:
            if not self.cond.wait_for(lambda: predicate(self), timeout):
                raise AssertionError("peer: %s not within %.3g s (accepted %d, eofs %d, received %d, sent %d, "
                                     "handshake errors %r, errors %r)" % (
                                         what, timeout, self.accepted, self.eofs, self.received, self.sent,
                                         self.handshake_errors, self.errors))

    def snapshot(self):
        with self.cond:
            return {"accepted": self.accepted, "eofs": self.eofs, "received": self.received, "sent": self.sent}


def _close_quietly(conn):
    if isinstance(conn, ssl.SSLSocket):
        # A TLS end proper: close_notify first (Python's shutdown and close send none),
        # so the client can tell this end from a cut (``say_then_cut``).
        try:
            conn.settimeout(JOIN_TIMEOUT)
            conn = conn.unwrap()
        except (OSError, ValueError):
            pass
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        conn.close()
    except OSError:
        pass


# ---- serve functions ---------------------------------------------------------------

def echo(conn, peer):
    """Send back every byte received, until the client's end."""
    while True:
        data = peer.recv(conn)
        if not data:
            return
        peer.send(conn, data)


def send_then_close(n, seed=0, piece=65521):
    """A serve function: the first ``n`` bytes of the pattern for ``seed``, then FIN."""
    def serve(conn, peer):
        for chunk in pattern.iter_pattern(n, seed, piece):
            peer.send(conn, chunk)
    return serve


def say_then_close(data):
    """A serve function: ``data``, then FIN (without reading anything)."""
    def serve(conn, peer):
        peer.send(conn, data)
    return serve


def say_then_cut(data):
    """A serve function: ``data`` over TLS, then FIN on the TCP connection with no TLS
    close_notify before it, as a peer that crashed or an attacker who cut it would."""
    def serve(conn, peer):
        peer.send(conn, data)
        cut = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            cut.shutdown(socket.SHUT_RDWR)
        finally:
            cut.close()
    return serve


def hold_then_read(conn, peer):
    """Read nothing until ``peer.release`` is set; then count and hash every byte
    until the client's end."""
    if not peer.release.wait(IO_TIMEOUT):
        raise AssertionError("hold_then_read was never released")
    read_to_eof(conn, peer)


def read_to_eof(conn, peer):
    """Count and hash every byte until the client's end."""
    while peer.recv(conn, digest=True):
        pass


class Silent:
    """A listening socket nobody accepts on: a connection attempt would complete into
    its backlog, so ``attempted(wait)`` shows whether one ever arrived."""

    def __init__(self, host="127.0.0.1"):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def attempted(self, wait=0.3):
        """True if a connection is waiting to be accepted, within ``wait`` s."""
        ready, _, _ = select.select([self.sock], [], [], wait)
        return bool(ready)

    def close(self):
        self.sock.close()


def tls_context(cert, key):
    """A server-side TLS context presenting ``cert`` (TLS 1.2 or later)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx
