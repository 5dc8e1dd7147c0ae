"""Python client for xhrpc, the JSON-RPC 2.0 HTTP(S) request server (standard library only).

    from xhrpc import Client, RPCError
    with Client.connect_unix("/run/xhrpc/xhrpc.sock") as c:
        print(c.call("server.info"))
"""

from .client import Client, ConnectionClosed, MalformedMessage, RPCError, encode

__all__ = ["Client", "ConnectionClosed", "MalformedMessage", "RPCError", "encode"]
__version__ = "0.1.0"
