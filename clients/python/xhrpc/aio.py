"""An asyncio client for xhrpc over a Unix, TCP or TLS socket (standard library only).

    import asyncio
    from xhrpc.aio import AsyncClient

    async def main():
        async with await AsyncClient.connect_unix() as c:      # the default socket
            print(await c.call("server.info"))

    asyncio.run(main())

One task reads the server's lines.  A response settles the call that awaits its id
(type included), so any number of calls from any number of tasks may be in flight
on one connection; a batch's array settles its batch.  Notifications go to the
oldest ``wait_notification`` (or ``notifications()`` iterator) whose predicate
they match, else into an inbox in arrival order from which later waits take
them; the inbox keeps the newest ``inbox_limit`` and counts the ones it dropped.
Responses no call awaits are kept in ``unmatched`` (the newest 100); the answer
to a call that timed out or was cancelled is dropped when it arrives.  With an
interceptor registered (``intercept``), each question from the server is answered
by a task of its own and the notices go to its ``on_notice`` when it has one.

Errors are the synchronous client's: ``RPCError`` (``code``, ``message``,
``data``, ``reason``, ``response``), ``ConnectionClosed``, ``TransferError``,
and the built-in ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import json
import os
import socket
import ssl
import time
from typing import (Any, AsyncIterator, Awaitable, Callable, Deque, Dict, Iterable, List, Mapping,
                    Optional, Set, Tuple, Union, cast)

from .client import (_ANSWER_MARGIN, _BODY_POLL_FIRST, _BODY_POLL_LAST, _CONNECT_TIMEOUT, _ON_CLOSE, _ON_ERR,
                     _ON_OPEN, _ON_READ, _READ_CALL_TIMEOUT, _READ_SIZE, BatchCall, ConnectionClosed, Data,
                     MalformedMessage, RPCError, SocketError, TransferError, _batch_messages, _callback_failed,
                     _chunk_bytes, _DownloadState, _download_calls, _download_handle, _end_calls, _exactly,
                     _expected_total, _fetch_options, _fetch_params, _header_calls, _id_key, _InterceptorBase,
                     _is_notification, _is_response, _is_server_request, _no_callback, _params_of, _prepared,
                     _question_reply, _raise_first_error, _register_params, _request_of, _result_of, _send_params,
                     _socket_connect_params, _socket_create_params, _socket_event,
                     _socket_read_params, _socket_write_params, _Source, _status_calls,
                     _unlink_quietly, _until, default_socket_path, encode, TransferProgressCallback,
                     _transfer_event, _transfer_handle, _transfer_params, _transfer_result,
                     _upload_body)
from .client import _subscribe_params
from .client import _credential_params
from .client import UNSET, MultipartPart, _part_params
from .client import _SocketCore

__all__ = ["AsyncClient", "AsyncInterceptor", "AsyncSocket", "RPCError", "ConnectionClosed", "SocketError",
           "TransferError"]

#: ``progress(received, total)``; it may also be a coroutine function.
AsyncProgressCallback = Callable[[int, int], Union[None, Awaitable[None]]]
NotificationPredicate = Callable[[Dict[str, Any]], bool]
#: An ``AsyncClient`` interceptor's question callback: ``callback(params)`` returns (or,
#: as a coroutine function, resolves to) ``True``, ``False`` or a replacement dict.
AsyncQuestionCallback = Callable[[Dict[str, Any]], Any]
#: ``on_notice(method, params)``; it may be a coroutine function.
AsyncNoticeCallback = Callable[[str, Dict[str, Any]], Any]

DEFAULT_INBOX_LIMIT = 10000
_UNMATCHED_KEPT = 100
# The stream's buffer: the transport pauses reading past twice this much unread.
_STREAM_LIMIT = 4 * _READ_SIZE


def _key(rid: Any) -> Optional[Tuple[str, Any]]:
    """The id's key when it can be one of ours (ids of other types match no call)."""
    if rid is None or isinstance(rid, (str, int, float)):
        return _id_key(rid)
    return None


class _Waiter:
    __slots__ = ("predicate", "future")

    def __init__(self, predicate: Optional[NotificationPredicate], future: "asyncio.Future[Any]") -> None:
        self.predicate = predicate
        self.future = future


class _Batch:
    __slots__ = ("keys", "future")

    def __init__(self, keys: List[Tuple[str, Any]], future: "asyncio.Future[Any]") -> None:
        self.keys = keys
        self.future = future


class _AsyncWatch:
    """Notifications about one request while body readers watch it; ``event`` is set
    at each one (and at close)."""

    __slots__ = ("count", "readers", "event")

    def __init__(self) -> None:
        self.count = 0
        self.readers = 0
        self.event = asyncio.Event()


async def _bounded(awaitable: Awaitable[Any], timeout: Optional[float], what: str) -> Any:
    """Await with a deadline; the built-in TimeoutError (asyncio's differs before 3.11)."""
    if timeout is None:
        return await awaitable
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise TimeoutError("no %s within %.3g s" % (what, timeout)) from None


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


class AsyncClient:
    """A connection to xhrpcd for asyncio.

    Make one with ``await AsyncClient.connect_unix(path=None)``, ``connect_tcp`` or
    ``connect_tls`` (or ``AsyncClient(reader, writer)`` over streams already
    connected, inside a running loop); end it with ``await close()`` or
    ``async with``.  Every method may be used from several tasks at once.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 inbox_limit: int = DEFAULT_INBOX_LIMIT) -> None:
        self._loop = asyncio.get_running_loop()
        self._stream = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._calls: Dict[Tuple[str, Any], "asyncio.Future[Dict[str, Any]]"] = {}
        # Calls whose answer drops the notifications before it that a predicate picks.
        self._drops: Dict[Tuple[str, Any], NotificationPredicate] = {}
        self._batches: Dict[Tuple[str, Any], _Batch] = {}
        self._abandoned: Set[Tuple[str, Any]] = set()
        self._inbox: Deque[Dict[str, Any]] = collections.deque()
        self._inbox_limit = inbox_limit
        self._waiters: List[_Waiter] = []
        self._watches: Dict[str, _AsyncWatch] = {}
        self._drain_lock = asyncio.Lock()
        self._closed = False
        self._close_error: Optional[BaseException] = None
        self._closed_event = asyncio.Event()
        #: Notifications pushed out of the full inbox (the oldest go first).
        self.dropped_notifications = 0
        #: Responses (or batch arrays) that no call awaited, the newest 100.
        self.unmatched: Deque[Any] = collections.deque(maxlen=_UNMATCHED_KEPT)
        #: Raw lines that were not JSON (and an unterminated last line).
        self.malformed: List[bytes] = []
        #: auth's answer when a constructor was given a token.
        self.auth_result: Optional[Dict[str, Any]] = None
        self._interceptor: Optional[AsyncInterceptor] = None  # the one intercept() registered, while active
        self._arming: Optional[Tuple[Tuple[str, Any], AsyncInterceptor]] = None  # intercept.register's id
        self._task = self._loop.create_task(self._read_loop())

    # ---- construction ---------------------------------------------------

    @classmethod
    async def connect_unix(cls, path: Optional[str] = None, *, timeout: float = 10,
                           token: Optional[str] = None,
                           inbox_limit: int = DEFAULT_INBOX_LIMIT) -> "AsyncClient":
        """Connect to a ``unix:`` listener; without ``path``, to ``default_socket_path()``.

        ``token``: call ``auth`` with it before returning (a peer whose uid maps to no
        principal); a refusal raises its ``RPCError`` and closes the connection.
        """
        where = default_socket_path() if path is None else path
        try:
            reader, writer = await _bounded(asyncio.open_unix_connection(where, limit=_STREAM_LIMIT),
                                            timeout, "connection to %s" % where)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            if path is not None:
                raise
            raise type(e)(e.errno, "no xhrpcd listening at the default socket %s "
                          "(XDG_RUNTIME_DIR decides it; start the server or pass the path): %s"
                          % (where, e.strerror)) from e
        return await cls(reader, writer, inbox_limit=inbox_limit)._authenticated(token, timeout)

    @classmethod
    async def connect_tcp(cls, host: str, port: int, token: Optional[str] = None, *,
                          timeout: float = 10, inbox_limit: int = DEFAULT_INBOX_LIMIT) -> "AsyncClient":
        """Connect to a ``tcp:`` listener; with ``token``, authenticated before returning."""
        reader, writer = await _bounded(asyncio.open_connection(host, port, limit=_STREAM_LIMIT),
                                        timeout, "connection to %s:%s" % (host, port))
        _nodelay(writer)
        return await cls(reader, writer, inbox_limit=inbox_limit)._authenticated(token, timeout)

    @classmethod
    async def connect_tls(cls, host: str, port: int, cafile: Optional[str] = None,
                          token: Optional[str] = None, *, server_hostname: Optional[str] = None,
                          context: Optional[ssl.SSLContext] = None, timeout: float = 10,
                          inbox_limit: int = DEFAULT_INBOX_LIMIT) -> "AsyncClient":
        """Connect to a ``tls:`` listener, the server's certificate verified.

        As the synchronous ``Client.connect_tls``: ``ssl.create_default_context(cafile=cafile)``
        (the system's CAs when ``cafile`` is None), the name checked against
        ``server_hostname`` (default ``host``); ``context`` replaces that context.
        ``timeout`` bounds the connect and the handshake.
        """
        if context is None:
            context = ssl.create_default_context(cafile=cafile)
        elif cafile is not None:
            raise ValueError("give cafile or context, not both")
        reader, writer = await _bounded(
            asyncio.open_connection(host, port, ssl=context, server_hostname=server_hostname or host,
                                    ssl_handshake_timeout=timeout, limit=_STREAM_LIMIT),
            timeout, "TLS connection to %s:%s" % (host, port))
        _nodelay(writer)
        return await cls(reader, writer, inbox_limit=inbox_limit)._authenticated(token, timeout)

    async def _authenticated(self, token: Optional[str], timeout: float) -> "AsyncClient":
        if token is None:
            return self
        try:
            # A wrong token is answered after the server's failure delay (1 s).
            self.auth_result = await self.call("auth", {"token": token}, timeout=timeout + 5)
        except BaseException:
            await self.close()
            raise
        return self

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ---- reading --------------------------------------------------------

    async def _read_loop(self) -> None:
        buf = bytearray()
        error: Optional[BaseException] = None
        try:
            while True:
                data = await self._stream.read(_READ_SIZE)
                if not data:
                    break
                start = len(buf)
                buf += data
                nl = buf.find(b"\n", start)
                if nl < 0:
                    continue
                pos = 0
                while nl >= 0:
                    self._dispatch_line(bytes(buf[pos:nl]))
                    pos = nl + 1
                    nl = buf.find(b"\n", pos)
                del buf[:pos]
        except asyncio.CancelledError:
            error = ConnectionClosed("the reader was cancelled")
        except Exception as e:  # OSError, ssl.SSLError; anything else still ends the waits
            error = e
        if buf:
            # A last line without its newline is a framing fault of the server.
            self.malformed.append(bytes(buf))
        self._finish(error)

    def _dispatch_line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            self.malformed.append(line)
            return
        icp = self._interceptor
        if icp is not None:
            if _is_server_request(msg):
                icp._ask(msg)  # answered in a task of its own
                return
            if icp._takes_notice(msg):
                icp._tell(msg)
                return
        if _is_response(msg):
            key = _key(msg.get("id"))
            if self._arming is not None and key == self._arming[0]:
                self._arm(msg)
            fut = self._calls.pop(key, None) if key is not None else None
            drop = self._drops.pop(key, None) if key is not None else None
            if drop is not None:
                # Here, before any later line: exactly the ones that came before the answer.
                kept = [m for m in self._inbox if not drop(m)]
                if len(kept) != len(self._inbox):
                    self._inbox = collections.deque(kept)
            if fut is not None:
                if not fut.done():
                    fut.set_result(msg)
                return
            if key is not None and key in self._abandoned:
                self._abandoned.discard(key)
                return
            self.unmatched.append(msg)
        elif isinstance(msg, list):
            self._dispatch_batch(msg)
        elif _is_notification(msg):
            self._dispatch_notification(msg)
        else:
            self.unmatched.append(msg)

    def _dispatch_batch(self, msg: List[Any]) -> None:
        keys = [k for k in (_key(r.get("id")) for r in msg if isinstance(r, dict)) if k is not None]
        for key in keys:
            record = self._batches.get(key)
            if record is not None:
                for k in record.keys:
                    self._batches.pop(k, None)
                if not record.future.done():
                    record.future.set_result(msg)
                return
        if any(k in self._abandoned for k in keys):
            for k in keys:
                self._abandoned.discard(k)
            return
        self.unmatched.append(msg)

    def _dispatch_notification(self, msg: Dict[str, Any]) -> None:
        if self._watches:
            watch = self._watches.get(_request_of(msg) or "")
            if watch is not None:
                watch.count += 1
                watch.event.set()
        for w in self._waiters:
            if w.future.done():
                continue
            try:
                wanted = w.predicate is None or w.predicate(msg)
            except Exception as e:  # the waiter's own predicate failed: tell that waiter
                w.future.set_exception(e)
                continue
            if wanted:
                w.future.set_result(msg)
                return
        self._keep(msg)

    def _keep(self, msg: Dict[str, Any], first: bool = False) -> None:
        if first:
            self._inbox.appendleft(msg)
        else:
            self._inbox.append(msg)
        while len(self._inbox) > self._inbox_limit:
            self._inbox.popleft()
            self.dropped_notifications += 1

    def _finish(self, error: Optional[BaseException]) -> None:
        self._closed = True
        self._close_error = error
        icp, self._interceptor = self._interceptor, None
        if icp is not None:
            icp._end()  # the server ended it with the connection
        for fut in self._calls.values():
            if not fut.done():
                fut.set_exception(self._closed_error("the response"))
        self._calls.clear()
        for record in self._batches.values():
            if not record.future.done():
                record.future.set_exception(self._closed_error("the batch response"))
        self._batches.clear()
        for w in self._waiters:
            if not w.future.done():
                w.future.set_exception(self._closed_error("a matching notification"))
        for watch in self._watches.values():
            watch.event.set()
        self._closed_event.set()

    def _closed_error(self, what: str) -> ConnectionClosed:
        return ConnectionClosed("connection closed while waiting for %s%s" % (
            what, "" if self._close_error is None else " (%s)" % self._close_error))

    # ---- calls ----------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    async def send_raw(self, data: bytes) -> None:
        """Send bytes exactly as given; one call's bytes are never interleaved with another's."""
        if self._closed or self._writer.is_closing():
            raise self._closed_error("the send")
        self._writer.write(data)
        # One drain at a time: before 3.10 concurrent drains of one stream fail.
        async with self._drain_lock:
            await self._writer.drain()

    async def send(self, message: Any) -> None:
        """Send one JSON value (an object or a batch array) as one line."""
        await self.send_raw(encode(message))

    async def request(self, method: str, params: Any = None, *, timeout: Optional[float] = 10,
                      id: Any = None) -> Dict[str, Any]:
        """Send a call and return the whole response object (result or error).

        ``timeout`` bounds the wait for the answer (None: no bound); the answer to a
        call that timed out or was cancelled is dropped when it comes.
        """
        return await self._request(method, params, timeout, id)

    async def _request(self, method: str, params: Any, timeout: Optional[float], id: Any = None,
                       drop_before: Optional[NotificationPredicate] = None) -> Dict[str, Any]:
        rid = self.next_id() if id is None else id
        key = _key(rid)
        if key is None:
            raise ValueError("an id must be a string, a number or null")
        if key in self._calls:
            raise ValueError("a call with id %r is in flight" % (rid,))
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": rid}
        if params is not None:
            msg["params"] = params
        fut: "asyncio.Future[Dict[str, Any]]" = self._loop.create_future()
        self._calls[key] = fut
        if drop_before is not None:
            self._drops[key] = drop_before
        try:
            await self.send(msg)
            result: Dict[str, Any] = await _bounded(asyncio.shield(fut), timeout,
                                                    "response to id %r" % (rid,))
            return result
        except BaseException:
            self._drops.pop(key, None)
            if self._calls.pop(key, None) is not None and not self._closed:
                self._abandoned.add(key)
            raise

    async def call(self, method: str, params: Any = None, *, timeout: Optional[float] = 10) -> Any:
        """Call ``method``; return its result or raise ``RPCError``."""
        return _result_of(await self._request(method, params, timeout))

    async def _call_dropping(self, method: str, params: Any, timeout: Optional[float],
                             drop_before: NotificationPredicate) -> Any:
        """``call``, dropping the notifications ``drop_before`` picks that arrived before
        its answer (a read's ``socket.onRead``: they announced the bytes it took)."""
        return _result_of(await self._request(method, params, timeout, drop_before=drop_before))

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no id, no reply)."""
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def batch(self, calls: Iterable[BatchCall], *, timeout: Optional[float] = 10) -> List[Any]:
        """Send a batch and return its responses in the order of the calls.

        ``calls`` holds ``(method, params)`` or ``(method, params, is_notification)``
        tuples, as the synchronous client's ``batch``; an all-notification batch
        returns ``[]`` without waiting.
        """
        msgs, ids = _batch_messages(calls, self.next_id)
        if not ids:
            await self.send(msgs)
            return []
        keys = [_id_key(i) for i in ids]
        record = _Batch(keys, self._loop.create_future())
        for k in keys:
            self._batches[k] = record
        try:
            await self.send(msgs)
            answer: List[Any] = await _bounded(asyncio.shield(record.future), timeout,
                                               "batch response to ids %r" % ids)
        except BaseException:
            if self._batches.pop(keys[0], None) is not None:
                for k in keys[1:]:
                    self._batches.pop(k, None)
                if not self._closed:
                    self._abandoned.update(keys)
            raise
        order: Dict[Any, int] = {rid: i for i, rid in enumerate(ids)}
        return sorted(answer, key=lambda r: order.get(r.get("id") if isinstance(r, dict) else None, len(ids)))

    # ---- notifications --------------------------------------------------

    async def wait_notification(self, predicate: Optional[NotificationPredicate] = None, *,
                                timeout: Optional[float] = 10) -> Dict[str, Any]:
        """Remove and return the first notification for which ``predicate`` holds:
        the oldest waiting one, else the next to arrive.  Raises ``TimeoutError``
        after ``timeout`` s (None: no bound) and ``ConnectionClosed`` at close."""
        for i, m in enumerate(self._inbox):
            if predicate is None or predicate(m):
                del self._inbox[i]
                return m
        if self._closed:
            raise self._closed_error("a matching notification")
        waiter = _Waiter(predicate, self._loop.create_future())
        self._waiters.append(waiter)
        try:
            got: Dict[str, Any] = await _bounded(asyncio.shield(waiter.future), timeout,
                                                 "matching notification")
            return got
        except BaseException:
            # Given to us in the same turn as the timeout or cancellation: not lost.
            f = waiter.future
            if f.done() and not f.cancelled() and f.exception() is None:
                self._keep(f.result(), first=True)
            raise
        finally:
            self._waiters.remove(waiter)

    async def notifications(self, predicate: Optional[NotificationPredicate] = None, *,
                            timeout: Optional[float] = None) -> AsyncIterator[Dict[str, Any]]:
        """``async for n in c.notifications(): ...``: notifications as they arrive.

        Ends when the connection closes, or when none (matching ``predicate``) came
        for ``timeout`` s (None: no bound).  Each notification goes to one taker.
        """
        while True:
            try:
                n = await self.wait_notification(predicate, timeout=timeout)
            except (TimeoutError, ConnectionClosed):
                return
            yield n

    def pending_notifications(self) -> List[Dict[str, Any]]:
        """The notifications received and not yet taken, oldest first (not removed)."""
        return list(self._inbox)

    def _discard_notifications(self, request: str) -> None:
        kept = [m for m in self._inbox if _request_of(m) != request]
        if len(kept) != len(self._inbox):
            self._inbox = collections.deque(kept)

    # ---- request objects -------------------------------------------------

    async def subscribe(self, request: Optional[str] = None, *, socket: Optional[str] = None, all: bool = False,
                        events: Optional[Iterable[str]] = None, progress_interval: Optional[int] = None,
                        timeout: Optional[float] = 10) -> str:
        """As ``Client.subscribe``: returns the subscription's id."""
        params = _subscribe_params(request, socket, all, events, progress_interval)
        return str((await self.call("subscribe", params, timeout=timeout))["subscription"])

    async def unsubscribe(self, subscription: str, *, timeout: Optional[float] = 10) -> None:
        """Ends a subscription made by this connection."""
        await self.call("unsubscribe", {"subscription": subscription}, timeout=timeout)

    async def pause(self, request: str, *, timeout: Optional[float] = 10) -> None:
        """As ``Client.pause``: pauses ``request``'s transfer in flight until ``resume``."""
        await self.call("pause", {"request": request}, timeout=timeout)

    async def resume(self, request: str, *, timeout: Optional[float] = 10) -> None:
        """As ``Client.resume``."""
        await self.call("resume", {"request": request}, timeout=timeout)

    async def fetch(self, url: str, method: str = "GET", headers: Optional[Mapping[str, str]] = None,
                    body: Union[str, bytes, bytearray, memoryview, None] = None,
                    timeout: Optional[float] = None,
                    response_type: Optional[str] = None,
                    retry: Optional[Mapping[str, Any]] = None, *, base_url: Optional[str] = None,
                    query: Optional[Mapping[str, Any]] = None, json: Any = UNSET,
                    form: Optional[Mapping[str, str]] = None, multipart: Optional[Iterable[MultipartPart]] = None,
                    credential: Optional[Mapping[str, str]] = None, follow_redirects: Optional[bool] = None,
                    max_redirects: Optional[int] = None, cookies: Optional[bool] = None,
                    proxy: Optional[Mapping[str, Any]] = None, disable_host_verification: Optional[bool] = None,
                    disable_peer_verification: Optional[bool] = None,
                    client_certificate: Optional[Mapping[str, str]] = None, pinned_public_key: Optional[str] = None,
                    request: Optional[str] = None, subscribe: Optional[bool] = None) -> Dict[str, Any]:
        """One whole exchange with the ``fetch`` method; as ``Client.fetch`` (``retry``:
        a retry policy, as ``setRetryPolicy`` takes it without ``request``).

        Returns ``{"status", "statusText", "headers", "body", "encoding"}``
        (``xhrpc.decode_body`` gives the body's bytes).  ``timeout`` bounds the
        transfer in the server, and this wait a little longer (None: no bound).  The
        keyword-only arguments are as ``Client.fetch``'s (serializers, options,
        ``request``, ``subscribe``).
        """
        options = _fetch_options(base_url, query, json, form, multipart, credential, follow_redirects,
                                 max_redirects, cookies, proxy, disable_host_verification,
                                 disable_peer_verification, client_certificate, pinned_public_key, request, subscribe)
        params = _fetch_params(url, method, headers, body, timeout, response_type, retry, options)
        timeout_answer = None if timeout is None or timeout <= 0 else timeout + _ANSWER_MARGIN
        result: Dict[str, Any] = await self.call("fetch", params, timeout=timeout_answer)
        return result

    # ---- stored credentials ----------------------------------------------

    async def credentials_set(self, host: str, user: str, password: str, port: Optional[int] = None,
                              scheme: Optional[str] = None, realm: Optional[str] = None,
                              auth: Optional[str] = None) -> None:
        """Stores a credential for a protection space; as ``Client.credentials_set``."""
        await self.call("credentials.set", _credential_params(host, port, scheme, realm, user=user,
                                                              password=password, auth=auth))

    async def credentials_list(self) -> List[Dict[str, Any]]:
        """This principal's stored credentials, without passwords."""
        result: Dict[str, Any] = await self.call("credentials.list")
        entries: List[Dict[str, Any]] = result["credentials"]
        return entries

    async def credentials_remove(self, host: str, port: Optional[int] = None, scheme: Optional[str] = None,
                                 realm: Optional[str] = None, user: Optional[str] = None) -> bool:
        """Removes the credential of a protection space; False when there was none."""
        result: Dict[str, Any] = await self.call("credentials.remove", _credential_params(host, port, scheme, realm,
                                                                                         user=user))
        return bool(result["removed"])

    async def set_json_body(self, request: str, value: Any) -> None:
        """``setJSONBody``, as ``Client.set_json_body``."""
        await self.call("setJSONBody", {"request": request, "value": value})

    async def add_multipart_part(self, request: str, name: str, value: Optional[str] = None, *,
                                 data: Union[bytes, bytearray, memoryview, None] = None, path: Optional[str] = None,
                                 filename: Optional[str] = None, content_type: Optional[str] = None) -> None:
        """``addMultipartPart``, as ``Client.add_multipart_part``."""
        await self.call("addMultipartPart", _part_params(request, name, value, data, path, filename, content_type))

    # ---- interception ----------------------------------------------------

    async def intercept(self, will_send: Optional[AsyncQuestionCallback] = None,
                        should_continue: Optional[AsyncQuestionCallback] = None,
                        on_notice: Optional[AsyncNoticeCallback] = None, *,
                        events: Optional[Iterable[str]] = None, match: Optional[Iterable[str]] = None,
                        timeout: Optional[float] = None) -> "AsyncInterceptor":
        """Register this connection as the interceptor of its principal's requests;
        as ``Client.intercept``, returning an ``AsyncInterceptor`` (``await
        unregister()``, ``async with``).  The callbacks may be coroutine functions;
        each question is answered in a task of its own, so a callback may await
        calls on this client.  A plain function runs on the event loop and must not
        block it.  Notices reach ``on_notice`` in order, from one task."""
        callbacks = {"willSendRequest": will_send, "shouldContinueAfterFailWithError": should_continue}
        params = _register_params(events, timeout, match, callbacks, on_notice)
        icp = AsyncInterceptor(self, "", params.get("events"), will_send, should_continue, on_notice)
        rid = self.next_id()
        # _dispatch_line arms it when the answer arrives, before the next line.
        self._arming = (_id_key(rid), icp)
        try:
            response = await self._request("intercept.register", params, 10, id=rid)
        finally:
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
    def interceptor(self) -> Optional["AsyncInterceptor"]:
        """The active interceptor ``intercept`` registered on this connection, if any."""
        return self._interceptor

    def _arm(self, response: Dict[str, Any]) -> None:
        assert self._arming is not None
        icp = self._arming[1]
        self._arming = None
        result = response.get("result")
        if isinstance(result, dict) and isinstance(result.get("interceptor"), str) and result["interceptor"]:
            icp.id = result["interceptor"]
            old, self._interceptor = self._interceptor, icp
            if old is not None:
                old._end()

    def _interceptor_ended(self, icp: "AsyncInterceptor") -> None:
        if self._interceptor is icp:
            self._interceptor = None
        icp._end()

    async def _drain(self, request: str, sink: Callable[[bytes], Awaitable[Optional[bool]]],
                     timeout: Optional[float], max_bytes: Optional[int], own: bool,
                     stream: bool = False) -> bool:
        """Pass the body of ``request`` (with ``stream``, the socket's stream) to
        ``sink`` as it arrives, until ``getReceiveBuffer`` says done (``socket.read``
        says closed): True; or until ``sink`` returns True: False.  As
        ``Client._drain``: a read that brought nothing waits for the next notification
        about the handle or a pause of 10 ms growing to 200 ms."""
        deadline = None if timeout is None else time.monotonic() + timeout
        source = _Source(request, max_bytes, stream)
        pause = _BODY_POLL_FIRST
        total = 0
        watch = self._watches.get(request)
        if watch is None:
            watch = self._watches[request] = _AsyncWatch()
        watch.readers += 1
        try:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("%s did not end within %.3g s (%d bytes read)"
                                       % (source.noun, cast(float, timeout), total))
                seen = watch.count
                call_timeout = _READ_CALL_TIMEOUT if left is None else min(left, _READ_CALL_TIMEOUT)
                if own and source.wakeups is not None:
                    chunk = await self._call_dropping(source.method, source.params, call_timeout, source.wakeups)
                else:
                    chunk = await self.call(source.method, source.params, timeout=call_timeout)
                data = _chunk_bytes(chunk)
                stop = False
                if data:
                    total += len(data)
                    pause = _BODY_POLL_FIRST
                    stop = bool(await sink(data))
                if chunk[source.end]:
                    return True
                if stop:
                    return False
                if own and source.wakeups is None:
                    self._discard_notifications(request)
                if not data and watch.count == seen and not self._closed:
                    watch.event.clear()
                    try:
                        await asyncio.wait_for(watch.event.wait(), pause if left is None else min(pause, left))
                    except asyncio.TimeoutError:
                        pass
                    pause = min(pause * 2, _BODY_POLL_LAST)
        finally:
            watch.readers -= 1
            if watch.readers == 0:
                del self._watches[request]

    async def read_body(self, request: str, *, timeout: Optional[float] = 30,
                        max_bytes: Optional[int] = None) -> bytes:
        """Read the body of ``request`` to its end and return it; as ``Client.read_body``
        (waits on the request's notifications or a short pause, never spinning)."""
        parts: List[bytes] = []

        async def sink(data: bytes) -> None:
            parts.append(data)

        await self._drain(request, sink, timeout, max_bytes, own=False)
        return b"".join(parts)

    async def download(self, url: str, path: Union[str, "os.PathLike[str]"],
                       progress: Optional[AsyncProgressCallback] = None,
                       headers: Optional[Mapping[str, str]] = None,
                       timeout: Optional[float] = None, max_bytes: Optional[int] = None) -> int:
        """GET ``url`` into the file ``path``, streaming; return the response's status.

        As ``Client.download`` (``path + ".part"`` renamed when complete,
        ``progress(received, total)`` with ``total`` -1 while unknown and a last call
        with ``total == received``, ``TransferError`` when no response or a cut
        body); ``progress`` may be a coroutine function.  The file is written from
        the event loop, one read (at most ``max_bytes``) at a time.
        """
        final = os.fspath(path)
        part = final + ".part"
        name = _download_handle()
        state = _DownloadState(progress)
        subscription: Optional[str] = None
        status = 0
        with open(part, "wb") as f:
            created = True  # from the moment the batch is sent, release at the end
            try:
                responses = await self.batch(_download_calls(name, url, headers))
                created, subscription = _prepared(responses)
                _raise_first_error(responses)
                await self.call("send", _send_params(name, timeout))

                async def sink(data: bytes) -> None:
                    if state.total is None:
                        heads = await self.batch(_header_calls(name))
                        state.total = _expected_total(*(_result_of(r) for r in heads))
                    f.write(data)
                    await _maybe_await(state.wrote(len(data)))

                timeout_answer = None if timeout is None or timeout <= 0 else timeout + _ANSWER_MARGIN
                await self._drain(name, sink, timeout_answer, max_bytes, own=True)
                status, status_text = (_result_of(r) for r in await self.batch(_status_calls(name)))
                if status == 0:
                    raise TransferError(name, status_text, state.received)
            except BaseException:
                f.close()
                _unlink_quietly(part)
                raise
            finally:
                if created:
                    await self._end_download(name, subscription)
        os.replace(part, final)
        await _maybe_await(state.finished())
        return int(status)

    async def upload(self, url: str, path: Optional[Union[str, "os.PathLike[str]"]] = None,
                     data: Optional[Data] = None, method: str = "POST",
                     headers: Optional[Mapping[str, str]] = None, request: Optional[str] = None,
                     on_progress: Optional[TransferProgressCallback] = None,
                     timeout: Optional[float] = None,
                     multipart: Optional[Iterable[MultipartPart]] = None) -> Dict[str, Any]:
        """As ``Client.upload``; ``on_progress`` may be a coroutine function."""
        name = request or _transfer_handle("upload")
        params = _transfer_params(name, url, headers, timeout, method=method, **_upload_body(path, data, multipart))
        return await self._run_transfer("upload", params, on_progress, timeout, None)

    async def server_download(self, url: str, path: str, headers: Optional[Mapping[str, str]] = None,
                              resume: bool = False, request: Optional[str] = None,
                              on_progress: Optional[TransferProgressCallback] = None,
                              timeout: Optional[float] = None) -> Dict[str, Any]:
        """As ``Client.server_download``; ``on_progress`` may be a coroutine function."""
        name = request or _transfer_handle("download")
        params = _transfer_params(name, url, headers, timeout, path=path, resume=resume or None)
        return await self._run_transfer("download", params, on_progress, timeout, path)

    async def _run_transfer(self, method: str, params: Dict[str, Any],
                            on_progress: Optional[TransferProgressCallback], timeout: Optional[float],
                            path: Optional[str]) -> Dict[str, Any]:
        # The calling connection is told the transfer's state changes and its progress
        # (the server's upload and download), so no subscription is needed.
        name = params["request"]
        try:
            started = await self.call(method, params)
        except RPCError:
            self._discard_notifications(name)
            raise
        try:
            wait = None if timeout is None else timeout + _ANSWER_MARGIN
            while True:
                msg = await self.wait_notification(_transfer_event(name), timeout=wait)
                p = _params_of(msg)
                if msg["method"] == "onProgress":
                    if on_progress is not None:
                        await _maybe_await(on_progress(p))
                elif p.get("state") == 5:
                    return _transfer_result(name, p, started.get("path", path))
        finally:
            await self._end_download(name, None)

    async def _end_download(self, name: str, subscription: Optional[str]) -> None:
        try:
            await self.batch(_end_calls(name, subscription))
        except (OSError, TimeoutError):
            pass  # the connection is gone or stuck: the server releases with it
        self._discard_notifications(name)

    # ---- raw sockets ------------------------------------------------------

    async def socket(self, host: str, port: int, ssl: bool = False, name: Optional[str] = None) -> "AsyncSocket":
        """``socket.create``: an ``AsyncSocket`` in state Prepared; as ``Client.socket``."""
        result = await self.call("socket.create", _socket_create_params(host, port, ssl, name))
        return AsyncSocket(self, result["socket"], host, port, ssl)

    # ---- closing --------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once no more messages will arrive (the server or ``close`` ended it)."""
        return self._closed

    async def wait_closed(self, timeout: Optional[float] = 10) -> bool:
        """Wait until the connection has ended; True if it did within ``timeout``."""
        try:
            await _bounded(self._closed_event.wait(), timeout, "close")
        except TimeoutError:
            return False
        return True

    async def close(self, timeout: float = 5) -> None:
        """Close the connection; calls still waiting raise ``ConnectionClosed``."""
        if not self._writer.is_closing():
            self._writer.close()
        try:
            await asyncio.wait_for(self._writer.wait_closed(), timeout)
        except (OSError, ssl.SSLError, asyncio.TimeoutError):
            pass
        if not self._task.done():
            # A TLS peer that never answers close_notify: drop the connection.
            self._writer.transport.abort()
            done, _ = await asyncio.wait({self._task}, timeout=timeout)
            if not done:
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=timeout)


class AsyncInterceptor(_InterceptorBase):
    """``xhrpc.Interceptor`` for an ``AsyncClient``: ``await unregister()``, ``async
    with``.  Each question runs in a task of its own; notices reach ``on_notice`` in
    order from one task (without ``on_notice`` they stay in the inbox)."""

    def __init__(self, client: AsyncClient, interceptor_id: str, events: Optional[List[str]],
                 will_send: Optional[AsyncQuestionCallback], should_continue: Optional[AsyncQuestionCallback],
                 on_notice: Optional[AsyncNoticeCallback]) -> None:
        super().__init__(interceptor_id, events, will_send, should_continue, on_notice)
        self.client = client
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._notices: "asyncio.Queue[Optional[Dict[str, Any]]]" = asyncio.Queue()
        self._notice_task: Optional["asyncio.Task[None]"] = None
        if on_notice is not None:
            self._notice_task = client._loop.create_task(self._notice_loop())

    async def __aenter__(self) -> "AsyncInterceptor":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.unregister()
        except (OSError, TimeoutError, RPCError):
            pass  # gone already, or the connection is: the server ends it with it

    async def unregister(self, *, timeout: Optional[float] = 10) -> None:
        """``intercept.unregister``; as ``Interceptor.unregister``."""
        if not self._active:
            return
        try:
            await self.client.call("intercept.unregister", {"interceptor": self.id}, timeout=timeout)
        finally:
            self.client._interceptor_ended(self)

    async def wait_notices(self, *, timeout: Optional[float] = 10) -> bool:
        """Wait until ``on_notice`` has been called for every notice received so far."""
        if self._notice_task is None:
            return True
        if not self._active:
            done, _ = await asyncio.wait({self._notice_task}, timeout=timeout)
            return bool(done)
        marker: "asyncio.Future[None]" = self.client._loop.create_future()
        self._notices.put_nowait({"_xhrpc_marker": marker})
        try:
            await _bounded(asyncio.shield(marker), timeout, "notices delivered")
        except TimeoutError:
            return False
        return True

    def _ask(self, msg: Dict[str, Any]) -> None:
        task = self.client._loop.create_task(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, msg: Dict[str, Any]) -> None:
        rid, method = msg["id"], msg["method"]
        callback = self._callback(method)
        if callback is None:
            reply = _no_callback(rid, method)
        else:
            try:
                answer = callback(_params_of(msg))
                if inspect.isawaitable(answer):
                    answer = await answer
                reply = _question_reply(rid, answer)
            except Exception as e:
                self.errors.append(e)
                reply = _callback_failed(rid, method, e)
        try:
            await self.client.send_raw(reply)
        except (OSError, ssl.SSLError):
            pass  # the connection closed: the server takes the default action

    def _tell(self, msg: Dict[str, Any]) -> None:
        self._notices.put_nowait(msg)

    def _end(self) -> None:
        if not self._active:
            return
        self._active = False
        if self._notice_task is not None:
            self._notices.put_nowait(None)

    async def _notice_loop(self) -> None:
        on_notice = self.on_notice
        assert on_notice is not None
        while True:
            msg = await self._notices.get()
            if msg is None:
                return
            marker = msg.get("_xhrpc_marker")
            if isinstance(marker, asyncio.Future):
                if not marker.done():
                    marker.set_result(None)
                continue
            try:
                await _maybe_await(on_notice(msg["method"], _params_of(msg)))
            except Exception as e:
                self.errors.append(e)


class AsyncSocket(_SocketCore):
    """``xhrpc.Socket`` for an ``AsyncClient``: the same methods, awaited (timeouts
    keyword-only); ``async with`` releases it.  One task at a time should read it."""

    client: AsyncClient

    async def __aenter__(self) -> "AsyncSocket":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.release()
        except (OSError, TimeoutError, RPCError):
            pass  # gone already, or the connection is: the server releases with it

    async def disable_host_verification(self) -> None:
        await self.client.call("socket.disableHostVerification", {"socket": self.handle})

    async def disable_peer_verification(self) -> None:
        await self.client.call("socket.disablePeerVerification", {"socket": self.handle})

    async def connect(self, timeout: Optional[float] = None) -> None:
        """``socket.connect`` (answered at once; ``wait_open`` waits); as ``Socket.connect``."""
        self.client._discard_notifications(self.handle)
        await self.client.call("socket.connect", _socket_connect_params(self.handle, timeout))
        self._connected()

    async def wait_open(self, *, timeout: Optional[float] = _CONNECT_TIMEOUT + _ANSWER_MARGIN) -> None:
        """Wait for ``socket.onOpen``; ``SocketError`` at ``socket.onErr``."""
        self._opened(await self.client.wait_notification(_socket_event(self.handle, (_ON_OPEN, _ON_ERR, _ON_CLOSE)),
                                                         timeout=timeout))

    async def wait_closed(self, *, timeout: Optional[float] = 10) -> None:
        """Wait for ``socket.onClose``; an ``onErr`` before it is kept in ``error``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._ended(await self.client.wait_notification(_socket_event(self.handle, (_ON_ERR, _ON_CLOSE)),
                                                               timeout=left)):
                return

    async def state(self) -> str:
        """The state's name: Prepared, Connecting, Open, Disconnecting or Disconnected."""
        answer: str = (await self.client.call("socket.getState", {"socket": self.handle}))["stateName"]
        return answer

    async def disconnect(self) -> None:
        await self.client.call("socket.disconnect", {"socket": self.handle})

    async def release(self) -> None:
        try:
            await self.client.call("socket.release", {"socket": self.handle})
        finally:
            self.client._discard_notifications(self.handle)

    async def write(self, data: Data) -> int:
        """Queue ``data`` (text as UTF-8); the number of bytes.  As ``Socket.write``."""
        n: int = (await self.client.call("socket.write", _socket_write_params(self.handle, data)))["bytes"]
        return n

    async def read(self, max_bytes: Optional[int] = None) -> bytes:
        """The bytes received and not read yet (``b""`` when none), without waiting."""
        if self._buf.data:
            return self._buf.take(max_bytes)
        chunk = await self.client._call_dropping("socket.read", _socket_read_params(self.handle, max_bytes),
                                                 _READ_CALL_TIMEOUT, _socket_event(self.handle, (_ON_READ,)))
        return self._read_answer(chunk)

    async def _fill(self, end: Callable[[bytearray], Optional[int]], timeout: Optional[float],
                    what: str) -> bytes:
        n = end(self._buf.data)
        if n is None and not self._buf.ended:
            async def sink(data: bytes) -> bool:
                self._buf.data += data
                return end(self._buf.data) is not None

            if await self.client._drain(self.handle, sink, timeout, None, own=True, stream=True):
                self._buf.ended = True
        return self._cut(end, what)

    async def read_exactly(self, n: int, *, timeout: Optional[float] = 30) -> bytes:
        """Exactly ``n`` bytes, waiting for them; ``EOFError`` if the stream ends first."""
        return await self._fill(_exactly(n), timeout, "%d bytes came" % n)

    async def read_until(self, separator: bytes = b"\n", *, timeout: Optional[float] = 30) -> bytes:
        """The bytes up to and including the next ``separator``."""
        return await self._fill(_until(separator), timeout, "%r came" % (separator,))

    async def read_until_closed(self, *, timeout: Optional[float] = 30, max_bytes: Optional[int] = None) -> bytes:
        """Every byte until the stream ends."""
        if not self._buf.ended:
            async def sink(data: bytes) -> None:
                self._buf.data += data

            await self.client._drain(self.handle, sink, timeout, max_bytes, own=True, stream=True)
            self._buf.ended = True
        return self._buf.take(None)


def _nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
