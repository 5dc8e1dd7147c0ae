"""A raw socket and an interceptor through xhrpcd, with the Python client.

    python3 examples/python/socket_and_intercept.py http://127.0.0.1:8080/hello.txt

1. Speaks HTTP/1.0 by hand over a raw TCP socket that the server opens (with its egress
   policy) to the URL's host and port, and prints the status line.
2. Registers as the interceptor of its principal's requests, adds a header to every
   request before it is sent, and cancels the ones whose path ends in ".secret".

The server is found on its default socket, or at $XHRPC_SOCKET.
"""

import os
import sys
from urllib.parse import urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from xhrpc import Client  # noqa: E402  (or `pip install ./clients/python` and drop the line above)

url = urlsplit(sys.argv[1])
with Client.connect_unix(os.environ.get("XHRPC_SOCKET") or None) as c:
    with c.socket(url.hostname, url.port or 80) as s:
        s.connect()
        s.wait_open()
        s.write("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (url.path or "/", url.netloc))
        reply = s.read_until_closed(timeout=30)
        print("socket:", reply.split(b"\r\n", 1)[0].decode())

    def will_send(q):
        if q["url"].endswith(".secret"):
            return False  # cancelled: DONE, status 0, "Cancelled by interceptor"
        return {"headers": dict(q["headers"], **{"X-Seen-By": "example"})}

    with c.intercept(will_send=will_send):
        ok = c.call("fetch", {"url": sys.argv[1]})
        cancelled = c.call("fetch", {"url": sys.argv[1] + ".secret"})
        print("intercepted:", ok["status"], "then", cancelled["status"], cancelled["statusText"])
