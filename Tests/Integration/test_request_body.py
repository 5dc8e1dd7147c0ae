"""The body a request sends, byte for byte, as the origin received it: form fields
(``setPostValue``, ``clearPostValues``) and a base64 body (``sendData``).

The origin is Tests/Fixtures/recording_origin.py, which parses each request itself and
records its method, header lines and body bytes; ``since(mark)`` gives the requests
made after a mark once the origin has parsed everything sent. Form fields are encoded
as application/x-www-form-urlencoded is in the WHATWG URL standard (what browsers
send): ASCII letters, digits and ``*-._`` as they are, space as ``+``, every other byte
of the UTF-8 as ``%XX`` in upper case, pairs joined with ``&`` in the order set.
"""

import base64
import os

from support import ServerTestCase, pattern
from recording_origin import RecordingOrigin  # Tests/Fixtures, on sys.path through support

FORM = "application/x-www-form-urlencoded"
DONE_200 = {"state": 5, "stateName": "DONE", "status": 200, "statusText": "OK"}


class BodyCase(ServerTestCase):
    """The server, and one recording origin for the class."""

    @classmethod
    def setUpClass(cls):
        cls.origin = RecordingOrigin().start()  # first, so that its cleanup runs if the server fails
        cls.addClassCleanup(cls.origin.close)
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.c = self.connect()

    def opened(self, method="POST", path="/form"):
        """A new request, opened synchronously on the origin; returns its handle."""
        r = self.c.call("create")["request"]
        self.c.call("open", {"request": r, "method": method, "url": self.origin.url(path),
                             "async": False, "subscribe": False})
        return r

    def sent(self, send, params):
        """Calls ``send`` (send or sendData, async false: answered at DONE) and returns the
        one request the origin parsed for it."""
        mark = self.origin.mark()
        self.assertEqual(self.c.call(send, params, timeout=30), DONE_200)
        (record,) = self.origin.since(mark)
        self.assertIsNone(record.error, record)
        return record

    def assertForm(self, record, body, method="POST"):
        self.assertEqual((record.method, record.body), (method, body))
        self.assertEqual(record.values("Content-Type"), [FORM])
        self.assertEqual(record.values("Content-Length"), [str(len(body))])


class PostValues(BodyCase):

    def test_fields_are_encoded_byte_exact_in_the_order_set(self):
        r = self.opened()
        for key, value in (("a b", "c d"), ("amp&", "x&y"), ("eq=", "1=2"), ("plus+", "50%"),
                           ("ünï", "çödé ✓"), ("safe*-._", "~!'()"), ("empty", "")):
            self.assertIs(self.c.call("setPostValue", {"request": r, "key": key, "value": value}), True)
        record = self.sent("send", {"request": r})
        self.assertForm(record, b"a+b=c+d&amp%26=x%26y&eq%3D=1%3D2&plus%2B=50%25"
                                b"&%C3%BCn%C3%AF=%C3%A7%C3%B6d%C3%A9+%E2%9C%93"
                                b"&safe*-._=%7E%21%27%28%29&empty=")

    def test_a_key_set_twice_is_sent_twice(self):
        r = self.opened()
        for value in ("1", "2"):
            self.c.call("setPostValue", {"request": r, "key": "k", "value": value})
        self.assertForm(self.sent("send", {"request": r}), b"k=1&k=2")

    def test_fields_make_a_get_a_post(self):
        r = self.opened(method="GET")
        self.c.call("setPostValue", {"request": r, "key": "q", "value": "1"})
        self.assertForm(self.sent("send", {"request": r}), b"q=1", method="POST")

    def test_open_clears_the_fields(self):
        # As api/openrpc.json says of open: it clears the form values, whether set in
        # UNSENT or in OPENED before a re-open.
        r = self.c.call("create")["request"]
        self.assertIs(self.c.call("setPostValue", {"request": r, "key": "early", "value": "yes"}), True)
        self.c.call("open", {"request": r, "method": "POST", "url": self.origin.url("/form"),
                             "async": False, "subscribe": False})
        self.c.call("setPostValue", {"request": r, "key": "before-reopen", "value": "1"})
        self.c.call("open", {"request": r, "method": "POST", "url": self.origin.url("/form"),
                             "async": False, "subscribe": False})
        self.c.call("setPostValue", {"request": r, "key": "late", "value": "2"})
        self.assertForm(self.sent("send", {"request": r}), b"late=2")

    def test_clear_post_values_sends_no_form_at_all(self):
        r = self.opened(method="GET")
        self.c.call("setPostValue", {"request": r, "key": "a", "value": "1"})
        self.c.call("setPostValue", {"request": r, "key": "b", "value": "2"})
        self.assertIs(self.c.call("clearPostValues", {"request": r}), True)
        record = self.sent("send", {"request": r})
        # Nothing is left of the fields: no body, no form Content-Type, and the GET
        # they would have made a POST stays a GET.
        self.assertEqual((record.method, record.body, record.framing), ("GET", b"", "none"))
        self.assertEqual(record.values("Content-Type"), [])
        self.assertEqual(record.values("Content-Length"), [])

    def test_fields_set_after_clear_are_the_only_ones_sent(self):
        r = self.opened()
        self.c.call("setPostValue", {"request": r, "key": "old", "value": "1"})
        self.c.call("clearPostValues", {"request": r})
        self.c.call("setPostValue", {"request": r, "key": "new", "value": "2"})
        self.assertForm(self.sent("send", {"request": r}), b"new=2")

    def test_clear_post_values_states(self):
        # UNSENT and OPENED take it; after the send it is refused.
        r = self.c.call("create")["request"]
        self.assertIs(self.c.call("clearPostValues", {"request": r}), True)
        self.c.call("open", {"request": r, "method": "POST", "url": self.origin.url("/form"),
                             "async": False, "subscribe": False})
        self.c.call("setPostValue", {"request": r, "key": "a", "value": "1"})
        self.assertForm(self.sent("send", {"request": r}), b"a=1")
        # DONE: too late to change what was sent.
        got = self.c.request("clearPostValues", {"request": r})
        self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32002, "invalid_state"))
        got = self.c.request("clearPostValues", {"request": "no-such-request"})
        self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32001, "unknown_handle"))


class SendData(BodyCase):

    def test_every_byte_value_arrives_exact(self):
        body = bytes(range(256)) * 3 + pattern.pattern_bytes(200_003, 4) + bytes(range(255, -1, -1))
        r = self.opened(method="PUT", path="/upload")
        record = self.sent("sendData", {"request": r, "data": base64.b64encode(body).decode()})
        self.assertEqual((record.method, record.framing, record.values("Content-Length")),
                         ("PUT", "length", [str(len(body))]))
        self.assertEqual(record.body, body)

    def test_data_beside_form_fields_is_refused(self):
        # Form fields and a body given to the send: invalid_params, nothing sent (issue
        # 15; the fields were once dropped in silence). After clearPostValues the data goes.
        r = self.opened()
        self.c.call("setPostValue", {"request": r, "key": "dropped", "value": "1"})
        body = os.urandom(1000)
        mark = self.origin.mark()
        got = self.c.request("sendData", {"request": r, "data": base64.b64encode(body).decode()})
        self.assertEqual(got["error"]["code"], -32602, got)
        self.assertEqual(self.origin.since(mark), [])
        self.c.call("clearPostValues", {"request": r})
        record = self.sent("sendData", {"request": r, "data": base64.b64encode(body).decode()})
        self.assertEqual((record.method, record.body), ("POST", body))
        self.assertNotIn(FORM, record.values("Content-Type"))

    def test_empty_data_is_an_empty_body(self):
        r = self.opened()
        record = self.sent("sendData", {"request": r, "data": ""})
        self.assertEqual((record.method, record.body, record.values("Content-Length")), ("POST", b"", ["0"]))

    def test_padded_base64_is_read_exactly(self):
        # Strict base64 (issue 41): every padding that is right decodes, the rest is refused
        # in test_refusals (`eA===` was accepted while `eA` was not).
        for text, body in (("eA==", b"x"), ("eHk=", b"xy"), ("eHl6", b"xyz"), ("eHl6eA==", b"xyzx")):
            r = self.opened(method="PUT", path="/upload")
            record = self.sent("sendData", {"request": r, "data": text})
            self.assertEqual(record.body, body, text)

    def test_async_send_data_answers_at_once_and_notifies(self):
        r = self.c.call("create")["request"]
        self.c.call("open", {"request": r, "method": "POST", "url": self.origin.url("/async")})
        mark = self.origin.mark()
        self.assertIs(self.c.call("sendData", {"request": r, "data": base64.b64encode(b"hello").decode()}), True)
        done = self.c.wait_notification(lambda m: m["params"].get("state") == 5, timeout=30)
        self.assertEqual((done["params"]["status"], done["params"]["statusText"]), (200, "OK"))
        (record,) = self.origin.since(mark)
        self.assertEqual(record.body, b"hello")

    def test_refusals(self):
        r = self.c.call("create")["request"]
        data = base64.b64encode(b"x").decode()
        # UNSENT: not opened yet.
        got = self.c.request("sendData", {"request": r, "data": data})
        self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32002, "invalid_state"))
        self.c.call("open", {"request": r, "method": "POST", "url": self.origin.url("/x"),
                             "async": False, "subscribe": False})
        mark = self.origin.mark()
        for bad in ("not base64!", "QQ", "QQ=", "Q===", "eA===", "eA", "eA=", "=eA=", "e===", "eA==eA==", "eA\n=="):
            got = self.c.request("sendData", {"request": r, "data": bad})
            self.assertEqual(got["error"]["code"], -32602, bad)
        self.assertEqual(self.c.request("sendData", {"request": r})["error"]["code"], -32602)
        # Nothing was sent, and the request is still OPENED.
        self.assertEqual(self.origin.since(mark), [])
        self.assertEqual(self.c.call("getState", {"request": r}), {"state": 1, "stateName": "OPENED", "attempt": 0})


class NoBodyForGetOrHead(BodyCase):
    """XHR's send() drops the body of a GET or HEAD ("If this's request method is GET or
    HEAD, then set body to null"): nothing and no Content-Length goes on the wire, even
    for an empty body (which put `Content-Length: 0` there, issue 41)."""

    def test_get_and_head_send_no_body_and_no_content_length(self):
        for method in ("GET", "HEAD"):
            for send, params in (("send", {"body": ""}), ("send", {"body": "dropped"}),
                                 ("send", {"bodyBase64": "eA=="}), ("sendData", {"data": "eA=="}),
                                 ("sendData", {"data": ""})):
                r = self.opened(method=method, path="/get")
                record = self.sent(send, dict(params, request=r))
                self.assertEqual((record.method, record.body, record.values("Content-Length"),
                                  record.values("Transfer-Encoding"), record.values("Content-Type")),
                                 (method, b"", [], [], []), (method, send, params))

    def test_fetch_drops_them_too(self):
        for method, params in (("GET", {"body": ""}), ("HEAD", {"bodyBase64": "eA=="}), ("GET", {"body": "x"})):
            mark = self.origin.mark()
            got = self.c.call("fetch", dict(params, method=method, url=self.origin.url("/fetch")), timeout=30)
            self.assertEqual(got["status"], 200)
            (record,) = self.origin.since(mark)
            self.assertEqual((record.method, record.body, record.values("Content-Length")), (method, b"", []),
                             (method, params))

    def test_other_methods_keep_an_empty_body(self):
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            r = self.opened(method=method, path="/x")
            record = self.sent("send", {"request": r, "body": ""})
            self.assertEqual((record.method, record.body, record.values("Content-Length")), (method, b"", ["0"]), method)
