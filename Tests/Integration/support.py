"""Test support: start the real xhrpcd binary and the fixture upstream, compare messages.

The binary is ``$XHRPCD`` if set, else ``<repo>/.build/debug/xhrpcd``, else
``<repo>/.build/release/xhrpcd``.  A missing binary fails the tests (a CI run
must not pass by skipping everything); set ``XHRPC_SKIP_WITHOUT_SERVER=1`` to
skip instead.

Every wait here has a deadline; no test sleeps to let something happen.
"""

import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "Tests" / "Fixtures"
CLIENT_DIR = REPO / "clients" / "python"
for _p in (str(CLIENT_DIR), str(FIXTURES)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from xhrpc import Client  # noqa: E402
import pattern  # noqa: E402,F401  (re-exported for the tests)
import contract  # noqa: E402

# Every reply and notification any test's client receives is checked against
# api/openrpc.json; a mismatch fails the test (contract.py).
contract.install()

# Every request a recording origin got from xhrpcd is replayed, when the origin closes,
# to h11, llhttp and nginx (Tests/Fixtures/wire_parsers.py), which must each read it as
# the origin did; a disagreement fails the class that closed the origin. An origin fed
# by something else sets ``differential = False``.
import atexit  # noqa: E402
from recording_origin import RecordingOrigin  # noqa: E402

_wire_parsers = None
_origin_close = RecordingOrigin.close


def wire_parsers():
    """The parsers of the differential checks, started once per process."""
    global _wire_parsers
    if _wire_parsers is None:
        from wire_parsers import WireParsers
        _wire_parsers = WireParsers().start()
        atexit.register(_wire_parsers.close)
    return _wire_parsers


def _close_and_compare(self, timeout=5):
    _origin_close(self, timeout)
    records = self.records
    if not getattr(self, "differential", True) or not records:
        return
    parsers = wire_parsers()
    problems = ["#%d %s %s: %s" % (r.index, r.method, r.target, d) for r in records for d in parsers.differences(r)]
    if problems:
        raise AssertionError("h11, llhttp and nginx read %d of the %d requests xhrpcd sent unlike the "
                             "recording origin:\n    %s" % (len({p.split(":")[0] for p in problems}), len(records),
                                                            "\n    ".join(problems[:40])))


RecordingOrigin.close = _close_and_compare

START_DEADLINE = 20.0
STOP_DEADLINE = 15.0


def find_binary():
    """Path of the xhrpcd binary to test, or None."""
    env = os.environ.get("XHRPCD")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    for sub in ("debug", "release"):
        p = REPO / ".build" / sub / "xhrpcd"
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def require_binary():
    path = find_binary()
    if path is None:
        msg = ("xhrpcd binary not found: set XHRPCD or build it (swift build --product xhrpcd); "
               "looked at $XHRPCD, %s/.build/{debug,release}/xhrpcd" % REPO)
        if os.environ.get("XHRPC_SKIP_WITHOUT_SERVER") == "1":
            raise unittest.SkipTest(msg)
        raise RuntimeError(msg)
    return path


def free_tcp_ports(count, host="127.0.0.1"):
    """``count`` distinct ports that were free a moment ago: bound to 0 all at once, read,
    then closed. Taken one after another, the kernel may hand out the port it just got
    back (a TCP and a TLS listener were once given the same one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets = []
    try:
        for _ in range(count):
            sockets.append(socket.socket(family, socket.SOCK_STREAM))
            sockets[-1].bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_tcp_port(host="127.0.0.1"):
    """A port that was free a moment ago (``free_tcp_ports``)."""
    return free_tcp_ports(1, host)[0]


def _pause(proc, seconds):
    """Wait up to ``seconds`` for ``proc`` to exit; True if it exited.

    Used between connection attempts while a server starts: the wait ends at
    once if the process dies, so a crash is reported without delay.
    """
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def principal_entry(p):
    """A config-file principal from a test's description: the token becomes its SHA-256."""
    entry = {k: v for k, v in p.items() if k != "token"}
    if "token" in p:
        entry["tokenSha256"] = hashlib.sha256(p["token"].encode()).hexdigest()
    return entry


class XhrpcServer:
    """One xhrpcd process on a temporary Unix socket, optionally with a loopback TCP
    listener (``tcp=True``) and a loopback TLS listener (``tls=True``).

    With ``tls=True`` the test certificates (Tests/Fixtures/certs.py) are made in the
    server's temporary directory: ``certs`` maps their names to paths, the listener
    presents ``good_cert`` (localhost, 127.0.0.1, ::1; signed by ``ca``), and
    ``connect_tls()`` trusts ``ca``.
    """

    # Every upstream a test starts listens on loopback, which the server's default
    # egress policy denies; tests of the policy pass default_policy=True.
    LOOPBACK_ALLOW = ["--allow", "127.0.0.0/8", "--allow", "::1", "--allow", "localhost"]

    def __init__(self, tcp=False, args=(), log_level="warning", default_policy=False, env=None,
                 principals=None, config=None, tls=False):
        """``principals``: dicts with ``name``, ``token`` (plain; written hashed),
        and optionally ``uid``, ``admin``, ``limits``; with any, TCP clients must
        ``auth``, and without, TCP runs with ``--insecure-tcp``. ``config``: more keys
        for the config file. ``tls``: a TLS listener too, with certificates made here."""
        self.tcp = tcp
        self.principals = principals or []
        self.config = dict(config or {})
        self.tls = tls
        self.tls_port = None
        self.certs = None
        self.env = env  # variables added to this process's environment for the server
        self.default_policy = default_policy
        self.extra_args = list(args)
        self.log_level = log_level
        self.proc = None
        self.dir = None
        self.socket_path = None
        self.tcp_port = None

    def start(self):
        binary = require_binary()
        # /tmp keeps the socket path well under the 108-byte sun_path limit.
        self.dir = tempfile.mkdtemp(prefix="xhrpc-py-", dir="/tmp")
        self.socket_path = os.path.join(self.dir, "s.sock")
        argv = [binary, "--listen", "unix:" + self.socket_path, "--log-level", self.log_level]
        config = dict(self.config)
        if self.principals:
            config["principals"] = [principal_entry(p) for p in self.principals]
        if config:
            self.config_path = os.path.join(self.dir, "config.json")
            with open(self.config_path, "w") as f:
                json.dump(config, f)
            argv += ["--config", self.config_path]
        ports = free_tcp_ports(2)
        if self.tcp:
            self.tcp_port = ports[0]
            argv += ["--listen", "tcp:127.0.0.1:%d" % self.tcp_port]
        if self.tls:
            import certs  # Tests/Fixtures, on sys.path above
            self.certs = certs.make_all(os.path.join(self.dir, "certs"))
            self.tls_port = ports[1]
            argv += ["--listen", "tls:127.0.0.1:%d" % self.tls_port,
                     "--tls-cert", self.certs["good_cert"], "--tls-key", self.certs["good_key"]]
        if self.tcp or self.tls:
            # The one place for flags that every TCP or TLS listener needs.
            if not self.principals:
                argv.append("--insecure-tcp")
            argv += os.environ.get("XHRPC_TCP_ARGS", "").split()
        if not self.default_policy:
            argv += self.LOOPBACK_ALLOW
        argv += self.extra_args
        return self.launch(argv)

    def launch(self, argv):
        """Runs ``argv`` (the binary first) as the server and waits until it accepts.

        ``start`` builds the command line; a test that needs one of its own (an operator's
        exact command) sets ``dir`` (for the logs), ``socket_path`` and the ports it
        listens on (``tcp_port``, ``tls_port``), which are what readiness is checked on.
        """
        self.argv = argv
        self.stdout_path = os.path.join(self.dir, "stdout.log")
        self.stderr_path = os.path.join(self.dir, "stderr.log")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            env = dict(os.environ, **self.env) if self.env else None
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
        self._wait_ready()
        return self

    def _wait_ready(self):
        deadline = time.monotonic() + START_DEADLINE
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("xhrpcd exited with %s during start-up: %s\nstderr:\n%s" % (
                    self.proc.returncode, " ".join(self.argv), self.stderr_text()))
            if self._accepts():
                return
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("xhrpcd did not accept connections within %ss: %s\nstderr:\n%s" % (
                    START_DEADLINE, " ".join(self.argv), self.stderr_text()))
            _pause(self.proc, 0.02)

    def _accepts(self):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.connect(self.socket_path)
            for port in (self.tcp_port, self.tls_port):
                if port is not None:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        pass
            return True
        except OSError:
            return False

    def stderr_text(self, limit=20000):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def connect(self):
        return Client.connect_unix(self.socket_path)

    def connect_tcp(self, token=None):
        """A TCP client; with ``token``, already authenticated with it."""
        return Client.connect_tcp("127.0.0.1", self.tcp_port, token=token)

    def connect_as(self, name):
        """A TCP client authenticated as the principal called ``name``."""
        token = next(p["token"] for p in self.principals if p["name"] == name)
        return self.connect_tcp(token)

    def connect_tls(self, **kwargs):
        """A client of the TLS listener, trusting the test CA unless told otherwise."""
        if "context" not in kwargs:
            kwargs.setdefault("cafile", self.certs["ca"])
        return Client.connect_tls("127.0.0.1", self.tls_port, **kwargs)

    def raw_socket(self, timeout=10):
        """A plain connected Unix socket, for byte-level tests (its replies are checked
        against api/openrpc.json too: contract.CheckedSocket)."""
        s = contract.CheckedSocket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.socket_path)
        return s

    def stop(self):
        """SIGTERM, wait, clean up; return the exit code (None if it had to be killed)."""
        if self.proc is None:
            return 0
        code = self.proc.poll()
        if code is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=STOP_DEADLINE)
            except subprocess.TimeoutExpired:
                self.kill()
                code = None
        if code == 0 and self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return code

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_DEADLINE)


class Upstream:
    """The fixture upstream (``Tests/Fixtures/upstream.py``) on 127.0.0.1; ``args`` are
    more of its flags (``--tls-cert …`` for HTTPS).

    Any fixture that prints ``READY <port>`` and stops at stdin EOF starts the same way:
    ``script`` names it (in Tests/Fixtures; it must take ``--host``), ``env`` adds to its
    environment."""

    def __init__(self, host="127.0.0.1", args=(), script="upstream.py", env=None, wire_dump=False):
        """``wire_dump``: upstream.py keeps the raw bytes of every request it reads, and
        ``wire_differences()`` replays them to h11, llhttp and nginx."""
        self.host = host
        self.args = list(args)
        self.script = script
        self.env = env
        self.proc = None
        self.port = None
        self.dump_path = None
        if wire_dump:
            fd, self.dump_path = tempfile.mkstemp(prefix="xhrpc-wire-", suffix=".dump", dir="/tmp")
            os.close(fd)
            self.env = dict(env or {}, XHRPC_WIRE_DUMP=self.dump_path)

    def wire_differences(self):
        """Every way h11, llhttp and nginx disagree on a request the upstream read (once
        it stopped; [] without ``wire_dump``). The dump file is removed."""
        if not self.dump_path:
            return []
        from wire_parsers import read_dump
        try:
            raws = read_dump(self.dump_path)
        finally:
            os.unlink(self.dump_path)
            self.dump_path = None
        parsers = wire_parsers() if raws else None
        return ["%s: %s" % (raw.split(b"\r\n", 1)[0].decode("latin-1")[:200], d)
                for raw in raws for d in parsers.differences_of_raw(raw)]

    def start(self):
        self.stderr_file = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, str(FIXTURES / self.script), "--host", self.host] + self.args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file,
            env=dict(os.environ, **self.env) if self.env else None)
        deadline = time.monotonic() + START_DEADLINE
        line = b""
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()
                raise RuntimeError("upstream did not print READY within %ss" % START_DEADLINE)
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 256)
                if not chunk:
                    raise RuntimeError("%s exited before READY (code %s): %s" % (
                        self.script, self.proc.wait(5), self.stderr_text()))
                line += chunk
        if not line.startswith(b"READY ") or line.count(b"\n") != 1:
            raise RuntimeError("upstream printed %r instead of one READY line" % line)
        self.port = int(line.split()[1])
        return self

    def stderr_text(self, limit=20000):
        """What it wrote to stderr (empty once stopped)."""
        if self.stderr_file.closed:
            return ""
        self.stderr_file.seek(0)
        return self.stderr_file.read()[-limit:].decode("utf-8", "replace")

    @property
    def base(self):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "http://%s:%d" % (host, self.port)

    def url(self, path):
        return self.base + path

    def stop(self):
        """Close its stdin (which stops it) and return its exit code."""
        if self.proc is None:
            return 0
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_DEADLINE)
            code = None
        self.proc.stdout.close()
        self.stderr_file.close()
        return code


# --------------------------------------------------------------------------
# Exact comparison with placeholders for text meant for people.

class _Any:
    def __init__(self, kind, name):
        self.kind = kind
        self.name = name

    def matches(self, value):
        if self.kind is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, self.kind)

    def __repr__(self):
        return self.name


ANY_STR = _Any(str, "ANY_STR")
ANY_INT = _Any(int, "ANY_INT")
ANY_NUMBER = _Any((int, float), "ANY_NUMBER")


def mismatch(expected, got, path="$"):
    """First difference between ``expected`` (may hold ANY_* placeholders) and ``got``, or None.

    Types are compared strictly (1 is not 1.0 nor True), dict keys exactly.
    """
    if isinstance(expected, _Any):
        return None if expected.matches(got) else "%s: expected %r, got %r" % (path, expected, got)
    if type(expected) is not type(got):
        return "%s: expected %r (%s), got %r (%s)" % (
            path, expected, type(expected).__name__, got, type(got).__name__)
    if isinstance(expected, dict):
        if set(expected) != set(got):
            return "%s: keys differ: expected %s, got %s" % (path, sorted(expected), sorted(got))
        for k in expected:
            m = mismatch(expected[k], got[k], "%s.%s" % (path, k))
            if m:
                return m
        return None
    if isinstance(expected, list):
        if len(expected) != len(got):
            return "%s: expected %d items, got %d: %s" % (path, len(expected), len(got), _short(got))
        for i, (e, g) in enumerate(zip(expected, got)):
            m = mismatch(e, g, "%s[%d]" % (path, i))
            if m:
                return m
        return None
    return None if expected == got else "%s: expected %r, got %r" % (path, expected, got)


def _short(v, limit=600):
    s = json.dumps(v, ensure_ascii=False, default=repr)
    return s if len(s) <= limit else s[:limit] + "…"


def is_compact_json_line(raw):
    """True when ``raw`` (one line without its newline) has no white space outside strings."""
    in_string = False
    escaped = False
    for b in raw:
        if in_string:
            if escaped:
                escaped = False
            elif b == 0x5C:
                escaped = True
            elif b == 0x22:
                in_string = False
        elif b == 0x22:
            in_string = True
        elif b in (0x20, 0x09, 0x0A, 0x0D):
            return False
    return not in_string


# Expected error objects, as the server builds them (Sources/JSONRPC/RPCError.swift):
# the `detail` and `offset` texts are for people and are matched by type only.

def err(code, message, data=None, id=None):
    e = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    return {"jsonrpc": "2.0", "error": e, "id": id}


def parse_error():
    return err(-32700, "Parse error", {"detail": ANY_STR, "offset": ANY_INT}, None)


def invalid_request(id=None):
    return err(-32600, "Invalid Request", {"detail": ANY_STR}, id)


def method_not_found(method, id):
    return err(-32601, "Method not found", {"method": method}, id)


def invalid_params(id):
    return err(-32602, "Invalid params", {"detail": ANY_STR}, id)


def result(value, id):
    return {"jsonrpc": "2.0", "result": value, "id": id}


SERVER_INFO = {"name": ANY_STR, "version": ANY_STR, "uptimeSeconds": ANY_NUMBER, "connections": ANY_INT}


def req(method, id=None, params=None, notification=False):
    """A request object (a dict); ``notification=True`` leaves out the id."""
    m = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        m["params"] = params
    if not notification:
        m["id"] = id
    return m


def line(obj):
    """Compact JSON of ``obj`` plus a newline, as bytes."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


class ServerTestCase(unittest.TestCase):
    """Starts one xhrpcd per test class (and the upstream when ``UPSTREAM``).

    The class fails in tearDownClass when the server does not exit 0 on SIGTERM,
    and each test fails when the server died during it.
    """

    SERVER_ARGS = ()
    TCP = False
    TLS = False             # True: a TLS listener too (XhrpcServer(tls=True))
    UPSTREAM = False
    DEFAULT_POLICY = False  # True: the server's own egress policy, loopback denied
    LOG_LEVEL = "warning"   # lower it for a test that reads the server's log
    PRINCIPALS = ()         # see XhrpcServer
    CONFIG = None           # more config-file keys
    server = None
    upstream = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if cls.UPSTREAM:
            cls.upstream = Upstream(wire_dump=True).start()
            cls.addClassCleanup(cls._stop_upstream)
        cls.server = XhrpcServer(tcp=cls.TCP, args=cls.server_args(), log_level=cls.LOG_LEVEL,
                                 default_policy=cls.DEFAULT_POLICY, principals=list(cls.PRINCIPALS),
                                 config=cls.CONFIG, tls=cls.TLS).start()

    @classmethod
    def server_args(cls):
        """The server's extra flags; a subclass may compute them from the upstream."""
        return cls.SERVER_ARGS

    @classmethod
    def _stop_upstream(cls):
        code = cls.upstream.stop()
        if code != 0:
            raise AssertionError("fixture upstream exited with %r" % code)
        # What xhrpcd sent it, read alike by h11, llhttp and nginx (wire_parsers.py).
        problems = cls.upstream.wire_differences()
        if problems:
            raise AssertionError("h11, llhttp and nginx disagree on %d requests the upstream read:\n    %s"
                                 % (len(problems), "\n    ".join(problems[:40])))

    @classmethod
    def tearDownClass(cls):
        server, cls.server = cls.server, None
        if server is not None:
            code = server.stop()
            if code != 0:
                raise AssertionError("xhrpcd exited with %r after SIGTERM (expected 0)\nstderr:\n%s" % (
                    code, server.stderr_text()))
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.addCleanup(self._check_alive)

    def _check_alive(self):
        if not self.server.alive():
            self.fail("xhrpcd died during the test (exit %r)\nstderr:\n%s" % (
                self.server.proc.returncode, self.server.stderr_text()))

    def connect(self):
        c = self.server.connect()
        self.addCleanup(c.close)
        return c

    def assertMessage(self, expected, got, note=""):
        m = mismatch(expected, got)
        if m:
            self.fail("%s%s\n  expected: %s\n  got:      %s" % (
                note + ": " if note else "", m, _short(expected, 2000), _short(got, 2000)))

    def assertNextMessages(self, client, expected, timeout=10, note=""):
        """The next len(expected) messages on ``client`` are exactly ``expected``, in order."""
        got = []
        for i in range(len(expected)):
            try:
                got.append(client.read_message(timeout))
            except Exception as e:
                self.fail("%smessage %d of %d did not arrive (%s: %s); got so far: %s" % (
                    note + ": " if note else "", i + 1, len(expected), type(e).__name__, e, _short(got)))
        self.assertMessage(expected, got, note)
        return got

    def assertNoReplyBefore(self, client, sentinel_id=987654, note=""):
        """Nothing was answered before a sentinel call made now (replies come in order)."""
        client.send(req("server.info", sentinel_id))
        msg = client.read_message(10)
        self.assertMessage(result(SERVER_INFO, sentinel_id), msg, note or "expected no reply before the sentinel")


class ScriptedPeer:
    """The server side of a socketpair: reads the client's lines, writes bytes back (the
    Python client's own tests, and the interceptor tests that play a server by hand)."""

    def __init__(self, sock):
        self.sock = sock
        self.sock.settimeout(5)
        self.buf = b""

    def read_line(self):
        deadline = time.monotonic() + 5
        while b"\n" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no line from the client")
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("client closed")
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def write(self, data):
        self.sock.sendall(data)

    def send(self, *msgs):
        self.write(b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in msgs))
