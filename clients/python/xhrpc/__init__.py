"""Python client for xhrpc, the JSON-RPC 2.0 HTTP(S) request server (standard library only).

    from xhrpc import Client, RPCError
    with Client.connect_unix() as c:          # the server's default socket
        print(c.call("server.info"))
        r = c.fetch("https://example.com/")
        print(r["status"], r["body"][:80])

``xhrpc.aio.AsyncClient`` (also ``xhrpc.AsyncClient``) is the same for asyncio.
``Client.socket(host, port)`` gives a ``Socket``, a raw TCP or TLS stream that the
server holds (``AsyncSocket`` from ``AsyncClient.socket``).  ``Client.intercept`` makes
the connection the interceptor of its principal's requests (``Interceptor``).
"""

from .aio import AsyncClient, AsyncInterceptor, AsyncSocket
from .client import (INTERCEPT_EVENTS, Client, ConnectionClosed, Interceptor, MalformedMessage, RPCError, Socket,
                     SocketError, TransferError, decode_body, default_socket_path, encode)
from .client import MultipartPart

__all__ = ["AsyncClient", "AsyncInterceptor", "AsyncSocket", "Client", "ConnectionClosed", "INTERCEPT_EVENTS",
           "Interceptor", "MalformedMessage", "MultipartPart", "RPCError", "Socket", "SocketError", "TransferError", "decode_body",
           "default_socket_path", "encode"]
__version__ = "0.1.0"
