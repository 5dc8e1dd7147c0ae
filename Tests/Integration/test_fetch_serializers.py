"""fetch complete (issue 15, items 1 and 2): baseURL and query, the body serializers
(json, form, multipart) of fetch and of the request object, byte-checked at a real
origin, multipart file parts confined to --upload-root, responseType json, credentials
and the per-request options, and the fetch's own handle in its notifications.

Origins: Tests/Fixtures/recording_origin.py (records every request byte for byte) and
the fixture upstream (``/basic-auth``, ``/redirect``, ``/cookies``, ``/drip``, ``/hang``).
Multipart bodies are parsed with the standard library's ``email`` parser (RFC 2046),
not with anything written here, and also compared byte for byte.
"""

import base64
import email.parser
import email.policy
import json
import os
import shutil
import tempfile
import asyncio
import threading

from support import ServerTestCase
from recording_origin import RecordingOrigin  # Tests/Fixtures, on sys.path through support
from test_requests import _server_args

from xhrpc import RPCError
from xhrpc.aio import AsyncClient

INVALID_PARAMS = -32602


def parse_multipart(content_type, body):
    """The parts of a multipart/form-data body, by the standard library's MIME parser."""
    raw = b"Content-Type: " + content_type.encode() + b"\r\nMIME-Version: 1.0\r\n\r\n" + body
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
    assert msg.is_multipart(), content_type
    return [(p.get_param("name", header="content-disposition"), p.get_filename(), p.get_content_type(),
             p.get("Content-Type"), p.get_payload(decode=True)) for p in msg.iter_parts()]


class FetchCase(ServerTestCase):
    """The server (loopback allowed, an upload root), a recording origin and the upstream."""

    UPSTREAM = True

    @classmethod
    def setUpClass(cls):
        base = tempfile.mkdtemp(prefix="xhrpc-py-fetchser-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, base, True)
        cls.base = base
        cls.root = os.path.join(base, "root")
        os.makedirs(os.path.join(cls.root, "sub"))
        with open(os.path.join(cls.root, "sub", "photo.bin"), "wb") as f:
            f.write(bytes(range(256)) * 3)
        with open(os.path.join(base, "outside.txt"), "wb") as f:
            f.write(b"secret outside the root\n")
        # A FIFO outside the root: opening it for reading would block until a writer
        # comes, so a path that reached it would hang the call instead of answering.
        os.mkfifo(os.path.join(base, "outside.fifo"))
        os.symlink(os.path.join(base, "outside.txt"), os.path.join(cls.root, "link-out"))
        os.symlink(os.path.join(base, "outside.fifo"), os.path.join(cls.root, "fifo-out"))
        os.symlink(base, os.path.join(cls.root, "dir-out"))
        cls.origin = RecordingOrigin().start()
        cls.addClassCleanup(cls.origin.close)
        cls.SERVER_ARGS = _server_args() + ("--upload-root", cls.root)
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.c = self.connect()

    def fetch(self, url, **kw):
        """Client.fetch, bounded: the server gives up after 30 s, this wait a little later."""
        kw.setdefault("timeout", 30)
        return self.c.fetch(url, **kw)

    def recorded(self, params):
        """fetch ``params`` at the recording origin; returns (result, the one record)."""
        mark = self.origin.mark()
        got = self.c.call("fetch", params, timeout=30)
        (record,) = self.origin.since(mark)
        self.assertIsNone(record.error, record)
        return got, record

    def refused(self, method, params, code=INVALID_PARAMS):
        got = self.c.request(method, params)
        self.assertIn("error", got, params)
        self.assertEqual(got["error"]["code"], code, got)
        return got["error"]


class BaseURLAndQuery(FetchCase):

    def test_base_url_resolution_table(self):
        origin = self.origin.url("/")[:-1]  # http://127.0.0.1:PORT
        host = origin.split("//", 1)[1]
        base = origin + "/a/b/c?x=1"
        table = [
            ("d", "/a/b/d"), ("./d", "/a/b/d"), ("../d", "/a/d"), ("../../d", "/d"), ("../../../d", "/d"),
            ("/d/./e/../f", "/d/f"), ("?q=2", "/a/b/c?q=2"), ("", "/a/b/c?x=1"), (".", "/a/b/"),
            ("..", "/a/"), ("d?y=%20#frag", "/a/b/d?y=%20"), ("//" + host + "/p/../q?z", "/q?z"),
            (origin + "/abs/./x", "/abs/x"),
        ]
        for ref, target in table:
            got, record = self.recorded({"url": ref, "baseURL": base, "responseType": "json"})
            self.assertEqual(got["status"], 200, ref)
            self.assertEqual(record.target, target, ref)
        # An absolute url ignores the base, whatever it is.
        got, record = self.recorded({"url": self.origin.url("/only"), "baseURL": "http://base.invalid/x/"})
        self.assertEqual(record.target, "/only")

    def test_a_relative_url_needs_an_http_base(self):
        for params in ({"url": "/x"}, {"url": "/x", "baseURL": "ftp://h/"}, {"url": "/x", "baseURL": "/rel"},
                       {"url": "//", "baseURL": self.origin.url("/")}):
            self.refused("fetch", params)

    def test_query_encoding_reserved_utf8_and_repeats_in_order(self):
        query = {"a b": "c&d=e", "plus+": "1+1", "ü": ["一", "ç", "é"], "n": 3, "f": 1.5, "t": True,
                 "empty": "", "safe*-._": "~/?#%"}
        expected = ("a+b=c%26d%3De&plus%2B=1%2B1&%C3%BC=%E4%B8%80&%C3%BC=%C3%A7&%C3%BC=%C3%A9&n=3&f=1.5"
                    "&t=true&empty=&safe*-._=%7E%2F%3F%23%25")
        for url, target in ((self.origin.url("/q"), "/q?" + expected),
                            (self.origin.url("/q?x=1"), "/q?x=1&" + expected),
                            (self.origin.url("/q?"), "/q?" + expected),
                            (self.origin.url("/q?x=1&"), "/q?x=1&" + expected),
                            (self.origin.url("/q#frag"), "/q?" + expected)):
            got, record = self.recorded({"url": url, "query": query})
            self.assertEqual(record.target, target, url)
        # Through the Python client, with a base.
        mark = self.origin.mark()
        self.fetch("r?k=v", base_url=self.origin.url("/base/"), query={"k": ["w", "x y"]})
        (record,) = self.origin.since(mark)
        self.assertEqual(record.target, "/base/r?k=v&k=w&k=x+y")

    def test_bad_query_values_are_refused(self):
        for query in ({"a": None}, {"a": {"b": 1}}, {"a": [["x"]]}):
            self.refused("fetch", {"url": self.origin.url("/q"), "query": query})
        self.refused("fetch", {"url": self.origin.url("/q"), "query": ["a", "b"]})


class Serializers(FetchCase):

    def test_json_body_with_its_content_type(self):
        value = {"a": [1, 2.5, None, True], "ü": "✓\n\"q\""}
        got, record = self.recorded({"method": "POST", "url": self.origin.url("/j"), "json": value})
        self.assertEqual(got["status"], 200)
        self.assertEqual(record.method, "POST")
        self.assertEqual(record.values("Content-Type"), ["application/json"])
        self.assertEqual(json.loads(record.body), value)
        self.assertEqual(record.body, json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        # Any JSON value, null included; the caller's Content-Type wins; GET becomes POST.
        for v, body in ((None, b"null"), (7, b"7"), ("s", b'"s"'), ([], b"[]")):
            _, record = self.recorded({"url": self.origin.url("/j"), "json": v,
                                       "headers": {"Content-Type": "application/vnd.x+json"}})
            self.assertEqual((record.method, record.body, record.values("Content-Type")),
                             ("POST", body, ["application/vnd.x+json"]))
        # Through the client: json=None is null, not "no body".
        mark = self.origin.mark()
        self.fetch(self.origin.url("/j"), method="PUT", json=None)
        (record,) = self.origin.since(mark)
        self.assertEqual((record.method, record.body), ("PUT", b"null"))

    def test_form_body_byte_exact(self):
        got, record = self.recorded({"method": "POST", "url": self.origin.url("/f"),
                                     "form": {"a b": "c&d", "ü": "é=1", "e": ""}})
        self.assertEqual(record.values("Content-Type"), ["application/x-www-form-urlencoded"])
        self.assertEqual(record.body, b"a+b=c%26d&%C3%BC=%C3%A9%3D1&e=")

    def test_multipart_body_parsed_and_byte_checked(self):
        parts = [
            {"name": "field", "value": "héllo\r\nworld"},
            {"name": 'we"ird\r\nname', "value": "v"},
            {"name": "blob", "dataBase64": base64.b64encode(b"\x00\xffbin").decode(), "filename": "a\"b.bin"},
            {"name": "typed", "value": "{}", "contentType": "application/json"},
            {"name": "file", "path": "sub/photo.bin", "contentType": "image/x-test"},
            {"name": "file2", "path": "sub/photo.bin", "filename": "ünï.bin"},
        ]
        got, record = self.recorded({"url": self.origin.url("/m"), "multipart": parts})
        self.assertEqual(record.method, "POST")
        (ctype,) = record.values("Content-Type")
        self.assertTrue(ctype.startswith("multipart/form-data; boundary="), ctype)
        boundary = ctype.split("boundary=", 1)[1]
        photo = bytes(range(256)) * 3
        self.assertEqual(parse_multipart(ctype, record.body), [
            ("field", None, "text/plain", None, "héllo\r\nworld".encode()),
            ("we%22ird%0D%0Aname", None, "text/plain", None, b"v"),
            ("blob", "a%22b.bin", "application/octet-stream", "application/octet-stream", b"\x00\xffbin"),
            ("typed", None, "application/json", "application/json", b"{}"),
            ("file", "photo.bin", "image/x-test", "image/x-test", photo),
            ("file2", "ünï.bin", "application/octet-stream", "application/octet-stream", photo),
        ])
        d = b"--" + boundary.encode()
        expected = (d + b'\r\nContent-Disposition: form-data; name="field"\r\n\r\n' + "héllo\r\nworld".encode()
                    + b"\r\n" + d + b'\r\nContent-Disposition: form-data; name="we%22ird%0D%0Aname"\r\n\r\nv\r\n'
                    + d + b'\r\nContent-Disposition: form-data; name="blob"; filename="a%22b.bin"\r\n'
                    b"Content-Type: application/octet-stream\r\n\r\n\x00\xffbin\r\n"
                    + d + b'\r\nContent-Disposition: form-data; name="typed"\r\nContent-Type: application/json\r\n\r\n{}\r\n'
                    + d + b'\r\nContent-Disposition: form-data; name="file"; filename="photo.bin"\r\n'
                    b"Content-Type: image/x-test\r\n\r\n" + photo + b"\r\n"
                    + d + b'\r\nContent-Disposition: form-data; name="file2"; filename="' + "ünï.bin".encode()
                    + b'"\r\nContent-Type: application/octet-stream\r\n\r\n' + photo + b"\r\n" + d + b"--\r\n")
        self.assertEqual(record.body, expected)
        self.assertEqual(record.values("Content-Length"), [str(len(expected))])
        # The boundary is new each time and occurs in no part.
        _, again = self.recorded({"url": self.origin.url("/m"), "multipart": parts[:1]})
        self.assertNotEqual(again.values("Content-Type"), [ctype])

    def test_a_large_file_part_streams_byte_exact_and_a_307_sends_it_again(self):
        big = os.path.join(self.root, "big.bin")
        data = os.urandom(5 * 1024 * 1024 + 3)
        with open(big, "wb") as f:
            f.write(data)
        self.addCleanup(os.unlink, big)
        self.origin.script("/again", status=307, reason="Temporary Redirect", headers=["Location: /landed"])
        mark = self.origin.mark()
        got = self.c.call("fetch", {"url": self.origin.url("/again"), "request": "big",
                                    "multipart": [{"name": "a", "value": "1"}, {"name": "big", "path": "big.bin"},
                                                  {"name": "z", "value": "2"}]}, timeout=60)
        self.assertEqual((got["request"], got["status"]), ("big", 200))
        first, second = self.origin.since(mark)
        self.assertEqual((first.path, second.path, second.method), ("/again", "/landed", "POST"))
        self.assertEqual(first.body, second.body)
        (ctype,) = second.values("Content-Type")
        self.assertEqual(parse_multipart(ctype, second.body), [
            ("a", None, "text/plain", None, b"1"),
            ("big", "big.bin", "application/octet-stream", "application/octet-stream", data),
            ("z", None, "text/plain", None, b"2"),
        ])
        self.assertEqual(second.values("Content-Length"), [str(len(second.body))])

    def test_two_bodies_are_invalid_params(self):
        url = self.origin.url("/x")
        mark = self.origin.mark()
        for extra in ({"json": 1, "form": {"a": "b"}}, {"json": None, "body": "x"}, {"body": "x", "bodyBase64": "eA=="},
                      {"form": {}, "multipart": [{"name": "a", "value": "b"}]}, {"bodyBase64": "eA==", "json": []}):
            error = self.refused("fetch", dict({"url": url}, **extra))
            self.assertIn("one body", error["data"]["detail"], extra)
        self.assertEqual(self.origin.since(mark), [])

    def test_bad_parts_are_invalid_params(self):
        url = self.origin.url("/x")
        for part in ({"value": "no name"}, {"name": "a"}, {"name": "a", "value": "v", "dataBase64": "eA=="},
                     {"name": "a", "dataBase64": "***"}, {"name": "a", "value": "v", "contentType": "x\r\ny"},
                     {"name": "a", "value": "v", "extra": 1}, "text"):
            self.refused("fetch", {"url": url, "multipart": [part]})
        self.refused("fetch", {"url": url, "multipart": []})


class UploadRootConfinement(FetchCase):

    def test_escaping_paths_are_path_not_allowed_and_nothing_is_read(self):
        url = self.origin.url("/m")
        mark = self.origin.mark()
        for path in ("../outside.txt", "sub/../../outside.txt", "sub/../photo", os.path.join(self.base, "outside.txt"),
                     os.path.join(self.root, "sub", "photo.bin"), "/etc/passwd", "link-out", "fifo-out",
                     "dir-out/outside.txt", "dir-out/outside.fifo"):
            error = self.refused("fetch", {"url": url, "multipart": [{"name": "f", "path": path}]})
            self.assertEqual((error["data"]["reason"], error["data"]["path"]), ("path_not_allowed", path), path)
            # The object: refused at addMultipartPart, before any send.
            r = self.c.call("create")["request"]
            self.c.call("open", {"request": r, "method": "POST", "url": url, "subscribe": False})
            error = self.refused("addMultipartPart", {"request": r, "name": "f", "path": path})
            self.assertEqual(error["data"]["reason"], "path_not_allowed", path)
            self.c.call("release", {"request": r})
        self.assertEqual(self.origin.since(mark), [])

    def test_a_missing_file_is_file_error(self):
        error = self.refused("fetch", {"url": self.origin.url("/m"), "multipart": [{"name": "f", "path": "nope"}]},
                             code=-32008)
        self.assertEqual(error["data"]["reason"], "file_error")


class WithoutUploadRoot(ServerTestCase):
    SERVER_ARGS = _server_args()

    def test_file_parts_need_an_upload_root(self):
        c = self.connect()
        got = c.request("fetch", {"url": "http://127.0.0.1:9/", "multipart": [{"name": "f", "path": "x"}]})
        self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32006, "forbidden"))


class ResponseTypeJSON(FetchCase):

    def test_json_parsed_non_json_is_an_error_with_the_status(self):
        self.origin.script("/is-json", body=b'{"k": [1, "\\u00e9"]}')
        self.origin.script("/not-json", status=201, reason="Created", body=b"<html>nope</html>")
        self.origin.script("/empty", status=204, reason="No Content")
        got = self.c.call("fetch", {"url": self.origin.url("/is-json"), "responseType": "json", "request": "j1"})
        self.assertEqual((got["request"], got["status"], got["encoding"], got["body"]), ("j1", 200, "json", {"k": [1, "é"]}))
        got = self.c.request("fetch", {"url": self.origin.url("/not-json"), "responseType": "json"})
        error = got["error"]
        self.assertEqual((error["code"], error["data"]["reason"], error["data"]["status"]), (-32010, "request_failed", 201))
        self.assertIn("not JSON", error["message"])
        self.assertEqual((error["data"]["response"]["body"], error["data"]["response"]["encoding"]),
                         ("<html>nope</html>", "utf8"))
        with self.assertRaises(RPCError) as caught:
            self.c.fetch(self.origin.url("/not-json"), response_type="json", timeout=30)
        self.assertEqual(caught.exception.reason, "request_failed")
        got = self.c.call("fetch", {"url": self.origin.url("/empty"), "responseType": "json"})
        self.assertEqual((got["status"], got["body"], got["encoding"]), (204, None, "json"))


class CredentialsAndOptions(FetchCase):

    def test_credential_basic_against_a_401_peer(self):
        url = self.upstream.url("/basic-auth/ann/s3cret")
        self.assertEqual(self.fetch(url)["status"], 401)
        got = self.fetch(url, credential={"user": "ann", "password": "s3cret"}, response_type="json")
        self.assertEqual((got["status"], got["body"]), (200, {"authenticated": True, "user": "ann"}))
        got = self.fetch(url, credential={"user": "ann", "password": "wrong", "auth": "BASIC"})
        self.assertEqual(got["status"], 401)
        for bad in ({"user": "ann"}, {"user": "a\r\nb", "password": "x"}, {"user": "a", "password": "b", "auth": "X"}):
            self.refused("fetch", {"url": url, "credential": bad})

    def test_follow_redirects_and_max_redirects(self):
        got = self.fetch(self.upstream.url("/redirect/2"), follow_redirects=False)
        location = [v for k, v in got["headers"].items() if k.lower() == "location"]
        self.assertEqual((got["status"], location), (302, ["/redirect/1"]))
        got = self.fetch(self.upstream.url("/redirect/2"), max_redirects=2)
        self.assertEqual((got["status"], got["body"]), (200, "done"))
        got = self.fetch(self.upstream.url("/redirect/3"), max_redirects=2)
        self.assertEqual(got["status"], 0)
        self.assertIn("redirect", got["statusText"].lower())
        self.refused("fetch", {"url": self.upstream.url("/"), "maxRedirects": -1})
        self.refused("fetch", {"url": self.upstream.url("/"), "maxRedirects": 10 ** 6})

    def test_cookies_false_neither_sends_nor_stores(self):
        self.fetch(self.upstream.url("/set-cookie?name=kept&value=1"))
        self.fetch(self.upstream.url("/set-cookie?name=dropped&value=2"), cookies=False)
        self.assertEqual(self.fetch(self.upstream.url("/cookies"), response_type="json")["body"], {"kept": "1"})
        self.assertEqual(self.fetch(self.upstream.url("/cookies"), response_type="json", cookies=False)["body"], {})

    def test_timeout_ends_a_silent_exchange(self):
        got = self.fetch(self.upstream.url("/hang"), timeout=1)
        self.assertEqual(got["status"], 0)
        self.assertIn("timed out", got["statusText"].lower())

    def test_option_values_are_checked_as_the_methods_check_them(self):
        url = self.upstream.url("/")
        for extra in ({"proxy": {"host": "a/b", "port": 1}}, {"proxy": {"host": "h", "port": 0}},
                      {"pinnedPublicKey": "/etc/passwd"}, {"followRedirects": "no"}, {"cookies": 1},
                      {"disablePeerVerification": "yes"}):
            self.refused("fetch", dict({"url": url}, **extra))
        error = self.refused("fetch", {"url": url, "clientCertificate": {"cert": "c", "key": "k"}}, code=-32006)
        self.assertIn("--cert-root", error["message"])


class HandlesAndNotifications(FetchCase):

    def test_subscribe_tells_concurrent_fetches_apart(self):
        c = self.c
        results = {}

        def run(name, n):
            results[name] = c.fetch(self.upstream.url("/drip/%d?chunk=1000&delay=20" % n), request=name,
                                    subscribe=True, response_type="base64", timeout=30)

        threads = [threading.Thread(target=run, args=(name, n)) for name, n in (("fa", 6000), ("fb", 9000))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual({k: (v["request"], v["status"], len(base64.b64decode(v["body"]))) for k, v in results.items()},
                         {"fa": ("fa", 200, 6000), "fb": ("fb", 200, 9000)})
        seen = {"fa": {"states": [], "received": 0}, "fb": {"states": [], "received": 0}}
        for m in c.notifications(timeout=1.0):
            p = m["params"]
            self.assertIn(p["request"], seen, m)
            if m["method"] == "onStateChange":
                seen[p["request"]]["states"].append(p["stateName"])
            elif m["method"] == "onProgress":
                seen[p["request"]]["received"] = max(seen[p["request"]]["received"], p["totalBytesReceived"])
        for name, n in (("fa", 6000), ("fb", 9000)):
            self.assertEqual(seen[name]["states"][0], "SENT", name)
            self.assertEqual(seen[name]["states"][-1], "DONE", name)
            self.assertEqual(seen[name]["received"], n, name)

    def test_without_subscribe_nothing_is_sent_and_handles_are_generated(self):
        got = self.c.call("fetch", {"url": self.origin.url("/plain")})
        self.assertTrue(got["request"].startswith("fetch_"), got)
        other = self.c.call("fetch", {"url": self.origin.url("/plain")})
        self.assertNotEqual(got["request"], other["request"])
        # A notification would have come before the answer (the wire is in order).
        self.assertEqual(self.c.pending(), [])

    def test_a_given_handle_must_be_valid_and_free(self):
        self.c.call("create", {"request": "taken"})
        error = self.refused("fetch", {"url": self.origin.url("/x"), "request": "taken"}, code=-32007)
        self.assertEqual(error["data"]["reason"], "already_exists")
        self.refused("fetch", {"url": self.origin.url("/x"), "request": "bad name"})

    def test_a_name_in_flight_on_this_connection_is_taken_until_answered(self):
        # In one batch: the first fetch is still in flight when the second, of the
        # same name, is checked; another name goes through. Once answered the name is
        # free again.
        slow = self.upstream.url("/drip/3000?chunk=1000&delay=100")
        got = self.c.batch([("fetch", {"url": slow, "request": "dup"}),
                            ("fetch", {"url": self.origin.url("/plain"), "request": "dup"}),
                            ("fetch", {"url": self.origin.url("/plain"), "request": "other"})], timeout=30)
        self.assertEqual(got[0]["result"]["request"], "dup", got)
        self.assertEqual(got[1]["error"]["data"]["reason"], "already_exists", got)
        self.assertEqual(got[2]["result"]["request"], "other", got)
        again = self.c.call("fetch", {"url": self.origin.url("/plain"), "request": "dup"})
        self.assertEqual(again["request"], "dup")


class ObjectSerializers(FetchCase):

    def opened(self, method="POST", path="/o"):
        r = self.c.call("create")["request"]
        self.c.call("open", {"request": r, "method": method, "url": self.origin.url(path), "async": False,
                             "subscribe": False})
        return r

    def sent(self, send, params):
        mark = self.origin.mark()
        self.assertEqual(self.c.call(send, params, timeout=30)["status"], 200)
        (record,) = self.origin.since(mark)
        self.assertIsNone(record.error, record)
        return record

    def test_set_json_body(self):
        r = self.opened(method="GET")
        self.c.set_json_body(r, {"first": 1})
        self.c.set_json_body(r, {"a": ["é", None]})  # replaces
        record = self.sent("send", {"request": r})
        self.assertEqual((record.method, record.body, record.values("Content-Type")),
                         ("POST", '{"a":["é",null]}'.encode(), ["application/json"]))

    def test_add_multipart_part(self):
        r = self.opened()
        self.c.add_multipart_part(r, "t", "text")
        self.c.add_multipart_part(r, "d", data=b"\x01\x02", filename="d.bin", content_type="application/x-d")
        self.c.add_multipart_part(r, "p", path="sub/photo.bin")
        record = self.sent("send", {"request": r})
        (ctype,) = record.values("Content-Type")
        self.assertEqual(parse_multipart(ctype, record.body), [
            ("t", None, "text/plain", None, b"text"),
            ("d", "d.bin", "application/x-d", "application/x-d", b"\x01\x02"),
            ("p", "photo.bin", "application/octet-stream", "application/octet-stream", bytes(range(256)) * 3),
        ])

    def test_mixing_serializers_is_refused_at_the_second_call(self):
        r = self.opened()
        self.c.call("setPostValue", {"request": r, "key": "k", "value": "v"})
        self.refused("setJSONBody", {"request": r, "value": 1})
        self.refused("addMultipartPart", {"request": r, "name": "a", "value": "b"})
        self.c.call("clearPostValues", {"request": r})
        self.c.call("setJSONBody", {"request": r, "value": None})
        self.refused("setPostValue", {"request": r, "key": "k", "value": "v"})
        self.refused("addMultipartPart", {"request": r, "name": "a", "value": "b"})
        self.c.call("clearPostValues", {"request": r})
        self.c.call("addMultipartPart", {"request": r, "name": "a", "value": "b"})
        self.refused("setJSONBody", {"request": r, "value": 1})
        self.refused("setPostValue", {"request": r, "key": "k", "value": "v"})
        # What is left is what was set last: the one part.
        record = self.sent("send", {"request": r})
        (ctype,) = record.values("Content-Type")
        self.assertEqual([p[0] for p in parse_multipart(ctype, record.body)], ["a"])

    def test_a_serializer_and_a_body_of_its_own_are_invalid_params(self):
        mark = self.origin.mark()
        for setup in (("setPostValue", {"key": "k", "value": "v"}), ("setJSONBody", {"value": {}}),
                      ("addMultipartPart", {"name": "a", "value": "b"})):
            for send, extra in (("send", {"body": "x"}), ("send", {"bodyBase64": "eA=="}), ("sendData", {"data": "eA=="}),
                                ("sendWithFile", {"path": "sub/photo.bin"})):
                r = self.opened()
                self.c.call(setup[0], dict({"request": r}, **setup[1]))
                error = self.refused(send, dict({"request": r}, **extra))
                self.assertIn("already has", error["data"]["detail"], (setup, send))
                # Refused before anything changed: still OPENED.
                self.assertEqual(self.c.call("getState", {"request": r})["stateName"], "OPENED")
                self.c.call("release", {"request": r})
        self.assertEqual(self.origin.since(mark), [])

    def test_clear_post_values_then_a_body_goes(self):
        r = self.opened()
        self.c.call("setJSONBody", {"request": r, "value": 1})
        self.c.call("clearPostValues", {"request": r})
        record = self.sent("send", {"request": r, "body": "raw"})
        self.assertEqual((record.body, record.values("Content-Type")), (b"raw", []))


class AsyncClientSerializers(FetchCase):

    def test_async_fetch_and_object_serializers(self):
        async def scenario():
            c = await AsyncClient.connect_unix(self.server.socket_path)
            try:
                mark = self.origin.mark()
                got = await c.fetch("x", base_url=self.origin.url("/a/"), query={"q": "1 2"}, json=[1],
                                    request="async-1", timeout=30)
                r = (await c.call("create"))["request"]
                await c.call("open", {"request": r, "method": "PUT", "url": self.origin.url("/o"), "async": False,
                                      "subscribe": False})
                await c.add_multipart_part(r, "f", data=b"\x00\x01", filename="f.bin")
                await c.call("send", {"request": r}, timeout=30)
                r2 = (await c.call("create"))["request"]
                await c.call("open", {"request": r2, "method": "POST", "url": self.origin.url("/o"), "async": False,
                                      "subscribe": False})
                await c.set_json_body(r2, {"k": None})
                await c.call("send", {"request": r2}, timeout=30)
                return got, mark
            finally:
                await c.close()

        async def bounded():
            return await asyncio.wait_for(scenario(), 60)

        got, mark = asyncio.run(bounded())
        self.assertEqual((got["request"], got["status"]), ("async-1", 200))
        fetched, parts, jsoned = self.origin.since(mark)
        self.assertEqual((fetched.target, fetched.body), ("/a/x?q=1+2", b"[1]"))
        (ctype,) = parts.values("Content-Type")
        self.assertEqual(parse_multipart(ctype, parts.body),
                         [("f", "f.bin", "application/octet-stream", "application/octet-stream", b"\x00\x01")])
        self.assertEqual((jsoned.body, jsoned.values("Content-Type")), (b'{"k":null}', ["application/json"]))
