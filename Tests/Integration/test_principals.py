"""Principals: tokens on TCP, uids on the Unix socket, isolation, limits and stats.

Two principals (alice and bob, and carol the admin) share one server; every method
that names a request is tried by one principal on the other's request, and each must
answer ``unknown_handle`` while the owner's request goes on untouched.
"""

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import sys
import time
import unittest

from support import ANY_STR, ServerTestCase, XhrpcServer, free_tcp_port, line, pattern, req
from test_request_object import ObjectTestCase, poll_until
from test_requests import state_change
from xhrpc import RPCError

ALICE = {"name": "alice", "token": "alice-" + "a" * 40}
BOB = {"name": "bob", "token": "bob-" + "b" * 40}
CAROL = {"name": "carol", "token": "carol-" + "c" * 40, "admin": True}

# A plausible value for every parameter a method may require, so that a call on
# someone else's handle fails for the handle, not for a missing argument.
SAMPLE = {
    "method": "GET", "header": "X-Test", "value": "v", "key": "k", "enabled": True, "data": "",
    "path": "nothing.txt", "name": "n", "host": "127.0.0.1", "port": 3128, "cert": "c.pem",
    "sha256": "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "maxAttempts": 2,
}


def reason_of(call):
    try:
        call()
    except RPCError as e:
        return e.reason
    return None


class TwoPrincipals(ObjectTestCase):
    TCP = True
    PRINCIPALS = (ALICE, BOB, CAROL)

    def setUp(self):
        super().setUp()
        self.alice = self.server.connect_as("alice")
        self.bob = self.server.connect_as("bob")
        self.addCleanup(self.alice.close)
        self.addCleanup(self.bob.close)

    def request_methods(self):
        """Every method of rpc.discover that takes a request handle, with its params."""
        doc = self.alice.call("rpc.discover")
        out = []
        for m in doc["methods"]:
            names = [p["name"] for p in m.get("params", [])]
            # These name a new object of the caller's own with `request`: bob's names
            # are his own, so alice's "mine" is no clash there.
            if "request" not in names or m["name"] in ("create", "subscribe", "fetch", "upload", "download"):
                continue
            required = [p["name"] for p in m["params"] if p.get("required")]
            out.append((m["name"], required))
        return out

    def test_every_method_on_another_principals_handle_is_unknown_handle(self):
        a = self.alice
        self.start_request(a, "mine", self.url("/bytes/300000"))
        a.call("create", {"request": "idle"})
        methods = self.request_methods()
        self.assertGreater(len(methods), 20, "rpc.discover lists the request methods")
        tried = []
        for name, required in methods:
            for handle in ("mine", "idle"):
                params = {"request": handle}
                for p in required:
                    if p == "url":
                        params[p] = self.url("/bytes/10")
                    elif p != "request":
                        params[p] = SAMPLE[p]
                self.assertEqual(reason_of(lambda: self.bob.call(name, params)), "unknown_handle",
                                 "%s on alice's %s" % (name, handle))
                tried.append(name)
        self.assertIn("release", tried)
        self.assertIn("getReceiveBuffer", tried)
        # Alice's requests were not touched: the body arrives whole and "idle" is UNSENT.
        self.assertBody(a, "mine", 300000)
        self.assertEqual(a.call("getState", {"request": "idle"})["stateName"], "UNSENT")
        self.assertEqual([r["request"] for r in a.call("list")], ["idle", "mine"])

    def test_list_subscriptions_and_names_are_per_principal(self):
        a, b = self.alice, self.bob
        b_sub = b.call("subscribe", {"all": True})["subscription"]
        a_sub = a.call("subscribe", {"all": True})["subscription"]
        self.start_request(a, "shared-name", self.url("/bytes/1000"))
        # Bob may use the same name: handles are per principal.
        self.assertEqual(b.call("create", {"request": "shared-name"}), {"request": "shared-name"})
        self.assertEqual([r["request"] for r in b.call("list")], ["shared-name"])
        self.assertEqual(b.call("getState", {"request": "shared-name"})["stateName"], "UNSENT")
        self.assertEqual(reason_of(lambda: b.call("unsubscribe", {"subscription": a_sub})), "unknown_handle")
        self.assertBody(a, "shared-name", 1000)
        # Bob's subscription to "all" heard nothing of alice's request.
        self.assertNothingPending(b)
        b.call("unsubscribe", {"subscription": b_sub})

    def test_a_detach_token_works_only_for_its_principal(self):
        a, b = self.alice, self.bob
        self.start_request(a, "kept", self.url("/bytes/5000"))
        token = a.call("detach")["token"]
        self.assertEqual(reason_of(lambda: b.call("attach", {"token": token})), "unknown_handle")
        with self.server.connect_as("alice") as again:
            self.assertEqual(again.call("attach", {"token": token}), {"requests": ["kept"]})
            self.assertBody(again, "kept", 5000)

    def test_cookies_are_per_principal(self):
        a, b = self.alice, self.bob
        self.start_request(a, "set", self.url("/set-cookie?name=who&value=alice&max_age=60"))
        self.assertEqual(json.loads(self.body(a, "set"))["set"], {"who": "alice"})
        for c, expected in ((a, {"who": "alice"}), (b, {})):
            c.call("create", {"request": "look"})
            c.call("open", {"request": "look", "method": "GET", "url": self.url("/cookies"), "subscribe": False})
            c.call("send", {"request": "look"})
            self.assertEqual(json.loads(self.body(c, "look")), expected)

    def test_stats_show_own_figures_and_admin_sees_all(self):
        a, b = self.alice, self.bob
        a.call("create", {"request": "s1"})
        reason_of(lambda: a.call("getState", {"request": "nope"}))
        mine = a.call("server.stats")
        self.assertEqual(mine["principal"], "alice")
        self.assertNotIn("total", mine)
        self.assertNotIn("principals", mine)
        self.assertEqual(mine["requests"]["UNSENT"], 1)
        self.assertGreaterEqual(mine["errors"].get("unknown_handle", 0), 1)
        self.assertGreater(mine["bytesIn"], 0)
        self.assertGreater(mine["bytesOut"], 0)
        self.assertEqual(mine["connections"], 1)
        self.assertEqual(b.call("server.stats")["requests"]["UNSENT"], 0)
        with self.server.connect_as("carol") as admin:
            everything = admin.call("server.stats")
        self.assertEqual(everything["principal"], "carol")
        self.assertEqual(set(everything["principals"]), {"alice", "bob", "carol", "local"})
        self.assertEqual(everything["principals"]["alice"]["requests"]["UNSENT"], 1)
        self.assertGreaterEqual(everything["total"]["connections"], 3)
        for key in ("authFailures", "unauthenticatedConnections", "bytesIn", "bytesOut", "errors"):
            self.assertIn(key, everything["total"])
        text = json.dumps(everything)
        for p in (ALICE, BOB, CAROL):
            self.assertNotIn(p["token"], text)


class ByteCounts(ServerTestCase):
    """A principal's bytes start when its connection starts to act for it: the auth
    exchange before that is counted with the anonymous connections."""

    TCP = True
    PRINCIPALS = (dict(ALICE, admin=True),)

    def test_the_auth_exchange_is_not_the_principals(self):
        with self.server.connect_tcp() as c:
            auth = line(req("auth", 1, {"token": ALICE["token"]}))
            stats = line(req("server.stats", 2))
            c.send_raw(auth)
            _, reply = c.read_message(raw=True)
            reply_bytes = len(reply) + (0 if reply.endswith(b"\n") else 1)
            c.send_raw(stats)
            mine = c.read_message()["result"]
        self.assertEqual((mine["bytesIn"], mine["bytesOut"]), (len(stats), reply_bytes))
        # The auth request went to the anonymous connections, whose bytes the total adds.
        self.assertGreaterEqual(mine["total"]["bytesIn"] - mine["bytesIn"], len(auth))


class Authentication(ServerTestCase):
    TCP = True
    PRINCIPALS = (ALICE, BOB)
    LOG_LEVEL = "info"

    def test_everything_but_auth_and_discover_needs_a_token(self):
        with self.server.connect_tcp() as c:
            for method, params in (("create", {}), ("list", None), ("server.info", None), ("server.stats", None),
                                   ("getState", {"request": "x"}), ("no.such.method", None)):
                with self.assertRaises(RPCError) as e:
                    c.call(method, params)
                self.assertEqual(e.exception.reason, "unauthenticated", method)
            self.assertIn("methods", c.call("rpc.discover"))
            self.assertEqual(c.call("auth", {"token": ALICE["token"]}), {"principal": "alice", "admin": False})
            self.assertEqual(c.call("list"), [])
            with self.assertRaises(RPCError) as e:
                c.call("auth", {"token": BOB["token"]})
            self.assertEqual(e.exception.reason, "invalid_state")

    def test_failures_are_answered_one_a_second_and_others_are_served_meanwhile(self):
        # The local owner (the Unix socket) is an admin: its stats show the failures judged
        # and alice's connections. Both figures come from one answer, made between two
        # turns of the server's loop, so they are seen together or not at all.
        admin = self.connect()

        def seen():
            stats = admin.call("server.stats")
            return stats["total"]["authFailures"], stats["principals"]["alice"]["connections"]

        failures, _ = seen()
        poll_until(lambda: seen()[1] == 0, 10, "alice's connections of earlier tests closed")
        with self.server.connect_tcp() as guesser, self.server.connect_as("bob") as other:
            ids = []
            data = b""
            for guess in ("wrong-1", "wrong-2", ALICE["token"]):
                rid = guesser.next_id()
                ids.append(rid)
                data += line(req("auth", rid, {"token": guess}))
            guesser.send_raw(data)
            # While the guesses wait, another principal is answered at once.
            self.assertEqual(other.call("list"), [])
            # Each failure holds back what comes after it until its own answer, the delay
            # later: when the stats show a failure judged, the attempt behind it is not
            # judged yet (alice has no connection), and the next is judged only after that
            # failure's answer. Answered at once, all three would be judged before the
            # admin could see a failure on its own.
            self.assertEqual(poll_until(lambda: (lambda f: f if f[0] == failures + 1 else None)(seen()), 10,
                                        "the first failure judged"), (failures + 1, 0))
            first = guesser.wait_response(ids[0], timeout=10)
            self.assertEqual(poll_until(lambda: (lambda f: f if f[0] == failures + 2 else None)(seen()), 10,
                                        "the second failure judged"), (failures + 2, 0))
            second = guesser.wait_response(ids[1], timeout=10)
            third = guesser.wait_response(ids[2], timeout=10)
            for r in (first, second):
                self.assertEqual(r["error"]["data"]["reason"], "unauthenticated")
            # The right token, sent behind two wrong ones, was judged only after both answers.
            self.assertEqual(third["result"], {"principal": "alice", "admin": False})
            self.assertEqual(seen(), (failures + 2, 1))
            self.assertNotIn(ALICE["token"], self.server.stderr_text())

    def test_attempts_queued_behind_a_success_are_answered(self):
        # Found by the fuzzer: a success used to drop the attempts queued behind it, so
        # a half-closed connection waited for their answers forever.
        with self.server.connect_tcp() as c:
            ids = [c.next_id() for _ in range(3)]
            c.send_raw(b"".join(line(req("auth", rid, {"token": t}))
                                for rid, t in zip(ids, ("wrong", ALICE["token"], ALICE["token"]))))
            c.shutdown_write()
            replies = [c.wait_response(rid, timeout=10) for rid in ids]
            self.assertEqual(replies[0]["error"]["data"]["reason"], "unauthenticated")
            self.assertEqual(replies[1]["result"]["principal"], "alice")
            self.assertEqual(replies[2]["error"]["data"]["reason"], "invalid_state")
            self.assertTrue(c.wait_closed(timeout=10))

    def test_five_failures_close_the_connection(self):
        with self.server.connect_tcp() as c:
            for i in range(5):
                with self.assertRaises(RPCError) as e:
                    c.call("auth", {"token": "guess-%d" % i})
                self.assertEqual(e.exception.reason, "unauthenticated")
            self.assertTrue(c.wait_closed(timeout=10))
        with self.server.connect_as("alice") as ok:
            self.assertEqual(ok.call("list"), [])

    def test_unix_socket_owner_needs_no_token(self):
        with self.server.connect() as c:
            self.assertEqual(c.call("server.stats")["principal"], "local")

    @unittest.skipUnless(os.geteuid() == 0, "needs root to connect under another uid")
    def test_unix_peer_uid_maps_to_its_principal_or_must_auth(self):
        os.chmod(self.server.dir, 0o755)
        os.chmod(self.server.socket_path, 0o666)
        script = (
            "import json, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rwb')\n"
            "for i, (m, p) in enumerate([('server.stats', {}), ('auth', {'token': sys.argv[2]}), ('server.stats', {})]):\n"
            "    f.write((json.dumps({'jsonrpc': '2.0', 'id': i, 'method': m, 'params': p}) + '\\n').encode()); f.flush()\n"
            "    print(f.readline().decode().strip())\n")
        # The system's Python: the test's own may live where uid 65534 cannot read.
        out = subprocess.run(["/usr/bin/python3", "-c", script, self.server.socket_path, BOB["token"]],
                             user=65534, capture_output=True, timeout=20, check=True).stdout.decode().splitlines()
        replies = [json.loads(x) for x in out]
        self.assertEqual(replies[0]["error"]["data"]["reason"], "unauthenticated")
        self.assertEqual(replies[1]["result"]["principal"], "bob")
        self.assertEqual(replies[2]["result"]["principal"], "bob")


class TLSWithTokens(ServerTestCase):
    """The TLS listener asks for a token like plain TCP, inside the verified channel."""

    TLS = True
    PRINCIPALS = (ALICE, BOB)

    def test_auth_over_tls(self):
        with self.server.connect_tls() as c:
            with self.assertRaises(RPCError) as e:
                c.call("list")
            self.assertEqual(e.exception.reason, "unauthenticated")
            self.assertEqual(c.call("auth", {"token": BOB["token"]}), {"principal": "bob", "admin": False})
            self.assertEqual(c.call("server.stats")["principal"], "bob")


class AuthTimeout(ServerTestCase):
    TCP = True
    PRINCIPALS = (ALICE,)
    SERVER_ARGS = ("--auth-timeout", "0.5")

    def test_a_silent_client_is_closed_after_the_auth_timeout(self):
        with self.server.connect_tcp() as c:
            note = c.read_message(timeout=10)
            self.assertEqual(note["error"]["data"]["reason"], "unauthenticated")
            self.assertTrue(c.wait_closed(timeout=10))
        with self.server.connect_as("alice") as ok:
            self.assertEqual(ok.call("list"), [])


class FailureLimit(ServerTestCase):
    """The fifth failed auth itself closes the connection. Under the default 10 s auth
    timeout (Authentication above) the timeout would close it as well; here it is two
    minutes, so only the failure limit can."""

    TCP = True
    PRINCIPALS = (ALICE,)
    SERVER_ARGS = ("--auth-timeout", "120")

    def test_the_fifth_failure_closes_the_connection(self):
        with self.server.connect_tcp() as c:
            for i in range(5):
                with self.assertRaises(RPCError) as e:
                    c.call("auth", {"token": "guess-%d" % i})
                self.assertEqual(e.exception.reason, "unauthenticated")
            self.assertTrue(c.wait_closed(timeout=10), "still open after five failures")


class UidPrincipal(ServerTestCase):
    """A principal given by uid: Unix peers with that uid act for it without a token."""

    PRINCIPALS = ({"name": "me", "uid": os.geteuid(), "limits": {"requests": 1}},)

    def test_owner_uid_maps_to_the_configured_principal_and_its_limits(self):
        with self.server.connect() as c:
            self.assertEqual(c.call("server.stats")["principal"], "me")
            c.call("create")
            with self.assertRaises(RPCError) as e:
                c.call("create")
            self.assertEqual(e.exception.reason, "limit_exceeded")
            self.assertEqual((e.exception.data["limit"], e.exception.data["max"]), ("requests", 1))


class SubscriptionLimit(ObjectTestCase):
    """Subscriptions share the requests limit, fetch {subscribe: true}'s included: it
    holds one while the fetch runs, and gives it back when the fetch is answered."""

    PRINCIPALS = ({"name": "me", "uid": os.geteuid(), "limits": {"requests": 2}},)

    def assertSubscriptionsFull(self, c, method, params):
        with self.assertRaises(RPCError) as e:
            c.call(method, params)
        self.assertEqual((e.exception.reason, e.exception.data["limit"], e.exception.data["max"]),
                         ("limit_exceeded", "subscriptions", 2), method)

    def test_fetch_subscriptions_count_and_end_with_the_fetch(self):
        with self.server.connect() as c:
            first = c.call("subscribe", {"all": True})["subscription"]
            c.call("subscribe", {"all": True})
            self.assertSubscriptionsFull(c, "subscribe", {"all": True})
            self.assertSubscriptionsFull(c, "fetch", {"method": "GET", "url": self.url("/bytes/10"), "subscribe": True})
            c.call("unsubscribe", {"subscription": first})
            self.assertEqual(c.call("fetch", {"method": "GET", "url": self.url("/bytes/10"), "subscribe": True})["status"],
                             200)
            # The fetch's own subscription ended with it: the slot is free again.
            c.call("subscribe", {"all": True})
            self.assertSubscriptionsFull(c, "subscribe", {"all": True})


class StartupRules(unittest.TestCase):
    def run_briefly(self, args, config=None):
        server = XhrpcServer(args=args, config=config)
        with self.assertRaises(RuntimeError) as e:
            server.start()
        return str(e.exception)

    def test_tcp_without_principals_needs_the_insecure_flag_on_loopback(self):
        text = self.run_briefly(["--listen", "tcp:127.0.0.1:%d" % free_tcp_port()])
        self.assertIn("--insecure-tcp", text)

    def test_non_loopback_tcp_without_principals_refuses_even_with_the_flag(self):
        text = self.run_briefly(["--listen", "tcp:0.0.0.0:%d" % free_tcp_port(), "--insecure-tcp"])
        self.assertIn("non-loopback", text)

    def test_bad_principals_are_refused_with_a_clear_message(self):
        for principals, words in (([{"name": "x", "tokenSha256": "abc"}], "64 hex digits"),
                                  ([{"name": "x"}], "needs a \"tokenSha256\" or a \"uid\""),
                                  ([{"name": "local", "uid": 5}], "built-in"),
                                  ([{"name": "a b", "uid": 5}], "a name is"),
                                  ([{"name": "x", "uid": 5}, {"name": "x", "uid": 6}], "declared twice"),
                                  ([{"name": "x", "uid": 5, "limits": {"requests": 0}}], "positive"),
                                  ([{"name": "x", "uid": 5, "token": "t"}], "unknown key 'token'")):
            self.assertIn(words, self.run_briefly([], config={"principals": principals}), principals)


class Limits(ObjectTestCase):
    TCP = True
    DORA = {"name": "dora", "token": "dora-" + "d" * 40, "limits": {"bufferedBytes": 1 << 20}}
    PRINCIPALS = (dict(ALICE, limits={"transfers": 2, "connections": 2}), BOB, DORA)
    SERVER_ARGS = ("--max-response-bytes", "500000")

    def test_transfers_in_flight_are_refused_past_the_limit_not_queued(self):
        with self.server.connect_as("alice") as a:
            for name in ("h1", "h2"):
                self.start_request(a, name, self.url("/hang"))
            a.call("create", {"request": "h3"})
            a.call("open", {"request": "h3", "method": "GET", "url": self.url("/bytes/10"), "subscribe": False})
            with self.assertRaises(RPCError) as e:
                a.call("send", {"request": "h3"})
            self.assertEqual((e.exception.reason, e.exception.data["limit"], e.exception.data["max"]),
                             ("limit_exceeded", "transfers", 2))
            self.assertEqual(a.call("getState", {"request": "h3"})["stateName"], "OPENED")
            with self.assertRaises(RPCError) as e:
                a.call("fetch", {"method": "GET", "url": self.url("/bytes/10")})
            self.assertEqual(e.exception.data["limit"], "transfers")
            # Another principal is not held by alice's limit.
            with self.server.connect_as("bob") as b:
                self.assertEqual(b.call("fetch", {"method": "GET", "url": self.url("/bytes/10")})["status"], 200)
            self.assertTrue(a.call("abort", {"request": "h1"}))
            self.assertTrue(a.call("send", {"request": "h3"}))
            self.assertBody(a, "h3", 10)

    def test_buffered_bytes_pause_transfers_and_refuse_sends_until_read(self):
        with self.server.connect_as("dora") as a:
            size = 400000
            for name in ("b1", "b2", "b3"):
                a.batch([("create", {"request": name}),
                         ("open", {"request": name, "method": "GET", "url": self.url("/bytes/%d" % size),
                                   "subscribe": False}),
                         ("send", {"request": name})])
            # Three 400 kB bodies exceed the 1 MiB budget: the transfers pause.
            deadline = time.monotonic() + 30
            while a.call("server.stats")["bufferedBytes"] < (1 << 20) and time.monotonic() < deadline:
                time.sleep(0.05)
            stats = a.call("server.stats")
            self.assertGreaterEqual(stats["bufferedBytes"], 1 << 20)
            self.assertLess(stats["bufferedBytes"], (1 << 20) + 3 * size)
            a.call("create", {"request": "b4"})
            a.call("open", {"request": "b4", "method": "GET", "url": self.url("/bytes/10"), "subscribe": False})
            with self.assertRaises(RPCError) as e:
                a.call("send", {"request": "b4"})
            self.assertEqual(e.exception.data["limit"], "bufferedBytes")
            for name in ("b1", "b2", "b3"):
                self.assertBody(a, name, size)
            # Read, the bodies are given back; the response heads count until release
            # (docs/operations/budgets.md).
            for name in ("b1", "b2", "b3"):
                a.call("release", {"request": name})
            self.assertEqual(a.call("server.stats")["bufferedBytes"], 0)
            self.assertTrue(a.call("send", {"request": "b4"}))
            self.assertBody(a, "b4", 10)

    def test_connections_per_principal(self):
        with self.server.connect_as("alice"), self.server.connect_as("alice"):
            with self.server.connect_tcp() as third:
                with self.assertRaises(RPCError) as e:
                    third.call("auth", {"token": ALICE["token"]})
                self.assertEqual((e.exception.reason, e.exception.data["limit"]), ("limit_exceeded", "connections"))
                self.assertEqual(third.call("auth", {"token": BOB["token"]})["principal"], "bob")
        # Closed connections free their places.
        deadline = time.monotonic() + 10
        while True:
            try:
                with self.server.connect_as("alice") as again:
                    self.assertEqual(again.call("list"), [])
                break
            except RPCError:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)

    def test_max_response_bytes_ends_in_done_with_status_0(self):
        with self.server.connect_as("bob") as b:
            self.start_request(b, "big", self.url("/bytes/600000"))
            self.assertNextMessages(b, [state_change("big", s, 200, "OK") for s in (3, 4)] + [
                state_change("big", 5, 0, ANY_STR)])
            self.assertEqual(b.call("getStatus", {"request": "big"}), 0)
            self.assertEqual(b.call("getStatusText", {"request": "big"}),
                             "The response body is larger than 500000 bytes (--max-response-bytes)")
            self.start_request(b, "fits", self.url("/bytes/500000"))
            self.assertBody(b, "fits", 500000)
            result = b.call("fetch", {"method": "GET", "url": self.url("/bytes/500001")})
            self.assertEqual(result["status"], 0)


def _shared_roots():
    """One folder serving as both roots (download a file, then upload it), so that a
    principal reaching another's files would find them by the same name."""
    base = tempfile.mkdtemp(prefix="xhrpc-py-roots-", dir="/tmp")
    root = os.path.join(base, "files")
    os.makedirs(root)
    return base, root


class FilesPerPrincipal(ServerTestCase):
    """Each principal's files are in its own folder of the roots (made 0700), the owner
    keeps the root without the principals' folders: one principal never reads, replaces
    or uploads another's."""
    TCP = True
    UPSTREAM = True
    PRINCIPALS = (ALICE, BOB)

    @classmethod
    def setUpClass(cls):
        cls.base, cls.root = _shared_roots()
        cls.addClassCleanup(shutil.rmtree, cls.base, True)
        cls.SERVER_ARGS = ("--download-root", cls.root, "--upload-root", cls.root)
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.alice = self.server.connect_as("alice")
        self.bob = self.server.connect_as("bob")
        self.addCleanup(self.alice.close)
        self.addCleanup(self.bob.close)

    def download(self, c, name, rel, seed):
        from test_transfers import run_transfer
        _, done, _, _ = run_transfer(c, "download", {"request": name, "path": rel,
                                                     "url": self.upstream.url("/ranged/1000?seed=%d" % seed)})
        return done

    def test_one_principal_never_reads_replaces_or_uploads_anothers_files(self):
        self.assertEqual(self.download(self.alice, "a1", "report.bin", 1)["status"], 200)
        # By the same name bob finds no file of his: he never reads hers.
        url = self.upstream.url("/echo")
        got = self.bob.request("upload", {"url": url, "path": "report.bin"})
        self.assertEqual((got.get("error", {}).get("code"), got.get("error", {}).get("data", {}).get("reason")),
                         (-32008, "file_error"), got)
        alices = os.path.join(self.root, "alice", "report.bin")
        self.assertEqual(stat.S_IMODE(os.lstat(os.path.join(self.root, "alice")).st_mode), 0o700)
        with open(alices, "rb") as f:
            self.assertEqual(f.read(), pattern.pattern_bytes(1000, 1))
        self.assertFalse(os.path.exists(os.path.join(self.root, "report.bin")))
        # Bob's same name is his own file: alice's is not replaced.
        self.assertEqual(self.download(self.bob, "b1", "report.bin", 2)["status"], 200)
        with open(alices, "rb") as f:
            self.assertEqual(f.read(), pattern.pattern_bytes(1000, 1))
        with open(os.path.join(self.root, "bob", "report.bin"), "rb") as f:
            self.assertEqual(f.read(), pattern.pattern_bytes(1000, 2))
        # The ways to her folder are refused, for every kind of upload.
        for rel in ("../alice/report.bin", os.path.join(self.root, "alice", "report.bin")):
            for method, params in (("upload", {"url": url, "path": rel}),
                                   ("upload", {"url": url, "multipart": [{"name": "f", "path": rel}]}),
                                   ("fetch", {"url": url, "multipart": [{"name": "f", "path": rel}]})):
                got = self.bob.request(method, params)
                self.assertEqual(got["error"]["data"]["reason"], "path_not_allowed", (method, rel, got))
            self.bob.call("create", {"request": "swf"})
            self.bob.call("open", {"request": "swf", "method": "PUT", "url": url, "subscribe": False})
            got = self.bob.request("sendWithFile", {"request": "swf", "path": rel})
            self.assertEqual(got["error"]["data"]["reason"], "path_not_allowed", (rel, got))
            self.bob.call("release", {"request": "swf"})
        # Alice reads her own back.
        started = self.alice.call("upload", {"request": "up", "url": url, "path": "report.bin"})
        self.alice.wait_notification(lambda m: m["params"].get("request") == "up" and m["params"].get("state") == 5, 30)
        echo = json.loads(base64.b64decode(self.alice.call("getReceiveBuffer", {"request": "up"})["data"]))
        self.assertEqual((started["request"], echo["bodySha256"]),
                         ("up", hashlib.sha256(pattern.pattern_bytes(1000, 1)).hexdigest()))

    def test_the_owner_keeps_the_root_but_not_the_principals_folders(self):
        with self.server.connect() as owner:
            self.assertEqual(self.download(owner, "o1", "owners.bin", 3)["status"], 200)
            self.assertTrue(os.path.isfile(os.path.join(self.root, "owners.bin")))
            for rel in ("alice/x.bin", "bob", "alice"):
                got = owner.request("download", {"url": self.upstream.url("/ranged/10"), "path": rel})
                self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32602, "path_not_allowed"),
                                 (rel, got))
            got = owner.request("upload", {"url": self.upstream.url("/echo"), "path": "alice/report.bin"})
            self.assertEqual(got["error"]["data"]["reason"], "path_not_allowed", got)
            self.assertEqual(owner.call("list"), [])


class OwnRootFromTheConfig(ServerTestCase):
    """A principal's "downloadRoot" and "uploadRoot" in the config file are its roots."""
    TCP = True
    UPSTREAM = True

    @classmethod
    def setUpClass(cls):
        cls.base, cls.root = _shared_roots()
        cls.addClassCleanup(shutil.rmtree, cls.base, True)
        cls.own = os.path.join(cls.base, "carols")
        os.makedirs(cls.own)
        cls.PRINCIPALS = (ALICE, dict(CAROL, downloadRoot=cls.own, uploadRoot=cls.own))
        cls.SERVER_ARGS = ("--download-root", cls.root)
        super().setUpClass()

    def test_the_principals_own_root(self):
        with self.server.connect_as("carol") as carol:
            from test_transfers import run_transfer
            _, done, _, _ = run_transfer(carol, "download", {"request": "c1", "path": "mine.bin",
                                                             "url": self.upstream.url("/ranged/100?seed=5")})
            self.assertEqual(done["status"], 200)
            self.assertEqual(os.listdir(self.own), ["mine.bin"])
            self.assertEqual(os.listdir(self.root), [])
            got = carol.call("upload", {"url": self.upstream.url("/echo"), "path": "mine.bin"})
            self.assertIn("request", got)
        with self.server.connect_as("alice") as alice:
            got = alice.request("upload", {"url": self.upstream.url("/echo"), "path": "x"})
            self.assertEqual(got["error"]["data"]["reason"], "forbidden")
            self.assertIn("--upload-root", got["error"]["message"])


if __name__ == "__main__":
    unittest.main()
