"""Python client for xhrpc, the JSON-RPC 2.0 HTTP(S) request server (standard library only).

    from xhrpc import Client, RPCError
    with Client.connect_unix() as c:          # the server's default socket
        print(c.call("server.info"))
        r = c.fetch("https://example.com/")
        print(r["status"], r["body"][:80])

``xhrpc.aio.AsyncClient`` (also ``xhrpc.AsyncClient``) is the same for asyncio.
"""

from .aio import AsyncClient
from .client import (Client, ConnectionClosed, MalformedMessage, RPCError, TransferError, decode_body,
                     default_socket_path, encode)

__all__ = ["AsyncClient", "Client", "ConnectionClosed", "MalformedMessage", "RPCError", "TransferError",
           "decode_body", "default_socket_path", "encode"]
__version__ = "0.1.0"
