"""Every message the suite's clients receive, checked against api/openrpc.json.

``install()`` (support.py calls it at import) wraps the send and receive paths of
``xhrpc.Client``, ``xhrpc.aio.AsyncClient``, support's raw sockets and the
``websockets`` connections of the WebSocket tests: each connection remembers the method of
every call it sent (by id, in order, batches and raw bytes included), and each message
it receives is checked:

- a response to a call whose method the file declares: its ``result`` against the
  method's result schema, or its error against the error shape (``code`` an integer,
  ``message`` a string) and, when ``data.reason`` is given, against the declared
  application errors: the word must be one of ``components/errors``, with that entry's
  code, and listed in the method's ``errors`` (``unauthenticated`` and
  ``message_too_large`` may answer any method: the file says so in auth and
  MessageTooLarge);
- a response to an undeclared method or an unknown id: the error shape only (an
  undeclared method must not succeed);
- a notification: its name must be in ``x-notifications`` and its params an object
  of the declared params;
- a request from the server: its name in ``x-server-requests``, its id a string
  beginning ``srv-``, its params likewise.

The schemas are read strictly: an object schema that lists ``properties`` and says
nothing about ``additionalProperties`` is closed (a member the file does not declare
is drift), and a notification's params are closed the same way (the params marked
``"required": true`` must be there).

A mismatch is recorded, not raised on the client's reader thread; ``install()`` also
adds a cleanup to every ``unittest.TestCase`` that fails the test if anything was
recorded since the previous check, with the message and the schema's complaint. A test
class whose peer is a fake (the client's own tests on a socket pair) says why in
``CONTRACT_EXEMPT``; nothing it receives is held against it.
"""

import copy
import json
import socket
import threading
import unittest
from pathlib import Path

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7


def _repo():
    """The checkout this file is in: the nearest folder above it with api/openrpc.json (so
    that moving the suite, e.g. to Tests/Integration, needs no change here)."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / "api" / "openrpc.json").is_file():
            return folder
    raise RuntimeError("no api/openrpc.json above %s" % here)


REPO = _repo()
OPENRPC = REPO / "api" / "openrpc.json"
DOC_URI = "urn:xhrpc:openrpc"

# Errors the file says any call may get, whatever its method lists.
ANY_METHOD_REASONS = frozenset({"unauthenticated", "message_too_large"})


class ContractViolation(AssertionError):
    pass


def _closed(schema):
    """``schema`` with every object schema that lists properties closed to others."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if "properties" in out and isinstance(out["properties"], dict) \
            and "additionalProperties" not in out and "patternProperties" not in out:
        out["additionalProperties"] = False
    return out


def _params_schema(params, path):
    """An object schema for by-name params (OpenRPC content descriptors)."""
    props = {}
    required = []
    for i, p in enumerate(params):
        props[p["name"]] = {"$ref": "%s#%s/%d/schema" % (DOC_URI, path, i)}
        if p.get("required"):
            required.append(p["name"])
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


ERROR_SHAPE = {
    "type": "object",
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
    "required": ["code", "message"],
    "additionalProperties": False,
}


class Contract:
    """api/openrpc.json as validators."""

    def __init__(self, doc):
        self.doc = doc
        closed = _closed(copy.deepcopy(doc))
        self.registry = Registry().with_resource(DOC_URI, Resource.from_contents(closed, DRAFT7))
        self.methods = {}
        for i, m in enumerate(doc["methods"]):
            self.methods[m["name"]] = {
                "result": self._validator({"$ref": "%s#/methods/%d/result/schema" % (DOC_URI, i)}),
                "reasons": {self._error(e)["data"]["reason"] for e in m.get("errors", [])
                            if "reason" in self._error(e).get("data", {})},
            }
        self.notifications = {
            n["name"]: self._validator(_params_schema(n.get("params", []), "/x-notifications/%d/params" % i))
            for i, n in enumerate(doc.get("x-notifications", []))}
        self.server_requests = {
            n["name"]: self._validator(_params_schema(n.get("params", []), "/x-server-requests/%d/params" % i))
            for i, n in enumerate(doc.get("x-server-requests", []))}
        self.reason_codes = {e["data"]["reason"]: e["code"]
                             for e in doc["components"].get("errors", {}).values() if "reason" in e.get("data", {})}
        self.error_shape = jsonschema.Draft7Validator(ERROR_SHAPE)

    def _error(self, e):
        if "$ref" in e:
            name = e["$ref"].rsplit("/", 1)[-1]
            return self.doc["components"]["errors"][name]
        return e

    def _validator(self, schema):
        return jsonschema.Draft7Validator(schema, registry=self.registry)

    @staticmethod
    def _complaints(validator, value):
        return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(top)", e.message)
                for e in validator.iter_errors(value)]

    def check_response(self, method, msg):
        """The complaints about response ``msg`` to a call of ``method`` (None: unknown)."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return ["not a JSON-RPC 2.0 response object"]
        extra = set(msg) - {"jsonrpc", "id", "result", "error"}
        if extra:
            return ["members the specification has no place for: %s" % sorted(extra)]
        if ("result" in msg) == ("error" in msg):
            return ["a response has exactly one of result and error"]
        spec = self.methods.get(method) if method is not None else None
        if "result" in msg:
            if spec is None:
                return [] if method is None else ["a result for %r, a method api/openrpc.json does not declare" % method]
            return self._complaints(spec["result"], msg["result"])
        error = msg["error"]
        out = self._complaints(self.error_shape, error)
        if out:
            return out
        data = error.get("data")
        reason = data.get("reason") if isinstance(data, dict) else None
        if reason is None:
            if error["code"] in self.reason_codes.values() and error["code"] != -32602:
                out.append("application error %d without data.reason" % error["code"])
            return out
        if reason not in self.reason_codes:
            return ["data.reason %r is not declared in components/errors" % reason]
        if self.reason_codes[reason] != error["code"]:
            out.append("data.reason %r comes with code %d, declared %d" % (reason, error["code"], self.reason_codes[reason]))
        if spec is not None and reason not in spec["reasons"] and reason not in ANY_METHOD_REASONS:
            out.append("data.reason %r is not among %s's declared errors %s" % (reason, method, sorted(spec["reasons"])))
        return out

    def check_notification(self, msg):
        name = msg.get("method")
        validator = self.notifications.get(name)
        if validator is None:
            return ["notification %r is not declared in x-notifications" % (name,)]
        if set(msg) - {"jsonrpc", "method", "params"}:
            return ["a notification with members %s" % sorted(msg)]
        return self._complaints(validator, msg.get("params"))

    def check_server_request(self, msg):
        name = msg.get("method")
        validator = self.server_requests.get(name)
        if validator is None:
            return ["server request %r is not declared in x-server-requests" % (name,)]
        out = []
        if not (isinstance(msg.get("id"), str) and msg["id"].startswith("srv-")):
            out.append("a server request's id must be a string beginning srv-, got %r" % (msg.get("id"),))
        return out + self._complaints(validator, msg.get("params"))


_contract = None


def contract():
    global _contract
    if _contract is None:
        with open(OPENRPC, encoding="utf-8") as f:
            _contract = Contract(json.load(f))
    return _contract


# ---- what was recorded ------------------------------------------------------

_lock = threading.Lock()
_violations = []


def record(where, message, complaints):
    text = json.dumps(message, ensure_ascii=False, default=repr)
    if len(text) > 1500:
        text = text[:1500] + "…"
    with _lock:
        _violations.append("%s: %s\n    message: %s" % (where, "; ".join(complaints), text))


def take_violations():
    with _lock:
        out = list(_violations)
        _violations.clear()
        return out


def check_recorded(test=None):
    """Fails (ContractViolation) when something was recorded since the last check, unless
    ``test``'s class says ``CONTRACT_EXEMPT`` (a reason: its peer is a fake, not xhrpcd)."""
    found = take_violations()
    if found and not getattr(test, "CONTRACT_EXEMPT", None):
        raise ContractViolation("%d message(s) broke api/openrpc.json:\n  %s" % (len(found), "\n  ".join(found)))


# ---- one connection's view --------------------------------------------------

def _key(rid):
    # True and 1 are different ids; so are 1 and 1.0 (the client keeps the same distinction).
    return (type(rid).__name__, json.dumps(rid))


class Connection:
    """What one client sent (the methods of its calls, by id) and the checks of what it got."""

    MAX_PENDING = 4 << 20  # undecoded outgoing bytes kept while a value may be incomplete

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {}      # id key -> methods of calls sent with that id, oldest first
        self.out = bytearray()

    def sent(self, data):
        with self.lock:
            self.out += data
            self._decode()

    def _decode(self):
        decoder = json.JSONDecoder()
        text = self.out.decode("utf-8", "replace")
        pos = 0
        while True:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos >= len(text):
                self.out.clear()
                return
            try:
                value, end = decoder.raw_decode(text, pos)
            except (ValueError, RecursionError):  # RecursionError: nested deeper than Python goes
                nl = text.find("\n", pos)
                if nl < 0:
                    # Perhaps incomplete: keep it for the next send (within bounds).
                    rest = text[pos:].encode("utf-8", "replace")
                    self.out = bytearray(rest) if len(rest) <= self.MAX_PENDING else bytearray()
                    return
                pos = nl + 1  # the server skips to the next newline after a parse error
                continue
            self._note(value)
            pos = end

    def _note(self, value):
        for m in value if isinstance(value, list) else [value]:
            if isinstance(m, dict) and isinstance(m.get("method"), str) and "id" in m:
                self.calls.setdefault(_key(m["id"]), []).append(m["method"])

    def _method_of(self, rid):
        with self.lock:
            methods = self.calls.get(_key(rid))
            if not methods:
                return None
            method = methods.pop(0)
            if not methods:
                del self.calls[_key(rid)]
            return method

    def received(self, msg):
        for m in msg if isinstance(msg, list) else [msg]:
            self._check(m)

    def _check(self, m):
        c = contract()
        if not isinstance(m, dict):
            record("received", m, ["not a JSON object"])
            return
        if "method" in m:
            if "id" in m:
                out, where = c.check_server_request(m), "server request %s" % m.get("method")
            else:
                out, where = c.check_notification(m), "notification %s" % m.get("method")
        else:
            method = self._method_of(m.get("id")) if "id" in m else None
            out = c.check_response(method, m)
            where = "reply to %s (id %r)" % (method or "an unknown call", m.get("id"))
        if out:
            record(where, m, out)


_connections_lock = threading.Lock()


def connection_of(client):
    conn = client.__dict__.get("_contract_connection")
    if conn is None:
        with _connections_lock:
            conn = client.__dict__.setdefault("_contract_connection", Connection())
    return conn


class CheckedSocket(socket.socket):
    """A plain socket whose traffic is checked like a client's: for the tests that speak
    bytes (support's ``raw_socket``)."""

    def sendall(self, data, flags=0):
        connection_of(self).sent(bytes(data))
        return super().sendall(data, flags)

    def send(self, data, flags=0):
        n = super().send(data, flags)
        connection_of(self).sent(bytes(memoryview(data)[:n]))
        return n

    def recv(self, bufsize, flags=0):
        data = super().recv(bufsize, flags)
        if not flags & socket.MSG_PEEK:
            self._got(data)
        return data

    def recv_into(self, buffer, nbytes=0, flags=0):
        n = super().recv_into(buffer, nbytes, flags)
        if not flags & socket.MSG_PEEK:
            self._got(bytes(memoryview(buffer)[:n]))
        return n

    def _got(self, data):
        buf = self.__dict__.setdefault("_contract_in", bytearray())
        buf += data
        nl = buf.find(b"\n")
        while nl >= 0:
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                pass  # a framing test's business
            else:
                connection_of(self).received(message)
            nl = buf.find(b"\n")


def _install_websockets():
    """The same check on the WebSocket connections of the tests (ws: listener, /rpc):
    one JSON-RPC message or batch per text frame, both ways."""
    try:
        from websockets.sync.connection import Connection as WSConnection
    except ImportError:
        return  # the tests that speak WebSocket need it and say so
    ws_send, ws_recv = WSConnection.send, WSConnection.recv

    def checked_ws_send(self, message, *args, **kwargs):
        if isinstance(message, (str, bytes, bytearray)):
            connection_of(self).sent(message.encode() if isinstance(message, str) else bytes(message))
            connection_of(self).sent(b"\n")  # a frame is a whole message
        return ws_send(self, message, *args, **kwargs)

    def checked_ws_recv(self, *args, **kwargs):
        frame = ws_recv(self, *args, **kwargs)
        try:
            message = json.loads(frame)
        except (ValueError, RecursionError, TypeError):
            pass  # not JSON-RPC: the test's business
        else:
            connection_of(self).received(message)
        return frame

    WSConnection.send = checked_ws_send
    WSConnection.recv = checked_ws_recv


# ---- installation -----------------------------------------------------------

_installed = False


def install():
    """Wraps the clients' send and receive paths and adds the check to every test."""
    global _installed
    if _installed:
        return
    _installed = True
    contract()  # a broken api/openrpc.json fails here, loudly, once

    from xhrpc import client as sync_client
    from xhrpc import aio

    Client = sync_client.Client
    send_raw, parse = Client.send_raw, Client._parse

    def checked_send_raw(self, data):
        connection_of(self).sent(bytes(data))
        return send_raw(self, data)

    def checked_parse(self, line):
        entry = parse(self, line)
        if entry.error is None:
            connection_of(self).received(entry.message)
        return entry

    Client.send_raw = checked_send_raw
    Client._parse = checked_parse

    AsyncClient = aio.AsyncClient
    async_send_raw, dispatch = AsyncClient.send_raw, AsyncClient._dispatch_line

    async def checked_async_send_raw(self, data):
        connection_of(self).sent(bytes(data))
        return await async_send_raw(self, data)

    def checked_dispatch(self, line):
        try:
            connection_of(self).received(json.loads(line))
        except (ValueError, RecursionError):
            pass  # not JSON: the client itself counts it as malformed
        return dispatch(self, line)

    AsyncClient.send_raw = checked_async_send_raw
    AsyncClient._dispatch_line = checked_dispatch

    _install_websockets()

    run = unittest.TestCase.run

    def run_checked(self, result=None):
        # Registered first, so it runs last: after the test's own cleanups closed its clients.
        self.addCleanup(check_recorded, self)
        return run(self, result)

    unittest.TestCase.run = run_checked
