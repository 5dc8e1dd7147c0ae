"""Interception and retries (issue 14): ``intercept.register`` and its questions and
notices, ``setRetryPolicy`` and ``fetch``'s ``retry``, against the real xhrpcd.

The interceptor is one connection of a principal (``Client.intercept``); the requests it
steers come from ANOTHER connection of the same principal, unless a test says otherwise.
Two principals (alice and bob) share the server over TCP, so a test can show that one's
requests never reach the other's interceptor.

Besides the fixture upstream (``Tests/Fixtures/upstream.py``: ``/echo`` shows what
arrived), the module runs an origin of its own in this process (``Origin``): it counts
what reaches it per key, answers a given number of failures before a success, and
resets a first connection, so a test can tell how many attempts were sent and that a
cancelled or refused request never left.  Its responses close their connections, so
libcurl never reuses one (a reused connection that dies is retried by libcurl itself,
which would hide the failure from the server).

``ClientSide`` checks the Python client's part (the reader hands questions to threads,
answers them, routes notices) against a scripted peer, without a server.

Every wait has a deadline; no test sleeps to let something happen.
"""

import asyncio
import base64
import email.utils
import http.server
import json
import socket
import socketserver
import struct
import threading
import time
import unittest
import urllib.parse

from support import ScriptedPeer as Peer, ServerTestCase, free_tcp_port, pattern
from xhrpc import AsyncClient, Client, Interceptor, RPCError

ALICE = {"name": "alice", "token": "alice-" + "a" * 40}
BOB = {"name": "bob", "token": "bob-" + "b" * 40}

WAIT = 20.0  # the bound of every wait for a request's end


# --------------------------------------------------------------------------
# An origin of our own: failures on demand, and a count of what arrived.

class Origin:
    """An HTTP/1.1 origin on 127.0.0.1 in this process.

    ``/flaky/KEY?fail=N&status=S&retryAfter=R``: the first N requests with KEY answer S
    (default 503) with ``Retry-After: R`` when given (``retryAfterDate=D``: the HTTP date
    D seconds ahead) and the body ``failure i``; later
    ones answer 200 ``success after i attempts``.  ``/reset-once/KEY``: the first request
    with KEY is read and its connection reset (RST, no response); later ones answer 200
    ``ok``.  Anything else answers 200 ``origin``.  ``hits(KEY)`` lists what arrived for
    KEY: ``(method, path with query, body bytes)``.  Every response closes its
    connection.
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = {}
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle(self):
                try:
                    super().handle()
                except (OSError, ValueError):
                    self.close_connection = True

            def __getattr__(self, name):
                if name.startswith("do_"):
                    return self.dispatch
                raise AttributeError(name)

            def dispatch(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urllib.parse.urlsplit(self.path)
                args = urllib.parse.parse_qs(split.query)
                parts = split.path.strip("/").split("/")
                key = parts[1] if len(parts) == 2 else None
                n = origin.record(key, (self.command, self.path, body)) if key else 0
                self.close_connection = True
                if parts[0] == "flaky" and key:
                    fail = int(args.get("fail", ["0"])[0])
                    if n <= fail:
                        extra = []
                        if "retryAfter" in args:
                            extra.append(("Retry-After", args["retryAfter"][0]))
                        if "retryAfterDate" in args:  # an HTTP date that many seconds ahead
                            when = time.time() + float(args["retryAfterDate"][0])
                            extra.append(("Retry-After", email.utils.formatdate(when, usegmt=True)))
                        self.answer(int(args.get("status", ["503"])[0]), b"failure %d" % n, extra)
                    else:
                        self.answer(200, b"success after %d attempts" % n)
                elif parts[0] == "reset-once" and key:
                    if n == 1:
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        self.connection.close()
                    else:
                        self.answer(200, b"ok")
                else:
                    self.answer(200, b"origin")

            def answer(self, status, body, extra=()):
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                for name, value in extra:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)

    def record(self, key, what):
        with self.lock:
            hits = self.seen.setdefault(key, [])
            hits.append(what)
            return len(hits)

    def hits(self, key):
        with self.lock:
            return list(self.seen.get(key, []))

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)


_keys = iter(range(1, 1 << 30))


def new_key(prefix):
    return "%s%d" % (prefix, next(_keys))


# --------------------------------------------------------------------------
# Recording callbacks.

class Recorder:
    """Callbacks that record what they were asked and told (thread-safe).

    ``answer(method, params)`` decides a question's answer (default True).  ``notices``
    lists ``(method, params)`` in arrival order; ``finished(request)`` waits for a
    ``didFinishLoading`` (or, with ``failed=True``, a ``didFailWithError``) about it.
    """

    def __init__(self, answer=None):
        self.answer = answer or (lambda method, params: True)
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.questions = []
        self.notices = []

    def will_send(self, params):
        with self.cond:
            self.questions.append(("willSendRequest", params))
            self.cond.notify_all()
        return self.answer("willSendRequest", params)

    def should_continue(self, params):
        with self.cond:
            self.questions.append(("shouldContinueAfterFailWithError", params))
            self.cond.notify_all()
        return self.answer("shouldContinueAfterFailWithError", params)

    def on_notice(self, method, params):
        with self.cond:
            self.notices.append((method, params))
            self.cond.notify_all()

    def asked(self, method=None, request=None):
        with self.lock:
            return [p for m, p in self.questions
                    if (method is None or m == method) and (request is None or p.get("request") == request)]

    def told(self, request=None, method=None):
        with self.lock:
            return [(m, p) for m, p in self.notices
                    if (request is None or p.get("request") == request) and (method is None or m == method)]

    def wait_for(self, predicate, timeout=WAIT, what="a notice"):
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                raise AssertionError("%s did not come within %s s; questions %r notices %r"
                                     % (what, timeout, self.questions, [m for m, _ in self.notices]))

    def finished(self, request, failed=False, timeout=WAIT):
        method = "didFailWithError" if failed else "didFinishLoading"
        self.wait_for(lambda: any(m == method and p.get("request") == request for m, p in self.notices),
                      timeout, "%s about %s" % (method, request))


class Outcome:
    """What a request object ended with: ``status``, ``text``, ``body``, ``states``
    (its onStateChange params in order), ``state`` (getState at the end), ``seconds``."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return "<Outcome %r>" % self.__dict__


class InterceptCase(ServerTestCase):
    TCP = True
    UPSTREAM = True
    PRINCIPALS = (ALICE, BOB)
    origin = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.origin = Origin().start()
        cls.addClassCleanup(cls.origin.stop)

    def setUp(self):
        super().setUp()
        self.app = self.alice()  # the connection whose requests are steered

    def alice(self):
        c = self.server.connect_as("alice")
        self.addCleanup(c.close)
        return c

    def bob(self):
        c = self.server.connect_as("bob")
        self.addCleanup(c.close)
        return c

    def intercept(self, c=None, **kw):
        """``c.intercept(**kw)`` on a new alice connection (or ``c``), unregistered at the
        end of the test."""
        c = c or self.alice()
        icp = c.intercept(**kw)
        self.assertIsInstance(icp, Interceptor)
        self.assertRegex(icp.id, r"^icp_[0-9a-f]{32}$")
        self.addCleanup(icp.__exit__, None, None, None)
        return icp

    def unregister_quietly(self, c, icp_id):
        try:
            c.call("intercept.unregister", {"interceptor": icp_id})
        except (RPCError, OSError, TimeoutError):
            pass

    def closed_url(self):
        """A loopback URL where nothing listens (connect refused)."""
        return "http://127.0.0.1:%d/nothing" % free_tcp_port()

    def run_request(self, url, method="GET", headers=None, body=None, retry=None, c=None, timeout=WAIT):
        """A request object on ``c`` (default the app connection), sent and awaited to DONE."""
        c = c or self.app
        start = time.monotonic()
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": method, "url": url})
        for name, value in (headers or {}).items():
            c.call("setRequestHeader", {"request": r, "header": name, "value": value})
        if retry is not None:
            self.assertIs(c.call("setRetryPolicy", dict(retry, request=r)), True)
        send = {"request": r}
        if body is not None:
            send["body"] = body
        c.call("send", send)
        states = self.states_until_done(c, r, timeout)
        seconds = time.monotonic() - start
        data = c.read_body(r, timeout=timeout)
        status, text = (x["result"] for x in c.batch([("getStatus", {"request": r}),
                                                       ("getStatusText", {"request": r})]))
        state = c.call("getState", {"request": r})
        return Outcome(request=r, status=status, text=text, body=data, states=states, state=state,
                       seconds=seconds)

    def states_until_done(self, c, r, timeout=WAIT):
        deadline = time.monotonic() + timeout
        states = []
        while not states or states[-1]["stateName"] != "DONE":
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail("%s did not reach DONE within %s s: %r" % (r, timeout, states))
            n = c.wait_notification(lambda m: m.get("method") == "onStateChange"
                                    and m.get("params", {}).get("request") == r, left)
            states.append(n["params"])
        return states

    def assertFailedWith(self, outcome, prefix=None, note=""):
        """DONE with status 0 and a status text (starting with ``prefix``)."""
        self.assertEqual(outcome.state["stateName"], "DONE", note)
        self.assertEqual(outcome.status, 0, note or outcome)
        self.assertTrue(outcome.text, "a failure says why: %r" % outcome)
        if prefix is not None:
            self.assertTrue(outcome.text.startswith(prefix), "%s: %r" % (note, outcome.text))
        self.assertEqual(outcome.body, b"")

    def echo(self, outcome):
        self.assertEqual(outcome.status, 200, outcome)
        return json.loads(outcome.body)

    def barrier(self, rec):
        """Every notice the server sent ``rec``'s interceptor before now has arrived: a
        request of the app's, whose didFinishLoading comes after them on that connection."""
        o = self.run_request(self.upstream.url("/bytes/1"))
        self.assertEqual(o.status, 200)
        rec.finished(o.request)

    def wait_interceptor_gone(self, timeout=10):
        """Alice's interceptor ended (its connection closed): a register elsewhere
        succeeds within ``timeout`` s; it is unregistered again at once."""
        c = self.alice()
        deadline = time.monotonic() + timeout
        pause = 0.01
        while True:
            try:
                icp_id = c.call("intercept.register", {"events": ["didFinishLoading"]})["interceptor"]
                c.call("intercept.unregister", {"interceptor": icp_id})
                return
            except RPCError as e:
                if e.reason != "busy" or time.monotonic() > deadline:
                    raise
            time.sleep(pause)  # polling a condition, bounded above
            pause = min(pause * 2, 0.2)


# --------------------------------------------------------------------------

class Registration(InterceptCase):

    def test_register_answers_an_interceptor_id_and_unregister_true(self):
        c = self.alice()
        answer = c.call("intercept.register")
        self.assertEqual(set(answer), {"interceptor"})
        self.assertRegex(answer["interceptor"], r"^icp_[0-9a-f]{32}$")
        self.assertIs(c.call("intercept.unregister", {"interceptor": answer["interceptor"]}), True)
        # Gone: a second unregister is unknown_handle, a new register succeeds.
        with self.assertRaises(RPCError) as cm:
            c.call("intercept.unregister", {"interceptor": answer["interceptor"]})
        self.assertEqual((cm.exception.code, cm.exception.reason), (-32001, "unknown_handle"))
        again = c.call("intercept.register")["interceptor"]
        self.assertNotEqual(again, answer["interceptor"])
        c.call("intercept.unregister", {"interceptor": again})

    def test_bad_parameters_are_invalid_params(self):
        c = self.alice()
        for params in ({"events": []}, {"events": ["willSendRequest", "nonsense"]}, {"events": "willSendRequest"},
                       {"timeout": 0}, {"timeout": -1}, {"timeout": 61}, {"match": []},
                       {"match": ["not a pattern at all/"]}):
            with self.assertRaises(RPCError, msg=params) as cm:
                c.call("intercept.register", params)
            self.assertEqual(cm.exception.code, -32602, params)
        # None of them registered anything.
        icp = self.intercept(c, events=["didFinishLoading"])
        icp.unregister()

    def test_a_second_register_of_the_principal_is_busy(self):
        icp = self.intercept()
        other = self.alice()
        with self.assertRaises(RPCError) as cm:
            other.call("intercept.register")
        self.assertEqual((cm.exception.code, cm.exception.reason), (-32011, "busy"))
        self.assertNotIn(icp.id, json.dumps(cm.exception.response), "the busy error names nothing secret")
        # The client's helper says the same; bob is another principal: not busy.
        with self.assertRaises(RPCError) as cm:
            other.intercept(will_send=lambda p: True)
        self.assertEqual(cm.exception.reason, "busy")
        self.assertIsNone(other.interceptor)
        bob_icp = self.intercept(self.bob())
        bob_icp.unregister()
        # Once alice's is unregistered, another connection of hers may register.
        icp.unregister()
        self.assertFalse(icp.active)
        self.intercept(other).unregister()

    def test_unregister_of_an_unknown_or_another_principals_interceptor_is_unknown_handle(self):
        icp = self.intercept()
        for c, params in ((self.bob(), {"interceptor": icp.id}),
                          (self.alice(), {"interceptor": "icp_" + "0" * 32})):
            with self.assertRaises(RPCError) as cm:
                c.call("intercept.unregister", params)
            self.assertEqual((cm.exception.code, cm.exception.reason), (-32001, "unknown_handle"))
        self.assertTrue(icp.active)
        # Any connection of the principal may end it.
        self.assertIs(self.alice().call("intercept.unregister", {"interceptor": icp.id}), True)

    def test_after_unregister_no_question_is_asked(self):
        rec = Recorder()
        icp = self.intercept(will_send=rec.will_send)
        o = self.run_request(self.upstream.url("/echo"))
        self.assertEqual(len(rec.asked(request=o.request)), 1)
        icp.unregister()
        o = self.run_request(self.upstream.url("/echo"))
        self.assertEqual(o.status, 200)
        self.assertEqual(rec.asked(request=o.request), [])
        self.assertEqual(icp.client.pending(), [], "nothing arrived for the ended interceptor")


class Questions(InterceptCase):

    def test_another_connections_request_is_asked_about_before_it_is_sent(self):
        rec = Recorder()
        icp = self.intercept(will_send=rec.will_send)
        self.assertIsNot(icp.client, self.app)
        o = self.run_request(self.upstream.url("/echo?a=1"), headers={"X-Test": "one"})
        self.assertEqual(self.echo(o)["headers"]["x-test"], "one")
        [q] = rec.asked(request=o.request)
        self.assertEqual(q["request"], o.request)
        self.assertEqual(q["attempt"], 1)
        self.assertEqual(q["method"], "GET")
        self.assertEqual(q["url"], self.upstream.url("/echo?a=1"))
        self.assertEqual({k.lower(): v for k, v in q["headers"].items()}, {"x-test": "one"})
        self.assertEqual(icp.errors, [])
        self.assertEqual([s["attempt"] for s in o.states if s["stateName"] == "SENT"], [1])
        self.assertEqual(o.state["attempt"], 1)

    def test_questions_have_server_ids(self):
        # A connection that registered by hand sees the question itself: an id "srv-N".
        raw = self.alice()
        icp_id = raw.call("intercept.register", {"events": ["willSendRequest"]})["interceptor"]
        self.addCleanup(self.unregister_quietly, raw, icp_id)
        r = self.app.call("create")["request"]
        self.app.call("open", {"request": r, "method": "GET", "url": self.upstream.url("/echo")})
        self.app.call("send", {"request": r})
        q = raw.wait_notification(lambda m: m.get("method") == "willSendRequest", WAIT)
        self.assertRegex(q["id"], r"^srv-\d+$")
        self.assertEqual(q["params"]["request"], r)
        raw.send({"jsonrpc": "2.0", "id": q["id"], "result": True})
        states = self.states_until_done(self.app, r)
        self.assertEqual(states[-1]["status"], 200)

    def test_false_cancels_and_nothing_is_sent(self):
        self.intercept(will_send=lambda p: False)
        key = new_key("cancel")
        o = self.run_request(self.origin.url("/flaky/%s" % key))
        self.assertFailedWith(o, "Cancelled by interceptor")
        self.assertEqual(o.text, "Cancelled by interceptor")
        self.assertEqual(self.origin.hits(key), [], "a cancelled request never leaves")

    def test_url_replacement_to_an_allowed_host(self):
        target = self.upstream.url("/echo?replaced=1")
        self.intercept(will_send=lambda p: {"url": target})
        o = self.run_request(self.origin.url("/flaky/%s" % new_key("orig")))
        seen = self.echo(o)
        self.assertEqual((seen["path"], seen["query"]), ("/echo", "replaced=1"))

    def test_url_replacement_to_a_denied_host_fails_and_is_never_sent(self):
        key = new_key("denied")
        self.intercept(will_send=lambda p: {"url": "http://10.0.0.1:9/x"})
        o = self.run_request(self.origin.url("/flaky/%s" % key))
        self.assertFailedWith(o, "Denied by egress policy", "a replacement to 10.0.0.1")
        self.assertEqual(self.origin.hits(key), [], "not sent unchanged either")

    def test_method_and_body_replacement(self):
        self.intercept(will_send=lambda p: {"method": "PUT", "body": "replaced body"})
        o = self.run_request(self.upstream.url("/echo"), method="POST", body="original")
        seen = self.echo(o)
        self.assertEqual(seen["method"], "PUT")
        self.assertEqual(base64.b64decode(seen["bodyBase64"]), b"replaced body")

    def test_header_replacement_replaces_the_requests_headers(self):
        self.intercept(will_send=lambda p: {"headers": {"X-Replaced": "yes"}})
        o = self.run_request(self.upstream.url("/echo"), headers={"X-Original": "a"})
        headers = self.echo(o)["headers"]
        self.assertEqual(headers.get("x-replaced"), "yes")
        self.assertNotIn("x-original", headers)

    def test_a_forbidden_header_or_scheme_in_a_replacement_fails_and_is_never_sent(self):
        for replacement in ({"headers": {"Content-Length": "5"}}, {"headers": {"Host": "elsewhere.example"}},
                            {"url": "ftp://127.0.0.1/x"}, {"url": "file:///etc/passwd"}):
            with self.subTest(replacement=replacement):
                key = new_key("forbidden")
                icp = self.intercept(will_send=lambda p, r=replacement: r)
                o = self.run_request(self.origin.url("/flaky/%s" % key))
                self.assertFailedWith(o, note=json.dumps(replacement))
                # Refused by the replacement's own check, the one every caller's header and
                # URL go through, not only by the engine's second line.
                self.assertTrue(o.text.startswith("Replacement refused by the server: "), o.text)
                self.assertEqual(self.origin.hits(key), [], "never sent unchanged")
                icp.unregister()

    def test_no_answer_within_the_timeout_sends_unchanged(self):
        release = threading.Event()
        self.addCleanup(release.set)
        asked = threading.Event()

        def slow(params):
            if asked.is_set():
                return True   # later questions: answered at once
            asked.set()
            release.wait(10)  # far past the interceptor's timeout
            return False      # late: ignored

        icp = self.intercept(will_send=slow, timeout=0.5)
        o = self.run_request(self.upstream.url("/echo"))
        self.assertTrue(asked.is_set())
        self.assertEqual(o.status, 200, "the default action: sent unchanged")
        self.assertLess(o.seconds, 5, "it waited for the timeout, not for the callback")
        release.set()
        # The late answer changed nothing; the interceptor still works.
        o = self.run_request(self.upstream.url("/echo"))
        self.assertEqual(o.status, 200)
        self.assertTrue(icp.active)

    def test_a_callback_that_raises_gets_the_default_action(self):
        def boom(params):
            raise ValueError("no opinion")

        icp = self.intercept(will_send=boom)
        o = self.run_request(self.upstream.url("/echo"))
        self.assertEqual(o.status, 200)
        self.assertEqual([type(e) for e in icp.errors], [ValueError])
        # An answer that is neither a bool nor an object: the same.
        icp.unregister()
        icp = self.intercept(will_send=lambda p: "yes")
        self.assertEqual(self.run_request(self.upstream.url("/echo")).status, 200)
        self.assertEqual([type(e) for e in icp.errors], [TypeError])

    def test_a_malformed_result_gets_the_default_action(self):
        raw = self.alice()
        icp_id = raw.call("intercept.register", {"events": ["willSendRequest"]})["interceptor"]
        self.addCleanup(self.unregister_quietly, raw, icp_id)
        key = new_key("malformed")
        r = self.app.call("create")["request"]
        self.app.call("open", {"request": r, "method": "GET", "url": self.origin.url("/flaky/%s" % key)})
        self.app.call("send", {"request": r})
        q = raw.wait_notification(lambda m: m.get("method") == "willSendRequest", WAIT)
        raw.send({"jsonrpc": "2.0", "id": q["id"], "result": 42})
        self.assertEqual(self.states_until_done(self.app, r)[-1]["status"], 200)
        self.assertEqual(len(self.origin.hits(key)), 1)

    def test_the_interceptor_closing_mid_question_gets_the_default_action(self):
        raw = self.server.connect_as("alice")
        try:
            raw.call("intercept.register", {"events": ["willSendRequest"], "timeout": 30})
            r = self.app.call("create")["request"]
            self.app.call("open", {"request": r, "method": "GET", "url": self.upstream.url("/echo")})
            start = time.monotonic()
            self.app.call("send", {"request": r})
            q = raw.wait_notification(lambda m: m.get("method") == "willSendRequest", WAIT)
            self.assertEqual(q["params"]["request"], r)
        finally:
            raw.close()
        states = self.states_until_done(self.app, r)
        self.assertEqual(states[-1]["status"], 200, "sent unchanged")
        self.assertLess(time.monotonic() - start, 15, "not held until the 30 s timeout")
        self.wait_interceptor_gone()

    def test_fetch_is_intercepted_even_on_the_interceptors_own_connection(self):
        def decide(method, params):
            return False if "cancel-me" in params["url"] else {"headers": {"X-From-Interceptor": "1"}}

        rec = Recorder(decide)
        for c in (self.app, None):
            with self.subTest(own_connection=c is None):
                c = c or self.alice()
                icp = self.intercept(c, will_send=rec.will_send)
                r = c.fetch(self.upstream.url("/echo"), timeout=WAIT)
                self.assertEqual(r["status"], 200, r)
                self.assertEqual(json.loads(r["body"])["headers"].get("x-from-interceptor"), "1")
                q = rec.asked()[-1]
                self.assertRegex(q["request"], r"^fetch_[0-9a-f]{32}$")
                self.assertEqual((q["method"], q["url"], q["attempt"]), ("GET", self.upstream.url("/echo"), 1))
                r = c.fetch(self.upstream.url("/echo?cancel-me"), timeout=WAIT)
                self.assertEqual((r["status"], r["statusText"]), (0, "Cancelled by interceptor"))
                icp.unregister()

    def test_match_limits_the_hosts(self):
        rec = Recorder()
        self.intercept(will_send=rec.will_send, match=["127.0.0.1:%d" % self.upstream.port])
        key = new_key("unmatched")
        o = self.run_request(self.origin.url("/flaky/%s" % key))
        self.assertEqual(o.status, 200)
        self.assertEqual(rec.asked(request=o.request), [], "another port: not intercepted")
        o = self.run_request(self.upstream.url("/echo"))
        self.assertEqual(len(rec.asked(request=o.request)), 1)

    def test_match_by_name_does_not_cover_an_address(self):
        rec = Recorder()
        self.intercept(will_send=rec.will_send, match=["*.example.com", "10.0.0.0/8"])
        o = self.run_request(self.upstream.url("/echo"))
        self.assertEqual(o.status, 200)
        self.assertEqual(rec.asked(), [])

    def test_events_limit_the_questions(self):
        rec = Recorder(lambda m, p: False)
        # Only didFinishLoading: will_send is given but not asked.
        self.intercept(will_send=rec.will_send, on_notice=rec.on_notice, events=["didFinishLoading"])
        o = self.run_request(self.upstream.url("/bytes/10"))
        self.assertEqual(o.status, 200)
        rec.finished(o.request)
        self.assertEqual(rec.asked(), [])
        self.assertEqual([m for m, _ in rec.told(o.request)], ["didFinishLoading"])

    def test_another_principals_requests_are_never_shown(self):
        rec = Recorder(lambda m, p: False)  # would cancel anything it is asked about
        self.intercept(will_send=rec.will_send, should_continue=rec.should_continue, on_notice=rec.on_notice)
        bob = self.bob()
        o = self.run_request(self.upstream.url("/bytes/1000"), c=bob)
        self.assertEqual(o.status, 200)
        self.assertEqual(len(o.body), 1000)
        r = bob.fetch(self.upstream.url("/echo"), timeout=WAIT)
        self.assertEqual(r["status"], 200)
        o_fail = self.run_request(self.closed_url(), c=bob)
        self.assertFailedWith(o_fail)
        # Alice's own request after bob's: asked (and cancelled); nothing of bob's before it.
        o = self.run_request(self.upstream.url("/echo"))
        self.assertEqual(o.text, "Cancelled by interceptor")
        self.assertEqual([p["request"] for _, p in rec.questions], [o.request])
        self.assertEqual(rec.told(), [])


class Notices(InterceptCase):

    def test_a_successful_request_is_told_response_data_and_finish(self):
        rec = Recorder()
        icp = self.intercept(on_notice=rec.on_notice)
        self.assertEqual(icp.events, ["didReceiveResponse", "didReceiveData", "didFailWithError",
                                      "didFinishLoading"])
        n = 300000
        o = self.run_request(self.upstream.url("/bytes/%d" % n))
        self.assertEqual(o.status, 200)
        self.assertEqual(len(o.body), n)
        self.assertEqual(o.body, pattern.pattern_bytes(n))
        rec.finished(o.request)
        told = rec.told(o.request)
        methods = [m for m, _ in told]
        self.assertEqual(methods[0], "didReceiveResponse")
        self.assertEqual(methods[-1], "didFinishLoading")
        self.assertEqual(set(methods[1:-1]), {"didReceiveData"})
        head = told[0][1]
        self.assertEqual((head["status"], head["statusText"], head["expectedContentLength"]), (200, "OK", n))
        self.assertEqual({k.lower(): v for k, v in head["headers"].items()}.get("content-length"), str(n))
        data = b""
        for _, p in told[1:-1]:
            chunk = base64.b64decode(p["dataBase64"], validate=True)
            self.assertEqual(p["bytes"], len(chunk))
            data += chunk
        self.assertEqual(data, o.body, "the data notices hold the body, and the reader got it all too")
        self.assertEqual(icp.errors, [])

    def test_without_on_notice_the_notices_wait_in_the_inbox(self):
        c = self.alice()
        self.intercept(c, events=["didReceiveResponse", "didFinishLoading"])
        o = self.run_request(self.upstream.url("/bytes/5"))
        got = [c.wait_notification(lambda m: m["params"].get("request") == o.request, WAIT)["method"]
               for _ in range(2)]
        self.assertEqual(got, ["didReceiveResponse", "didFinishLoading"])

    def test_a_refused_connection_is_told_did_fail_with_error(self):
        rec = Recorder()
        self.intercept(on_notice=rec.on_notice)
        o = self.run_request(self.closed_url())
        self.assertFailedWith(o)
        rec.finished(o.request, failed=True)
        [(method, params)] = rec.told(o.request)
        self.assertEqual(method, "didFailWithError")
        self.assertEqual(params["error"]["reason"], "connect")
        self.assertTrue(params["error"]["message"])

    def test_a_response_cut_after_its_head_is_told_did_fail_with_error(self):
        # The seed: didFailWithError comes for "an incomplete response" too.
        rec = Recorder()
        self.intercept(on_notice=rec.on_notice)
        o = self.run_request(self.upstream.url("/close-early/1000"))
        self.assertFailedWith(o)
        rec.finished(o.request, failed=True)
        methods = [m for m, _ in rec.told(o.request)]
        self.assertEqual(methods[0], "didReceiveResponse")
        self.assertEqual(methods[-1], "didFailWithError")
        self.assertNotIn("didFinishLoading", methods)
        [(_, params)] = rec.told(o.request, "didFailWithError")
        self.assertEqual(params["error"]["reason"], "reset")
        self.assertEqual(params["error"]["message"], o.text)

    def test_a_coded_body_cut_short_is_told_did_fail_with_error(self):
        rec = Recorder()
        self.intercept(on_notice=rec.on_notice, events=["didReceiveResponse", "didFailWithError", "didFinishLoading"])
        o = self.run_request(self.upstream.url("/gzip/10240?seed=7&truncate=200"))
        self.assertFailedWith(o, "Truncated gzip body")
        rec.finished(o.request, failed=True)
        self.assertEqual([m for m, _ in rec.told(o.request)], ["didReceiveResponse", "didFailWithError"])
        [(_, params)] = rec.told(o.request, "didFailWithError")
        self.assertEqual((params["error"]["reason"], params["error"]["message"]),
                         ("io", "Truncated gzip body: the response ended before its gzip stream did"))

    def test_an_interceptor_that_takes_should_continue_is_not_told_did_fail(self):
        rec = Recorder(lambda m, p: m == "willSendRequest")  # never retry
        self.intercept(should_continue=rec.should_continue, on_notice=rec.on_notice)
        url = self.closed_url()
        o = self.run_request(url)
        self.assertFailedWith(o)
        self.assertNotEqual(o.text, "Cancelled by interceptor")
        [q] = rec.asked("shouldContinueAfterFailWithError", o.request)
        self.assertEqual((q["attempt"], q["error"]["reason"], q["method"], q["url"]), (1, "connect", "GET", url))
        self.barrier(rec)
        self.assertEqual(rec.told(o.request), [], "no didFailWithError")
        self.assertEqual(o.state["attempt"], 1)


class InterceptorRetries(InterceptCase):

    def test_retry_after_a_refused_connection_with_a_replacement_url(self):
        target = self.upstream.url("/echo?second=1")
        rec = Recorder(lambda m, p: {"url": target} if m == "shouldContinueAfterFailWithError" else True)
        self.intercept(will_send=rec.will_send, should_continue=rec.should_continue)
        url = self.closed_url()
        o = self.run_request(url)
        seen = self.echo(o)
        self.assertEqual((seen["path"], seen["query"]), ("/echo", "second=1"))
        [q] = rec.asked("shouldContinueAfterFailWithError", o.request)
        self.assertEqual((q["attempt"], q["error"]["reason"], q["url"]), (1, "connect", url))
        self.assertEqual([p["attempt"] for p in rec.asked("willSendRequest", o.request)], [1, 2])
        self.assertEqual([s["attempt"] for s in o.states if s["stateName"] == "SENT"], [1, 2])
        self.assertEqual(o.state["attempt"], 2)

    def test_retry_unchanged_after_a_reset(self):
        rec = Recorder()
        self.intercept(should_continue=rec.should_continue)
        key = new_key("reset")
        o = self.run_request(self.origin.url("/reset-once/%s" % key))
        self.assertEqual((o.status, o.body), (200, b"ok"))
        [q] = rec.asked("shouldContinueAfterFailWithError", o.request)
        self.assertEqual((q["attempt"], q["error"]["reason"]), (1, "reset"))
        self.assertEqual(len(self.origin.hits(key)), 2)
        self.assertEqual(o.state["attempt"], 2)

    def test_a_response_cut_after_its_head_is_asked_about_and_retried_from_sent(self):
        target = self.upstream.url("/bytes/5")
        rec = Recorder(lambda m, p: {"url": target} if m == "shouldContinueAfterFailWithError" else True)
        self.intercept(should_continue=rec.should_continue)
        url = self.upstream.url("/close-early/1000")
        o = self.run_request(url)
        self.assertEqual((o.status, o.body), (200, pattern.pattern_bytes(5)))
        [q] = rec.asked("shouldContinueAfterFailWithError", o.request)
        self.assertEqual((q["attempt"], q["error"]["reason"], q["url"]), (1, "reset", url))
        self.assertEqual([(s["stateName"], s.get("attempt")) for s in o.states if s["stateName"] == "SENT"],
                         [("SENT", 1), ("SENT", 2)])
        self.assertEqual([s["stateName"] for s in o.states],
                         ["OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "SENT", "HEADERS_RECEIVED", "LOADING",
                          "DONE"])
        self.assertEqual(o.state["attempt"], 2)

    def test_a_response_cut_after_its_head_and_not_retried_fails(self):
        rec = Recorder(lambda m, p: False)
        self.intercept(should_continue=rec.should_continue, on_notice=rec.on_notice)
        o = self.run_request(self.upstream.url("/close-early/1000"))
        self.assertFailedWith(o)
        [q] = rec.asked("shouldContinueAfterFailWithError", o.request)
        self.assertEqual((q["attempt"], q["error"]["reason"]), (1, "reset"))
        self.barrier(rec)
        told = [m for m, _ in rec.told(o.request)]
        self.assertEqual(told[0], "didReceiveResponse")
        self.assertNotIn("didFailWithError", told, "it took the question")
        self.assertNotIn("didFinishLoading", told)
        self.assertEqual(o.state["attempt"], 1)

    def test_at_most_ten_attempts(self):
        rec = Recorder()  # always retry
        self.intercept(should_continue=rec.should_continue)
        o = self.run_request(self.closed_url())
        self.assertFailedWith(o)
        self.assertEqual(o.state["attempt"], 10)
        attempts = [p["attempt"] for p in rec.asked("shouldContinueAfterFailWithError", o.request)]
        self.assertIn(attempts, (list(range(1, 10)), list(range(1, 11))))
        self.assertEqual([s["attempt"] for s in o.states if s["stateName"] == "SENT"], list(range(1, 11)))

    def test_the_interceptors_answer_decides_over_a_retry_policy(self):
        rec = Recorder(lambda m, p: False)  # never retry
        self.intercept(should_continue=rec.should_continue)
        o = self.run_request(self.closed_url(), retry={"maxAttempts": 5, "initialDelay": 0.01})
        self.assertFailedWith(o)
        self.assertEqual(o.state["attempt"], 1)
        self.assertEqual(len(rec.asked("shouldContinueAfterFailWithError", o.request)), 1)

    def test_a_response_is_not_a_failure(self):
        rec = Recorder()
        self.intercept(should_continue=rec.should_continue)
        key = new_key("five")
        o = self.run_request(self.origin.url("/flaky/%s?fail=1" % key))
        self.assertEqual(o.status, 503)
        self.assertEqual(rec.asked(), [])
        self.assertEqual(len(self.origin.hits(key)), 1)


class RetryPolicy(InterceptCase):

    def test_503_twice_with_retry_after_then_200(self):
        rec = Recorder()  # notices only: the policy decides the retries
        self.intercept(on_notice=rec.on_notice)
        key = new_key("policy")
        url = self.origin.url("/flaky/%s?fail=2&retryAfter=1" % key)
        o = self.run_request(url, retry={"maxAttempts": 5, "initialDelay": 0.05})
        self.assertEqual((o.status, o.body), (200, b"success after 3 attempts"),
                         "only the final attempt's response is read")
        self.assertEqual([s["attempt"] for s in o.states if s["stateName"] == "SENT"], [1, 2, 3])
        self.assertEqual(o.states[-1]["attempt"], 3)
        self.assertEqual(o.state["attempt"], 3)
        self.assertEqual(len(self.origin.hits(key)), 3)
        self.assertGreaterEqual(o.seconds, 1.9, "each retry waited Retry-After: 1")
        self.assertLess(o.seconds, 15)
        self.assertEqual(self.app.call("getResponseHeader", {"request": o.request, "header": "Retry-After"}), "",
                         "the 503s' headers were discarded")
        rec.finished(o.request)
        told = rec.told(o.request)
        self.assertEqual([p["status"] for m, p in told if m == "didReceiveResponse"], [200],
                         "one didReceiveResponse: the kept response's")
        data = b"".join(base64.b64decode(p["dataBase64"]) for m, p in told if m == "didReceiveData")
        self.assertEqual(data, b"success after 3 attempts")

    def test_retry_after_as_a_date_and_capped_by_max_delay(self):
        key = new_key("date")
        o = self.run_request(self.origin.url("/flaky/%s?fail=1&retryAfterDate=2" % key),
                             retry={"maxAttempts": 2, "initialDelay": 0.01})
        self.assertEqual(o.status, 200)
        # The date has whole seconds: 2 s ahead waits between 1 and 2 s.
        self.assertGreaterEqual(o.seconds, 0.9, "Retry-After as an HTTP date was waited for")
        key = new_key("capped")
        o = self.run_request(self.origin.url("/flaky/%s?fail=1&retryAfter=120" % key),
                             retry={"maxAttempts": 2, "initialDelay": 0.01, "maxDelay": 0.2})
        self.assertEqual(o.status, 200)
        self.assertLess(o.seconds, 10, "maxDelay caps Retry-After")
        self.assertEqual(len(self.origin.hits(key)), 2)

    def test_max_attempts_ends_with_the_last_response(self):
        key = new_key("exhaust")
        o = self.run_request(self.origin.url("/flaky/%s?fail=5" % key), retry={"maxAttempts": 2, "initialDelay": 0.01})
        self.assertEqual((o.status, o.body), (503, b"failure 2"))
        self.assertEqual(o.state["attempt"], 2)
        self.assertEqual(len(self.origin.hits(key)), 2)

    def test_a_post_is_not_retried_unless_retry_on_says_unsafe(self):
        key = new_key("post")
        o = self.run_request(self.origin.url("/flaky/%s?fail=2" % key), method="POST", body="payload",
                             retry={"maxAttempts": 3, "initialDelay": 0.01})
        self.assertEqual((o.status, o.body), (503, b"failure 1"))
        self.assertEqual(o.state["attempt"], 1)
        self.assertEqual(len(self.origin.hits(key)), 1)

        key = new_key("post")
        o = self.run_request(self.origin.url("/flaky/%s?fail=2" % key), method="POST", body="payload",
                             retry={"maxAttempts": 3, "initialDelay": 0.01, "retryOn": ["5xx", "unsafe"]})
        self.assertEqual((o.status, o.body), (200, b"success after 3 attempts"))
        self.assertEqual(o.state["attempt"], 3)
        self.assertEqual([(m, b) for m, _, b in self.origin.hits(key)], [("POST", b"payload")] * 3,
                         "each attempt sent the body again")

    def test_retry_on_limits_what_is_retried(self):
        key = new_key("only429")
        o = self.run_request(self.origin.url("/flaky/%s?fail=1" % key),
                             retry={"maxAttempts": 3, "initialDelay": 0.01, "retryOn": ["429"]})
        self.assertEqual(o.status, 503)
        self.assertEqual(len(self.origin.hits(key)), 1)
        key = new_key("is429")
        o = self.run_request(self.origin.url("/flaky/%s?fail=1&status=429" % key),
                             retry={"maxAttempts": 3, "initialDelay": 0.01, "retryOn": ["429"]})
        self.assertEqual(o.status, 200)
        self.assertEqual(len(self.origin.hits(key)), 2)

    def test_a_refused_connection_is_retried_on_connect(self):
        o = self.run_request(self.closed_url(), retry={"maxAttempts": 3, "initialDelay": 0.01})
        self.assertFailedWith(o)
        self.assertEqual(o.state["attempt"], 3)
        self.assertEqual([s["attempt"] for s in o.states if s["stateName"] == "SENT"], [1, 2, 3])

    def test_fetch_with_retry(self):
        key = new_key("fetch")
        r = self.app.fetch(self.origin.url("/flaky/%s?fail=2" % key), timeout=WAIT,
                           retry={"maxAttempts": 3, "initialDelay": 0.01})
        self.assertEqual((r["status"], r["body"]), (200, "success after 3 attempts"))
        self.assertEqual(len(self.origin.hits(key)), 3)
        key = new_key("fetch")
        r = self.app.fetch(self.origin.url("/flaky/%s?fail=2" % key), timeout=WAIT)
        self.assertEqual((r["status"], r["body"]), (503, "failure 1"), "no retry without the option")

    def test_bad_policies_are_refused(self):
        c = self.app
        r = c.call("create")["request"]
        for policy in ({"maxAttempts": 0}, {"maxAttempts": 11}, {}, {"maxAttempts": 2, "retryOn": ["sometimes"]},
                       {"maxAttempts": 2, "initialDelay": -1}):
            with self.assertRaises(RPCError, msg=policy) as cm:
                c.call("setRetryPolicy", dict(policy, request=r))
            self.assertEqual(cm.exception.code, -32602, policy)
        c.call("open", {"request": r, "method": "GET", "url": self.upstream.url("/bytes/1")})
        self.assertIs(c.call("setRetryPolicy", {"request": r, "maxAttempts": 2}), True)
        c.call("send", {"request": r})
        self.states_until_done(c, r)
        with self.assertRaises(RPCError) as cm:
            c.call("setRetryPolicy", {"request": r, "maxAttempts": 2})
        self.assertEqual(cm.exception.reason, "invalid_state")
        with self.assertRaises(RPCError) as cm:
            self.bob().call("setRetryPolicy", {"request": r, "maxAttempts": 2})
        self.assertEqual(cm.exception.reason, "unknown_handle")


class AsyncInterception(InterceptCase):

    def test_async_callbacks_may_await_the_same_client(self):
        async def main():
            c = await AsyncClient.connect_tcp("127.0.0.1", self.server.tcp_port, ALICE["token"])
            try:
                told = []
                finished = asyncio.Event()

                async def will_send(params):
                    info = await c.call("server.info")  # a call from inside the callback
                    return {"headers": {"X-Async": str(info["name"])}}

                async def on_notice(method, params):
                    told.append(method)
                    if method == "didFinishLoading":
                        finished.set()

                icp = await c.intercept(will_send, on_notice=on_notice)
                self.assertRegex(icp.id, r"^icp_[0-9a-f]{32}$")
                loop = asyncio.get_running_loop()
                o = await loop.run_in_executor(None, self.run_request, self.upstream.url("/echo"))
                await asyncio.wait_for(finished.wait(), WAIT)
                r = await c.fetch(self.upstream.url("/echo"), timeout=WAIT)  # its own connection's fetch
                await icp.unregister()
                self.assertFalse(icp.active)
                self.assertEqual(icp.errors, [])
                return o, told, r
            finally:
                await c.close()

        o, told, r = asyncio.run(main())
        self.assertEqual(self.echo(o)["headers"].get("x-async"), "xhrpcd")
        self.assertEqual(json.loads(r["body"])["headers"].get("x-async"), "xhrpcd")
        self.assertEqual(told[0], "didReceiveResponse")
        self.assertIn("didFinishLoading", told)


# --------------------------------------------------------------------------
# The client's part, against a scripted peer (no server).

def msg_line(*msgs):
    return b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in msgs)


class ClientSide(unittest.TestCase):
    # The peer is a fake on a socket pair that says what each test needs, not xhrpcd.
    CONTRACT_EXEMPT = "fake peer"

    def setUp(self):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.client = Client(a)
        self.peer = Peer(b)
        self.addCleanup(b.close)
        self.addCleanup(self.client.close)

    def register(self, question_too=None, **kw):
        """``client.intercept(**kw)`` answered by the peer; ``question_too`` is written in
        the same write as the answer (it must still be answered)."""
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("icp", self.client.intercept(**kw)))
        t.start()
        req = self.peer.read_line()
        self.assertEqual(req["method"], "intercept.register")
        msgs = [{"jsonrpc": "2.0", "id": req["id"], "result": {"interceptor": "icp_" + "1" * 32}}]
        if question_too is not None:
            msgs.append(question_too)
        self.peer.write(msg_line(*msgs))
        t.join(5)
        self.assertIn("icp", out)
        return req, out["icp"]

    def question(self, rid, method="willSendRequest", **params):
        return {"jsonrpc": "2.0", "id": rid, "method": method,
                "params": dict({"request": "r1", "attempt": 1, "method": "GET", "url": "http://x/"}, **params)}

    def test_register_params_follow_the_callbacks(self):
        req, icp = self.register(will_send=lambda p: True, timeout=0.5, match=["127.0.0.1"])
        self.assertEqual(req["params"], {"events": ["willSendRequest"], "timeout": 0.5, "match": ["127.0.0.1"]})
        self.assertEqual(icp.id, "icp_" + "1" * 32)
        self.assertIs(self.client.interceptor, icp)

    def test_a_question_in_the_same_write_as_the_register_answer_is_answered(self):
        _, icp = self.register(self.question("srv-1"), will_send=lambda p: {"url": "http://y/"})
        self.assertEqual(self.peer.read_line(), {"jsonrpc": "2.0", "id": "srv-1", "result": {"url": "http://y/"}})

    def test_answers_true_false_object_error_and_no_callback(self):
        def will_send(p):
            return {"u1": True, "u2": False, "u3": {"headers": {"A": "b"}}}.get(p["url"]) if p["url"] != "boom" \
                else 1 / 0

        _, icp = self.register(will_send=will_send)
        for rid, url in (("srv-1", "u1"), ("srv-2", "u2"), ("srv-3", "u3")):
            self.peer.send(self.question(rid, url=url))
            answer = self.peer.read_line()
            self.assertEqual(answer["id"], rid)
            self.assertEqual(answer["result"], will_send({"url": url}))
        self.peer.send(self.question("srv-4", url="boom"))
        answer = self.peer.read_line()
        self.assertEqual((answer["id"], answer["error"]["code"]), ("srv-4", -32000))
        self.assertIn("ZeroDivisionError", answer["error"]["message"])
        self.peer.send(self.question("srv-5", url="unknown"))  # None: not an answer
        self.assertEqual(self.peer.read_line()["error"]["code"], -32000)
        self.peer.send(self.question("srv-6", "shouldContinueAfterFailWithError"))
        self.assertEqual(self.peer.read_line()["error"],
                         {"code": -32601, "message": "Method not found",
                          "data": {"method": "shouldContinueAfterFailWithError"}})
        self.assertEqual([type(e) for e in icp.errors], [ZeroDivisionError, TypeError])
        self.assertEqual(self.client.pending(), [])

    def test_questions_are_answered_while_a_call_waits_and_a_slow_one_holds_no_other(self):
        release = threading.Event()
        self.addCleanup(release.set)

        def will_send(p):
            if p["url"] == "slow":
                release.wait(5)
            return True

        self.register(will_send=will_send)
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", self.client.call("fetch", {"url": "u"})))
        t.start()
        req = self.peer.read_line()
        self.peer.send(self.question("srv-1", url="slow"), self.question("srv-2", url="fast"))
        self.assertEqual(self.peer.read_line(), {"jsonrpc": "2.0", "id": "srv-2", "result": True})
        release.set()
        self.assertEqual(self.peer.read_line(), {"jsonrpc": "2.0", "id": "srv-1", "result": True})
        self.peer.send({"jsonrpc": "2.0", "id": req["id"], "result": {"status": 200}})
        t.join(5)
        self.assertEqual(out["r"], {"status": 200})

    def test_notices_go_to_on_notice_in_order_others_stay(self):
        told = []
        _, icp = self.register(on_notice=lambda m, p: told.append((m, p["n"])))
        notices = [{"jsonrpc": "2.0", "method": m, "params": {"request": "r", "n": i}}
                   for i, m in enumerate(["didReceiveResponse", "didReceiveData", "didReceiveData",
                                          "onStateChange", "didFinishLoading"])]
        self.peer.send(*notices)
        self.assertEqual(self.client.wait_notification(timeout=5)["method"], "onStateChange")
        self.assertTrue(icp.wait_notices(5))
        self.assertEqual(told, [("didReceiveResponse", 0), ("didReceiveData", 1), ("didReceiveData", 2),
                                ("didFinishLoading", 4)])

    def test_unregister_and_close(self):
        _, icp = self.register(will_send=lambda p: True)
        t = threading.Thread(target=icp.unregister)
        t.start()
        req = self.peer.read_line()
        self.assertEqual(req["params"], {"interceptor": icp.id})
        self.peer.send({"jsonrpc": "2.0", "id": req["id"], "result": True})
        t.join(5)
        self.assertFalse(icp.active)
        self.assertIsNone(self.client.interceptor)
        # A question now is nobody's: it waits in the inbox, unanswered.
        self.peer.send(self.question("srv-9"))
        self.assertEqual(self.client.wait_notification(timeout=5)["id"], "srv-9")
        # A new one ends with the connection.
        _, icp = self.register(will_send=lambda p: True)
        self.peer.sock.close()
        self.assertTrue(self.client.wait_closed(5))
        self.assertFalse(icp.active)

    def test_register_refused_leaves_no_interceptor(self):
        out = {}

        def call():
            try:
                self.client.intercept(will_send=lambda p: True)
            except RPCError as e:
                out["e"] = e

        t = threading.Thread(target=call)
        t.start()
        req = self.peer.read_line()
        self.peer.send({"jsonrpc": "2.0", "id": req["id"],
                        "error": {"code": -32011, "message": "busy", "data": {"reason": "busy"}}},
                       self.question("srv-1"))
        t.join(5)
        self.assertEqual(out["e"].reason, "busy")
        self.assertIsNone(self.client.interceptor)
        self.assertEqual(self.client.wait_notification(timeout=5)["id"], "srv-1")

    def test_async_client_answers_and_routes(self):
        async def main():
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            peer = Peer(b)
            reader, writer = await asyncio.open_unix_connection(sock=a)
            c = AsyncClient(reader, writer)
            loop = asyncio.get_running_loop()
            told = []

            async def will_send(p):
                await asyncio.sleep(0)
                return p["url"] == "yes"

            def answer_register():
                req = peer.read_line()
                peer.write(msg_line({"jsonrpc": "2.0", "id": req["id"], "result": {"interceptor": "icp_x"}},
                                    self.question("srv-1", url="yes"),
                                    {"jsonrpc": "2.0", "method": "didFinishLoading", "params": {"request": "r"}},
                                    {"jsonrpc": "2.0", "method": "onStateChange", "params": {"request": "r"}}))
                return req, peer.read_line()

            fut = loop.run_in_executor(None, answer_register)
            icp = await c.intercept(will_send, on_notice=lambda m, p: told.append(m))
            req, answer = await fut
            other = await c.wait_notification(timeout=5)
            self.assertTrue(await icp.wait_notices(timeout=5))
            await c.close()
            b.close()
            return req, answer, other, told, icp

        req, answer, other, told, icp = asyncio.run(main())
        self.assertEqual(req["params"]["events"], ["willSendRequest", "didReceiveResponse", "didReceiveData",
                                                   "didFailWithError", "didFinishLoading"])
        self.assertEqual(answer, {"jsonrpc": "2.0", "id": "srv-1", "result": True})
        self.assertEqual(other["method"], "onStateChange")
        self.assertEqual(told, ["didFinishLoading"])
        self.assertFalse(icp.active)


if __name__ == "__main__":
    unittest.main()
