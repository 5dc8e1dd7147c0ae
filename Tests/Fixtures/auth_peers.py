#!/usr/bin/env python3
"""HTTP origins that authenticate with NTLM or Negotiate (Kerberos), for real.

    python3 Tests/Fixtures/auth_peers.py --scheme ntlm --user U --password P [--domain D] [--host H]
    python3 Tests/Fixtures/auth_peers.py --scheme negotiate     # KRB5_KTNAME names the keytab

Listens on a port the OS picks, prints exactly one line ``READY <port>`` and serves
until stdin reaches end of file or SIGTERM/SIGINT, then exits 0. HTTP/1.1 with
keep-alive, one thread per connection, every socket read bounded (30 s).

Every path answers the same way. A request without credentials gets ``401`` with
``WWW-Authenticate: NTLM`` (or ``Negotiate``) and an empty body; the connection stays
open, as both schemes need.

- **ntlm**: pyspnego (PyPI) is the acceptor, a real NTLM server: the type-1 message gets
  a type-2 challenge (``401``, ``WWW-Authenticate: NTLM <challenge>``) on the same
  connection, and the type-3 answer is verified against the one account given (pyspnego
  reads it from ``NTLM_USER_FILE``, which this script writes). Success authenticates the
  *connection*: later requests on it need no header (that is how NTLM works); a new
  handshake on it starts over. A message out of order or a wrong password: ``401``
  again with ``WWW-Authenticate: NTLM`` and the connection closed.
- **negotiate**: python-gssapi (PyPI) accepts the SPNEGO/Kerberos token with the
  ``HTTP/<host>`` key from ``KRB5_KTNAME``; success answers the final token in
  ``WWW-Authenticate: Negotiate <token>`` (mutual authentication). Each request
  authenticates on its own.

Success is ``200`` with JSON ``{"authenticated": true, "user": <the client's name as
the acceptor saw it>, "scheme", "connection": <number of the TCP connection, from 1>,
"legs": <401s sent on this connection before this answer>, "method", "path"}``.
``GET /log`` (no authentication) answers the JSON array of every request's
``{connection, path, authorization (scheme word or null), status}``.
"""

import argparse
import base64
import http.server
import json
import os
import socketserver
import sys
import tempfile
import threading
from peer_process import announce_ready, stop_on_signal_or_end_of_stdin  # noqa: E402

READ_TIMEOUT = 30


class State:
    scheme = "ntlm"
    lock = threading.Lock()
    connections = 0
    log = []


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "xhrpc-auth-peer"

    def setup(self):
        super().setup()
        self.connection.settimeout(READ_TIMEOUT)
        with State.lock:
            State.connections += 1
            self.number = State.connections
        self.context = None       # the NTLM handshake under way
        self.authenticated = None  # the user once NTLM succeeded on this connection
        self.legs = 0

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.serve()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = do_GET

    def serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path == "/log":
            with State.lock:
                return self.answer(200, State.log)
        word, token = self.credentials()
        if State.scheme == "ntlm":
            self.serve_ntlm(word, token)
        else:
            self.serve_negotiate(word, token)

    def credentials(self):
        value = self.headers.get("Authorization")
        if not value:
            return None, None
        word, _, rest = value.strip().partition(" ")
        try:
            return word, base64.b64decode(rest.strip()) if rest.strip() else b""
        except ValueError:
            return word, b""

    def record(self, word, status):
        with State.lock:
            State.log.append({"connection": self.number, "path": self.path, "authorization": word, "status": status})

    def challenge(self, word, token=None, close=False):
        self.legs += 1
        self.record(word, 401)
        header = State.scheme.upper() if State.scheme == "ntlm" else "Negotiate"
        if token:
            header += " " + base64.b64encode(token).decode()
        self.answer(401, None, [("WWW-Authenticate", header)], close=close)

    def success(self, word, user, extra_headers=()):
        self.record(word, 200)
        self.answer(200, {"authenticated": True, "user": user, "scheme": State.scheme,
                          "connection": self.number, "legs": self.legs,
                          "method": self.command, "path": self.path}, list(extra_headers))

    def serve_ntlm(self, word, token):
        import spnego
        if word is None or word.upper() != "NTLM":
            if self.authenticated is not None and word is None:
                return self.success(word, self.authenticated)
            return self.challenge(word)
        if self.context is None or token[8:12] == b"\x01\x00\x00\x00":
            # A type-1 message (re)starts the handshake on this connection.
            self.context = spnego.server(protocol="ntlm")
            self.authenticated = None
        try:
            out = self.context.step(token)
        except Exception:
            self.context = None
            return self.challenge(word, close=True)
        if not self.context.complete:
            return self.challenge(word, out)
        self.authenticated = self.context.client_principal
        self.context = None
        self.success(word, self.authenticated)

    def serve_negotiate(self, word, token):
        import gssapi
        if word is None or word.lower() != "negotiate" or not token:
            return self.challenge(word)
        try:
            context = gssapi.SecurityContext(usage="accept")
            out = context.step(token)
        except gssapi.exceptions.GSSError:
            return self.challenge(word, close=True)
        if not context.complete:
            return self.challenge(word, out)
        headers = [("WWW-Authenticate", "Negotiate " + base64.b64encode(out).decode())] if out else []
        self.success(word, str(context.initiator_name), headers)

    def answer(self, status, value, headers=(), close=False):
        body = b"" if value is None else json.dumps(value).encode()
        self.send_response(status)
        for name, v in headers:
            self.send_header(name, v)
        if value is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--scheme", choices=("ntlm", "negotiate"), required=True)
    ap.add_argument("--user")
    ap.add_argument("--password", default="")
    ap.add_argument("--domain", default="")
    args = ap.parse_args()
    State.scheme = args.scheme
    if args.scheme == "ntlm":
        if not args.user:
            ap.error("--scheme ntlm needs --user")
        # pyspnego's NTLM acceptor reads its accounts from this file, DOMAIN:USER:PASSWORD
        # a line; an empty domain matches any domain the client names.
        fd, path = tempfile.mkstemp(prefix="xhrpc-ntlm-users-")
        with os.fdopen(fd, "w") as f:
            f.write("%s:%s:%s\n" % (args.domain, args.user, args.password))
        os.environ["NTLM_USER_FILE"] = path
    elif not os.environ.get("KRB5_KTNAME"):
        ap.error("--scheme negotiate needs KRB5_KTNAME (the HTTP/<host> keytab)")

    server = Server((args.host, 0), Handler)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    stop_on_signal_or_end_of_stdin(stop)
    announce_ready(server.server_address[1])
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        if args.scheme == "ntlm":
            os.unlink(os.environ["NTLM_USER_FILE"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
