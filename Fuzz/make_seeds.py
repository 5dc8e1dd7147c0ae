#!/usr/bin/env python3
"""Writes the origin-mode seeds of Fuzz/corpus (origin-*), so they can be made again.

An origin-mode input (docs/internals/fuzzing.md) is a control byte with its top bit set,
then type-length-value records: a type byte, a two-byte big-endian length, the value.

  1      RPC: bytes the client sends; each record is a step, sent once the loop is quiet
  2      RESPONSE: the origin's answer to the next request head it reads
  3      RESPONSE then half-close of that connection
  0x10+k PEER: the k-th accepted connection is a raw peer that sends this, then echoes

`ORIGIN` in any record becomes the origin's 127.0.0.1:port, `OPORT` its port.

Run from anywhere: python3 Fuzz/make_seeds.py. Standard library only. Writes only the
files it names, and prints them; the other seeds are left alone.
"""

import gzip
import json
import os
import struct
import zlib

RPC, RESPONSE, RESPONSE_CLOSE, PEER = 1, 2, 3, 0x10
# Control bytes: 0x80 origin mode, socket owner; 0x90 origin mode, a TCP client that must
# `auth` (token fuzz-token); the low nibble adds chunk cuts to the client's bytes.
LOCAL, TCP = 0x80, 0x90

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def record(kind, value):
    if isinstance(value, str):
        value = value.encode()
    assert len(value) < 1 << 16
    return struct.pack(">BH", kind, len(value)) + value


def rpc(*calls, together=False):
    """The client's records: each call a (method, params) pair, numbered from 1, one JSON
    line each. Each call is a step of its own (the harness sends the next once the loop is
    quiet), or with `together` all go in one record, at once."""
    lines = []
    for n, (method, params) in enumerate(calls, 1):
        message = {"jsonrpc": "2.0", "id": n, "method": method}
        if params is not None:
            message["params"] = params
        lines.append(json.dumps(message, separators=(",", ":")) + "\n")
    if together:
        return record(RPC, "".join(lines))
    return b"".join(record(RPC, line) for line in lines)


def http(status_line, headers, body=b""):
    if isinstance(body, str):
        body = body.encode()
    head = status_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode() + body


def fetch(url="http://ORIGIN/", **params):
    return ("fetch", {"url": url, **params})


def seeds():
    hello = b"hello, origin\n"
    yield "origin-plain-200", LOCAL, [
        rpc(fetch(responseType="text")),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("Content-Length", len(hello)), ("Content-Type", "text/plain")], hello)),
    ]
    yield "origin-chunked", LOCAL | 3, [
        rpc(fetch(responseType="base64")),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("Transfer-Encoding", "chunked"), ("Trailer", "X-T")],
                              b"5\r\nhello\r\n1;ext=1\r\n,\r\n7\r\n chunks\r\n0\r\nX-T: t\r\n\r\n")),
    ]
    yield "origin-gzip", LOCAL, [
        rpc(fetch()),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("Content-Encoding", "gzip"),
                                                  ("Content-Length", len(gzip.compress(hello, mtime=0)))],
                              gzip.compress(hello, mtime=0))),
    ]
    yield "origin-deflate", LOCAL, [
        rpc(fetch(responseType="json")),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("Content-Encoding", "deflate"), ("Content-Type", "application/json")],
                              zlib.compress(b'{"a":[1,2,{"b":null}]}'))),
    ]
    yield "origin-redirect", LOCAL, [
        rpc(fetch("http://ORIGIN/a", maxRedirects=3)),
        record(RESPONSE, http("HTTP/1.1 302 Found", [("Location", "http://ORIGIN/b"), ("Content-Length", 0)])),
        record(RESPONSE, http("HTTP/1.1 301 Moved", [("Location", "/c?x=1"), ("Content-Length", 0)])),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("Content-Length", 2)], "ok")),
    ]
    yield "origin-401-digest", LOCAL, [
        rpc(("create", {"request": "r"}),
            ("open", {"request": "r", "method": "GET", "url": "http://ORIGIN/secret", "user": "u",
                      "password": "p", "auth": "DIGEST"}),
            ("send", {"request": "r", "timeout": 5}),
            ("getStatus", {"request": "r"}),
            ("getAllResponseHeaders", {"request": "r"}),
            ("getReceiveBuffer", {"request": "r", "encoding": "utf8"})),
        record(RESPONSE_CLOSE, http("HTTP/1.1 401 Unauthorized", [
            ("WWW-Authenticate", 'Digest realm="fuzz", qop="auth", nonce="abc123", opaque="xyz", algorithm=MD5'),
            ("WWW-Authenticate", 'Basic realm="fuzz"'), ("Content-Length", 0)])),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("Content-Length", 6)], "secret")),
    ]
    yield "origin-100-continue", LOCAL, [
        rpc(fetch(method="POST", headers={"Expect": "100-continue"}, body="x" * 2048)),
        record(RESPONSE, b"HTTP/1.1 100 Continue\r\n\r\n"
               + http("HTTP/1.1 200 OK", [("Content-Length", 2), ("Connection", "close")], "ok")),
    ]
    yield "origin-truncated", LOCAL | 5, [
        rpc(fetch(), fetch("http://ORIGIN/2"), together=True),
        record(RESPONSE_CLOSE, http("HTTP/1.1 200 OK", [("Content-Length", 100)], "only ten b")),
        record(RESPONSE_CLOSE, http("HTTP/1.1 200 OK", [("Transfer-Encoding", "chunked")], "ff\r\nshort")),
    ]
    yield "origin-huge-headers", LOCAL, [
        rpc(fetch()),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("X-Big", "a" * 8000), ("Set-Cookie", "c=" + "b" * 4000)]
                              + [(f"X-{i}", "v") for i in range(150)] + [("Content-Length", 0)])),
    ]
    yield "origin-close-delimited", LOCAL, [
        rpc(fetch(), ("fetch", {"method": "HEAD", "url": "http://ORIGIN/h"}), together=True),
        record(RESPONSE, b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close"),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("Content-Length", 1000)])),
    ]
    yield "origin-object-keepalive", LOCAL | 2, [
        rpc(("create", {"request": "k"}),
            ("open", {"request": "k", "method": "PUT", "url": "http://ORIGIN/k"}),
            ("setRequestHeader", {"request": "k", "header": "X-A", "value": "1"}),
            ("send", {"request": "k", "body": "first"}),
            ("getResponseHeader", {"request": "k", "header": "Set-Cookie"}),
            ("open", {"request": "k", "method": "GET", "url": "http://ORIGIN/again"}),
            ("send", {"request": "k"}),
            ("getReceiveBuffer", {"request": "k", "maxBytes": 3}),
            ("release", {"request": "k"})),
        record(RESPONSE, http("HTTP/1.1 201 Created", [("Set-Cookie", "s=1; Path=/"), ("Content-Length", 3)], "one")),
        record(RESPONSE, http("HTTP/1.1 200 OK", [("Content-Length", 3)], "two")),
    ]
    yield "origin-socket-echo", LOCAL, [
        rpc(("socket.create", {"host": "127.0.0.1", "port": "OPORT", "socket": "s"}),
            ("socket.connect", {"socket": "s"}),
            ("socket.write", {"socket": "s", "data": "ping\r\n"}),
            ("socket.read", {"socket": "s", "maxBytes": 64, "encoding": "utf8"}),
            ("socket.getState", {"socket": "s"}),
            ("socket.disconnect", {"socket": "s"}),
            ("socket.release", {"socket": "s"})),
        record(PEER, "+hello from the peer\r\n"),
    ]
    yield "origin-tcp-auth-fetch", TCP, [
        rpc(("auth", {"token": "fuzz-token"}), fetch(responseType="base64")),
        record(RESPONSE, http("HTTP/1.1 404 Not Found", [("Content-Length", 4)], "nope")),
    ]
    yield "origin-garbage-status", LOCAL, [
        rpc(fetch(), fetch("http://ORIGIN/next")),
        record(RESPONSE_CLOSE, b"HTTP/1.1 99999999999 \xff\xfe\r\nX: \x00\r\n\r\n"),
        record(RESPONSE_CLOSE, b"SSH-2.0-not-http\r\n"),
    ]


def main():
    for name, control, records in seeds():
        # `"port": OPORT` must be a number once substituted, not a string.
        data = bytes([control]) + b"".join(fix_port(r) for r in records)
        path = os.path.join(CORPUS, name)
        with open(path, "wb") as f:
            f.write(data)
        print(path)


def fix_port(records):
    """Records with `"OPORT"` (quoted, as json.dumps writes it) made a bare OPORT."""
    out, at = b"", 0
    while at < len(records):
        kind, length = struct.unpack(">BH", records[at:at + 3])
        value = records[at + 3:at + 3 + length].replace(b'"OPORT"', b"OPORT")
        out += struct.pack(">BH", kind, len(value)) + value
        at += 3 + length
    return out


if __name__ == "__main__":
    main()
