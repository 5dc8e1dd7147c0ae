"""Real third-party peers for the tests, started on loopback, and the calls that use them.

Reusable by any suite (the credentials store's tests too):

- ``start_httpbin()``: httpbin under waitress (``Tests/Fixtures/httpbin_peer.py``).
- ``start_h2_peer(certs)``: hypercorn over TLS with ALPN h2 (``h2_peer.py``).
- ``start_ntlm_peer(user, password)``: an origin doing the NTLM handshake with
  pyspnego (``auth_peers.py``); returns an ``NTLMPeer`` with ``port``, ``url(path)``,
  ``user``, ``password`` and ``log()``.
- ``kerberos_realm()``: a context manager that sets up a KDC realm on loopback
  (k5test, Debian's krb5-kdc), with an ``HTTP/localhost`` key in a keytab and a ticket
  cache obtained by kinit; yields a ``KerberosRealm`` with ``env`` (the variables an
  xhrpcd or a peer needs: KRB5_CONFIG, KRB5CCNAME, KRB5_KTNAME …), ``principal`` and
  ``password``. ``start_negotiate_peer(realm)`` starts the Negotiate origin in it.
- ``exchange(c, method, url, …)``: one request through the object API (sync send),
  returning ``(summary, body bytes)``.

Every start reads the peer's ``READY <port>`` with a deadline; ``stop()`` closes its
stdin (which stops it) and waits, bounded, killing it by pid if it must.
"""

import base64
import contextlib
import json
import os
import socket
import time
import urllib.request

import unittest

from support import Upstream

READ_DEADLINE = 30


class OwnServerTestCase(unittest.TestCase):
    """A test class that starts its own ``cls.server`` in ``setUpClass`` (with its own
    flags or environment) and, at the end, stops it and fails if it did not exit 0."""

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        super().tearDownClass()
        if code != 0:
            raise AssertionError("xhrpcd exited with %r\n%s" % (code, cls.server.stderr_text()))


def start_httpbin():
    return Upstream(script="httpbin_peer.py").start()


def start_h2_peer(certs):
    """The HTTP/2 origin presenting ``certs['good_cert']`` (localhost, 127.0.0.1)."""
    return Upstream(script="h2_peer.py", args=["--tls-cert", certs["good_cert"], "--tls-key", certs["good_key"]]).start()


def peer_log(peer):
    """``GET /log`` of an auth peer, read directly (no xhrpcd)."""
    with urllib.request.urlopen("http://127.0.0.1:%d/log" % peer.port, timeout=10) as r:
        return json.loads(r.read())


class NTLMPeer:
    """An NTLM origin and the one account it knows."""

    def __init__(self, upstream, user, password):
        self.upstream = upstream
        self.port = upstream.port
        self.user = user
        self.password = password

    def url(self, path="/"):
        return self.upstream.url(path)

    def log(self):
        return peer_log(self.upstream)

    def stop(self):
        return self.upstream.stop()


def start_ntlm_peer(user="alice", password="ntlm-Secret-7"):
    up = Upstream(script="auth_peers.py", args=["--scheme", "ntlm", "--user", user, "--password", password]).start()
    return NTLMPeer(up, user, password)


def _free_port_pair():
    """A port free for both TCP and UDP on 127.0.0.1 (the KDC listens on both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                try:
                    u.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError("no port free for both TCP and UDP")


class KerberosRealm:
    """A k5test realm: ``env`` (a ticket for ``principal`` in its KRB5CCNAME),
    ``password`` of ``principal``, ``service`` (``HTTP/localhost@REALM``, in KRB5_KTNAME)."""

    def __init__(self, k5):
        self.k5 = k5
        self.realm = k5.realm
        self.principal = k5.user_princ
        self.password = k5.password("user")
        self.service = "HTTP/localhost@" + k5.realm
        self.env = dict(k5.env)

    def kinit(self):
        """A fresh ticket for ``principal`` in the realm's ticket cache (kinit)."""
        self.k5.kinit(self.principal, self.password)

    def kdestroy(self):
        """Empties the ticket cache."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.env["KRB5CCNAME"])


@contextlib.contextmanager
def kerberos_realm():
    """A KDC on loopback for the duration of the block (stopped, files removed, after).

    The realm's krb5.conf turns off the host name canonicalisation (``rdns``,
    ``dns_canonicalize_hostname``), so ``http://localhost:PORT`` asks for exactly
    ``HTTP/localhost``, whatever the machine's resolver says.
    """
    import k5test
    k5 = k5test.K5Realm(portbase=_free_port_pair(), create_host=False, get_creds=False,
                        krb5_conf={"libdefaults": {"rdns": "false", "dns_canonicalize_hostname": "false"}})
    try:
        k5.addprinc("HTTP/localhost")
        k5.extract_keytab("HTTP/localhost", k5.keytab)
        realm = KerberosRealm(k5)
        realm.kinit()
        yield realm
    finally:
        k5.stop()


def start_negotiate_peer(realm):
    return Upstream(script="auth_peers.py", args=["--scheme", "negotiate"], env=realm.env).start()


def read_all(c, handle, timeout=READ_DEADLINE):
    """The whole unread body of ``handle`` (getReceiveBuffer until done), bounded."""
    out = bytearray()
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        if time.monotonic() > deadline:
            raise AssertionError("body of %s not done within %ss (%d bytes)" % (handle, timeout, len(out)))
        chunk = c.call("getReceiveBuffer", {"request": handle, "encoding": "base64"})
        data = base64.b64decode(chunk["data"])
        out += data
        if chunk["done"]:
            return bytes(out)
        if not data:
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def exchange(c, method, url, handle="x", open_params=None, before_send=(), headers=(), send_params=None,
             send="send", release=True):
    """create, open (sync), pre-send calls, headers, ``send``; returns (summary, body).

    ``before_send``: (method, params) pairs, params without the handle; ``headers``:
    (name, value) pairs. The request is released afterwards unless ``release`` is false.
    """
    c.call("create", {"request": handle})
    try:
        c.call("open", dict({"request": handle, "method": method, "url": url, "async": False, "subscribe": False},
                            **(open_params or {})))
        for name, params in before_send:
            c.call(name, dict(params, request=handle))
        for name, value in headers:
            c.call("setRequestHeader", {"request": handle, "header": name, "value": value})
        summary = c.call(send, dict({"request": handle}, **(send_params or {})), timeout=60)
        return summary, read_all(c, handle)
    finally:
        if release:
            c.call("release", {"request": handle})
