"""The ``xhrpc`` command (Sources/xhrpc, on the Swift client library Sources/XHRPCClient)
run as a user runs it, against the real xhrpcd and the fixture upstream.

Covers every subcommand (``call``, ``discover``, ``fetch``, ``watch``, ``socket``), each exit status
the command documents (0, 1, 3, 4, 22, 64), the connection options (``--socket``,
``--tcp`` with ``--token-file``, ``--tls`` with ``--ca-file``) and the progress bar,
which is drawn only when stderr is a terminal: ``script`` gives the command one.

The binary is ``$XHRPC`` if set, else ``xhrpc`` beside the server binary under test.
Every run has a deadline.
"""

import json
import os
import shlex
import shutil
import signal
import socket as pysocket
import subprocess
import tempfile
import threading
import unittest

from support import ServerTestCase, find_binary, pattern
from xhrpc import Client

RUN_DEADLINE = 60


def cli_binary():
    path = os.environ.get("XHRPC")
    if not path:
        server = find_binary()
        path = os.path.join(os.path.dirname(server), "xhrpc") if server else ""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise RuntimeError("the xhrpc command was not found at %r: build it (swift build --product xhrpc) "
                           "or set XHRPC" % path)
    return path


class CLICase(ServerTestCase):
    UPSTREAM = True

    @classmethod
    def setUpClass(cls):
        cls.cli = cli_binary()
        super().setUpClass()

    def run_cli(self, *args, socket=True, input=None, env=None):
        argv = [self.cli] + list(args)
        if socket:
            argv += ["--socket", self.server.socket_path]
        return subprocess.run(argv, input=input, capture_output=True, timeout=RUN_DEADLINE,
                              env=dict(os.environ, **(env or {})))

    def assertExit(self, proc, code):
        self.assertEqual(proc.returncode, code, "exit %d, stderr: %s" % (proc.returncode, proc.stderr.decode()))


class Call(CLICase):

    def test_call_prints_the_result_as_json(self):
        p = self.run_cli("call", "server.info")
        self.assertExit(p, 0)
        info = json.loads(p.stdout)
        self.assertEqual(info["name"], "xhrpcd")
        self.assertEqual(p.stdout.count(b"\n"), 1)

    def test_params_and_server_errors(self):
        p = self.run_cli("call", "create", '{"request":"cli-1"}')
        self.assertExit(p, 0)
        self.assertEqual(json.loads(p.stdout), {"request": "cli-1"})
        p = self.run_cli("call", "getState", '{"request":"no-such"}')
        self.assertExit(p, 1)
        self.assertIn(b"unknown_handle", p.stderr)
        self.assertEqual(p.stdout, b"")
        p = self.run_cli("call", "no.such.method")
        self.assertExit(p, 1)
        self.assertIn(b"-32601", p.stderr)

    def test_bad_command_lines_are_usage_errors(self):
        for args in (["call", "server.info", "not json"], ["call", "server.info", "42"], ["fetch"],
                     ["fetch", "http://x/", "-d", "a", "--json", "{}"], ["call", "server.info", "--tls"]):
            with self.subTest(args=args):
                self.assertExit(self.run_cli(*args), 64)

    def test_unreachable_server(self):
        p = self.run_cli("call", "server.info", "--socket", "/nonexistent/xhrpc.sock", socket=False)
        self.assertExit(p, 3)
        self.assertIn(b"cannot connect", p.stderr)

    def test_default_socket_path_follows_xdg_runtime_dir(self):
        with tempfile.TemporaryDirectory(dir="/tmp") as d:
            os.symlink(self.server.socket_path, os.path.join(d, "xhrpc.sock"))
            p = self.run_cli("call", "server.info", socket=False, env={"XDG_RUNTIME_DIR": d})
            self.assertExit(p, 0)

    def test_discover_lists_every_method(self):
        p = self.run_cli("discover")
        self.assertExit(p, 0)
        names = [line.split()[0] for line in p.stdout.decode().splitlines()]
        with Client.connect_unix(self.server.socket_path) as c:
            documented = [m["name"] for m in c.call("rpc.discover")["methods"]]
        self.assertEqual(names, documented)
        p = self.run_cli("discover", "--json")
        self.assertEqual([m["name"] for m in json.loads(p.stdout)["methods"]], documented)


class Fetch(CLICase):

    def test_body_to_stdout_and_to_a_file_byte_exact(self):
        n = 3 * 1024 * 1024 + 17
        p = self.run_cli("fetch", self.upstream.url("/bytes/%d?seed=5" % n))
        self.assertExit(p, 0)
        self.assertEqual(p.stdout, pattern.pattern_bytes(n, seed=5))
        self.assertEqual(p.stderr, b"", "no progress bar when stderr is not a terminal")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "body")
            p = self.run_cli("fetch", self.upstream.url("/chunked/%d?seed=6" % n), "-o", out)
            self.assertExit(p, 0)
            self.assertEqual(p.stdout, b"")
            with open(out, "rb") as f:
                self.assertEqual(f.read(), pattern.pattern_bytes(n, seed=6))

    def echo(self, *args):
        p = self.run_cli("fetch", self.upstream.url("/echo"), *args)
        self.assertExit(p, 0)
        return json.loads(p.stdout)

    def test_method_headers_and_bodies_reach_the_origin(self):
        e = self.echo("-X", "PUT", "-H", "X-One: 1", "-H", "X-Two:two  ", "-d", "a=1&b=2")
        self.assertEqual((e["method"], e["headers"]["x-one"], e["headers"]["x-two"]), ("PUT", "1", "two"))
        self.assertEqual(e["bodyBase64"], "YT0xJmI9Mg==")
        self.assertEqual(e["headers"]["content-type"], "application/x-www-form-urlencoded")
        e = self.echo("--json", '{"k": [1, 2]}')
        self.assertEqual(e["method"], "POST")
        self.assertEqual(e["headers"]["content-type"], "application/json")
        self.assertEqual(e["headers"]["accept"], "application/json")
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "up.bin")
            with open(f, "wb") as fh:
                fh.write(pattern.pattern_bytes(70000, seed=2))
            e = self.echo("-d", "@" + f, "-H", "Content-Type: application/octet-stream")
            self.assertEqual(e["bodyLength"], 70000)
            self.assertEqual(e["bodySha256"], pattern.pattern_sha256(70000, seed=2))
            e = self.echo("-F", "name=value one", "-F", "file=@" + f)
            ctype = e["headers"]["content-type"]
            self.assertTrue(ctype.startswith("multipart/form-data; boundary="), ctype)
            boundary = ctype.split("boundary=")[1].encode()
            import base64
            import hashlib
            body = base64.b64decode(e["bodyBase64"])
            parts = body.split(b"--" + boundary)
            self.assertEqual(parts[0], b"")
            self.assertEqual(parts[-1], b"--\r\n")
            self.assertEqual(parts[1], b'\r\nContent-Disposition: form-data; name="name"\r\n\r\nvalue one\r\n')
            head, _, content = parts[2].partition(b"\r\n\r\n")
            self.assertIn(b'name="file"; filename="up.bin"', head)
            self.assertEqual(hashlib.sha256(content[:-2]).hexdigest(), pattern.pattern_sha256(70000, seed=2))

    def test_include_prints_the_head_first(self):
        p = self.run_cli("fetch", "-i", self.upstream.url("/bytes/5"))
        self.assertExit(p, 0)
        head, _, body = p.stdout.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP 200 OK\r\n"), head)
        self.assertIn(b"Content-Length: 5", head)
        self.assertEqual(body, pattern.pattern_bytes(5))

    def test_status_and_failures_give_their_exit_status(self):
        self.assertExit(self.run_cli("fetch", self.upstream.url("/status/404")), 0)
        p = self.run_cli("fetch", "--fail", self.upstream.url("/status/404"))
        self.assertExit(p, 22)
        self.assertEqual(p.stdout, b"", "--fail writes no body of an error response")
        self.assertIn(b"404", p.stderr)
        p = self.run_cli("fetch", "http://127.0.0.1:1/")
        self.assertExit(p, 4)
        self.assertIn(b"no response", p.stderr)
        p = self.run_cli("fetch", "-H", "Content-Length: 0", self.upstream.url("/echo"))
        self.assertExit(p, 1)
        self.assertIn(b"forbidden_header", p.stderr)

    def test_progress_bar_on_a_terminal(self):
        if shutil.which("script") is None:
            self.fail("the script command (util-linux/bsdutils) is needed to give the command a terminal")
        n = 8 * 1024 * 1024
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "body")
            log = os.path.join(d, "tty")
            cmd = shlex.join([self.cli, "fetch", "--socket", self.server.socket_path, "-o", out,
                              self.upstream.url("/drip/%d?chunk=65521&delay=5" % n)])
            p = subprocess.run(["script", "-qec", cmd, log], capture_output=True, timeout=RUN_DEADLINE)
            self.assertExit(p, 0)
            screen = p.stdout.decode("utf-8", "replace")
            self.assertIn("100% [" + "#" * 24 + "]", screen)
            self.assertIn("8.0 MiB / 8.0 MiB", screen)
            self.assertIn("ETA", screen)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), pattern.pattern_bytes(n))
            cmd += " -s"
            p = subprocess.run(["script", "-qec", cmd, log], capture_output=True, timeout=RUN_DEADLINE)
            self.assertExit(p, 0)
            self.assertNotIn("ETA", p.stdout.decode("utf-8", "replace"))


class Watch(CLICase):

    def test_watch_prints_each_state_change_of_another_connections_request(self):
        proc = subprocess.Popen([self.cli, "watch", "--socket", self.server.socket_path],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait(RUN_DEADLINE)))
        # The subscription is made once "watching" is on stderr.
        line = proc.stderr.readline()
        self.assertIn(b"watching every request", line)
        with Client.connect_unix(self.server.socket_path) as c:
            c.call("create", {"request": "watched"})
            c.call("open", {"request": "watched", "method": "GET", "url": self.upstream.url("/bytes/10"),
                            "async": False})
            c.call("send", {"request": "watched"}, timeout=20)
        lines = []
        while not lines or lines[-1] != "watched DONE 200 OK":
            raw = proc.stdout.readline()
            self.assertTrue(raw, "watch ended early; got %r" % lines)
            text = raw.decode().strip()
            if " progress " not in text:
                lines.append(text)
        self.assertEqual(lines, ["watched OPENED", "watched SENT", "watched HEADERS_RECEIVED 200 OK",
                                 "watched LOADING 200 OK", "watched DONE 200 OK"])
        # SIGTERM, not SIGINT: a shell without job control starts background commands
        # with SIGINT ignored, and a test run may be such a command.
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(RUN_DEADLINE), -signal.SIGTERM)

    def test_watch_shows_an_unknown_size_as_unknown(self):
        proc = subprocess.Popen([self.cli, "watch", "--socket", self.server.socket_path],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait(RUN_DEADLINE)))
        self.assertIn(b"watching every request", proc.stderr.readline())
        with Client.connect_unix(self.server.socket_path) as c:
            for name, path in (("chunked", "/chunked/100000?chunk=1000"), ("sized", "/bytes/100000")):
                c.call("create", {"request": name})
                c.call("open", {"request": name, "method": "GET", "url": self.upstream.url(path), "async": False})
                c.call("send", {"request": name}, timeout=20)
        progress = {"chunked": [], "sized": []}
        done = set()
        while done != {"chunked", "sized"}:
            raw = proc.stdout.readline()
            self.assertTrue(raw, "watch ended early; got %r" % progress)
            name, _, rest = raw.decode().strip().partition(" ")
            if rest.startswith("progress "):
                progress[name].append(rest)
            elif rest.startswith("DONE"):
                done.add(name)
        self.assertEqual(progress["chunked"][-1], "progress 97.7 KiB / unknown")
        self.assertEqual(progress["sized"][-1], "progress 97.7 KiB / 97.7 KiB")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(RUN_DEADLINE), -signal.SIGTERM)


class Socket(CLICase):
    """``xhrpc socket HOST PORT``: standard input to a raw socket, what it receives to
    standard output, through the server (netcat over xhrpc)."""

    def peer(self, serve):
        """A one-connection TCP peer on 127.0.0.1 running ``serve(conn)``; its port."""
        listener = pysocket.create_server(("127.0.0.1", 0))
        self.addCleanup(listener.close)

        def run():
            listener.settimeout(RUN_DEADLINE)
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(RUN_DEADLINE)
                serve(conn)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.addCleanup(t.join, RUN_DEADLINE)
        return listener.getsockname()[1]

    def test_input_reaches_the_peer_and_its_answer_stdout_byte_exact(self):
        sent = pattern.pattern_bytes(200_000)

        def echo(conn):
            got = 0
            while got < len(sent):
                chunk = conn.recv(65536)
                if not chunk:
                    return
                got += len(chunk)
                conn.sendall(chunk)
        port = self.peer(echo)
        p = self.run_cli("socket", "--quit-after", "1", "127.0.0.1", str(port), input=sent)
        self.assertExit(p, 0)
        self.assertEqual(p.stdout, sent)
        with Client.connect_unix(self.server.socket_path) as c:
            stats = c.call("server.stats")
        self.assertGreaterEqual(stats["socketBytesSent"], len(sent))
        self.assertGreaterEqual(stats["socketBytesReceived"], len(sent))

    def test_a_peer_that_closes_first_ends_the_command(self):
        port = self.peer(lambda conn: conn.sendall(b"220 ready\r\n"))
        p = self.run_cli("socket", "127.0.0.1", str(port), input=b"")
        self.assertExit(p, 0)
        self.assertEqual(p.stdout, b"220 ready\r\n")

    def test_a_socket_that_cannot_open_exits_4_with_the_reason(self):
        closed = pysocket.create_server(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        p = self.run_cli("socket", "127.0.0.1", str(port), input=b"")
        self.assertExit(p, 4)
        self.assertIn(b"refused", p.stderr)
        p = self.run_cli("socket", "--insecure", "127.0.0.1", str(port), input=b"")
        self.assertExit(p, 64)


class OverTLSWithAToken(CLICase):
    TLS = True
    PRINCIPALS = ({"name": "dana", "token": "dana-" + "d" * 40},)

    def test_tls_and_token_file(self):
        with tempfile.TemporaryDirectory() as d:
            token = os.path.join(d, "token")
            with open(token, "w") as f:
                f.write("dana-" + "d" * 40 + "\n")
            base = ["--tcp", "127.0.0.1:%d" % self.server.tls_port, "--tls", "--ca-file", self.server.certs["ca"]]
            p = self.run_cli("call", "list", *base, "--token-file", token, socket=False)
            self.assertExit(p, 0)
            self.assertEqual(json.loads(p.stdout), [])
            with open(token, "w") as f:
                f.write("wrong")
            p = self.run_cli("call", "list", *base, "--token-file", token, socket=False)
            self.assertExit(p, 1)
            self.assertIn(b"unauthenticated", p.stderr)
            p = self.run_cli("call", "list", "--tcp", "127.0.0.1:%d" % self.server.tls_port, "--tls",
                             "--ca-file", self.server.certs["untrusted_ca"], socket=False)
            self.assertExit(p, 3)


if __name__ == "__main__":
    unittest.main()
