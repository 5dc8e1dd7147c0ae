"""A JSON-RPC 2.0 client for xhrpc over a Unix, TCP or TLS socket (standard library only).

The server writes one compact JSON message per line.  A background thread reads
the lines, parses them and puts them, in arrival order, into one inbox.  Callers
take from the inbox what concerns them: ``call`` the response with its id,
``batch`` the array that answers its batch, ``notifications`` and
``wait_notification`` the messages with a ``method``, and ``read_message`` simply
the oldest message of any kind (for framing tests that send raw bytes).  A
message nobody claims stays in the inbox in order, so nothing is lost between
calls; a response to a call that timed out is dropped when it arrives.

Once ``intercept`` registered the connection as an interceptor, the reader hands
each request from the server (a question, id ``srv-N``) to a thread that calls the
callback and sends the answer, and the notices to the interceptor's ``on_notice``
when it has one: neither reaches the inbox then, and the reader itself never waits.
"""

from __future__ import annotations

import base64
import collections
import itertools
import json
import os
import queue
import secrets
import socket
import ssl
import threading
import time
from typing import (Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping,
                    Optional, Set, Tuple, Union, cast)

__all__ = [
    "Client",
    "Interceptor",
    "RPCError",
    "ConnectionClosed",
    "MalformedMessage",
    "TransferError",
    "Socket",
    "SocketError",
    "default_socket_path",
    "decode_body",
    "encode",
]

_READ_SIZE = 256 * 1024

#: A JSON-RPC message as ``json.loads`` returns it: an object, or an array for a batch.
Message = Any
#: ``(method, params)`` or ``(method, params, is_notification)``, as ``batch`` takes them.
BatchCall = Union[Tuple[str, Any], Tuple[str, Any, bool]]
#: ``progress(received, total)`` for ``download``; ``total`` is -1 while unknown.
ProgressCallback = Callable[[int, int], Any]

# read_body's pauses between reads that brought nothing, when no notification about
# the request came: from the first to the last, doubling (a body arriving after
# LOADING comes with no notification unless someone subscribed to progress).
_BODY_POLL_FIRST = 0.01
_BODY_POLL_LAST = 0.2
# The RPC wait for one read of a body: a read of up to --max-buffer-bytes (8 MiB)
# answers in well under a second; this only bounds a server that stopped answering.
_READ_CALL_TIMEOUT = 30.0
# Added to a transfer timeout given to the server, for the answer to travel back.
_ANSWER_MARGIN = 10.0


def default_socket_path(environ: Optional[Mapping[str, str]] = None) -> str:
    """The socket xhrpcd listens on when started without ``--listen``.

    ``$XDG_RUNTIME_DIR/xhrpc.sock`` when ``XDG_RUNTIME_DIR`` is set and not empty, else
    ``/tmp/xhrpc-<uid>.sock``: the server's own rule (``ListenAddress.defaultUnix`` in
    Sources/Service/Listening/ListenAddress.swift), joined the same way, so both name one file.
    ``environ`` replaces ``os.environ`` (for tests and for a server started with
    another environment).
    """
    env = os.environ if environ is None else environ
    runtime_dir = env.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        return runtime_dir + "/xhrpc.sock"
    return "/tmp/xhrpc-%d.sock" % os.getuid()


def decode_body(response: Mapping[str, Any]) -> bytes:
    """The body of a ``fetch`` result as bytes, whichever ``encoding`` it came in.

    ``utf8`` text is encoded back to UTF-8 and ``base64`` decoded; a ``json`` body was
    parsed by the server and has no bytes to give back (ask with
    ``response_type="base64"`` instead), so it raises ``ValueError``.
    """
    encoding = response.get("encoding")
    body = response.get("body")
    if encoding == "base64" and isinstance(body, str):
        return base64.b64decode(body)
    if encoding == "utf8" and isinstance(body, str):
        return body.encode("utf-8")
    raise ValueError("a body with encoding %r has no bytes to decode" % (encoding,))


class RPCError(Exception):
    """An error response: ``code``, ``message`` and ``data`` of the JSON-RPC error object.

    ``response`` holds the whole response object, ``reason`` the application's
    ``data.reason`` word when there is one.
    """

    def __init__(self, code: Any, message: Any, data: Any = None,
                 response: Optional[Dict[str, Any]] = None) -> None:
        super().__init__("%s %s%s" % (code, message, "" if data is None else " " + json.dumps(data)))
        self.code = code
        self.message = message
        self.data = data
        self.response = response

    @property
    def reason(self) -> Optional[str]:
        return self.data.get("reason") if isinstance(self.data, dict) else None


class ConnectionClosed(ConnectionError):
    """The server closed the connection (or the client did) before the awaited message."""


class MalformedMessage(Exception):
    """The server sent a line that is not one JSON value; ``line`` holds its bytes."""

    def __init__(self, line: bytes, error: str) -> None:
        super().__init__("malformed line from server (%s): %r" % (error, line[:200]))
        self.line = line


class _TLSChannel:
    """TLS on a connected socket through memory BIOs (``ssl.SSLObject``).

    Why not ``ssl.SSLSocket``: the client reads in one thread while others write,
    and OpenSSL does not allow two threads in one connection at once; and an
    SSLSocket cannot half-close (``unwrap`` blocks for the peer's close_notify).
    Here the socket stays plain: every OpenSSL call runs under ``_lock``, the
    ciphertext goes out under ``_send_lock`` in the order it was made, and
    ``close_notify`` sends our close_notify without waiting for the server's, so
    ``shutdown_write`` is a real TLS half-close and replies keep arriving.

    Only the reader thread calls ``recv``; ``send`` and ``close_notify`` may be
    called from any thread.
    """

    # Plaintext encrypted per lock hold: large sends do not keep the reader out for
    # long nor hold the whole message twice (plaintext and ciphertext).
    _SEND_SLICE = 256 * 1024

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str,
                 timeout: float) -> None:
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=False,
                                     server_hostname=server_hostname)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ended = False  # the server's close_notify or EOF was seen
        self._handshake(timeout)

    def _handshake(self, timeout: float) -> None:
        """Runs the handshake on this thread before the reader starts (no locks needed)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                # Tell the server why (the alert) before giving up.
                self._send_outgoing_quietly()
                raise
            self.sock.sendall(self._outgoing.read())
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the TLS handshake did not finish within %.3g s" % timeout)
            self.sock.settimeout(left)
            data = self.sock.recv(_READ_SIZE)
            if not data:
                raise ConnectionClosed("the server closed the connection during the TLS handshake")
            self._incoming.write(data)
        self.sock.sendall(self._outgoing.read())
        # Read now, while no other thread uses the connection: later, OpenSSL answers
        # None whenever the reader is in the middle of a post-handshake message (a TLS
        # 1.3 session ticket).
        self._version = self._ssl.version()

    def _send_outgoing_quietly(self) -> None:
        try:
            self.sock.sendall(self._outgoing.read())
        except OSError:
            pass

    @property
    def version(self) -> Optional[str]:
        """The negotiated protocol, such as ``"TLSv1.3"``."""
        return self._version

    def send(self, data: bytes) -> None:
        """Encrypt and send all of ``data``."""
        view = memoryview(data)
        with self._send_lock:
            for start in range(0, len(view), self._SEND_SLICE):
                with self._lock:
                    self._ssl.write(view[start:start + self._SEND_SLICE])
                    out = self._outgoing.read()
                self.sock.sendall(out)

    def close_notify(self) -> None:
        """Send our close_notify (no more data from us); do not wait for the server's."""
        with self._send_lock:
            with self._lock:
                try:
                    self._ssl.unwrap()
                except ssl.SSLWantReadError:
                    pass  # sent; the server's close_notify is read later by recv
                out = self._outgoing.read()
            self.sock.sendall(out)

    def recv(self) -> bytes:
        """Plaintext as it arrives; ``b""`` once the server's close_notify or EOF came."""
        raw: Optional[bytes] = None
        while True:
            chunks: List[bytes] = []
            with self._lock:
                # Feeding and reading under one hold: records must not sit in the BIO
                # while close_notify runs, since OpenSSL discards what it reads then.
                if raw:
                    self._incoming.write(raw)
                while not self._ended:
                    try:
                        chunk = self._ssl.read(_READ_SIZE)
                    except ssl.SSLWantReadError:
                        break
                    except ssl.SSLZeroReturnError:
                        self._ended = True
                        break
                    if not chunk:
                        self._ended = True
                        break
                    chunks.append(chunk)
                answer = self._outgoing.pending > 0  # e.g. a key update's answer
            if answer:
                with self._send_lock:
                    with self._lock:
                        out = self._outgoing.read()
                    self.sock.sendall(out)
            if chunks:
                return b"".join(chunks)
            if self._ended:
                return b""
            raw = self.sock.recv(_READ_SIZE)
            if not raw:
                # EOF without close_notify: a truncation TLS cannot rule out; the
                # caller's framing (a last line without newline) shows a cut message.
                self._ended = True
                return b""


class _Entry:
    """One line from the server: the parsed message and the raw line (without ``\\n``)."""

    __slots__ = ("message", "raw", "error")

    def __init__(self, message: Message, raw: bytes, error: Optional[str] = None) -> None:
        self.message = message
        self.raw = raw
        self.error = error


def encode(message: Any) -> bytes:
    """Compact JSON of ``message`` followed by a newline, as bytes."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def _batch_messages(calls: Iterable[BatchCall], next_id: Callable[[], int]) -> Tuple[List[Dict[str, Any]], List[int]]:
    """The messages of a batch and the ids of its calls that are not notifications.

    ``calls`` holds ``(method, params)`` or ``(method, params, is_notification)``
    tuples; ``next_id`` gives each call that wants an answer its id.  One reading of a
    batch for the synchronous and the asyncio client.
    """
    msgs: List[Dict[str, Any]] = []
    ids: List[int] = []
    for c in calls:
        method, params = c[0], c[1]
        is_notification = len(c) > 2 and bool(c[2])
        m: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            m["params"] = params
        if not is_notification:
            m["id"] = next_id()
            ids.append(m["id"])
        msgs.append(m)
    return msgs, ids


def _is_response(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" not in msg and ("result" in msg or "error" in msg)


def _id_key(rid: Any) -> Tuple[str, Any]:
    # 1, 1.0 and True are equal in Python but different ids on the wire.
    return (type(rid).__name__, rid)


def _is_notification(msg: Any) -> bool:
    return isinstance(msg, dict) and isinstance(msg.get("method"), str)


class TransferError(Exception):
    """A request ended without a response (DONE with status 0): refused, timed out,
    reset, cut short, aborted or denied by the server's egress policy.

    ``status_text`` is the server's explanation (``getStatusText``), ``request`` the
    handle and ``received`` the body bytes read before the end.
    """

    def __init__(self, request: str, status_text: str, received: int = 0) -> None:
        super().__init__("request %s ended without a complete response: %s" % (request, status_text))
        self.request = request
        self.status_text = status_text
        self.received = received


def _error_of(resp: Dict[str, Any]) -> RPCError:
    err = resp["error"] if isinstance(resp.get("error"), dict) else {}
    return RPCError(err.get("code"), err.get("message"), err.get("data"), resp)


def _result_of(resp: Dict[str, Any]) -> Any:
    """The result of one response object, or its error raised."""
    if "error" in resp:
        raise _error_of(resp)
    return resp["result"]


def _request_of(msg: Any) -> Optional[str]:
    """The request or socket a notification is about (``params.request``, else
    ``params.socket``), if any: the server's handles are unique across both."""
    if not _is_notification(msg):
        return None
    params = msg.get("params")
    if not isinstance(params, dict):
        return None
    handle = params.get("request")
    if handle is None:
        handle = params.get("socket")
    return handle if isinstance(handle, str) else None


#: A multipart part, as ``addMultipartPart`` and ``fetch``'s ``multipart`` take it:
#: ``{"name", "value"}`` (a text field) or ``{"name", "filename"?, "contentType"?,
#: "dataBase64" | "path"}`` (a file; ``path`` below the principal's upload root, docs/guide/files.md).
MultipartPart = Mapping[str, str]


class _Unset:
    """The default of ``json=``: ``None`` is a JSON value (null) a caller may send."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _fetch_options(base_url: Optional[str] = None, query: Optional[Mapping[str, Any]] = None,
                   json_body: Any = UNSET, form: Optional[Mapping[str, str]] = None,
                   multipart: Optional[Iterable[MultipartPart]] = None,
                   credential: Optional[Mapping[str, str]] = None, follow_redirects: Optional[bool] = None,
                   max_redirects: Optional[int] = None, cookies: Optional[bool] = None,
                   proxy: Optional[Mapping[str, Any]] = None, disable_host_verification: Optional[bool] = None,
                   disable_peer_verification: Optional[bool] = None,
                   client_certificate: Optional[Mapping[str, str]] = None, pinned_public_key: Optional[str] = None,
                   request: Optional[str] = None, subscribe: Optional[bool] = None) -> Dict[str, Any]:
    """The members of ``fetch`` beyond url, method, headers, body, timeout, responseType
    and retry, by their wire names; what is not given is left out."""
    out: Dict[str, Any] = {}
    for name, value in (("baseURL", base_url), ("followRedirects", follow_redirects),
                        ("maxRedirects", max_redirects), ("cookies", cookies),
                        ("disableHostVerification", disable_host_verification),
                        ("disablePeerVerification", disable_peer_verification),
                        ("pinnedPublicKey", pinned_public_key), ("request", request), ("subscribe", subscribe)):
        if value is not None:
            out[name] = value
    for name, mapping in (("query", query), ("form", form), ("credential", credential), ("proxy", proxy),
                          ("clientCertificate", client_certificate)):
        if mapping is not None:
            out[name] = dict(mapping)
    if multipart is not None:
        out["multipart"] = [dict(part) for part in multipart]
    if not isinstance(json_body, _Unset):
        out["json"] = json_body
    return out


def _fetch_params(url: str, method: str, headers: Optional[Mapping[str, str]],
                  body: Union[str, bytes, bytearray, memoryview, None], timeout: Optional[float],
                  response_type: Optional[str], retry: Optional[Mapping[str, Any]] = None,
                  options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    params: Dict[str, Any] = {"url": url, "method": method}
    params.update(options or {})
    if retry is not None:
        params["retry"] = dict(retry)
    if headers:
        params["headers"] = dict(headers)
    if isinstance(body, str):
        params["body"] = body
    elif body is not None:
        params["bodyBase64"] = base64.b64encode(bytes(body)).decode("ascii")
    if timeout is not None:
        params["timeout"] = timeout
    if response_type is not None:
        params["responseType"] = response_type
    return params


def _credential_params(host: str, port: Optional[int], scheme: Optional[str], realm: Optional[str],
                       **more: Optional[str]) -> Dict[str, Any]:
    """The protection space of a ``credentials.*`` call, and its other members; None is left out."""
    params: Dict[str, Any] = {"host": host}
    for name, value in (("port", port), ("scheme", scheme), ("realm", realm)):
        if value is not None:
            params[name] = value
    params.update({k: v for k, v in more.items() if v is not None})
    return params


def _part_params(request: str, name: str, value: Optional[str], data: Union[bytes, bytearray, memoryview, None],
                 path: Optional[str], filename: Optional[str], content_type: Optional[str]) -> Dict[str, Any]:
    params: Dict[str, Any] = {"request": request, "name": name}
    if value is not None:
        params["value"] = value
    if data is not None:
        params["dataBase64"] = base64.b64encode(bytes(data)).decode("ascii")
    if path is not None:
        params["path"] = path
    if filename is not None:
        params["filename"] = filename
    if content_type is not None:
        params["contentType"] = content_type
    return params


def _answer_timeout(timeout: Optional[float]) -> Optional[float]:
    """How long to wait for the answer to a call that bounds its transfer by ``timeout``."""
    return None if timeout is None or timeout <= 0 else timeout + _ANSWER_MARGIN


def _chunk_bytes(chunk: Dict[str, Any]) -> bytes:
    """The bytes of a base64 ``getReceiveBuffer`` or ``socket.read`` result, checked
    against its count."""
    data = base64.b64decode(chunk["data"])
    if len(data) != chunk["bytes"]:
        raise ValueError("the read said %r bytes but its data holds %d" % (chunk["bytes"], len(data)))
    return data


def _subscribe_params(request: Optional[str], socket: Optional[str], all: bool,
                      events: Optional[Iterable[str]], progress_interval: Optional[int]) -> Dict[str, Any]:
    """``subscribe``'s params: one of ``request``, ``socket`` or ``all``; the server checks
    the rest (``progress_interval`` in milliseconds, at least 10)."""
    params: Dict[str, Any] = {}
    if request is not None:
        params["request"] = request
    if socket is not None:
        params["socket"] = socket
    if all:
        params["all"] = True
    if events is not None:
        params["events"] = list(events)
    if progress_interval is not None:
        if isinstance(progress_interval, bool) or not isinstance(progress_interval, int):
            raise TypeError("progress_interval is a whole number of milliseconds")
        params["progressInterval"] = progress_interval
    return params


def _read_params(request: str, max_bytes: Optional[int]) -> Dict[str, Any]:
    params: Dict[str, Any] = {"request": request, "encoding": "base64"}
    if max_bytes is not None:
        params["maxBytes"] = max_bytes
    return params


class _Source:
    """What ``_drain`` reads: a request's body (``getReceiveBuffer`` until ``done``) or a
    socket's stream (``socket.read`` until ``closed``).  ``wakeups``, for a stream, picks
    the notifications that only say bytes arrived (``socket.onRead``): a reader of its
    own socket drops those that came before each read's answer, which took their bytes."""

    __slots__ = ("method", "params", "end", "noun", "wakeups")

    def __init__(self, handle: str, max_bytes: Optional[int], stream: bool) -> None:
        self.wakeups: Optional[Callable[[Any], bool]]
        if stream:
            self.method = "socket.read"
            self.params = _socket_read_params(handle, max_bytes)
            self.end = "closed"
            self.noun = "the stream of %s" % handle
            self.wakeups = _socket_event(handle, (_ON_READ,))
        else:
            self.method = "getReceiveBuffer"
            self.params = _read_params(handle, max_bytes)
            self.end = "done"
            self.noun = "the body of %s" % handle
            self.wakeups = None


# ---- raw sockets: what the synchronous and the asyncio helpers share ------

_ON_OPEN = "socket.onOpen"
_ON_READ = "socket.onRead"
_ON_ERR = "socket.onErr"
_ON_CLOSE = "socket.onClose"
# The server's connect timeout when the caller gives none (API: 30 s); wait_open's
# default adds the margin for the notification to travel.
_CONNECT_TIMEOUT = 30.0
#: What ``Socket.write`` takes: text (sent as UTF-8) or bytes.
Data = Union[str, bytes, bytearray, memoryview]


class SocketError(Exception):
    """A socket's stream failed: the ``socket.onErr`` notification.

    ``error`` is its word (``refused``, ``timeout``, ``resolve``, ``unreachable``,
    ``tls``, ``policy_denied``, ``proxy``, ``reset``, ``io``; ``closed`` when the
    stream closed before it opened without saying why), ``message`` the server's
    explanation (``SSL certificate problem: …`` for ``tls``), ``socket`` the handle.
    """

    def __init__(self, socket: str, error: str, message: str) -> None:
        super().__init__("socket %s: %s: %s" % (socket, error, message))
        self.socket = socket
        self.error = error
        self.message = message


def _socket_create_params(host: str, port: int, ssl: bool, name: Optional[str]) -> Dict[str, Any]:
    params: Dict[str, Any] = {"host": host, "port": port}
    if ssl:
        params["ssl"] = True
    if name is not None:
        params["socket"] = name
    return params


def _socket_connect_params(handle: str, timeout: Optional[float]) -> Dict[str, Any]:
    params: Dict[str, Any] = {"socket": handle}
    if timeout is not None:
        params["timeout"] = timeout
    return params


def _socket_write_params(handle: str, data: Data) -> Dict[str, Any]:
    if isinstance(data, str):
        return {"socket": handle, "data": data}
    return {"socket": handle, "dataBase64": base64.b64encode(bytes(data)).decode("ascii")}


def _socket_read_params(handle: str, max_bytes: Optional[int]) -> Dict[str, Any]:
    params: Dict[str, Any] = {"socket": handle, "encoding": "base64"}
    if max_bytes is not None:
        params["maxBytes"] = max_bytes
    return params


def _socket_event(handle: str, methods: Tuple[str, ...]) -> Callable[[Any], bool]:
    """A message predicate: a notification ``methods`` about the socket ``handle``."""
    def match(msg: Any) -> bool:
        return isinstance(msg, dict) and msg.get("method") in methods and _request_of(msg) == handle
    return match


def _socket_error(msg: Dict[str, Any]) -> SocketError:
    """The ``SocketError`` of a ``socket.onErr`` notification (or of an early onClose)."""
    params = msg.get("params")
    params = params if isinstance(params, dict) else {}
    if msg.get("method") == _ON_ERR:
        return SocketError(str(params.get("socket")), str(params.get("error")), str(params.get("message")))
    return SocketError(str(params.get("socket")), "closed", "the stream closed before it opened")


class _SocketBuffer:
    """Bytes a socket helper read from the server and has not returned yet (what
    ``read_exactly`` and ``read_until`` read past their end), and whether the server
    said the stream ended.  One reading of it for the sync and the asyncio helper."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.ended = False

    def take(self, n: Optional[int]) -> bytes:
        n = len(self.data) if n is None else min(n, len(self.data))
        out = bytes(self.data[:n])
        del self.data[:n]
        return out

    def reset(self) -> None:
        self.data.clear()
        self.ended = False


def _exactly(n: int) -> Callable[[bytearray], Optional[int]]:
    """For ``read_exactly``: how many bytes of the buffer to return, once it holds ``n``."""
    if n < 0:
        raise ValueError("n must be >= 0")
    return lambda buf: n if len(buf) >= n else None


def _until(separator: bytes) -> Callable[[bytearray], Optional[int]]:
    """For ``read_until``: the bytes up to and including ``separator``, once it came."""
    if not separator:
        raise ValueError("the separator must not be empty")

    def end(buf: bytearray) -> Optional[int]:
        i = buf.find(separator)
        return None if i < 0 else i + len(separator)
    return end


def _incomplete(handle: str, buffered: int, what: str) -> EOFError:
    return EOFError("the stream of %s ended before %s (%d bytes left to read)" % (handle, what, buffered))


def _download_handle() -> str:
    # A name of our own, so that create, open, subscribe and send travel in one batch.
    return "xhrpc-py-download-" + secrets.token_hex(8)


def _download_calls(name: str, url: str, headers: Optional[Mapping[str, str]]) -> List[BatchCall]:
    """A download's request, made ready in one batch; ``send`` follows only if every
    call succeeded (a refused header must not leave without it)."""
    calls: List[BatchCall] = [("create", {"request": name}),
                              ("open", {"request": name, "method": "GET", "url": url})]
    for header, value in (headers or {}).items():
        calls.append(("setRequestHeader", {"request": name, "header": header, "value": value}))
    # The opener already receives onStateChange; progress notifications wake the
    # reader whenever bytes arrive, so it need not poll while LOADING.
    calls.append(("subscribe", {"request": name, "events": ["progress"]}))
    return calls


def _send_params(name: str, timeout: Optional[float]) -> Dict[str, Any]:
    send: Dict[str, Any] = {"request": name}
    if timeout is not None:
        send["timeout"] = timeout
    return send


def _prepared(responses: List[Any]) -> Tuple[bool, Optional[str]]:
    """Whether the download's request was created, and its subscription, from the
    answers to ``_download_calls``; then the first error among them is raised (after
    the caller has what it needs to clean up)."""
    created = bool(responses) and "result" in responses[0]
    subscription = None
    for resp in responses:
        result = resp.get("result")
        if isinstance(result, dict) and isinstance(result.get("subscription"), str):
            subscription = result["subscription"]
    return created, subscription


def _raise_first_error(responses: List[Any]) -> None:
    for resp in responses:
        _result_of(resp)


def _header_calls(name: str) -> List[BatchCall]:
    return [("getResponseHeader", {"request": name, "header": "Content-Length"}),
            ("getResponseHeader", {"request": name, "header": "Content-Encoding"})]


def _expected_total(content_length: Any, content_encoding: Any) -> int:
    """The body size a download can expect, or -1 when the headers do not tell it.

    The server decodes content codings (gzip, deflate, br), so Content-Length, the
    encoded size, says nothing about the bytes read then.
    """
    if isinstance(content_encoding, str) and content_encoding.strip().lower() not in ("", "identity"):
        return -1
    if isinstance(content_length, str) and content_length.strip().isdigit():
        return int(content_length.strip())
    return -1


def _end_calls(name: str, subscription: Optional[str]) -> List[BatchCall]:
    calls: List[BatchCall] = []
    if subscription is not None:
        calls.append(("unsubscribe", {"subscription": subscription}))
    calls.append(("release", {"request": name}))
    return calls


def _status_calls(name: str) -> List[BatchCall]:
    return [("getStatus", {"request": name}), ("getStatusText", {"request": name})]


#: ``on_progress(params)`` for ``upload`` and ``server_download``: the ``onProgress``
#: notification's params for that request.
TransferProgressCallback = Callable[[Dict[str, Any]], Any]


def _transfer_params(name: str, url: str, headers: Optional[Mapping[str, str]],
                     timeout: Optional[float], **extra: Any) -> Dict[str, Any]:
    """The params of ``upload`` / ``download`` (the server methods), None left out."""
    params: Dict[str, Any] = {"request": name, "url": url}
    if headers:
        params["headers"] = dict(headers)
    if timeout is not None:
        params["timeout"] = timeout
    params.update({k: v for k, v in extra.items() if v is not None})
    return params


def _upload_body(path: Optional[Union[str, "os.PathLike[str]"]], data: Optional[Data],
                 multipart: Optional[Iterable[MultipartPart]] = None) -> Dict[str, Any]:
    if sum(x is not None for x in (path, data, multipart)) != 1:
        raise TypeError("upload: give one of path (below the principal's upload root, docs/guide/files.md), data or multipart")
    if path is not None:
        return {"path": os.fspath(path)}
    if multipart is not None:
        return {"multipart": [dict(part) for part in multipart]}
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(cast(Any, data))
    return {"dataBase64": base64.b64encode(raw).decode("ascii")}


def _transfer_event(name: str) -> Callable[[Dict[str, Any]], bool]:
    def match(msg: Dict[str, Any]) -> bool:
        return _request_of(msg) == name and msg.get("method") in ("onProgress", "onStateChange")
    return match


def _transfer_result(name: str, done: Dict[str, Any], path: Optional[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"request": name, "status": done.get("status"), "statusText": done.get("statusText")}
    if path is not None:
        out["path"] = path
    return out


def _transfer_handle(kind: str) -> str:
    return "xhrpc-py-%s-%s" % (kind, secrets.token_hex(8))


class _DownloadState:
    """What a download has written, and the progress calls that say so."""

    def __init__(self, progress: Optional[ProgressCallback]) -> None:
        self.progress = progress
        self.received = 0
        self.total: Optional[int] = None  # None until the headers were asked for

    def wrote(self, n: int) -> Any:
        self.received += n
        if self.progress is not None:
            return self.progress(self.received, -1 if self.total is None else self.total)
        return None

    def finished(self) -> Any:
        if self.progress is not None and self.total != self.received:
            return self.progress(self.received, self.received)
        return None


# ---- interception: what the synchronous and the asyncio clients share -----

#: The questions an interceptor is asked (server -> client requests, ids "srv-N").
QUESTIONS = ("willSendRequest", "shouldContinueAfterFailWithError")
#: The notices an interceptor is told (notifications).
NOTICES = ("didReceiveResponse", "didReceiveData", "didFailWithError", "didFinishLoading")
#: Every name ``intercept.register``'s ``events`` takes.
INTERCEPT_EVENTS = QUESTIONS + NOTICES
#: What a question's callback returns: ``True``, ``False`` or a replacement object
#: ``{url?, method?, headers?, body? | bodyBase64?}``.
Answer = Union[bool, Dict[str, Any]]
#: ``callback(params)`` for a question: the question's ``params``, the answer returned.
QuestionCallback = Callable[[Dict[str, Any]], Answer]
#: ``on_notice(method, params)`` for a notice.
NoticeCallback = Callable[[str, Dict[str, Any]], Any]

# The error code of an answer whose callback failed (or gave no usable answer): the
# server then takes the question's default action.
_CALLBACK_FAILED = -32000


def _is_server_request(msg: Any) -> bool:
    """A request from the server (a question): a ``method`` and an ``id``."""
    return isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg


def _register_params(events: Optional[Iterable[str]], timeout: Optional[float],
                     match: Optional[Iterable[str]], callbacks: Mapping[str, Optional[Callable[..., Any]]],
                     on_notice: Optional[Callable[..., Any]]) -> Dict[str, Any]:
    """``intercept.register``'s params.  Without ``events``: the questions that have a
    callback, and the notices when there is an ``on_notice`` (none of them: every
    event, the server's default)."""
    params: Dict[str, Any] = {}
    if events is None:
        wanted = [q for q in QUESTIONS if callbacks.get(q) is not None]
        if on_notice is not None:
            wanted += NOTICES
        if wanted:
            params["events"] = wanted
    else:
        if isinstance(events, str):
            raise TypeError("events must be a list of names, not a string")
        params["events"] = list(events)
    if timeout is not None:
        params["timeout"] = timeout
    if match is not None:
        if isinstance(match, str):
            raise TypeError("match must be a list of host patterns, not a string")
        params["match"] = list(match)
    return params


def _question_reply(rid: Any, answer: Any) -> bytes:
    """The encoded answer to question ``rid``: ``answer`` when it is True, False or an
    object; ``TypeError`` (or ``ValueError``) when it is anything else or no JSON."""
    if not isinstance(answer, (bool, dict)):
        raise TypeError("an interceptor callback must return True, False or a dict, not %s"
                        % type(answer).__name__)
    return encode({"jsonrpc": "2.0", "id": rid, "result": answer})


def _question_error(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    """The encoded error answer to question ``rid`` (the server takes the default action)."""
    error: Dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return encode({"jsonrpc": "2.0", "id": rid, "error": error})


def _callback_failed(rid: Any, method: str, e: BaseException) -> bytes:
    text = "%s: %s" % (type(e).__name__, e)
    return _question_error(rid, _CALLBACK_FAILED, "the %s callback failed: %s" % (method, text[:300]))


def _no_callback(rid: Any, method: str) -> bytes:
    return _question_error(rid, -32601, "Method not found", {"method": method})


def _params_of(msg: Dict[str, Any]) -> Dict[str, Any]:
    params = msg.get("params")
    return params if isinstance(params, dict) else {}


class _InterceptorBase:
    """What ``Interceptor`` and ``AsyncInterceptor`` share: the id, the callbacks and
    the errors they raised."""

    def __init__(self, interceptor_id: str, events: Optional[List[str]],
                 will_send: Optional[Callable[..., Any]], should_continue: Optional[Callable[..., Any]],
                 on_notice: Optional[Callable[..., Any]]) -> None:
        #: The server's handle, ``icp_<32 hex>``.
        self.id = interceptor_id
        #: The events asked for (None: every one, the server's default).
        self.events = events
        self.will_send = will_send
        self.should_continue = should_continue
        self.on_notice = on_notice
        #: Exceptions the callbacks raised (and answers that were not True, False or a
        #: dict), oldest first; each question concerned was answered with an error.
        self.errors: List[BaseException] = []
        self._active = True

    @property
    def active(self) -> bool:
        """True until unregistered or its connection closed."""
        return self._active

    def _callback(self, method: str) -> Optional[Callable[..., Any]]:
        if method == "willSendRequest":
            return self.will_send
        if method == "shouldContinueAfterFailWithError":
            return self.should_continue
        return None

    def _takes_notice(self, msg: Any) -> bool:
        return (self.on_notice is not None and _is_notification(msg) and "id" not in msg
                and msg.get("method") in NOTICES)

    def __repr__(self) -> str:
        return "<%s %s%s>" % (type(self).__name__, self.id, "" if self._active else " ended")


class Interceptor(_InterceptorBase):
    """The interceptor of the principal's requests that ``Client.intercept`` registered.

    The client's reader thread hands each question to a thread of its own, which
    calls the callback and sends its answer, so questions are answered while the
    program waits for anything else (a call's response, a notification, a body) and
    a slow callback holds up no other question.  Notices go, in order, to
    ``on_notice`` on one thread of the interceptor's; without ``on_notice`` they stay
    in the client's inbox as notifications.  ``unregister()`` (or the end of a
    ``with`` block) ends it; so does the connection's close.
    """

    def __init__(self, client: "Client", interceptor_id: str, events: Optional[List[str]],
                 will_send: Optional[QuestionCallback], should_continue: Optional[QuestionCallback],
                 on_notice: Optional[NoticeCallback]) -> None:
        super().__init__(interceptor_id, events, will_send, should_continue, on_notice)
        self.client = client
        self._lock = threading.Lock()
        self._notices: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()
        self._notice_thread: Optional[threading.Thread] = None
        if on_notice is not None:
            self._notice_thread = threading.Thread(target=self._notice_loop, daemon=True,
                                                   name="xhrpc-notices-" + interceptor_id)
            self._notice_thread.start()

    def __enter__(self) -> "Interceptor":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.unregister()
        except (OSError, TimeoutError, RPCError):
            pass  # gone already, or the connection is: the server ends it with it

    def unregister(self, timeout: Optional[float] = 10) -> None:
        """``intercept.unregister``; questions that arrive until its answer are still
        answered, notices already received still reach ``on_notice``.  A second call
        does nothing."""
        if not self._active:
            return
        try:
            self.client.call("intercept.unregister", {"interceptor": self.id}, timeout=timeout)
        finally:
            self.client._interceptor_ended(self)

    def wait_notices(self, timeout: Optional[float] = 10) -> bool:
        """Wait until ``on_notice`` has been called for every notice received so far;
        True if it was within ``timeout`` (always True without ``on_notice``)."""
        if self._notice_thread is None:
            return True
        done = threading.Event()
        with self._lock:
            ended = not self._active
            if not ended:
                self._notices.put({"_xhrpc_marker": done})
        if ended:  # the notices before the end are still delivered; then the thread stops
            self._notice_thread.join(timeout)
            return not self._notice_thread.is_alive()
        return done.wait(timeout)

    # ---- called by the client ---------------------------------------------

    def _record(self, e: BaseException) -> None:
        with self._lock:
            self.errors.append(e)

    def _ask(self, msg: Dict[str, Any]) -> None:
        """A question arrived (on the reader thread): answer it on a thread of its own."""
        threading.Thread(target=self._answer, args=(msg,), daemon=True,
                         name="xhrpc-question-%s" % (msg.get("id"),)).start()

    def _answer(self, msg: Dict[str, Any]) -> None:
        rid, method = msg["id"], msg["method"]
        callback = self._callback(method)
        if callback is None:
            reply = _no_callback(rid, method)
        else:
            try:
                reply = _question_reply(rid, callback(_params_of(msg)))
            except Exception as e:
                self._record(e)
                reply = _callback_failed(rid, method, e)
        try:
            self.client.send_raw(reply)
        except OSError:
            pass  # the connection closed: the server takes the default action

    def _tell(self, msg: Dict[str, Any]) -> None:
        self._notices.put(msg)

    def _end(self) -> None:
        with self._lock:
            if not self._active:
                return
            self._active = False
            if self._notice_thread is not None:
                self._notices.put(None)

    def _notice_loop(self) -> None:
        on_notice = self.on_notice
        assert on_notice is not None
        while True:
            msg = self._notices.get()
            if msg is None:
                return
            marker = msg.get("_xhrpc_marker")
            if isinstance(marker, threading.Event):
                marker.set()
                continue
            try:
                on_notice(msg["method"], _params_of(msg))
            except Exception as e:
                self._record(e)


class _Watch:
    """How many notifications about one request arrived while body readers watch it."""

    __slots__ = ("count", "readers")

    def __init__(self) -> None:
        self.count = 0
        self.readers = 0


class Client:
    """A connection to xhrpcd.

    Use ``Client.connect_unix(path)`` (no path: ``default_socket_path()``),
    ``Client.connect_tcp(host, port)`` or ``Client.connect_tls(host, port, cafile=...)``;
    close it with ``close()`` or a ``with`` block.  Methods may be called from
    several threads, though the tests use one.
    """

    def __init__(self, sock: socket.socket, tls: Optional[_TLSChannel] = None) -> None:
        self.sock = sock
        self.tls = tls  # a _TLSChannel over sock, or None for plaintext
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._inbox: Deque[_Entry] = collections.deque()
        self._abandoned: Set[Tuple[str, Any]] = set()
        self._ids = itertools.count(1)
        self._watches: Dict[str, _Watch] = {}  # requests whose bodies are being read
        self._closed = False          # no more messages will arrive
        self._close_error: Optional[OSError] = None  # why the reader stopped, if not a clean EOF
        self.malformed: List[bytes] = []  # raw lines that were not JSON
        self.auth_result: Optional[Dict[str, Any]] = None  # auth's answer when a constructor was given a token
        self._interceptor: Optional[Interceptor] = None  # the one intercept() registered, while active
        self._arming: Optional[Tuple[Tuple[str, Any], Interceptor]] = None  # intercept.register's id
        self._reader = threading.Thread(target=self._read_loop, name="xhrpc-reader", daemon=True)
        self._reader.start()

    # ---- construction ---------------------------------------------------

    # Each constructor takes ``token``: when given, the new client calls ``auth`` with
    # it before it is returned (and is closed if that fails, the RPCError raised).

    @classmethod
    def connect_unix(cls, path: Optional[str] = None, timeout: float = 10,
                     token: Optional[str] = None) -> "Client":
        """Connect to a ``unix:`` listener; without ``path``, to ``default_socket_path()``."""
        where = default_socket_path() if path is None else path
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(where)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            s.close()
            if path is not None:
                raise
            # Say where we looked and why there: the usual first-run stumble.
            raise type(e)(e.errno, "no xhrpcd listening at the default socket %s "
                          "(XDG_RUNTIME_DIR decides it; start the server or pass the path): %s"
                          % (where, e.strerror)) from e
        except BaseException:
            s.close()
            raise
        s.settimeout(None)
        return cls(s)._authenticated(token, timeout)

    @classmethod
    def connect_tcp(cls, host: str, port: int, timeout: float = 10,
                    token: Optional[str] = None) -> "Client":
        s = socket.create_connection((host, port), timeout=timeout)
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(s)._authenticated(token, timeout)

    def _authenticated(self, token: Optional[str], timeout: float) -> "Client":
        if token is None:
            return self
        try:
            # A wrong token is answered after the server's failure delay (1 s).
            self.auth_result = self.call("auth", {"token": token}, timeout=timeout + 5)
        except BaseException:
            self.close()
            raise
        return self

    @classmethod
    def connect_tls(cls, host: str, port: int, cafile: Optional[str] = None,
                    server_hostname: Optional[str] = None, timeout: float = 10,
                    context: Optional[ssl.SSLContext] = None, token: Optional[str] = None) -> "Client":
        """Connect to a ``tls:`` listener and finish the TLS handshake.

        The server's certificate is verified, host name included:
        ``ssl.create_default_context(cafile=cafile)`` (the system's CAs when
        ``cafile`` is None), checked against ``server_hostname`` (default: ``host``,
        which may be an IP address).  ``context`` replaces that default context
        (then ``cafile`` must be None).  ``timeout`` bounds the connect and the
        handshake.  Raises ``ssl.SSLCertVerificationError`` (an ``OSError``) when
        the certificate is refused.
        """
        if context is None:
            context = ssl.create_default_context(cafile=cafile)
        elif cafile is not None:
            raise ValueError("give cafile or context, not both")
        s = socket.create_connection((host, port), timeout=timeout)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = _TLSChannel(s, context, server_hostname or host, timeout)
            s.settimeout(None)
        except BaseException:
            s.close()
            raise
        return cls(s, tls)._authenticated(token, timeout)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- reading --------------------------------------------------------

    def _read_loop(self) -> None:
        buf = bytearray()
        error = None
        try:
            recv: Callable[[], bytes]
            if self.tls is not None:
                recv = self.tls.recv
            else:
                recv = lambda: self.sock.recv(_READ_SIZE)  # noqa: E731
            while True:
                data = recv()
                if not data:
                    break
                start = len(buf)
                buf += data
                nl = buf.find(b"\n", start)
                if nl < 0:
                    continue
                entries = []
                pos = 0
                while nl >= 0:
                    line = bytes(buf[pos:nl])
                    pos = nl + 1
                    entries.append(self._parse(line))
                    nl = buf.find(b"\n", pos)
                del buf[:pos]
                self._deliver(entries)
        except OSError as e:
            error = e
        if buf:
            # A last line without its newline is a framing fault of the server.
            self._deliver([_Entry(None, bytes(buf), "unterminated last line")])
        with self._cond:
            self._closed = True
            self._close_error = error
            icp, self._interceptor = self._interceptor, None
            self._cond.notify_all()
        if icp is not None:
            icp._end()  # the server ended it with the connection

    def _parse(self, line: bytes) -> _Entry:
        try:
            return _Entry(json.loads(line), line)
        except ValueError as e:
            return _Entry(None, line, str(e))

    def _deliver(self, entries: List[_Entry]) -> None:
        with self._cond:
            for e in entries:
                if e.error is not None:
                    self.malformed.append(e.raw)
                msg = e.message
                if self._arming is not None and _is_response(msg) and _id_key(msg.get("id")) == self._arming[0]:
                    self._arm(msg)
                if _is_response(msg) and _id_key(msg.get("id")) in self._abandoned:
                    self._abandoned.discard(_id_key(msg.get("id")))
                    continue
                if self._watches:
                    watch = self._watches.get(_request_of(msg) or "")
                    if watch is not None:
                        watch.count += 1
                icp = self._interceptor
                if icp is not None:
                    if _is_server_request(msg):
                        icp._ask(msg)  # answered on a thread of its own, never here
                        continue
                    if icp._takes_notice(msg):
                        icp._tell(msg)
                        continue
                self._inbox.append(e)
            self._cond.notify_all()

    def _take(self, match: Callable[[_Entry], bool], timeout: Optional[float], what: str,
              drop_before: Optional[Callable[[Any], bool]] = None) -> _Entry:
        """Remove and return the first inbox entry for which ``match(entry)`` is true;
        with ``drop_before``, also remove the messages before it that it picks."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                for i, e in enumerate(self._inbox):
                    if match(e):
                        del self._inbox[i]
                        if drop_before is not None:
                            kept = [x for j, x in enumerate(self._inbox) if j >= i or not drop_before(x.message)]
                            if len(kept) != len(self._inbox):
                                self._inbox = collections.deque(kept)
                        return e
                if self._closed:
                    raise ConnectionClosed("connection closed while waiting for %s%s" % (
                        what, "" if self._close_error is None else " (%s)" % self._close_error))
                if deadline is None:
                    self._cond.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("no %s within %.3g s" % (what, cast(float, timeout)))
                    self._cond.wait(left)

    # ---- calls ----------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, message: Any) -> None:
        """Send one JSON value (an object or a batch array) as one line."""
        self.send_raw(encode(message))

    def send_raw(self, data: bytes) -> None:
        """Send bytes exactly as given (for framing tests)."""
        with self._send_lock:
            if self.tls is not None:
                self.tls.send(data)
            else:
                self.sock.sendall(data)

    def request(self, method: str, params: Any = None, timeout: Optional[float] = 10,
                id: Any = None) -> Dict[str, Any]:
        """Send a call and return the whole response object (result or error)."""
        return self._request(method, params, timeout, id)

    def _request(self, method: str, params: Any, timeout: Optional[float], id: Any = None,
                 drop_before: Optional[Callable[[Any], bool]] = None) -> Dict[str, Any]:
        rid = self.next_id() if id is None else id
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": rid}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self._wait_response(rid, timeout, drop_before)

    def wait_response(self, rid: Any, timeout: Optional[float] = 10) -> Dict[str, Any]:
        """Wait for the response with id ``rid`` (sent earlier, e.g. with ``send_raw``)."""
        return self._wait_response(rid, timeout)

    def _wait_response(self, rid: Any, timeout: Optional[float],
                       drop_before: Optional[Callable[[Any], bool]] = None) -> Dict[str, Any]:
        try:
            e = self._take(lambda e: _is_response(e.message) and e.message.get("id") == rid
                           and type(e.message.get("id")) is type(rid),
                           timeout, "the response to id %r" % (rid,), drop_before)
        except TimeoutError:
            with self._cond:
                self._abandoned.add(_id_key(rid))
            raise
        message: Dict[str, Any] = e.message
        return message

    def call(self, method: str, params: Any = None, timeout: Optional[float] = 10) -> Any:
        """Call ``method``; return its result or raise ``RPCError``."""
        return _result_of(self._request(method, params, timeout))

    def _call_dropping(self, method: str, params: Any, timeout: Optional[float],
                       drop_before: Callable[[Any], bool]) -> Any:
        """``call``, dropping the notifications ``drop_before`` picks that arrived before
        its answer (a read's ``socket.onRead``: they announced the bytes it took)."""
        return _result_of(self._request(method, params, timeout, drop_before=drop_before))

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no id, no reply)."""
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def batch(self, calls: Iterable[BatchCall], timeout: Optional[float] = 10) -> List[Any]:
        """Send a batch and return its responses in the order of the calls.

        ``calls`` holds ``(method, params)`` or ``(method, params, is_notification)``
        tuples.  The result lists one response object per call that is not a
        notification; an all-notification batch returns ``[]`` without waiting.
        """
        msgs, ids = _batch_messages(calls, self.next_id)
        self.send(msgs)
        if not ids:
            return []
        wanted = set(ids)

        def match(e: _Entry) -> bool:
            msg = e.message
            return bool(isinstance(msg, list) and msg and
                        any(isinstance(r, dict) and r.get("id") in wanted for r in msg))

        msg = self._take(match, timeout, "the batch response to ids %r" % ids).message
        order: Dict[Any, int] = {rid: i for i, rid in enumerate(ids)}
        return sorted(msg, key=lambda r: order.get(r.get("id") if isinstance(r, dict) else None, len(ids)))

    # ---- notifications and raw messages ---------------------------------

    def read_message(self, timeout: Optional[float] = 10, raw: bool = False) -> Any:
        """Remove and return the oldest message of any kind.

        With ``raw=True`` return ``(message, line_bytes)``.  Raises ``TimeoutError``,
        ``ConnectionClosed`` when the server closed and nothing is left, or
        ``MalformedMessage`` when the oldest line was not JSON.
        """
        e = self._take(lambda e: True, timeout, "a message")
        if e.error is not None:
            raise MalformedMessage(e.raw, e.error)
        return (e.message, e.raw) if raw else e.message

    def wait_notification(self, predicate: Optional[Callable[[Dict[str, Any]], bool]] = None,
                          timeout: Optional[float] = 10) -> Dict[str, Any]:
        """Remove and return the first notification for which ``predicate`` holds.

        Other messages stay in the inbox in order.
        """
        message: Dict[str, Any] = self._take(lambda e: _is_notification(e.message) and
                                             (predicate is None or predicate(e.message)),
                                             timeout, "a matching notification").message
        return message

    def notifications(self, timeout: Optional[float] = 1.0) -> Iterator[Dict[str, Any]]:
        """Yield notifications as they arrive; stop after ``timeout`` s with none, or at close."""
        while True:
            try:
                yield self.wait_notification(None, timeout)
            except (TimeoutError, ConnectionClosed):
                return

    def pending(self) -> List[Any]:
        """The messages received and not yet taken, oldest first (not removed)."""
        with self._cond:
            return [e.message for e in self._inbox]

    def _discard_notifications(self, request: str) -> None:
        """Drop the waiting notifications about ``request`` (one the client made itself)."""
        with self._cond:
            kept = [e for e in self._inbox if _request_of(e.message) != request]
            if len(kept) != len(self._inbox):
                self._inbox = collections.deque(kept)

    # ---- request objects -------------------------------------------------

    def subscribe(self, request: Optional[str] = None, *, socket: Optional[str] = None, all: bool = False,
                  events: Optional[Iterable[str]] = None, progress_interval: Optional[int] = None,
                  timeout: Optional[float] = 10) -> str:
        """Asks for notifications about one request (or ``socket``), or ``all`` of the
        principal's; returns the subscription's id for ``unsubscribe``.  ``events``:
        ``"stateChange"``, ``"progress"`` (default both).  ``progress_interval``: the least
        milliseconds between two ``onProgress`` of one request on this connection (default
        100, at least 10); each connection gets progress at its own pace."""
        params = _subscribe_params(request, socket, all, events, progress_interval)
        return str(self.call("subscribe", params, timeout=timeout)["subscription"])

    def unsubscribe(self, subscription: str, timeout: Optional[float] = 10) -> None:
        """Ends a subscription made by this connection."""
        self.call("unsubscribe", {"subscription": subscription}, timeout=timeout)

    def pause(self, request: str, timeout: Optional[float] = 10) -> None:
        """Pauses ``request``'s transfer in flight, both directions, until ``resume``; its
        ``timeout`` does not run meanwhile.  ``RPCError`` ``invalid_state`` when it is not
        in flight (UNSENT, OPENED, DONE)."""
        self.call("pause", {"request": request}, timeout=timeout)

    def resume(self, request: str, timeout: Optional[float] = 10) -> None:
        """Lifts ``pause``: the transfer goes on where it stopped.  ``RPCError``
        ``invalid_state`` when it is not in flight."""
        self.call("resume", {"request": request}, timeout=timeout)

    def fetch(self, url: str, method: str = "GET", headers: Optional[Mapping[str, str]] = None,
              body: Union[str, bytes, bytearray, memoryview, None] = None,
              timeout: Optional[float] = None, response_type: Optional[str] = None,
              retry: Optional[Mapping[str, Any]] = None, *, base_url: Optional[str] = None,
              query: Optional[Mapping[str, Any]] = None, json: Any = UNSET,
              form: Optional[Mapping[str, str]] = None, multipart: Optional[Iterable[MultipartPart]] = None,
              credential: Optional[Mapping[str, str]] = None, follow_redirects: Optional[bool] = None,
              max_redirects: Optional[int] = None, cookies: Optional[bool] = None,
              proxy: Optional[Mapping[str, Any]] = None, disable_host_verification: Optional[bool] = None,
              disable_peer_verification: Optional[bool] = None,
              client_certificate: Optional[Mapping[str, str]] = None, pinned_public_key: Optional[str] = None,
              request: Optional[str] = None, subscribe: Optional[bool] = None) -> Dict[str, Any]:
        """One whole exchange with the ``fetch`` method; returns its result.

        The result is ``{"status", "statusText", "headers", "body", "encoding"}``;
        ``decode_body(result)`` gives the body as bytes (ask with
        ``response_type="base64"`` for bytes that may not be text).  ``body`` is
        sent as text when it is a ``str`` and as base64 when it is bytes.
        ``timeout`` bounds the transfer in the server (None: no bound, and this
        call waits as long as the server does); a response that never came has
        status 0 and the reason in ``statusText``.  The body must fit in the
        server's ``--max-buffer-bytes`` (8 MiB); ``download`` has no such limit.
        ``retry``: a retry policy, as ``setRetryPolicy`` takes it without ``request``
        (``{"maxAttempts": 3, "initialDelay": 0.5, "maxDelay": 30, "retryOn": [...]}``).

        The keyword-only arguments are fetch's other members (api/openrpc.json):
        ``base_url`` (``url`` is then resolved against it as a browser would),
        ``query`` (``{name: value or [values]}``, appended form-urlencoded), one body
        serializer of ``json`` (any value, ``None`` sends ``null``), ``form``
        (``{name: value}``) and ``multipart`` (a list of ``MultipartPart``) instead of
        ``body``; ``credential`` (``{"user", "password", "auth"?}``), and the per-request
        options ``follow_redirects``, ``max_redirects``, ``cookies``, ``proxy``
        (``{"host", "port", ...}``), ``disable_host_verification``,
        ``disable_peer_verification``, ``client_certificate`` (``{"cert", "key",
        "password"?}``), ``pinned_public_key``; ``request`` names the fetch (its
        notifications and the result carry it) and ``subscribe=True`` sends its
        ``onStateChange`` and ``onProgress`` to this connection (read them with
        ``wait_notification``).  With ``response_type="json"`` a body that is not JSON
        raises ``RPCError`` (reason ``request_failed``, ``data.status``).
        """
        options = _fetch_options(base_url, query, json, form, multipart, credential, follow_redirects,
                                 max_redirects, cookies, proxy, disable_host_verification,
                                 disable_peer_verification, client_certificate, pinned_public_key, request, subscribe)
        params = _fetch_params(url, method, headers, body, timeout, response_type, retry, options)
        result: Dict[str, Any] = self.call("fetch", params, timeout=_answer_timeout(timeout))
        return result

    # ---- stored credentials ----------------------------------------------

    def credentials_set(self, host: str, user: str, password: str, port: Optional[int] = None,
                        scheme: Optional[str] = None, realm: Optional[str] = None,
                        auth: Optional[str] = None) -> None:
        """Stores a credential of this principal for a protection space (``credentials.set``).

        ``scheme`` defaults to ``"https"`` and ``port`` to the scheme's; no ``realm``
        means any realm of the host; ``auth`` (``"BASIC"``, ``"DIGEST"``, ``"NTLM"``,
        ``"NEGOTIATE"``) limits it to one scheme.  The server sends it only after a
        matching 401 (or a proxy's 407) challenge, and then sends the request again.
        """
        self.call("credentials.set", _credential_params(host, port, scheme, realm, user=user, password=password,
                                                        auth=auth))

    def credentials_list(self) -> List[Dict[str, Any]]:
        """This principal's stored credentials, without passwords (``credentials.list``)."""
        result: Dict[str, Any] = self.call("credentials.list")
        entries: List[Dict[str, Any]] = result["credentials"]
        return entries

    def credentials_remove(self, host: str, port: Optional[int] = None, scheme: Optional[str] = None,
                           realm: Optional[str] = None, user: Optional[str] = None) -> bool:
        """Removes the credential of a protection space; False when there was none."""
        result: Dict[str, Any] = self.call("credentials.remove", _credential_params(host, port, scheme, realm,
                                                                                   user=user))
        return bool(result["removed"])

    def set_json_body(self, request: str, value: Any) -> None:
        """``setJSONBody``: the request's body becomes ``value`` as JSON
        (``Content-Type: application/json``), sent by ``send`` without a body."""
        self.call("setJSONBody", {"request": request, "value": value})

    def add_multipart_part(self, request: str, name: str, value: Optional[str] = None, *,
                           data: Union[bytes, bytearray, memoryview, None] = None, path: Optional[str] = None,
                           filename: Optional[str] = None, content_type: Optional[str] = None) -> None:
        """``addMultipartPart``: a text field (``value``) or a file part (``data`` bytes,
        or ``path`` below the principal's upload root, docs/guide/files.md) of a multipart/form-data body."""
        self.call("addMultipartPart", _part_params(request, name, value, data, path, filename, content_type))

    # ---- interception ----------------------------------------------------

    def intercept(self, will_send: Optional[QuestionCallback] = None,
                  should_continue: Optional[QuestionCallback] = None,
                  on_notice: Optional[NoticeCallback] = None,
                  events: Optional[Iterable[str]] = None, match: Optional[Iterable[str]] = None,
                  timeout: Optional[float] = None) -> Interceptor:
        """Register this connection as the interceptor of its principal's requests
        (``intercept.register``): request objects and ``fetch``, from every connection
        of the principal.  Returns an ``Interceptor`` (``unregister()``, a context
        manager).

        ``will_send(params)`` answers ``willSendRequest`` (``params``: request,
        attempt, method, url, headers) and ``should_continue(params)`` answers
        ``shouldContinueAfterFailWithError`` (request, attempt, error {reason,
        message}, method, url); each returns ``True``, ``False`` or a replacement
        ``{url?, method?, headers?, body? | bodyBase64?}``.  A callback that raises
        or returns anything else is answered with an error (kept in
        ``Interceptor.errors``), and the server takes the default action (send
        unchanged; do not retry).  ``on_notice(method, params)`` receives
        ``didReceiveResponse``, ``didReceiveData``, ``didFailWithError`` and
        ``didFinishLoading``.  ``events``: the names to register for (default: the
        questions that have a callback, and the notices when ``on_notice`` is given;
        with no callback at all, every event: the questions are then answered with
        "Method not found", the default action, and the notices wait in the inbox).
        ``match``: host patterns in the ``--allow`` syntax that limit it to some
        hosts; ``timeout``: the seconds the server waits for each answer (default 5).
        Raises ``RPCError`` (-32011 ``busy`` when the principal has an interceptor
        already; -32602 for bad parameters).
        """
        callbacks = {"willSendRequest": will_send, "shouldContinueAfterFailWithError": should_continue}
        params = _register_params(events, timeout, match, callbacks, on_notice)
        icp = Interceptor(self, "", params.get("events"), will_send, should_continue, on_notice)
        rid = self.next_id()
        # The reader arms it when the answer arrives, before it reads the next line:
        # a question may follow the answer at once.
        with self._cond:
            self._arming = (_id_key(rid), icp)
        try:
            response = self._request("intercept.register", params, 10, id=rid)
        finally:
            with self._cond:
                if self._arming is not None and self._arming[1] is icp:
                    self._arming = None
        try:
            _result_of(response)
            if not icp.id:
                raise MalformedMessage(encode(response), "intercept.register answered no interceptor id")
        except BaseException:
            self._interceptor_ended(icp)
            raise
        return icp

    @property
    def interceptor(self) -> Optional[Interceptor]:
        """The active interceptor ``intercept`` registered on this connection, if any."""
        with self._cond:
            return self._interceptor

    def _arm(self, response: Dict[str, Any]) -> None:
        """intercept.register's answer arrived (reader thread, under ``_cond``): a
        successful one makes its interceptor the active one."""
        assert self._arming is not None
        icp = self._arming[1]
        self._arming = None
        result = response.get("result")
        if isinstance(result, dict) and isinstance(result.get("interceptor"), str) and result["interceptor"]:
            icp.id = result["interceptor"]
            old, self._interceptor = self._interceptor, icp
            if old is not None:
                old._end()

    def _interceptor_ended(self, icp: Interceptor) -> None:
        with self._cond:
            if self._interceptor is icp:
                self._interceptor = None
        icp._end()

    def _watch(self, request: str) -> None:
        with self._cond:
            watch = self._watches.get(request)
            if watch is None:
                watch = self._watches[request] = _Watch()
            watch.readers += 1

    def _unwatch(self, request: str) -> None:
        with self._cond:
            watch = self._watches[request]
            watch.readers -= 1
            if watch.readers == 0:
                del self._watches[request]

    def _news_count(self, request: str) -> int:
        with self._cond:
            return self._watches[request].count

    def _wait_news(self, request: str, seen: int, seconds: float) -> None:
        """Wait until a notification about ``request`` arrived since the count was ``seen``,
        the connection closed, or ``seconds`` passed."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._watches[request].count != seen, seconds)

    def _drain(self, request: str, sink: Callable[[bytes], Optional[bool]], timeout: Optional[float],
               max_bytes: Optional[int], own: bool, stream: bool = False) -> bool:
        """Pass the body of ``request`` (with ``stream``, the stream of the socket
        ``request``) to ``sink`` as it arrives, each read that brought bytes, until
        ``getReceiveBuffer`` says done (``socket.read`` says closed): True; or until
        ``sink`` returns True: False.

        A read that brings nothing is followed by a wait for the next notification
        about the handle, or a pause that grows from 10 to 200 ms when none comes:
        never a busy loop.  ``own``: the handle is the client's own, and its
        notifications are dropped as they come instead of piling up in the inbox (a
        socket's ``socket.onRead`` only, those that came before each read's answer).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        source = _Source(request, max_bytes, stream)
        pause = _BODY_POLL_FIRST
        total = 0
        self._watch(request)
        try:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("%s did not end within %.3g s (%d bytes read)"
                                       % (source.noun, cast(float, timeout), total))
                seen = self._news_count(request)
                call_timeout = _READ_CALL_TIMEOUT if left is None else min(left, _READ_CALL_TIMEOUT)
                if own and source.wakeups is not None:
                    chunk = self._call_dropping(source.method, source.params, call_timeout, source.wakeups)
                else:
                    chunk = self.call(source.method, source.params, timeout=call_timeout)
                data = _chunk_bytes(chunk)
                stop = False
                if data:
                    total += len(data)
                    pause = _BODY_POLL_FIRST
                    stop = bool(sink(data))
                if chunk[source.end]:
                    return True
                if stop:
                    return False
                if own and source.wakeups is None:
                    self._discard_notifications(request)
                if not data:
                    self._wait_news(request, seen, pause if left is None else min(pause, left))
                    pause = min(pause * 2, _BODY_POLL_LAST)
        finally:
            self._unwatch(request)

    def read_body(self, request: str, timeout: Optional[float] = 30,
                  max_bytes: Optional[int] = None) -> bytes:
        """Read the body of ``request`` to its end and return it.

        Calls ``getReceiveBuffer`` until it says done (the request is DONE and every
        byte read); between reads that bring nothing it waits for a notification
        about the request or a short pause (10 ms growing to 200 ms), never
        spinning.  Notifications stay in the inbox for whoever waits for them.
        ``timeout`` bounds the whole body (None: no bound); ``max_bytes`` each read.
        A request that failed (status 0) ends its body early: check ``getStatus``.
        """
        parts: List[bytes] = []
        self._drain(request, parts.append, timeout, max_bytes, own=False)
        return b"".join(parts)

    def download(self, url: str, path: Union[str, "os.PathLike[str]"],
                 progress: Optional[ProgressCallback] = None,
                 headers: Optional[Mapping[str, str]] = None,
                 timeout: Optional[float] = None, max_bytes: Optional[int] = None) -> int:
        """GET ``url`` into the file ``path``, streaming; return the response's status.

        Runs on the object API (create, open, subscribe to progress, send, then
        ``getReceiveBuffer`` as bytes arrive), so the body may be of any size and
        memory stays bounded by one read (``max_bytes``, default the server's
        ``--max-buffer-bytes``).  The bytes go to ``path + ".part"``, which is
        renamed to ``path`` once the body is complete, whatever the status (as
        ``curl -o`` does: check the status returned).  ``progress(received, total)``
        is called after each write, with ``total`` the size from the response's
        Content-Length (-1 when it has none or the body was decoded from a content
        coding), and at the end with ``total == received`` if the last call did not
        already say so.  ``headers`` are request headers; ``timeout`` bounds the
        transfer (None: no bound).  A request that gets no response, or whose body
        is cut short, raises ``TransferError``; any error removes the ``.part`` file
        and leaves ``path`` as it was.  The request is released at the end.
        """
        final = os.fspath(path)
        part = final + ".part"
        name = _download_handle()
        state = _DownloadState(progress)
        subscription: Optional[str] = None
        with open(part, "wb") as f:
            created = True  # from the moment the batch is sent, release at the end
            try:
                responses = self.batch(_download_calls(name, url, headers))
                created, subscription = _prepared(responses)
                _raise_first_error(responses)
                self.call("send", _send_params(name, timeout))

                def sink(data: bytes) -> None:
                    if state.total is None:
                        state.total = _expected_total(*(_result_of(r) for r in self.batch(_header_calls(name))))
                    f.write(data)
                    state.wrote(len(data))

                self._drain(name, sink, _answer_timeout(timeout), max_bytes, own=True)
                status, status_text = (_result_of(r) for r in self.batch(_status_calls(name)))
                if status == 0:
                    raise TransferError(name, status_text, state.received)
            except BaseException:
                f.close()
                _unlink_quietly(part)
                raise
            finally:
                if created:
                    self._end_download(name, subscription)
        os.replace(part, final)
        state.finished()
        return int(status)

    def upload(self, url: str, path: Optional[Union[str, "os.PathLike[str]"]] = None,
               data: Optional[Data] = None, method: str = "POST",
               headers: Optional[Mapping[str, str]] = None, request: Optional[str] = None,
               on_progress: Optional[TransferProgressCallback] = None,
               timeout: Optional[float] = None,
               multipart: Optional[Iterable[MultipartPart]] = None) -> Dict[str, Any]:
        """Send a file the server reads (``path``, below the principal's upload root),
        ``data`` (bytes, or text as UTF-8) or ``multipart`` parts (as ``fetch`` takes
        them) with the server's ``upload`` method; wait for DONE and return
        ``{"request", "status", "statusText"}``.

        ``on_progress(params)`` gets each ``onProgress`` of this request (its
        ``totalBytesWritten``, ``totalBytesExpectedToWrite``, ...).  The request object
        (named ``request``, or generated) is released at the end; read the response
        through ``upload``'s raw method if its body matters.  A path outside the root
        raises ``RPCError`` with reason ``path_not_allowed``.
        """
        name = request or _transfer_handle("upload")
        params = _transfer_params(name, url, headers, timeout, method=method, **_upload_body(path, data, multipart))
        return self._run_transfer("upload", params, on_progress, timeout, None)

    def server_download(self, url: str, path: str, headers: Optional[Mapping[str, str]] = None,
                        resume: bool = False, request: Optional[str] = None,
                        on_progress: Optional[TransferProgressCallback] = None,
                        timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET ``url`` into ``path`` below the principal's download root with the
        server's ``download`` method (the server writes the file, unlike ``download``,
        which streams the body to this process); wait for DONE and return
        ``{"request", "path", "status", "statusText"}``.

        The server writes ``path + ".part"`` and renames it to ``path`` only when the
        body is complete with a 2xx status; ``resume=True`` continues a part an
        earlier attempt left (``Range`` with ``If-Range``).  ``on_progress(params)``
        gets each ``onProgress`` of this request; its totals count the whole file,
        bytes kept from an earlier attempt included.  The request object is released
        at the end.  A path that leaves the root raises ``RPCError`` with reason
        ``path_not_allowed``.
        """
        name = request or _transfer_handle("download")
        params = _transfer_params(name, url, headers, timeout, path=path, resume=resume or None)
        return self._run_transfer("download", params, on_progress, timeout, path)

    def _run_transfer(self, method: str, params: Dict[str, Any], on_progress: Optional[TransferProgressCallback],
                      timeout: Optional[float], path: Optional[str]) -> Dict[str, Any]:
        # The calling connection is told the transfer's state changes and its progress
        # (the server's upload and download), so no subscription is needed.
        name = params["request"]
        try:
            started = self.call(method, params)
        except RPCError:
            self._discard_notifications(name)
            raise
        try:
            wait = _answer_timeout(timeout)
            while True:
                msg = self.wait_notification(_transfer_event(name), wait)
                p = _params_of(msg)
                if msg["method"] == "onProgress":
                    if on_progress is not None:
                        on_progress(p)
                elif p.get("state") == 5:
                    return _transfer_result(name, p, started.get("path", path))
        finally:
            self._end_download(name, None)

    def _end_download(self, name: str, subscription: Optional[str]) -> None:
        try:
            self.batch(_end_calls(name, subscription))
        except (OSError, TimeoutError):
            pass  # the connection is gone or stuck: the server releases with it
        self._discard_notifications(name)

    # ---- raw sockets ------------------------------------------------------

    def socket(self, host: str, port: int, ssl: bool = False, name: Optional[str] = None) -> "Socket":
        """A raw TCP (``ssl=True``: TLS) stream to ``host:port`` held by the server:
        ``socket.create``, returned as a ``Socket`` in state Prepared (nothing is sent
        before ``connect``).  ``name``: the handle to use (else the server makes one).
        Raises ``RPCError`` (``limit_exceeded`` past the principal's ``sockets`` limit,
        ``already_exists`` for a name in use, -32602 for a bad host or port)."""
        result = self.call("socket.create", _socket_create_params(host, port, ssl, name))
        return Socket(self, result["socket"], host, port, ssl)

    # ---- closing --------------------------------------------------------

    @property
    def closed_by_peer(self) -> bool:
        with self._cond:
            return self._closed

    def wait_closed(self, timeout: float = 10) -> bool:
        """Wait until the server closes the connection; True if it did within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def shutdown_write(self) -> None:
        """Half-close: tell the server we will send nothing more (replies still arrive).

        Over TLS this first sends close_notify (without waiting for the server's),
        then half-closes the socket, so the server sees a clean end of the TLS data
        and still writes its replies, which arrive as usual.
        """
        with self._send_lock:
            if self.tls is not None:
                self.tls.close_notify()
            self.sock.shutdown(socket.SHUT_WR)

    def close(self, timeout: float = 5) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._reader.join(timeout)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class _SocketCore:
    """What ``Socket`` and ``AsyncSocket`` share, all but the calls themselves: the
    handle, the bytes read past a helper's end (``_SocketBuffer``), the last error, and
    the reading of each answer and notification. Each subclass only makes the calls,
    blocking or awaited, and hands their answers here."""

    def __init__(self, client: Any, handle: str, host: Optional[str] = None,
                 port: Optional[int] = None, ssl: bool = False) -> None:
        self.client = client
        self.handle = handle
        self.host = host
        self.port = port
        self.ssl = ssl
        #: The last ``socket.onErr`` that ``wait_open`` or ``wait_closed`` took.
        self.error: Optional[SocketError] = None
        self._buf = _SocketBuffer()

    def __repr__(self) -> str:
        return "<xhrpc.%s %s %s:%s%s>" % (type(self).__name__, self.handle, self.host, self.port,
                                          " ssl" if self.ssl else "")

    @property
    def closed(self) -> bool:
        """True once a read said the stream ended and every byte was returned."""
        return self._buf.ended and not self._buf.data

    def _connected(self) -> None:
        """``socket.connect`` answered: a new stream starts with nothing read."""
        self._buf.reset()
        self.error = None

    def _opened(self, msg: Dict[str, Any]) -> None:
        """``wait_open``'s notification: nothing for ``onOpen``, else the error raised."""
        if msg.get("method") == _ON_OPEN:
            return
        self.error = _socket_error(msg)
        raise self.error

    def _ended(self, msg: Dict[str, Any]) -> bool:
        """``wait_closed``'s notification: True for ``onClose``; an ``onErr`` is kept."""
        if msg.get("method") == _ON_CLOSE:
            return True
        self.error = _socket_error(msg)
        return False

    def _read_answer(self, chunk: Dict[str, Any]) -> bytes:
        """The bytes of a ``socket.read`` answer; notes whether the stream ended."""
        data = _chunk_bytes(chunk)
        self._buf.ended = bool(chunk["closed"])
        return data

    def _cut(self, end: Callable[[bytearray], Optional[int]], what: str) -> bytes:
        """What a filling read returns once it waited: up to ``end``'s cut, or EOFError."""
        n = end(self._buf.data)
        if n is None:
            raise _incomplete(self.handle, len(self._buf.data), what)
        return self._buf.take(n)


class Socket(_SocketCore):
    """A raw TCP or TLS stream that xhrpcd holds for a ``Client``: ``Client.socket``
    makes one; ``Socket(client, handle)`` wraps a handle found otherwise (``list``,
    ``attach``).  Each method is one call of ``socket.*``, which raises ``RPCError``
    (``invalid_state`` in a state that does not allow it, ``unknown_handle`` once
    released).  Its notifications (``socket.onOpen``, ``onRead``, ``onErr``,
    ``onClose``) stay in the client's inbox for ``client.wait_notification`` unless a
    method here takes them: ``wait_open`` and ``wait_closed`` take theirs, a read drops
    the ``onRead`` ones (they only say bytes arrived), ``connect`` the old stream's.

    A ``with`` block releases the socket at its end.
    """

    client: Client

    def __enter__(self) -> "Socket":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.release()
        except (OSError, TimeoutError, RPCError):
            pass  # gone already, or the connection is: the server releases with it

    # ---- set-up and state -------------------------------------------------

    def disable_host_verification(self) -> None:
        """TLS: accept a certificate whose names do not match the host (Prepared or
        Disconnected only)."""
        self.client.call("socket.disableHostVerification", {"socket": self.handle})

    def disable_peer_verification(self) -> None:
        """TLS: accept any certificate at all, host name included (Prepared or
        Disconnected only)."""
        self.client.call("socket.disablePeerVerification", {"socket": self.handle})

    def connect(self, timeout: Optional[float] = None) -> None:
        """Start connecting (``socket.connect``; from Prepared or Disconnected); it
        answers at once, ``wait_open`` waits for the outcome.  ``timeout``: the
        server's bound on the connect and TLS handshake, in seconds (None: its
        default, 30 s).  A host the server's egress rules deny raises ``RPCError``
        (``policy_denied``) here.  Bytes and notifications of an earlier stream still
        waiting are dropped: a new stream starts."""
        self.client._discard_notifications(self.handle)
        self.client.call("socket.connect", _socket_connect_params(self.handle, timeout))
        self._connected()

    def wait_open(self, timeout: Optional[float] = _CONNECT_TIMEOUT + _ANSWER_MARGIN) -> None:
        """Wait for ``socket.onOpen``; raise ``SocketError`` at ``socket.onErr`` (its
        ``error`` and ``message``; the ``socket.onClose`` that follows stays for
        ``wait_closed``), ``TimeoutError`` after ``timeout`` s."""
        self._opened(self.client.wait_notification(_socket_event(self.handle, (_ON_OPEN, _ON_ERR, _ON_CLOSE)),
                                                   timeout))

    def wait_closed(self, timeout: Optional[float] = 10) -> None:
        """Wait for ``socket.onClose`` (after ``disconnect``, a failure or the peer's
        close); an ``onErr`` before it is kept in ``error``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._ended(self.client.wait_notification(_socket_event(self.handle, (_ON_ERR, _ON_CLOSE)), left)):
                return

    def state(self) -> str:
        """The state's name: Prepared, Connecting, Open, Disconnecting or Disconnected."""
        answer: str = self.client.call("socket.getState", {"socket": self.handle})["stateName"]
        return answer

    def disconnect(self) -> None:
        """Close the stream after the queued writes went out (``socket.disconnect``;
        Open or Connecting only); ``wait_closed`` waits for the end."""
        self.client.call("socket.disconnect", {"socket": self.handle})

    def release(self) -> None:
        """Close the stream if open and forget the socket (``socket.release``); its
        notifications still waiting are dropped."""
        try:
            self.client.call("socket.release", {"socket": self.handle})
        finally:
            self.client._discard_notifications(self.handle)

    # ---- bytes -------------------------------------------------------------

    def write(self, data: Data) -> int:
        """Queue ``data`` (text is sent as UTF-8, bytes as they are) and return the
        number of bytes.  Open only.  Past ``--max-buffer-bytes`` queued and not yet
        taken by the kernel it raises ``RPCError`` ``limit_exceeded``
        (``data.limit`` ``maxBufferBytes``) and nothing of ``data`` was queued: retry
        later. A ``data`` larger than ``--max-buffer-bytes`` can never fit: the error
        then has ``data.neverFits`` true (split it instead of retrying)."""
        n: int = self.client.call("socket.write", _socket_write_params(self.handle, data))["bytes"]
        return n

    def read(self, max_bytes: Optional[int] = None) -> bytes:
        """The bytes received and not read yet, at most ``max_bytes`` (None: all the
        server holds), without waiting: ``b""`` when none.  ``closed`` tells when no
        more will come."""
        if self._buf.data:
            return self._buf.take(max_bytes)
        chunk = self.client._call_dropping("socket.read", _socket_read_params(self.handle, max_bytes),
                                           _READ_CALL_TIMEOUT, _socket_event(self.handle, (_ON_READ,)))
        return self._read_answer(chunk)

    def _fill(self, end: Callable[[bytearray], Optional[int]], timeout: Optional[float],
              what: str) -> bytes:
        """Read into the buffer until ``end`` finds where to cut it; return up to there."""
        n = end(self._buf.data)
        if n is None and not self._buf.ended:
            def sink(data: bytes) -> bool:
                self._buf.data += data
                return end(self._buf.data) is not None

            if self.client._drain(self.handle, sink, timeout, None, own=True, stream=True):
                self._buf.ended = True
        return self._cut(end, what)

    def read_exactly(self, n: int, timeout: Optional[float] = 30) -> bytes:
        """Exactly ``n`` bytes, waiting for them (``onRead``, or a short growing pause;
        never spinning).  ``EOFError`` if the stream ends first (the bytes stay
        readable), ``TimeoutError`` after ``timeout`` s (None: no bound)."""
        return self._fill(_exactly(n), timeout, "%d bytes came" % n)

    def read_until(self, separator: bytes = b"\n", timeout: Optional[float] = 30) -> bytes:
        """The bytes up to and including the next ``separator``, waiting as
        ``read_exactly`` does (``EOFError`` if the stream ends first)."""
        return self._fill(_until(separator), timeout, "%r came" % (separator,))

    def read_until_closed(self, timeout: Optional[float] = 30, max_bytes: Optional[int] = None) -> bytes:
        """Every byte until the stream ends (the peer closed, a failure, ``disconnect``),
        waiting as ``read_exactly`` does; ``max_bytes`` bounds each read."""
        if not self._buf.ended:
            def sink(data: bytes) -> None:
                self._buf.data += data  # kept here if the wait fails: nothing is lost

            self.client._drain(self.handle, sink, timeout, max_bytes, own=True, stream=True)
            self._buf.ended = True
        return self._buf.take(None)
