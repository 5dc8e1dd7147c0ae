"""A stateful property test (hypothesis): random sequences of calls against the real daemon.

Two principals (alice, bob) on several TCP connections each call, in an order hypothesis
chooses: create, open (good and bad URLs on the fixture upstream, good and bad methods),
send (with and without a body), transfers started in one batch, getReceiveBuffer, getState, abort, release, list,
socket.create / connect / release, calls of any declared method with params of the
wrong shape, and disconnects in the middle of all that (transfers in flight, bytes
unread). The invariants, after every step:

- the daemon is alive and answers every call (each within its deadline);
- every reply and notification validates against api/openrpc.json (contract.py, the
  suite's check, installed by support.py);
- no principal sees another's objects: a handle of the other principal is
  unknown_handle to every method, ``list`` shows only the caller's own handles, and no
  notification (``subscribe {all: true}`` included) is about the other's objects.

And at the end of each sequence, once every connection is closed: the admin's
``server.stats`` total is back to its baseline (one connection, the admin's own; no
requests, sockets, transfers or buffered bytes), the daemon's open file descriptors
are exactly as many as before (not counting its keep-alive connections to the upstream:
libcurl's connection cache), and its RSS is within ``RSS_SLACK_MIB`` of the
baseline taken after a warm-up sequence (allocator caches and libcurl's connection
pool keep some memory; a leak of every sequence grows past it over the examples).

Bounded: ``XHRPC_STATEFUL_EXAMPLES`` sequences (default 40) of at most
``XHRPC_STATEFUL_STEPS`` steps (default 30), each call at most ``CALL_TIMEOUT`` s; the
default run takes well under a minute. Hypothesis keeps no database (``database=None``)
and does not shrink unless ``XHRPC_STATEFUL_SHRINK=1``: a failure prints the sequence
that shows it. The sequences are the same every run unless ``XHRPC_STATEFUL_RANDOM=1``.
"""

import json
import os
import socket
import subprocess
import time
import unittest

from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import contract
from support import Upstream, XhrpcServer
from xhrpc import Client
from xhrpc.client import ConnectionClosed

EXAMPLES = int(os.environ.get("XHRPC_STATEFUL_EXAMPLES", "40"))
STEPS = int(os.environ.get("XHRPC_STATEFUL_STEPS", "30"))
# Shrinking a failure to its shortest sequence can take minutes against a real daemon
# (a leak fails every later sequence too): asked for with XHRPC_STATEFUL_SHRINK=1.
SHRINK = os.environ.get("XHRPC_STATEFUL_SHRINK") == "1"
# The same sequences every run (make test must not pass one day and fail the next);
# XHRPC_STATEFUL_RANDOM=1 explores new ones.
DERANDOMIZE = os.environ.get("XHRPC_STATEFUL_RANDOM") != "1"
CALL_TIMEOUT = 15
SEND_TIMEOUT = 5
SETTLE_DEADLINE = 15.0
RSS_SLACK_MIB = 48
MAX_CONNECTIONS = 6

PRINCIPALS = [
    {"name": "alice", "token": "stateful-alice-token"},
    {"name": "bob", "token": "stateful-bob-token"},
    {"name": "ops", "token": "stateful-ops-token", "admin": True},
]
USERS = ("alice", "bob")

# Methods that change what outlives a connection (detach keeps objects past it,
# intercept.register makes the daemon wait for answers, credentials persist, auth
# re-authenticates): left out of the calls with random params.
NOT_AT_RANDOM = {"detach", "attach", "intercept.register", "credentials.set", "auth", "download", "upload"}
# (detach and attach have rules of their own, which keep track of the tokens.)
with open(contract.OPENRPC, encoding="utf-8") as _f:
    METHODS = sorted(m["name"] for m in json.load(_f)["methods"] if m["name"] not in NOT_AT_RANDOM)

# Methods that take a handle, with their other params, for the cross-principal probes.
HANDLE_METHODS = {
    "getState": {}, "getStatus": {}, "getReceiveBuffer": {}, "abort": {}, "release": {}, "send": {},
    "getAllResponseHeaders": {}, "setRequestHeader": {"header": "X-A", "value": "1"}, "pause": {}, "resume": {},
    "open": {"method": "GET", "url": "http://127.0.0.1:1/"}, "subscribe": {},
    "socket.getState": {}, "socket.read": {}, "socket.write": {"data": "aGk="}, "socket.disconnect": {},
    "socket.release": {}, "socket.connect": {},
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)


def _pooled_inodes(port):
    """Inodes of the TCP sockets whose remote port is ``port`` (/proc/net/tcp, tcp6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if int(fields[2].rsplit(":", 1)[1], 16) == port:
                        inodes.add(fields[9])
        except FileNotFoundError:
            pass
    return inodes


def fds_of(pid, upstream_port=None):
    """The daemon's open descriptors, not counting its connections to the upstream: those
    are libcurl's connection cache (bounded by it; they come and go with keep-alive)."""
    pooled = _pooled_inodes(upstream_port) if upstream_port else set()
    count = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except FileNotFoundError:
            continue
        if not (target.startswith("socket:[") and target[8:-1] in pooled):
            count += 1
    return count


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS for %d" % pid)


class Conn:
    def __init__(self, who, client):
        self.who = who
        self.client = client
        self.requests = []  # handles this connection created and has not released
        self.sockets = []


class DaemonMachine(RuleBasedStateMachine):
    server = None    # set by StatefulTest.setUpClass
    upstream = None
    baseline = None  # (fds, rss MiB) once warm

    def __init__(self):
        super().__init__()
        self.conns = []
        self.known = {who: set() for who in USERS}  # every handle each principal ever had
        self.detached = []  # (who, token, handles) not attached yet
        self.socket_handles = set()

    # ---- helpers -------------------------------------------------------------

    def call(self, conn, method, params=None):
        """The whole response (result or error); a missing answer fails the sequence."""
        return conn.client.request(method, params, timeout=CALL_TIMEOUT)

    def pick(self, i, who=None):
        conns = [c for c in self.conns if who is None or c.who == who]
        return conns[i % len(conns)] if conns else None

    def url(self, kind, n):
        return {
            "bytes": self.upstream.url("/bytes/%d" % (n * 997)),
            "drip": self.upstream.url("/drip/%d?chunk=64&delay=5" % (n * 64)),
            "delay": self.upstream.url("/delay/%d" % (n * 20)),
            "status": self.upstream.url("/status/%d" % (200 + n % 400)),
            "redirect": self.upstream.url("/redirect/%d" % (n % 4)),
            "echo": self.upstream.url("/echo"),
            "refused": "http://127.0.0.1:1/",
            "ftp": "ftp://127.0.0.1/x",
            "junk": "not a url at all",
        }[kind]

    # ---- rules ------------------------------------------------------------------

    @precondition(lambda self: len(self.conns) < MAX_CONNECTIONS)
    @rule(who=st.sampled_from(USERS))
    def connect(self, who):
        token = next(p["token"] for p in PRINCIPALS if p["name"] == who)
        self.conns.append(Conn(who, Client.connect_tcp("127.0.0.1", self.server.tcp_port, token=token,
                                                       timeout=CALL_TIMEOUT)))

    @precondition(lambda self: self.conns)
    @rule(i=st.integers(0, 63), abrupt=st.booleans())
    def disconnect(self, i, abrupt):
        """Close a connection whatever it has in flight (abruptly: without reading on)."""
        c = self.pick(i)
        self.conns.remove(c)
        if abrupt:
            # Both directions at once, unread replies and all. (A close() alone would not
            # end it: the client's reader thread still holds the socket in recv.)
            c.client.sock.shutdown(socket.SHUT_RDWR)
        c.client.close()

    @precondition(lambda self: self.conns)
    @rule(i=st.integers(0, 63), named=st.booleans())
    def create(self, i, named):
        c = self.pick(i)
        params = {"request": "n%d" % len(self.known[c.who])} if named else None
        got = self.call(c, "create", params)
        if "result" in got:
            h = got["result"]["request"]
            c.requests.append(h)
            self.known[c.who].add(h)
        else:
            # Only a name already taken (by a request of another connection of the principal).
            assert got["error"]["data"]["reason"] in ("already_exists", "limit_exceeded"), got

    @precondition(lambda self: any(c.requests for c in self.conns))
    @rule(i=st.integers(0, 63), j=st.integers(0, 63),
          method=st.sampled_from(["GET", "POST", "PUT", "HEAD", "DELETE", "PATCH", "TRACE", "BAD METHOD", ""]),
          kind=st.sampled_from(["bytes", "drip", "delay", "status", "redirect", "echo", "refused", "ftp", "junk"]),
          n=st.integers(0, 20))
    def open(self, i, j, method, kind, n):
        c = self.pick(i, who=None)
        if not c.requests:
            return
        h = c.requests[j % len(c.requests)]
        got = self.call(c, "open", {"request": h, "method": method, "url": self.url(kind, n)})
        if method in ("TRACE", "BAD METHOD", "") or kind in ("ftp", "junk"):
            assert "error" in got, got

    @precondition(lambda self: self.conns)
    @rule(i=st.integers(0, 63), kind=st.sampled_from(["bytes", "drip", "delay", "redirect", "echo", "refused"]),
          n=st.integers(0, 20), method=st.sampled_from(["GET", "POST", "PUT"]), body=st.none() | st.text(max_size=64))
    def transfer(self, i, kind, n, method, body):
        """create, open and send in one batch: a transfer under way (often still in flight
        when a later step disconnects)."""
        c = self.pick(i)
        send = {"request": "t%d" % len(self.known[c.who]), "timeout": SEND_TIMEOUT}
        if body is not None:
            send["body"] = body
        replies = c.client.batch([("create", {"request": send["request"]}),
                                  ("open", {"request": send["request"], "method": method, "url": self.url(kind, n)}),
                                  ("send", send)], timeout=CALL_TIMEOUT)
        assert len(replies) == 3, replies
        if "result" in replies[0]:
            c.requests.append(send["request"])
            self.known[c.who].add(send["request"])
            assert all("result" in r for r in replies), replies
        else:
            assert replies[0]["error"]["data"]["reason"] in ("already_exists", "limit_exceeded"), replies

    @precondition(lambda self: any(c.requests for c in self.conns))
    @rule(i=st.integers(0, 63), j=st.integers(0, 63), body=st.none() | st.text(max_size=64))
    def send(self, i, j, body):
        c = self.pick(i)
        if not c.requests:
            return
        params = {"request": c.requests[j % len(c.requests)], "timeout": SEND_TIMEOUT}
        if body is not None:
            params["body"] = body
        self.call(c, "send", params)

    @precondition(lambda self: any(c.requests for c in self.conns))
    @rule(i=st.integers(0, 63), j=st.integers(0, 63),
          method=st.sampled_from(["getReceiveBuffer", "getState", "getStatus", "getAllResponseHeaders", "abort"]))
    def look(self, i, j, method):
        c = self.pick(i)
        if not c.requests:
            return
        got = self.call(c, method, {"request": c.requests[j % len(c.requests)]})
        if "error" in got:
            assert got["error"]["data"]["reason"] in ("invalid_state", "unknown_handle"), got

    @precondition(lambda self: any(c.requests for c in self.conns))
    @rule(i=st.integers(0, 63), j=st.integers(0, 63))
    def release(self, i, j):
        c = self.pick(i)
        if not c.requests:
            return
        h = c.requests.pop(j % len(c.requests))
        got = self.call(c, "release", {"request": h})
        assert "result" in got, got

    @precondition(lambda self: {c.who for c in self.conns} == set(USERS))
    @rule(i=st.integers(0, 63), j=st.integers(0, 255), method=st.sampled_from(sorted(HANDLE_METHODS)))
    def steal(self, i, j, method):
        """A handle of the other principal is unknown to this one, whatever the method."""
        thief = self.pick(i)
        other = USERS[1 - USERS.index(thief.who)]
        theirs = sorted(self.known[other] - self.known[thief.who])
        if not theirs:
            return
        key = "socket" if method.startswith("socket.") else "request"
        params = dict(HANDLE_METHODS[method], **{key: theirs[j % len(theirs)]})
        got = self.call(thief, method, params)
        assert "error" in got and got["error"]["code"] == -32001 \
            and got["error"]["data"]["reason"] == "unknown_handle", (method, got)

    @precondition(lambda self: self.conns)
    @rule(i=st.integers(0, 63))
    def list_shows_only_own(self, i):
        c = self.pick(i)
        got = self.call(c, "list")
        assert "result" in got, got
        other = USERS[1 - USERS.index(c.who)]
        seen = {e.get("request") or e.get("socket") for e in got["result"]}
        leaked = seen & (self.known[other] - self.known[c.who])
        assert not leaked, "%s sees %s's %s" % (c.who, other, sorted(leaked))

    @precondition(lambda self: self.conns)
    @rule(i=st.integers(0, 63), connect=st.booleans(), to_upstream=st.booleans())
    def socket(self, i, connect, to_upstream):
        c = self.pick(i)
        got = self.call(c, "socket.create", {"host": "127.0.0.1", "port": self.upstream.port if to_upstream else 1})
        if "error" in got:
            assert got["error"]["data"]["reason"] == "limit_exceeded", got
            return
        h = got["result"]["socket"]
        self.socket_handles.add(h)
        c.sockets.append(h)
        self.known[c.who].add(h)
        if connect:
            self.call(c, "socket.connect", {"socket": h, "timeout": SEND_TIMEOUT})

    @precondition(lambda self: any(c.sockets for c in self.conns))
    @rule(i=st.integers(0, 63), j=st.integers(0, 63))
    def socket_release(self, i, j):
        c = self.pick(i)
        if not c.sockets:
            return
        got = self.call(c, "socket.release", {"socket": c.sockets.pop(j % len(c.sockets))})
        assert "result" in got, got

    @precondition(lambda self: self.conns)
    @rule(i=st.integers(0, 63), method=st.sampled_from(METHODS),
          params=st.none() | st.lists(json_values, max_size=3) | st.dictionaries(
              st.sampled_from(["request", "socket", "url", "method", "body", "timeout", "header", "value", "x"]),
              json_values, max_size=4))
    def wrong_params(self, i, method, params):
        """Any declared method with params of any shape: answered (contract-checked), never fatal."""
        c = self.pick(i)
        got = self.call(c, method, params)
        # Random params may still make an object (create and socket.create need none).
        if "result" in got and method in ("create", "socket.create"):
            h = got["result"]["request" if method == "create" else "socket"]
            (c.requests if method == "create" else c.sockets).append(h)
            self.known[c.who].add(h)
            if method == "socket.create":
                self.socket_handles.add(h)

    @precondition(lambda self: self.conns)
    @rule(i=st.integers(0, 63))
    def detach(self, i):
        """The connection's requests and sockets outlive it: a token for attach."""
        c = self.pick(i)
        got = self.call(c, "detach")
        assert "result" in got, got
        r = got["result"]
        # Kept first, so that the teardown attaches (and so releases) them whatever follows.
        self.detached.append((c.who, r["token"], r["requests"]))
        assert set(r["requests"]) == set(c.requests + c.sockets), (r, c.requests, c.sockets)
        c.requests, c.sockets = [], []

    @precondition(lambda self: self.detached and self.conns)
    @rule(i=st.integers(0, 63), k=st.integers(0, 63))
    def attach(self, i, k):
        """A token of the connection's own principal: its handles become this connection's."""
        c = self.pick(i)
        mine = [d for d in self.detached if d[0] == c.who]
        if not mine:
            return
        who, token, handles = mine[k % len(mine)]
        self.detached.remove((who, token, handles))
        got = self.call(c, "attach", {"token": token})
        assert "result" in got and set(got["result"]["requests"]) == set(handles), (got, handles)
        for h in handles:
            (c.sockets if h in self.socket_handles else c.requests).append(h)

    @precondition(lambda self: self.detached and {c.who for c in self.conns} == set(USERS))
    @rule(i=st.integers(0, 63), k=st.integers(0, 63))
    def attach_theirs(self, i, k):
        """Another principal's detach token is unknown_handle."""
        thief = self.pick(i)
        theirs = [d for d in self.detached if d[0] != thief.who]
        if not theirs:
            return
        got = self.call(thief, "attach", {"token": theirs[k % len(theirs)][1]})
        assert "error" in got and got["error"]["data"]["reason"] == "unknown_handle", got

    @precondition(lambda self: self.conns)
    @rule(i=st.integers(0, 63), details=st.booleans())
    def subscribe_all(self, i, details):
        """Every event of the principal's objects; never another's (checked below)."""
        c = self.pick(i)
        got = self.call(c, "subscribe", {"all": True, "details": details})
        assert "result" in got or got["error"]["data"]["reason"] == "limit_exceeded", got

    # ---- invariants ---------------------------------------------------------------

    @invariant()
    def notifications_are_about_own_objects(self):
        for c in self.conns:
            other = USERS[1 - USERS.index(c.who)]
            theirs = self.known[other] - self.known[c.who]
            while True:
                try:
                    n = c.client.wait_notification(timeout=0)
                except (TimeoutError, ConnectionClosed):
                    break
                params = n.get("params") or {}
                about = params.get("request") or params.get("socket")
                assert about not in theirs, "%s heard of %s's %s: %s" % (c.who, other, about, n)

    @invariant()
    def daemon_alive_and_contract_kept(self):
        assert self.server.alive(), "xhrpcd died:\n%s" % self.server.stderr_text()
        found = contract.take_violations()
        assert not found, "replies broke api/openrpc.json:\n  " + "\n  ".join(found)

    def teardown(self):
        for c in self.conns:
            c.client.close()
        self.conns = []
        # Detachments outlive their connection: attach each, then close (releases them).
        for who, token, handles in self.detached:
            t = next(p["token"] for p in PRINCIPALS if p["name"] == who)
            with Client.connect_tcp("127.0.0.1", self.server.tcp_port, token=t, timeout=CALL_TIMEOUT) as c:
                got = c.request("attach", {"token": token}, timeout=CALL_TIMEOUT)
                assert "result" in got, got
        self.detached = []
        settled(self.server, self.baseline)


def totals(server):
    with Client.connect_tcp("127.0.0.1", server.tcp_port, token="stateful-ops-token", timeout=CALL_TIMEOUT) as ops:
        return ops.call("server.stats", timeout=CALL_TIMEOUT)["total"]


def idle(total):
    return (total["connections"] == 1 and not any(total["requests"].values())
            and not any(total.get("sockets", {}).values()) and total["transfersInFlight"] == 0
            and total["bufferedBytes"] == 0)


def settled(server, baseline):
    """Waits (bounded) until the daemon holds nothing; asserts fds and RSS against ``baseline``."""
    deadline = time.monotonic() + SETTLE_DEADLINE
    pid = server.proc.pid
    while True:
        total = totals(server)
        fds = fds_of(pid, DaemonMachine.upstream.port)
        if idle(total) and (baseline is None or fds == baseline[0]):
            break
        if time.monotonic() > deadline:
            raise AssertionError("not back to the baseline within %ss: stats total %s, %d descriptors (baseline %s)"
                                 % (SETTLE_DEADLINE, json.dumps(total), fds, baseline))
        try:  # polls the daemon's own figures until the deadline; ends at once if it dies
            server.proc.wait(0.05)
            raise AssertionError("xhrpcd exited while settling:\n%s" % server.stderr_text())
        except subprocess.TimeoutExpired:
            pass
    if baseline is not None:
        rss = rss_mib(pid)
        assert rss <= baseline[1] + RSS_SLACK_MIB, "RSS %.1f MiB, baseline %.1f MiB + %d MiB slack" % (
            rss, baseline[1], RSS_SLACK_MIB)
    return fds_of(pid, DaemonMachine.upstream.port), rss_mib(pid)


class StatefulTest(DaemonMachine.TestCase):
    settings = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck), print_blob=False,
                        derandomize=DERANDOMIZE,
                        phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if SHRINK else []))

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        DaemonMachine.upstream = Upstream().start()
        cls.addClassCleanup(DaemonMachine.upstream.stop)
        DaemonMachine.server = XhrpcServer(tcp=True, principals=PRINCIPALS).start()
        cls.addClassCleanup(cls._stop_server)
        # Warm up (libcurl's pool, the allocator), then take the baseline.
        warm = Client.connect_tcp("127.0.0.1", DaemonMachine.server.tcp_port, token=PRINCIPALS[0]["token"])
        for path in ("/bytes/100000", "/redirect/2", "/drip/640?chunk=64&delay=1"):
            warm.call("fetch", {"url": DaemonMachine.upstream.url(path), "timeout": SEND_TIMEOUT}, timeout=CALL_TIMEOUT)
        warm.close()
        DaemonMachine.baseline = None
        DaemonMachine.baseline = settled(DaemonMachine.server, None)

    @classmethod
    def _stop_server(cls):
        code = DaemonMachine.server.stop()
        if code != 0:
            raise AssertionError("xhrpcd exited with %r after SIGTERM:\n%s" % (code, DaemonMachine.server.stderr_text()))


if __name__ == "__main__":
    unittest.main()
