"""Fetch a URL through xhrpcd with the Python client, then read a body as it arrives.

    python3 examples/python/fetch.py http://127.0.0.1:8080/hello.txt

The server is found on its default socket, or at $XHRPC_SOCKET.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from xhrpc import Client  # noqa: E402  (or `pip install ./clients/python` and drop the line above)

url = sys.argv[1]
with Client.connect_unix(os.environ.get("XHRPC_SOCKET") or None) as c:
    # One call does the whole exchange.
    r = c.call("fetch", {"url": url})
    print("fetch:", r["status"], r["statusText"], len(r["body"]), "characters")

    # The request object: create, open, send; state changes arrive as notifications.
    c.call("create", {"request": "example"})
    c.call("open", {"request": "example", "method": "GET", "url": url})
    c.call("send", {"request": "example"})
    done = c.wait_notification(lambda n: n["method"] == "onStateChange" and n["params"]["state"] == 5, timeout=30)
    body = c.call("getReceiveBuffer", {"request": "example", "encoding": "utf8"})
    print("object:", done["params"]["status"], body["bytes"], "bytes")
