"""HTTP on the wire: what xhrpcd actually sends to an origin, and what it accepts back,
seen by an origin that parses every byte itself (Tests/Fixtures/recording_origin.py).

What these tests prove, each against the real server and an origin on 127.0.0.1 only:

* Framing and connection headers are the service's alone (RFC 9112 §6.1–§6.3 and
  §11.2, request smuggling; RFC 9110 §7.2 Host, §7.6.1 Connection and the hop-by-hop
  fields it names, §7.8 Upgrade, §10.1.4 TE, §6.6.2 Trailer, §8.6 Content-Length). ``setRequestHeader`` and
  ``fetch``'s ``headers`` refuse Content-Length, Transfer-Encoding, Host, Connection,
  Keep-Alive, Proxy-Connection, TE, Trailer and Upgrade in any letter case (-32602,
  ``data.reason`` ``forbidden_header``, ``data.header`` the name as given); ``open``
  and ``fetch`` refuse CONNECT, TRACE and TRACK (RFC 9110 §9.3.6, §9.3.8;
  ``forbidden_method``); CR, LF or NUL in a value, a URL or a method, and names or
  methods that are not tokens (RFC 9110 §5.1, §5.5, §9.1) are refused as before. A body
  that holds a whole second request reaches the origin as one request with exactly
  that body and its own Content-Length: the origin parses one request per send, never
  the hidden one — also when two principals share the origin's pooled connections, each
  gets the answer to its own request.
* Redirects follow RFC 9110 §15.4 and the Fetch standard's HTTP-redirect fetch: only
  301, 302, 303, 307 and 308 with a Location are followed; 301/302 keep method and
  body except POST, which becomes GET without body (and without the body's
  Content-Type); 303 becomes GET without body (HEAD stays HEAD); 307/308 keep both. Any
  other 3xx with a Location is the response itself. A cross-origin hop drops the
  caller's Authorization header.
* A response whose Content-Length is not one decimal number (two different values on two
  lines or in one list, ``abc``, ``-1``, ``5x``) has invalid framing (RFC 9112 §6.3
  item 5; RFC 9110 §8.6): the request ends in DONE with status 0 and a status text
  beginning ``Invalid response framing``, and the connection is not reused — the next
  request arrives on a new TCP connection. Repeated identical values are one value.
* Every request carries exactly one User-Agent (RFC 9110 §10.1.5): ``xhrpc/<version>``
  of ``server.info``, or the caller's own value instead.
* A thousand connect/close pairs on the Unix socket leave no phantom connections
  behind: a client connecting right after is served, not refused with limit_exceeded
  (the per-principal limit is 128), ten rounds in a row.

The origin records each request it parsed (connection number, method, target, header
lines in order with names as sent, body bytes); ``since(mark)`` returns them once every
connection is idle, so a request hidden in a body, which the origin parses after
answering the first, is never missed. Refusals are proven with a sentinel request: the
records after the refused calls hold the sentinel and nothing else. Every call, send
and wait has a deadline; no test sleeps to let something happen.
"""

import base64
import itertools
import json
import socket
import struct
import time
import zlib
import unittest

from support import SERVER_INFO, ServerTestCase, pattern, req, result
from recording_origin import RecordingOrigin  # Tests/Fixtures, on sys.path through support
from xhrpc import Client

# A whole request, hidden in a body: an origin that took the body's end from a
# smuggled Content-Length: 0 would parse it as the next request on the connection.
SMUGGLED_PATH = "/smuggled"
SMUGGLED = "GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % SMUGGLED_PATH

FORBIDDEN_HEADERS = ["Content-Length", "Transfer-Encoding", "Host", "Connection", "Keep-Alive",
                     "Proxy-Connection", "TE", "Trailer", "Upgrade"]
# What a smuggler would set each of them to.
ATTACK_VALUE = {"Content-Length": "0", "Transfer-Encoding": "chunked", "Host": "evil.example",
                "Connection": "close", "Keep-Alive": "timeout=1, max=1000", "Proxy-Connection": "close",
                "TE": "trailers", "Trailer": "X-Smuggled", "Upgrade": "h2c"}
VALUES = ["0", "chunked", "close", "h2c", "evil.example"]
FORBIDDEN_METHODS = ["CONNECT", "TRACE", "TRACK", "connect", "Trace", "tRaCk"]

CALL_TIMEOUT = 20   # seconds a call may take (a send is bounded by SEND_TIMEOUT before that)
SEND_TIMEOUT = 10   # the transfer's own timeout, so that a misbehaving exchange ends


def spellings(name):
    """The name as written, lower, upper and in alternating case."""
    mixed = "".join(ch.upper() if i % 2 else ch.lower() for i, ch in enumerate(name))
    return list(dict.fromkeys([name, name.lower(), name.upper(), mixed]))


def error_of(resp):
    """The error object of a response, or None when it succeeded."""
    return resp.get("error") if isinstance(resp, dict) else None


def is_refusal(resp, reason=None, header=None):
    """True when ``resp`` is -32602 (with that ``data.reason`` and ``data.header`` when given)."""
    e = error_of(resp)
    if not isinstance(e, dict) or e.get("code") != -32602:
        return False
    data = e.get("data") if isinstance(e.get("data"), dict) else {}
    if reason is not None and data.get("reason") != reason:
        return False
    if header is not None and data.get("header") != header:
        return False
    return True


def brief(resp):
    """A response, short, for failure messages."""
    s = json.dumps(resp, default=repr)
    return s if len(s) < 300 else s[:300] + "…"


class WireCase(ServerTestCase):
    """The server with loopback allowed, plus one recording origin for the class."""

    ORIGINS = 1
    _names = itertools.count(1)

    @classmethod
    def setUpClass(cls):
        # The origins first: their cleanups also run when the server fails to start.
        cls.origins = []
        for _ in range(cls.ORIGINS):
            o = RecordingOrigin().start()
            cls.addClassCleanup(o.close)
            cls.origins.append(o)
        cls.origin = cls.origins[0]
        super().setUpClass()

    def assertNoProblems(self, problems, title):
        """Fails with every problem listed (a table of what went wrong, not only the first)."""
        if problems:
            self.fail("%s (%d):\n    %s" % (title, len(problems), "\n    ".join(problems)))

    def authority(self, origin=None):
        return "127.0.0.1:%d" % (origin or self.origin).port

    # ---- the object API, one exchange at a time ---------------------------

    def exchange(self, c, method, url, headers=(), body=None):
        """create, open (async false), headers, send with ``body``; returns (summary, body bytes).

        A header the server refuses fails the test here; tests of refusals call
        setRequestHeader themselves.
        """
        h = "w%d" % next(self._names)
        c.call("create", {"request": h})
        c.call("open", {"request": h, "method": method, "url": url, "async": False, "subscribe": False})
        for name, value in headers:
            c.call("setRequestHeader", {"request": h, "header": name, "value": value})
        return self.send_and_read(c, h, body)

    def send_and_read(self, c, h, body=None):
        params = {"request": h, "timeout": SEND_TIMEOUT}
        if body is not None:
            params["body"] = body
        summary = c.call("send", params, timeout=CALL_TIMEOUT)
        data = self.read_body(c, h)
        c.call("release", {"request": h})
        return summary, data

    def read_body(self, c, h, timeout=10):
        out = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail("the body of %s was not done within %ss" % (h, timeout))
            chunk = c.call("getReceiveBuffer", {"request": h}, timeout=left)
            out += base64.b64decode(chunk["data"])
            if chunk["done"]:
                return bytes(out)
            if not chunk["data"]:
                # DONE before send answered (async false), so this does not happen; bounded anyway.
                time.sleep(0.01)

    def fetch(self, c, params):
        """The whole ``fetch`` response object (result or error), bounded."""
        return c.request("fetch", dict(params, timeout=SEND_TIMEOUT), timeout=CALL_TIMEOUT)

    def sentinel(self, c, origin=None):
        """A plain GET that must be the only thing the origin records after a refusal."""
        path = "/sentinel/%d" % next(self._names)
        got = self.fetch(c, {"url": (origin or self.origin).url(path)})
        self.assertEqual(got.get("result", {}).get("status"), 200, "the sentinel request: %s" % brief(got))
        return path

    def assertOnlySentinel(self, mark, path, what, origin=None):
        got = [(r.method, r.target) for r in (origin or self.origin).since(mark)]
        self.assertEqual(got, [("GET", path)], "%s: the origin must have parsed the sentinel and nothing else" % what)

    def one_request_problems(self, records, method, path, body):
        """What differs from exactly one request ``method path`` with ``body`` byte-exact,
        one correct Content-Length, no Transfer-Encoding and one Host naming the origin."""
        got = [(r.method, r.target) for r in records]
        if got != [(method, path)]:
            return ["the origin parsed %d requests: %r" % (len(records), records)]
        r = records[0]
        problems = []
        if r.error is not None:
            problems.append("bad HTTP: %s" % r.error)
        if r.body != body.encode():
            problems.append("body %r" % r.body)
        if r.values("Content-Length") != [str(len(body.encode()))]:
            problems.append("Content-Length %r" % r.values("Content-Length"))
        if r.values("Transfer-Encoding"):
            problems.append("Transfer-Encoding %r" % r.values("Transfer-Encoding"))
        if r.values("Host") != [self.authority()]:
            problems.append("Host %r" % r.values("Host"))
        return problems

    def assertOneRequestWithBody(self, records, method, path, body, what):
        self.assertNoProblems(self.one_request_problems(records, method, path, body), what)


# --------------------------------------------------------------------------
# a) Smuggling: framing and connection headers, methods, CR/LF injection.

class Smuggling(WireCase):

    def test_setRequestHeader_refuses_every_framing_header_in_every_case(self):
        c = self.connect()
        c.call("create", {"request": "refusals"})
        c.call("open", {"request": "refusals", "method": "POST", "url": self.origin.url("/after-refusals"),
                        "async": False, "subscribe": False})
        wrong = []
        tried = 0
        for name in FORBIDDEN_HEADERS:
            for spelled in spellings(name):
                for value in VALUES + [ATTACK_VALUE[name]]:
                    tried += 1
                    resp = c.request("setRequestHeader", {"request": "refusals", "header": spelled, "value": value})
                    if not is_refusal(resp, "forbidden_header", spelled):
                        wrong.append("%s: %s -> %s" % (spelled, value, brief(resp)))
        self.assertNoProblems(wrong, "of %d setRequestHeader calls, these were not refused with -32602 "
                                     "forbidden_header naming the header as given" % tried)
        # The request object is still usable: it is OPENED, takes other headers, and its
        # body goes out as one request with its own Content-Length.
        self.assertEqual(c.call("getState", {"request": "refusals"}), {"state": 1, "stateName": "OPENED", "attempt": 0})
        c.call("setRequestHeader", {"request": "refusals", "header": "X-Probe", "value": "after"})
        mark = self.origin.mark()
        summary, _ = self.send_and_read(c, "refusals", SMUGGLED)
        self.assertEqual(summary["status"], 200, summary)
        records = self.origin.since(mark)
        self.assertOneRequestWithBody(records, "POST", "/after-refusals", SMUGGLED, "after the refusals")
        self.assertEqual(records[0].values("X-Probe"), ["after"])

    def test_each_smuggling_vector_alone_sends_one_request_with_the_whole_body(self):
        c = self.connect()
        start = self.origin.mark()
        refusals, wire = [], []
        for name in FORBIDDEN_HEADERS:
            for spelled in (name, name.lower()):
                h = "v%d" % next(self._names)
                path = "/vector/%s" % spelled
                c.call("create", {"request": h})
                c.call("open", {"request": h, "method": "POST", "url": self.origin.url(path),
                                "async": False, "subscribe": False})
                resp = c.request("setRequestHeader", {"request": h, "header": spelled, "value": ATTACK_VALUE[name]})
                if not is_refusal(resp, "forbidden_header", spelled):
                    refusals.append("%s: %s -> %s" % (spelled, ATTACK_VALUE[name], brief(resp)))
                mark = self.origin.mark()
                summary, _ = self.send_and_read(c, h, SMUGGLED)
                problems = self.one_request_problems(self.origin.since(mark), "POST", path, SMUGGLED)
                if summary.get("status") != 200:
                    problems.append("final status %r %r" % (summary.get("status"), summary.get("statusText")))
                if problems:
                    wire.append("%s: %s set first: %s" % (spelled, ATTACK_VALUE[name], "; ".join(problems)))
        hidden = [r for r in self.origin.since(start) if r.path == SMUGGLED_PATH]
        self.assertNoProblems(refusals + wire + ["the origin parsed the hidden request %r" % r for r in hidden],
                              "refusals missing, then what reached the origin")

    def test_fetch_headers_refuse_every_framing_header_and_send_nothing(self):
        c = self.connect()
        wrong = []
        mark = self.origin.mark()
        for name in FORBIDDEN_HEADERS:
            for spelled in spellings(name):
                resp = self.fetch(c, {"method": "POST", "url": self.origin.url("/fetch/" + spelled),
                                      "headers": {"X-Fine": "1", spelled: ATTACK_VALUE[name]}, "body": SMUGGLED})
                if not is_refusal(resp, "forbidden_header", spelled):
                    wrong.append("%s: %s -> %s" % (spelled, ATTACK_VALUE[name], brief(resp)))
        path = self.sentinel(c)
        self.assertNoProblems(wrong, "fetch calls not refused with -32602 forbidden_header")
        self.assertOnlySentinel(mark, path, "after the refused fetch calls")
        # The same fetch without the forbidden header: one request, the whole body.
        mark = self.origin.mark()
        resp = self.fetch(c, {"method": "POST", "url": self.origin.url("/fetch/clean"), "headers": {"X-Fine": "1"},
                              "body": SMUGGLED})
        self.assertEqual(resp.get("result", {}).get("status"), 200, brief(resp))
        self.assertOneRequestWithBody(self.origin.since(mark), "POST", "/fetch/clean", SMUGGLED, "a clean fetch")

    def test_connect_trace_and_track_are_refused(self):
        c = self.connect()
        wrong = []
        mark = self.origin.mark()
        for method in FORBIDDEN_METHODS:
            h = "m%d" % next(self._names)
            c.call("create", {"request": h})
            resp = c.request("open", {"request": h, "method": method, "url": self.origin.url("/m/" + method),
                                      "async": False, "subscribe": False})
            if not is_refusal(resp, "forbidden_method"):
                wrong.append("open %s -> %s" % (method, brief(resp)))
                if "result" in resp:  # the old behaviour: let the request go, to show what it does
                    self.send_and_read(c, h)
            resp = self.fetch(c, {"method": method, "url": self.origin.url("/f/" + method)})
            if not is_refusal(resp, "forbidden_method"):
                wrong.append("fetch %s -> %s" % (method, brief(resp)))
        path = self.sentinel(c)
        self.assertNoProblems(wrong, "methods not refused with -32602 forbidden_method")
        self.assertOnlySentinel(mark, path, "after the refused methods")

    def test_cr_lf_nul_and_non_tokens_are_refused(self):
        c = self.connect()
        url = self.origin.url("/inject")
        bad_values = ["1\r\nContent-Length: 0", "x\nTransfer-Encoding: chunked", "a\rb", "nul\x00byte",
                      "v\r\n\r\n" + SMUGGLED]
        bad_names = ["X Evil", "X-Evil:", "Host\r\n", "X\r\nContent-Length", "", "X(y)", "X-Évil", "X\x00"]
        bad_methods = ["GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\nGET", "GE T", "GET\r\n", "GET\x00", "G(ET)",
                       "POST\n"]
        bad_urls = [url + "\r\nX-Injected: 1", url + " HTTP/1.1\r\nHost: evil.example\r\n\r\n" + SMUGGLED,
                    url + "/a b", url + "\x00", url + "\n", url + "/a\tb", url + "\x7f", url + "\x01"]
        c.call("create", {"request": "inj"})
        c.call("open", {"request": "inj", "method": "POST", "url": url, "async": False, "subscribe": False})
        wrong = []
        mark = self.origin.mark()
        for v in bad_values:
            for resp in (c.request("setRequestHeader", {"request": "inj", "header": "X-Evil", "value": v}),
                         self.fetch(c, {"url": url, "headers": {"X-Evil": v}})):
                if not is_refusal(resp):
                    wrong.append("value %r -> %s" % (v, brief(resp)))
        for n in bad_names:
            for resp in (c.request("setRequestHeader", {"request": "inj", "header": n, "value": "1"}),
                         self.fetch(c, {"url": url, "headers": {n: "1"}})):
                if not is_refusal(resp):
                    wrong.append("name %r -> %s" % (n, brief(resp)))
        for m in bad_methods:
            h = "i%d" % next(self._names)
            c.call("create", {"request": h})
            for resp in (c.request("open", {"request": h, "method": m, "url": url}),
                         self.fetch(c, {"method": m, "url": url})):
                if not is_refusal(resp):
                    wrong.append("method %r -> %s" % (m, brief(resp)))
        for u in bad_urls:
            h = "i%d" % next(self._names)
            c.call("create", {"request": h})
            for resp in (c.request("open", {"request": h, "method": "GET", "url": u}),
                         self.fetch(c, {"url": u})):
                if not is_refusal(resp):
                    wrong.append("url %r -> %s" % (u, brief(resp)))
        path = self.sentinel(c)
        self.assertNoProblems(wrong, "injections not refused with -32602")
        self.assertOnlySentinel(mark, path, "after the refused injections")
        # The request object that refused them all still sends right.
        mark = self.origin.mark()
        summary, _ = self.send_and_read(c, "inj", SMUGGLED)
        self.assertEqual(summary["status"], 200, summary)
        self.assertOneRequestWithBody(self.origin.since(mark), "POST", "/inject", SMUGGLED, "after the injections")


# --------------------------------------------------------------------------
# b) Two principals on one origin: each gets the answer to its own request.

ALICE = {"name": "alice", "token": "alice-wire-" + "a" * 40}
BOB = {"name": "bob", "token": "bob-wire-" + "b" * 40}


class TwoPrincipalsOneOrigin(WireCase):
    TCP = True
    PRINCIPALS = (ALICE, BOB)
    ROUNDS = 3

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # If alice's hidden request were ever parsed, its answer would come late: after
        # bob's request had gone out on the same pooled connection (libcurl only drops a
        # pooled connection that has bytes waiting), so bob would read it as his.
        cls.origin.script(SMUGGLED_PATH, body=b'{"target": "/smuggled", "for": "alice"}', delay=0.3,
                          headers=["Content-Type: application/json"])

    def test_alices_smuggling_attempts_never_reach_bobs_responses(self):
        alice = self.server.connect_as("alice")
        self.addCleanup(alice.close)
        bob = self.server.connect_as("bob")
        self.addCleanup(bob.close)
        mark = self.origin.mark()
        sent = []      # (principal, method, path, body) of every request that should reach the origin
        refusals = []  # smuggling attempts that were not refused
        wrong = []     # answers that were not the origin's answer to the request
        vectors = [("Content-Length", "0"), ("content-length", "0"), ("Transfer-Encoding", "chunked"),
                   ("Connection", "keep-alive"), ("Host", "evil.example")]
        for rnd in range(self.ROUNDS):
            for i, (name, value) in enumerate(vectors):
                # Alice, through the object API and through fetch.
                path = "/alice/%d/%d/object" % (rnd, i)
                h = "a%d" % next(self._names)
                alice.call("create", {"request": h})
                alice.call("open", {"request": h, "method": "POST", "url": self.origin.url(path),
                                    "async": False, "subscribe": False})
                resp = alice.request("setRequestHeader", {"request": h, "header": name, "value": value})
                if not is_refusal(resp, "forbidden_header", name):
                    refusals.append("alice setRequestHeader %s: %s -> %s" % (name, value, brief(resp)))
                summary, body = self.send_and_read(alice, h, SMUGGLED)
                sent.append(("alice", "POST", path, SMUGGLED))
                self.check_answer(wrong, "alice", path, summary["status"], body)
                self.bob_asks(bob, rnd, "%d-a" % i, sent, wrong)

                path = "/alice/%d/%d/fetch" % (rnd, i)
                resp = self.fetch(alice, {"method": "POST", "url": self.origin.url(path), "headers": {name: value},
                                          "body": SMUGGLED})
                if not is_refusal(resp, "forbidden_header", name):
                    refusals.append("alice fetch with %s: %s -> %s" % (name, value, brief(resp)[:120]))
                    if "result" in resp:
                        sent.append(("alice", "POST", path, SMUGGLED))
                        self.check_answer(wrong, "alice", path, resp["result"]["status"],
                                          resp["result"]["body"].encode())
                resp = self.fetch(alice, {"method": "POST", "url": self.origin.url(path + "/clean"),
                                          "body": SMUGGLED})
                sent.append(("alice", "POST", path + "/clean", SMUGGLED))
                self.check_answer(wrong, "alice", path + "/clean", resp["result"]["status"],
                                  resp["result"]["body"].encode())
                self.bob_asks(bob, rnd, "%d-b" % i, sent, wrong)
        records = self.origin.since(mark)
        expected = sorted((m, p) for _, m, p, _ in sent)
        parsed = sorted((r.method, r.target) for r in records)
        extra = [x for x in parsed if x not in expected] + [x for x in expected if x not in parsed]
        self.assertNoProblems(
            wrong + ["the origin parsed %r, which no send asked for (or missed it)" % (x,) for x in extra] + refusals,
            "each principal must get the origin's answer to its own request, one request per send")
        self.assertEqual(parsed, expected)
        for (who, method, path, body) in sent:
            r = next(r for r in records if r.target == path)
            self.assertIsNone(r.error, r)
            self.assertEqual(r.body, body.encode(), "%s %s" % (who, path))
            self.assertEqual(r.values("Host"), [self.authority()], r)

    def bob_asks(self, bob, rnd, tag, sent, wrong):
        """Bob's GET right after alice's request: the same origin, likely the same pooled connection."""
        path = "/bob/%d/%s" % (rnd, tag)
        resp = self.fetch(bob, {"url": self.origin.url(path)})
        sent.append(("bob", "GET", path, ""))
        self.check_answer(wrong, "bob", path, resp["result"]["status"], resp["result"]["body"].encode())

    def check_answer(self, wrong, who, path, status, body):
        try:
            target = json.loads(body).get("target")
        except ValueError:
            target = None
        if status != 200 or target != path:
            wrong.append("%s asked for %s and got status %s, body %r" % (who, path, status, body[:200]))


# --------------------------------------------------------------------------
# c) Redirects.

REDIRECT_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
FOLLOWED = [301, 302, 303, 307, 308]
NOT_FOLLOWED = {300: "Multiple Choices", 304: "Not Modified", 305: "Use Proxy", 306: "Unused",
                309: "Odd", 399: "Odder"}
BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
CONTENT_TYPE = "text/plain; charset=utf-8"


def after_redirect(method, code):
    """(method, body kept) of the next hop, per RFC 9110 §15.4 and Fetch."""
    if code == 303:
        return ("HEAD" if method == "HEAD" else "GET"), False
    if code in (301, 302) and method == "POST":
        return "GET", False
    return method, method in BODY_METHODS


class Redirects(WireCase):
    ORIGINS = 2

    def test_followed_codes_keep_or_drop_method_and_body_as_rfc_9110_says(self):
        c = self.connect()
        wrong = []
        for code in FOLLOWED:
            for method in REDIRECT_METHODS:
                first, target = "/r/%s/%d" % (method, code), "/t/%s/%d" % (method, code)
                self.origin.script(first, status=code, reason="Redirect", headers=["Location: " + target],
                                   body=b"see elsewhere")
                body = "body of %s %d" % (method, code) if method in BODY_METHODS else None
                headers = [("Content-Type", CONTENT_TYPE)] if body is not None else []
                mark = self.origin.mark()
                summary, _ = self.exchange(c, method, self.origin.url(first), headers, body)
                records = self.origin.since(mark)
                problems = self.redirect_problems(method, code, body, summary, records, first, target)
                if problems:
                    wrong.append("%s %d: %s\n      origin saw %r" % (method, code, "; ".join(problems), records))
        self.assertNoProblems(wrong, "redirects not as RFC 9110 §15.4 says")

    def redirect_problems(self, method, code, body, summary, records, first, target):
        problems = []
        if summary.get("status") != 200:
            problems.append("final status %r (%r), expected 200" % (summary.get("status"), summary.get("statusText")))
        if [r.target for r in records] != [first, target]:
            return problems + ["requests %r, expected [%r, %r]" % ([r.target for r in records], first, target)]
        r0, r1 = records
        if r0.method != method or r0.body != (body or "").encode():
            problems.append("first request %s %r" % (r0.method, r0.body))
        want_method, keep = after_redirect(method, code)
        if r1.method != want_method:
            problems.append("followed with %s, expected %s" % (r1.method, want_method))
        if keep:
            if r1.body != body.encode():
                problems.append("body %r, expected %r" % (r1.body, body))
            if r1.values("Content-Length") != [str(len(body.encode()))]:
                problems.append("Content-Length %r" % r1.values("Content-Length"))
            if r1.values("Content-Type") != [CONTENT_TYPE]:
                problems.append("Content-Type %r, expected kept" % r1.values("Content-Type"))
        else:
            if r1.body != b"":
                problems.append("body %r, expected none" % r1.body)
            for name in ("Content-Length", "Transfer-Encoding", "Content-Type"):
                if r1.has(name):
                    problems.append("%s %r sent without a body" % (name, r1.values(name)))
        if r1.error is not None:
            problems.append("the followed request is bad HTTP: %s" % r1.error)
        return problems

    def test_other_3xx_with_a_location_are_the_response(self):
        c = self.connect()
        wrong = []
        for code, reason in NOT_FOLLOWED.items():
            for method in (["GET"] if code == 304 else ["GET", "POST"]):
                first, never = "/n/%s/%d" % (method, code), "/never/%s/%d" % (method, code)
                page = b"" if code == 304 else ("the %d page itself" % code).encode()
                self.origin.script(first, status=code, reason=reason, headers=["Location: " + never], body=page)
                body = "posted" if method == "POST" else None
                mark = self.origin.mark()
                summary, got = self.exchange(c, method, self.origin.url(first), (), body)
                records = self.origin.since(mark)
                if (summary.get("status"), summary.get("statusText"), got) != (code, reason, page):
                    wrong.append("%s %d: status %r %r body %r, expected %d %r %r" % (
                        method, code, summary.get("status"), summary.get("statusText"), got, code, reason, page))
                if [r.target for r in records] != [first]:
                    wrong.append("%s %d: the origin got %r, expected only %s" % (
                        method, code, [(r.method, r.target) for r in records], first))
        # fetch answers the same.
        mark = self.origin.mark()
        resp = self.fetch(c, {"url": self.origin.url("/n/GET/300")})
        got = resp.get("result", {})
        if (got.get("status"), got.get("body")) != (300, "the 300 page itself"):
            wrong.append("fetch 300: %s" % brief(resp))
        if [r.target for r in self.origin.since(mark)] != ["/n/GET/300"]:
            wrong.append("fetch 300 followed the Location")
        self.assertNoProblems(wrong, "3xx other than 301, 302, 303, 307, 308 must not be followed")

    def test_cross_origin_hop_drops_authorization(self):
        c = self.connect()
        a, b = self.origins
        token = "Bearer wire-secret-token"
        for code, method in ((302, "GET"), (307, "POST"), (308, "PUT")):
            with self.subTest(code=code, method=method):
                cross, same = "/cross/%d" % code, "/same/%d" % code
                landing = "/landing/%d" % code
                a.script(cross, status=code, headers=["Location: " + b.url(landing)])
                a.script(same, status=code, headers=["Location: " + landing])
                body = None if method == "GET" else "payload %d" % code
                headers = [("Authorization", token), ("Proxy-Authorization", "Basic cHJveHk6c2VjcmV0"),
                           ("X-Other", "kept")]
                ma, mb = a.mark(), b.mark()
                summary, _ = self.exchange(c, method, a.url(cross), headers, body)
                self.assertEqual(summary["status"], 200, summary)
                self.assertEqual([r.target for r in a.since(ma)], [cross])
                self.assertEqual(a.since(ma)[0].values("Authorization"), [token])
                hop = b.since(mb)
                self.assertEqual([(r.method, r.target) for r in hop], [(method, landing)])
                self.assertEqual(hop[0].values("Authorization"), [], "Authorization went to another origin")
                self.assertEqual(hop[0].values("Proxy-Authorization"), [], "Proxy-Authorization went to another origin")
                self.assertEqual(hop[0].values("X-Other"), ["kept"])
                self.assertEqual(hop[0].body, (body or "").encode())
                # A same-origin hop keeps it.
                ma = a.mark()
                summary, _ = self.exchange(c, method, a.url(same), headers, body)
                self.assertEqual(summary["status"], 200, summary)
                self.assertEqual([r.target for r in a.since(ma)], [same, landing])
                self.assertEqual(a.since(ma)[1].values("Authorization"), [token])


class UnaskedBytes(WireCase):
    """RFC 9112 §9.3: a response answers a request. Bytes an origin writes on an idle
    keep-alive connection (a second response, a body after a HEAD's answer) must never
    be read as the answer to the next request sent there."""

    def test_a_second_response_nobody_asked_for_answers_nobody(self):
        c = self.connect()
        stray = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Unasked: yes\r\n\r\nSMUGGLED"
        for method in ("GET", "HEAD"):
            with self.subTest(method=method):
                first, second = "/twice/%s" % method, "/next/%s" % method
                self.origin.script(first, body=b"first", unasked=stray)
                self.origin.script(second, body=b"real")
                mark = self.origin.mark()
                got = self.fetch(c, {"method": method, "url": self.origin.url(first)})["result"]
                self.assertEqual(got["status"], 200, got)
                time.sleep(0.4)  # the unasked bytes are on the idle connection by now
                got = self.fetch(c, {"url": self.origin.url(second)})["result"]
                self.assertEqual((got["status"], got["body"]), (200, "real"), got)
                self.assertNotIn("X-Unasked", got["headers"])
                records = self.origin.since(mark)
                self.assertEqual([r.path for r in records], [first, second])
                self.assertNotEqual(records[0].connection, records[1].connection,
                                    "the next request went on the connection the unasked bytes came on")


# --------------------------------------------------------------------------
# d) Invalid response framing.

INVALID_FRAMING = [
    ("two different lines", ["Content-Length: 2", "Content-Length: 5"]),
    ("two different values in one line", ["Content-Length: 2, 5"]),
    ("not a number", ["Content-Length: abc"]),
    ("negative", ["Content-Length: -1"]),
    ("digits then garbage", ["Content-Length: 5x"]),
]
REPEATED_FRAMING = [
    ("the same value on two lines", ["Content-Length: 5", "Content-Length: 5"]),
    ("the same value twice in one line", ["Content-Length: 5, 5"]),
]
FRAMING_PREFIX = "Invalid response framing"


class InvalidResponseFraming(WireCase):

    def test_invalid_content_length_is_a_network_error_and_the_connection_is_not_reused(self):
        c = self.connect()
        wrong = []
        for i, (what, lines) in enumerate(INVALID_FRAMING):
            bad = "/bad/%d" % i
            self.origin.script(bad, headers=lines, body=b"hello")
            # The object API: DONE, status 0, the reason; then the next request's connection.
            mark = self.origin.mark()
            summary, _ = self.exchange(c, "GET", self.origin.url(bad))
            after = self.exchange(c, "GET", self.origin.url("/after/object/%d" % i))[0]
            records = self.origin.since(mark)
            if (summary.get("state"), summary.get("status")) != (5, 0) or \
                    not summary.get("statusText", "").startswith(FRAMING_PREFIX):
                wrong.append("%s (object API): %s" % (what, brief(summary)))
            wrong += self.reuse_problems(what + " (object API)", records, bad, after)
            # fetch: status 0 too; then again a new connection.
            mark = self.origin.mark()
            resp = self.fetch(c, {"url": self.origin.url(bad)})
            got = resp.get("result", {})
            after = self.fetch(c, {"url": self.origin.url("/after/fetch/%d" % i)}).get("result", {})
            records = self.origin.since(mark)
            if got.get("status") != 0 or not got.get("statusText", "").startswith(FRAMING_PREFIX):
                wrong.append("%s (fetch): %s" % (what, brief(resp)))
            wrong += self.reuse_problems(what + " (fetch)", records, bad, after)
        self.assertNoProblems(wrong, "invalid response framing must end as a network error on a closed connection")

    def reuse_problems(self, what, records, bad, after):
        """The request after the bad response went out, on a connection of its own."""
        if after.get("status") != 200:
            return ["%s: the next request got %s" % (what, brief(after))]
        if len(records) != 2 or records[0].path != bad:
            return ["%s: the origin parsed %r" % (what, records)]
        if records[1].connection == records[0].connection:
            return ["%s: the next request reused connection %d" % (what, records[0].connection)]
        return []

    def test_a_switch_of_protocols_nobody_asked_for_is_a_network_error(self):
        """RFC 9110 §15.2.2: 101 only answers a request that asked to upgrade; what follows
        it is not HTTP, and must not become a body."""
        c = self.connect()
        self.origin.script("/switch", status=101, headers=["Connection: Upgrade", "Upgrade: evil"], body=b"rawbytes")
        summary, _ = self.exchange(c, "GET", self.origin.url("/switch"))
        self.assertEqual((summary.get("state"), summary.get("status")), (5, 0), summary)
        self.assertTrue(summary["statusText"].startswith(FRAMING_PREFIX), summary)
        self.assertIn("101", summary["statusText"])
        got = self.fetch(c, {"url": self.origin.url("/switch")})["result"]
        self.assertEqual((got["status"], got["body"]), (0, ""), got)

    def test_the_state_is_done_and_the_status_text_says_why(self):
        c = self.connect()
        self.origin.script("/bad/state", headers=["Content-Length: 2", "Content-Length: 5"], body=b"hello")
        c.call("create", {"request": "s"})
        c.call("open", {"request": "s", "method": "GET", "url": self.origin.url("/bad/state"), "async": False,
                        "subscribe": False})
        c.call("send", {"request": "s", "timeout": SEND_TIMEOUT}, timeout=CALL_TIMEOUT)
        self.assertEqual(c.call("getState", {"request": "s"}), {"state": 5, "stateName": "DONE", "attempt": 1})
        self.assertEqual(c.call("getStatus", {"request": "s"}), 0)
        text = c.call("getStatusText", {"request": "s"})
        self.assertTrue(text.startswith(FRAMING_PREFIX), text)

    def test_repeated_identical_values_are_one_value(self):
        c = self.connect()
        for i, (what, lines) in enumerate(REPEATED_FRAMING):
            with self.subTest(what):
                path = "/repeated/%d" % i
                self.origin.script(path, headers=lines, body=b"hello")
                summary, body = self.exchange(c, "GET", self.origin.url(path))
                self.assertEqual((summary["status"], body), (200, b"hello"), summary)
                resp = self.fetch(c, {"url": self.origin.url(path)})
                self.assertEqual((resp["result"]["status"], resp["result"]["body"]), (200, "hello"), brief(resp))


# --------------------------------------------------------------------------
# e) User-Agent.

class CodedBodiesOfWholeBuffers(ServerTestCase):
    """Coded bodies whose decoded length is a whole number of the decoder's 16 KiB
    output buffers, and one byte short: each ends, byte-exact. A gzip member ending on a
    full buffer once spun the daemon's loop for ever (the 30-minute soak found it with
    /gzip/65536), so no later call of any client was answered."""

    UPSTREAM = True

    def test_every_coding_at_buffer_boundaries(self):
        c = self.connect()
        for coding in ("gzip", "deflate", "br"):
            for n in (16384, 65535, 65536, 3 * 16384 + 1):
                with self.subTest(coding=coding, n=n):
                    r = c.fetch(self.upstream.url("/%s/%d?seed=5" % (coding, n)), response_type="base64", timeout=20)
                    body = base64.b64decode(r["body"])
                    self.assertEqual((r["status"], len(body)), (200, n))
                    self.assertEqual(body, pattern.pattern_bytes(n, 5))


class TruncatedCodedBodies(WireCase):
    """A coded body whose framing is whole but whose stream is cut short (a
    Content-Length that counts only the bytes sent, or chunks and a last chunk around
    part of a gzip stream) is a network error, status 0, never a 200 with the part
    decoded (libcurl 7.88 never checks that the decoder reached the stream's end; the
    engine does)."""

    BODY = b"".join(b"%05d " % i for i in range(1707))  # 10,242 bytes of text

    @classmethod
    def coded(cls, coding):
        bits = {"gzip": 31, "deflate": 15, "raw-deflate": -15}[coding]
        c = zlib.compressobj(6, zlib.DEFLATED, bits)
        return c.compress(cls.BODY) + c.flush()

    def test_a_stream_cut_inside_whole_framing_is_a_network_error(self):
        c = self.connect()
        wrong = []
        for coding in ("gzip", "deflate", "raw-deflate"):
            whole = self.coded(coding)
            name = "deflate" if coding == "raw-deflate" else coding
            for chunked in (False, True):
                cut = whole[:len(whole) // 2]
                if chunked:
                    lines = ["Content-Encoding: " + name, "Transfer-Encoding: chunked"]
                    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(cut), cut)
                else:
                    lines = ["Content-Encoding: " + name]
                    body = cut
                path = "/cut/%s/%d" % (coding, chunked)
                self.origin.script(path, headers=lines, body=body)
                self.origin.script(path + "/whole", headers=["Content-Encoding: " + name], body=whole)
                text = "Truncated %s body: the response ended before its %s stream did" % (name, name)
                summary, _ = self.exchange(c, "GET", self.origin.url(path))
                if (summary.get("state"), summary.get("status"), summary.get("statusText")) != (5, 0, text):
                    wrong.append("%s (object API): %s" % (path, brief(summary)))
                got = self.fetch(c, {"url": self.origin.url(path)}).get("result", {})
                if (got.get("status"), got.get("statusText"), got.get("body", "")) != (0, text, ""):
                    wrong.append("%s (fetch): %s" % (path, brief(got)))
                whole_got = self.fetch(c, {"url": self.origin.url(path + "/whole")}).get("result", {})
                if (whole_got.get("status"), whole_got.get("body")) != (200, self.BODY.decode()):
                    wrong.append("%s/whole: %s" % (path, brief(whole_got)))
        self.assertNoProblems(wrong, "a coded body cut short must end as a network error")


class UserAgent(WireCase):

    def test_default_and_override_are_exactly_one_line(self):
        c = self.connect()
        version = c.call("server.info")["version"]
        default = "xhrpc/" + version
        cases = [
            ("default, object API", lambda p: self.exchange(c, "GET", self.origin.url(p)), default),
            ("default, fetch", lambda p: self.fetch(c, {"url": self.origin.url(p)}), default),
            ("user-agent by setRequestHeader",
             lambda p: self.exchange(c, "GET", self.origin.url(p), [("user-agent", "probe/1.0")]), "probe/1.0"),
            ("User-Agent by setRequestHeader, POST",
             lambda p: self.exchange(c, "POST", self.origin.url(p), [("User-Agent", "probe/1.1")], "x"), "probe/1.1"),
            ("USER-AGENT in fetch headers",
             lambda p: self.fetch(c, {"url": self.origin.url(p), "headers": {"USER-AGENT": "probe/2.0"}}), "probe/2.0"),
            ("default again after an override", lambda p: self.fetch(c, {"url": self.origin.url(p)}), default),
        ]
        wrong = []
        for i, (what, do, expected) in enumerate(cases):
            path = "/ua/%d" % i
            mark = self.origin.mark()
            do(path)
            records = self.origin.since(mark)
            if [r.target for r in records] != [path]:
                wrong.append("%s: the origin parsed %r" % (what, records))
                continue
            got = records[0].values("User-Agent")
            if got != [expected]:
                wrong.append("%s: User-Agent lines %r, expected exactly [%r]" % (what, got, expected))
        self.assertNoProblems(wrong, "User-Agent lines not as expected")


# --------------------------------------------------------------------------
# f) Connection churn on the Unix socket.

class ConnectionChurn(ServerTestCase):
    ROUNDS = 10
    CHURN = 1000
    DEADLINE = 45.0   # for all rounds together

    def connect_unix(self, deadline):
        """A connected Unix socket. A blocking connect waits while the listen backlog is
        full, for at most SO_SNDTIMEO (Linux); a socket with a Python timeout would fail
        at once with EAGAIN instead."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            left = max(0.1, min(10.0, deadline - time.monotonic()))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(left), int((left % 1) * 1e6)))
            s.connect(self.server.socket_path)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
        except BaseException:
            s.close()
            raise
        return s

    def test_a_client_after_a_thousand_connect_close_pairs_is_served(self):
        deadline = time.monotonic() + self.DEADLINE
        for rnd in range(self.ROUNDS):
            for _ in range(self.CHURN):
                self.connect_unix(deadline).close()
            self.assertLess(time.monotonic(), deadline, "round %d: the churn took too long" % rnd)
            with Client(self.connect_unix(deadline)) as c:
                c.send(req("server.info", 1))
                got = c.read_message(timeout=10)
                self.assertMessage(result(SERVER_INFO, 1), got,
                                   "round %d: the client connecting after %d connect/close pairs" % (rnd, self.CHURN))

if __name__ == "__main__":
    unittest.main()


# --------------------------------------------------------------------------
# Other ways caller bytes reach the wire: credentials and a message framed twice.

class CredentialInjection(WireCase):
    """User names and passwords go into headers that libcurl writes: Digest quotes the
    user name without escaping line breaks, so before this was refused a user name
    ``bob\\r\\nX-Injected: yes`` put a header line of the caller's own on the wire."""

    def test_cr_lf_nul_in_credentials_are_refused(self):
        c = self.connect()
        c.call("create", {"request": "cred"})
        url = self.origin.url("/cred")
        wrong = []
        for field in ("user", "password"):
            for bad in ("bob\r\nX-Injected: yes", "bob\nX", "bob\rX", "bob\x00"):
                params = {"request": "cred", "method": "GET", "url": url, "auth": "DIGEST",
                          "user": "bob", "password": "pw"}
                params[field] = bad
                got = c.request("open", params)
                if not is_refusal(got):
                    wrong.append("open %s=%r: %s" % (field, bad, brief(got)))
                got = c.request("enableHttpProxy", {"request": "cred", "host": "127.0.0.1", "port": 1, field: bad})
                if not is_refusal(got):
                    wrong.append("enableHttpProxy %s=%r: %s" % (field, bad, brief(got)))
        self.assertNoProblems(wrong, "credentials with CR, LF or NUL must be refused")
        mark = self.origin.mark()
        path = self.sentinel(c)
        self.assertOnlySentinel(mark, path, "after the refused credentials")


class TransferEncodingWithLength(WireCase):
    """RFC 9112 §6.3: with both, Transfer-Encoding frames the body, and a message with both
    "ought to be handled as an error": the body is read by its chunks and the connection
    is not used again."""

    def test_body_read_by_chunks_and_connection_not_reused(self):
        c = self.connect()
        self.origin.script("/te-cl", headers=["Transfer-Encoding: chunked", "Content-Length: 3"],
                           body=b"5\r\nhello\r\n0\r\n\r\n")
        mark = self.origin.mark()
        summary, body = self.exchange(c, "GET", self.origin.url("/te-cl"))
        after = self.exchange(c, "GET", self.origin.url("/after-te-cl"))[0]
        records = self.origin.since(mark)
        self.assertEqual((summary["status"], body), (200, b"hello"), summary)
        self.assertEqual(after["status"], 200, after)
        self.assertEqual([r.path for r in records], ["/te-cl", "/after-te-cl"], records)
        self.assertNotEqual(records[0].connection, records[1].connection,
                            "the connection that carried both framings was reused")
