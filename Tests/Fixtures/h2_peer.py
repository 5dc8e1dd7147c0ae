#!/usr/bin/env python3
"""An HTTP/2 origin over TLS (ALPN ``h2``, ``http/1.1``) that shows how requests shared
connections: hypercorn (PyPI) serving a small ASGI app.

    python3 Tests/Fixtures/h2_peer.py --tls-cert good.pem --tls-key good.key [--host 127.0.0.1]

Listens on a port the OS picks, prints exactly one line ``READY <port>`` and serves
until stdin reaches end of file or SIGTERM/SIGINT, then exits 0.

Endpoints (any method):

- ``/hold?group=G&n=N`` holds the answer until N requests of group G are in flight at
  the same time (at most 10 s: then 504), then answers each with its record. N requests
  that all got a 200 were all in flight together, so N records with one ``connection``
  and ``httpVersion`` "2" prove N concurrent streams on one connection (multiplexing).
- ``/whoami`` answers its record at once.
- ``/log?group=G`` the records of group G so far (JSON array).

A record is ``{group, connection ("ip:port" of the client end: one per TCP
connection), httpVersion ("2" or "1.1"), streamId (the HTTP/2 stream id; null over
HTTP/1.1)}``. The stream id comes from hypercorn's stream object through a context
variable (ASGI has no field for it); should a hypercorn release move it, ``streamId`` is
null and the connection still shows.
"""

import argparse
import asyncio
import contextvars
import json
import socket
import sys
import urllib.parse

from hypercorn.asyncio import serve
from hypercorn.config import Config
import hypercorn.protocol.http_stream as http_stream
from peer_process import announce_ready, stop_on_signal_or_end_of_stdin  # noqa: E402

HOLD_LIMIT = 10.0

_stream_id = contextvars.ContextVar("stream_id", default=None)
_original_handle = http_stream.HTTPStream.handle


async def _handle_with_stream_id(self, event):
    # The app's task is created inside this call, so it inherits the variable.
    _stream_id.set(getattr(self, "stream_id", None))
    return await _original_handle(self, event)


http_stream.HTTPStream.handle = _handle_with_stream_id


class Origin:
    def __init__(self):
        self.records = {}   # group -> [record]
        self.waiting = {}   # group -> (in flight, event)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        # Drain the request body.
        while True:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode())
        group = query.get("group", [""])[0]
        client = scope.get("client") or ("?", 0)
        record = {"group": group, "connection": "%s:%d" % (client[0], client[1]),
                  "httpVersion": scope.get("http_version"), "streamId": _stream_id.get()}
        path = scope["path"]
        if path == "/hold":
            try:
                n = int(query.get("n", ["1"])[0])
            except ValueError:
                return await self.answer(send, 400, {"error": "n must be a number"})
            self.records.setdefault(group, []).append(record)
            count, event = self.waiting.get(group, (0, asyncio.Event()))
            count += 1
            self.waiting[group] = (count, event)
            if count >= n:
                event.set()
            try:
                await asyncio.wait_for(event.wait(), HOLD_LIMIT)
            except asyncio.TimeoutError:
                return await self.answer(send, 504, {"error": "only %d of %d in flight" % (self.waiting[group][0], n)})
            finally:
                count, event = self.waiting[group]
                self.waiting[group] = (count - 1, event)
                if count - 1 == 0:
                    del self.waiting[group]
            return await self.answer(send, 200, record)
        if path == "/whoami":
            self.records.setdefault(group, []).append(record)
            return await self.answer(send, 200, record)
        if path == "/log":
            return await self.answer(send, 200, self.records.get(group, []))
        return await self.answer(send, 404, {"error": "not found"})

    @staticmethod
    async def answer(send, status, value):
        body = json.dumps(value).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--tls-cert", required=True)
    ap.add_argument("--tls-key", required=True)
    args = ap.parse_args()

    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, 0))
    sock.listen(128)
    sock.set_inheritable(True)
    config = Config()
    config.bind = ["fd://%d" % sock.fileno()]
    config.certfile = args.tls_cert
    config.keyfile = args.tls_key
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = None
    config.errorlog = None
    config.h2_max_concurrent_streams = 100
    config.keep_alive_timeout = 60

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def request_stop(*_):
        loop.call_soon_threadsafe(stop.set)

    stop_on_signal_or_end_of_stdin(request_stop)

    async def run():
        server = asyncio.ensure_future(serve(Origin(), config, shutdown_trigger=stop.wait))
        # hypercorn listens on the socket given; it is bound already, so READY is true.
        announce_ready(sock.getsockname()[1])
        await server

    loop.run_until_complete(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
