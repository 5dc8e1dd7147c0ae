"""The Python client as a package: its default socket, its helpers, and its install.

- ``default_socket_path()`` against the server's rule, in subprocesses whose
  environment has XDG_RUNTIME_DIR set, empty and unset.
- ``fetch``, ``read_body`` and ``download`` of the synchronous client against the
  fixture upstream, bodies compared byte for byte with Tests/Fixtures/pattern.py.
- The build backend (clients/python/_backend): its TOML reader agrees with
  ``tomllib``, the wheel holds what it should, and a version mismatch stops it.
- ``pip install`` of a copy of clients/python into a fresh venv, with no package
  index; then, from that venv's python (no PYTHONPATH, working directory ``/``),
  ``connect_unix()`` with no path finds a real xhrpcd started with no ``--listen``
  under a private XDG_RUNTIME_DIR, synchronous and asyncio, and every example of
  README.md runs as written against it.

Every wait has a deadline; subprocesses too.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import support
from support import CLIENT_DIR, ServerTestCase, XhrpcServer, pattern, require_binary

from xhrpc import RPCError, TransferError, decode_body

SUBPROCESS_DEADLINE = 60   # one python -c run
VENV_DEADLINE = 120        # python -m venv (it runs ensurepip)
PIP_DEADLINE = 180         # pip install of the package, no index

sys.path.insert(0, str(CLIENT_DIR / "_backend"))
import xhrpc_backend  # noqa: E402


def run_python(code, env, cwd="/", python=sys.executable, timeout=SUBPROCESS_DEADLINE):
    """Run ``python -c code`` with exactly ``env``; return its stdout parsed as JSON."""
    done = subprocess.run([python, "-c", code], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError("python -c exited %d\nstdout:\n%s\nstderr:\n%s" % (
            done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")))
    return json.loads(done.stdout)


def clean_env(**changes):
    """This process's environment without PYTHON* variables, with ``changes``
    (a value of None removes the variable)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


# The client from the source tree, in a subprocess (cwd / so nothing else is found).
SOURCE_PATH = "import sys; sys.path.insert(0, %r)\n" % str(CLIENT_DIR)


class DefaultSocketPath(unittest.TestCase):
    """The helper mirrors ``ListenAddress.defaultUnix`` (Sources/Service/Listening/ListenAddress.swift)."""

    CODE = SOURCE_PATH + "import json, xhrpc; print(json.dumps(xhrpc.default_socket_path()))"

    def test_xdg_runtime_dir_set(self):
        self.assertEqual(run_python(self.CODE, clean_env(XDG_RUNTIME_DIR="/run/user/4242")),
                         "/run/user/4242/xhrpc.sock")

    def test_xdg_runtime_dir_joined_as_the_server_joins_it(self):
        # The server appends "/xhrpc.sock" to the value as it is.
        self.assertEqual(run_python(self.CODE, clean_env(XDG_RUNTIME_DIR="/run/user/4242/")),
                         "/run/user/4242//xhrpc.sock")

    def test_xdg_runtime_dir_unset(self):
        self.assertEqual(run_python(self.CODE, clean_env(XDG_RUNTIME_DIR=None)),
                         "/tmp/xhrpc-%d.sock" % os.getuid())

    def test_xdg_runtime_dir_empty_counts_as_unset(self):
        self.assertEqual(run_python(self.CODE, clean_env(XDG_RUNTIME_DIR="")),
                         "/tmp/xhrpc-%d.sock" % os.getuid())

    def test_environ_argument(self):
        from xhrpc import default_socket_path
        self.assertEqual(default_socket_path({"XDG_RUNTIME_DIR": "/r"}), "/r/xhrpc.sock")
        self.assertEqual(default_socket_path({}), "/tmp/xhrpc-%d.sock" % os.getuid())

    def test_no_server_at_the_default_socket_says_where_it_looked(self):
        with tempfile.TemporaryDirectory(prefix="xhrpc-py-xdg-", dir="/tmp") as d:
            code = SOURCE_PATH + (
                "import json, xhrpc\n"
                "try:\n"
                "    xhrpc.Client.connect_unix()\n"
                "except FileNotFoundError as e:\n"
                "    print(json.dumps(str(e)))\n")
            message = run_python(code, clean_env(XDG_RUNTIME_DIR=d))
        self.assertIn(d + "/xhrpc.sock", message)
        self.assertIn("XDG_RUNTIME_DIR", message)


class SyncHelpers(ServerTestCase):
    """``fetch``, ``read_body`` and ``download`` of the synchronous client."""

    UPSTREAM = True

    def test_fetch_bytes_exact(self):
        c = self.connect()
        for n in (0, 1000, 65521 * 3 + 7):
            r = c.fetch(self.upstream.url("/bytes/%d" % n), response_type="base64")
            self.assertEqual(r["status"], 200)
            self.assertEqual(decode_body(r), pattern.pattern_bytes(n), n)

    def test_fetch_method_headers_body(self):
        c = self.connect()
        r = c.fetch(self.upstream.url("/echo"), method="PUT", headers={"X-Test": "yes"},
                    body=b"\x00\xffbinary", timeout=30, response_type="json")
        self.assertEqual((r["status"], r["encoding"]), (200, "json"))
        echo = r["body"]
        self.assertEqual((echo["method"], echo["headers"]["x-test"], echo["bodyBase64"]),
                         ("PUT", "yes", "AP9iaW5hcnk="))
        r = c.fetch(self.upstream.url("/echo"), method="POST", body="text é", response_type="json")
        self.assertEqual(r["body"]["bodySha256"], hashlib.sha256("text é".encode()).hexdigest())

    def test_fetch_errors_raise_rpc_error(self):
        c = self.connect()
        with self.assertRaises(RPCError) as cm:
            c.fetch(self.upstream.url("/echo"), headers={"Content-Length": "1"})
        self.assertEqual((cm.exception.code, cm.exception.reason), (-32602, "forbidden_header"))

    def start_get(self, c, path):
        r = c.call("create")["request"]
        for resp in c.batch([("open", {"request": r, "method": "GET", "url": self.upstream.url(path)}),
                             ("send", {"request": r})]):
            self.assertIn("result", resp)
        return r

    def test_read_body_multi_mib_byte_exact(self):
        # 20 MiB: more than --max-buffer-bytes (8 MiB), so the transfer pauses and
        # resumes as the reads drain it.
        n = 20 << 20
        c = self.connect()
        r = self.start_get(c, "/bytes/%d" % n)
        body = c.read_body(r, timeout=60)
        self.assertEqual(len(body), n)
        self.assertEqual(hashlib.sha256(body).hexdigest(), pattern.pattern_sha256(n))
        # read_body leaves the request's notifications for whoever waits for them.
        done = c.wait_notification(lambda m: m["params"].get("request") == r and m["params"]["state"] == 5)
        self.assertEqual(done["params"]["status"], 200)

    def test_read_body_of_a_slow_body_waits_and_misses_nothing(self):
        c = self.connect()
        r = self.start_get(c, "/drip/3000?chunk=300&delay=20")
        self.assertEqual(c.read_body(r, timeout=30, max_bytes=256), pattern.pattern_bytes(3000))

    def test_read_body_deadline(self):
        c = self.connect()
        r = self.start_get(c, "/hang")
        with self.assertRaises(TimeoutError):
            c.read_body(r, timeout=0.3)
        self.assertTrue(c.call("abort", {"request": r}))

    def download(self, c, path, name, **kwargs):
        target = os.path.join(self.tmp, name)
        calls = []
        status = c.download(self.upstream.url(path), target, progress=lambda a, b: calls.append((a, b)),
                            timeout=60, **kwargs)
        return status, target, calls

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="xhrpc-py-dl-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def assertMonotonic(self, calls, n, total):
        """Each write's call says more than the one before, with ``total``; the last
        call says ``(n, n)`` (a call of its own when ``total`` was not ``n``)."""
        writes = calls if total == n else calls[:-1]
        received = [a for a, _ in writes]
        self.assertEqual(received, sorted(set(received)), "received must grow at every write")
        self.assertTrue(all(t == total for _, t in writes), calls)
        self.assertEqual(calls[-1], (n, n))

    def assertFile(self, target, n, status=200, got_status=200):
        self.assertEqual(got_status, status)
        self.assertFalse(os.path.exists(target + ".part"))
        with open(target, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), pattern.pattern_sha256(n))

    def test_download_with_progress(self):
        n = 12 << 20
        c = self.connect()
        status, target, calls = self.download(c, "/bytes/%d" % n, "big.bin", max_bytes=1 << 20)
        self.assertFile(target, n, got_status=status)
        self.assertGreaterEqual(len(calls), 12)
        self.assertMonotonic(calls, n, total=n)
        self.assertEqual(c.pending(), [])
        self.assertEqual(list_handles(c), [])

    def test_download_without_content_length(self):
        n = 300000
        c = self.connect()
        status, target, calls = self.download(c, "/chunked/%d" % n, "chunked.bin", max_bytes=50000)
        self.assertFile(target, n, got_status=status)
        self.assertMonotonic(calls, n, total=-1)

    def test_download_of_a_decoded_body_has_no_total(self):
        n = 200000
        c = self.connect()
        status, target, calls = self.download(c, "/gzip/%d" % n, "gzip.bin")
        self.assertFile(target, n, got_status=status)
        self.assertMonotonic(calls, n, total=-1)

    def test_download_of_a_slow_body(self):
        c = self.connect()
        status, target, calls = self.download(c, "/drip/4000?chunk=400&delay=20", "drip.bin")
        self.assertFile(target, 4000, got_status=status)
        self.assertMonotonic(calls, 4000, total=4000)

    def test_download_of_an_empty_body(self):
        c = self.connect()
        status, target, calls = self.download(c, "/bytes/0", "empty.bin")
        self.assertFile(target, 0, got_status=status)
        self.assertEqual(calls, [(0, 0)])

    def test_download_keeps_other_statuses(self):
        c = self.connect()
        status, target, _ = self.download(c, "/status/404", "404.bin")
        self.assertEqual(status, 404)
        self.assertTrue(os.path.exists(target))
        self.assertFalse(os.path.exists(target + ".part"))

    def test_download_cut_short_raises_and_leaves_no_file(self):
        c = self.connect()
        target = os.path.join(self.tmp, "cut.bin")
        with open(target, "wb") as f:
            f.write(b"before")
        with self.assertRaises(TransferError) as cm:
            c.download(self.upstream.url("/close-early/100000"), target, timeout=30)
        # How much was read before the end depends on when the reads came.
        self.assertLessEqual(cm.exception.received, 100000)
        self.assertTrue(cm.exception.status_text)
        self.assertFalse(os.path.exists(target + ".part"))
        with open(target, "rb") as f:
            self.assertEqual(f.read(), b"before", "a failed download leaves the old file as it was")
        self.assertEqual(list_handles(c), [])
        self.assertEqual(c.pending(), [])

    def test_download_refused_header_raises_rpc_error(self):
        c = self.connect()
        target = os.path.join(self.tmp, "refused.bin")
        with self.assertRaises(RPCError) as cm:
            c.download(self.upstream.url("/bytes/10"), target, headers={"Host": "x"}, timeout=30)
        self.assertEqual(cm.exception.reason, "forbidden_header")
        self.assertFalse(os.path.exists(target + ".part"))
        self.assertFalse(os.path.exists(target))
        self.assertEqual(list_handles(c), [])


class DownloadCleanup(ServerTestCase):
    """A download gives back its request and its subscription however it ends: with
    ``--limit requests=1`` (subscriptions share that limit) any leftover would make
    the next download's create or subscribe fail with limit_exceeded."""

    UPSTREAM = True
    SERVER_ARGS = ("--limit", "requests=1")

    def test_every_ending_gives_back_what_it_took(self):
        c = self.connect()
        tmp = tempfile.mkdtemp(prefix="xhrpc-py-dl-")
        self.addCleanup(shutil.rmtree, tmp, True)
        target = os.path.join(tmp, "f.bin")
        for _ in range(3):
            with self.assertRaises(RPCError) as cm:
                c.download(self.upstream.url("/bytes/10"), target, headers={"Connection": "close"}, timeout=30)
            self.assertEqual(cm.exception.reason, "forbidden_header")
            with self.assertRaises(TransferError):
                c.download(self.upstream.url("/close-early/1000"), target, timeout=30)
            self.assertEqual(c.download(self.upstream.url("/bytes/1000"), target, timeout=30), 200)
            with open(target, "rb") as f:
                self.assertEqual(f.read(), pattern.pattern_bytes(1000))
        self.assertEqual(list_handles(c), [])
        self.assertEqual(c.pending(), [])


def list_handles(c):
    """The handles of the caller's requests (``list``)."""
    return [r["request"] for r in c.call("list")]


class BuildBackend(unittest.TestCase):
    """clients/python/_backend/xhrpc_backend.py, the package's own PEP 517 backend."""

    def test_toml_reader_agrees_with_tomllib(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("tomllib is Python 3.11+; the reader is used below that")
        text = (CLIENT_DIR / "pyproject.toml").read_text(encoding="utf-8")
        self.assertEqual(xhrpc_backend.parse_toml_subset(text), tomllib.loads(text))

    def test_toml_reader_refuses_what_it_does_not_know(self):
        for text in ('[[a]]\n', 'a = """x"""\n', 'a = 1.5\n', 'a = "x" b\n', 'a = 1\na = 2\n'):
            with self.assertRaises(xhrpc_backend.TOMLSubsetError, msg=text):
                xhrpc_backend.parse_toml_subset(text)

    def test_wheel_contents(self):
        with tempfile.TemporaryDirectory() as out:
            name = xhrpc_backend.build_wheel(out)
            self.assertEqual(name, "xhrpc-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(out, name)) as z:
                names = sorted(z.namelist())
                meta = z.read("xhrpc-0.1.0.dist-info/METADATA").decode()
                record = z.read("xhrpc-0.1.0.dist-info/RECORD").decode()
        self.assertEqual(names, ["xhrpc-0.1.0.dist-info/METADATA", "xhrpc-0.1.0.dist-info/RECORD",
                                 "xhrpc-0.1.0.dist-info/WHEEL", "xhrpc/__init__.py", "xhrpc/aio.py",
                                 "xhrpc/client.py", "xhrpc/py.typed"])
        for line in ("Name: xhrpc", "Version: 0.1.0", "License: Apache-2.0", "Requires-Python: >=3.9"):
            self.assertIn(line + "\n", meta)
        self.assertNotIn("Requires-Dist", meta)
        self.assertEqual(len(record.splitlines()), len(names))

    def test_version_mismatch_stops_the_build(self):
        with tempfile.TemporaryDirectory() as root:
            shutil.copy(CLIENT_DIR / "pyproject.toml", root)
            shutil.copy(CLIENT_DIR / "README.md", root)
            os.mkdir(os.path.join(root, "xhrpc"))
            with open(os.path.join(root, "xhrpc", "__init__.py"), "w") as f:
                f.write('__version__ = "9.9.9"\n')
            with self.assertRaisesRegex(ValueError, "9.9.9"):
                xhrpc_backend._Project(root)


class InstalledPackage(unittest.TestCase):
    """``pip install`` into a fresh venv with no package index (the package needs no
    network), then, from that venv's python (cwd ``/`` or a scratch directory, no
    PYTHONPATH): a call on the default socket of a server started without
    ``--listen`` (under a private XDG_RUNTIME_DIR), and every example of README.md."""

    README_URL_PATH = "/bytes/200000?seed=3"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        binary = require_binary()
        cls.work = tempfile.mkdtemp(prefix="xhrpc-py-pkg-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.work, True)
        cls.upstream = support.Upstream().start()
        cls.addClassCleanup(cls.upstream.stop)
        cls.runtime_dir = os.path.join(cls.work, "runtime")
        os.mkdir(cls.runtime_dir, 0o700)
        cls.server = XhrpcServer(env={"XDG_RUNTIME_DIR": cls.runtime_dir})
        cls.server.dir = cls.runtime_dir
        cls.server.socket_path = os.path.join(cls.runtime_dir, "xhrpc.sock")
        cls.server.launch([binary, "--log-level", "warning"] + XhrpcServer.LOOPBACK_ALLOW)
        cls.addClassCleanup(cls._stop_server)
        cls.python = cls._install(cls.work)

    @classmethod
    def _stop_server(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError("xhrpcd exited with %r after SIGTERM\n%s" % (code, cls.server.stderr_text()))

    @classmethod
    def _install(cls, work):
        """A venv in ``work`` with a copy of clients/python installed; its python."""
        # A copy, so that the build leaves nothing in the source tree and two runs at
        # once do not meet.
        src = os.path.join(work, "src")
        os.mkdir(src)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(CLIENT_DIR / name, src)
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(CLIENT_DIR / "xhrpc", os.path.join(src, "xhrpc"), ignore=ignore)
        shutil.copytree(CLIENT_DIR / "_backend", os.path.join(src, "_backend"), ignore=ignore)
        venv = os.path.join(work, "venv")
        python = os.path.join(venv, "bin", "python")
        env = clean_env(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1",
                        PIP_FIND_LINKS=None, PIP_INDEX_URL=None, PIP_EXTRA_INDEX_URL=None)
        steps = [([sys.executable, "-m", "venv", venv], VENV_DEADLINE),
                 ([python, "-m", "pip", "install", "--no-index", src], PIP_DEADLINE)]
        for argv, deadline in steps:
            done = subprocess.run(argv, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=deadline)
            if done.returncode != 0:
                raise AssertionError("%s exited %d:\n%s" % (" ".join(argv), done.returncode,
                                                            done.stdout.decode(errors="replace")))
        left = sorted(os.listdir(src))
        if left != ["README.md", "_backend", "pyproject.toml", "xhrpc"]:
            raise AssertionError("the build left files in the source directory: %s" % left)
        return python

    def env(self):
        return clean_env(XDG_RUNTIME_DIR=self.runtime_dir)

    CHECK = (
        "import asyncio, importlib.metadata as md, json, os\n"
        "import xhrpc\n"
        "with xhrpc.Client.connect_unix() as c:\n"
        "    info = c.call('server.info')\n"
        "async def main():\n"
        "    async with await xhrpc.AsyncClient.connect_unix() as c:\n"
        "        return await c.call('server.info')\n"
        "meta = md.metadata('xhrpc')\n"
        "print(json.dumps({'file': xhrpc.__file__, 'path': xhrpc.default_socket_path(),\n"
        "                  'version': md.version('xhrpc'), 'license': meta['License'],\n"
        "                  'requiresPython': meta['Requires-Python'],\n"
        "                  'typed': os.path.exists(os.path.join(os.path.dirname(xhrpc.__file__), 'py.typed')),\n"
        "                  'info': info, 'aioInfo': asyncio.run(main())}))\n")

    def test_imported_from_the_venv_finds_the_server_on_its_default_socket(self):
        got = run_python(self.CHECK, self.env(), cwd="/", python=self.python)
        venv = os.path.dirname(os.path.dirname(self.python)) + os.sep
        self.assertTrue(got["file"].startswith(venv), "xhrpc imported from %s, not from the venv" % got["file"])
        self.assertEqual(got["path"], self.server.socket_path)
        self.assertEqual((got["version"], got["license"], got["requiresPython"], got["typed"]),
                         ("0.1.0", "Apache-2.0", ">=3.9", True))
        self.assertEqual(got["info"]["name"], "xhrpcd")
        self.assertEqual(got["aioInfo"]["name"], "xhrpcd")

    def test_readme_examples_run_as_written(self):
        text = (CLIENT_DIR / "README.md").read_text(encoding="utf-8")
        blocks = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
        self.assertGreaterEqual(len(blocks), 4, "the README's python examples")
        where = os.path.join(self.work, "examples")
        os.mkdir(where)
        url = self.upstream.url(self.README_URL_PATH)
        for i, code in enumerate(blocks, 1):
            with self.subTest(example=i):
                path = os.path.join(where, "example-%d.py" % i)
                with open(path, "w") as f:
                    f.write(code)
                done = subprocess.run([self.python, path, url], env=self.env(), cwd=where,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      timeout=SUBPROCESS_DEADLINE)
                what = "README example %d exited %d\n%s\nstdout:\n%s\nstderr:\n%s" % (
                    i, done.returncode, code, done.stdout.decode(errors="replace"),
                    done.stderr.decode(errors="replace"))
                self.assertEqual((done.returncode, done.stderr), (0, b""), what)
                self.assertNotEqual(done.stdout, b"", what)
        self.assertTrue(self.server.alive(), "xhrpcd died")
        downloads = sorted(f for f in os.listdir(where) if f.startswith("download"))
        self.assertEqual(downloads, ["download-aio.out", "download.out"])
        for name in downloads:
            with open(os.path.join(where, name), "rb") as f:
                self.assertEqual(f.read(), pattern.pattern_bytes(200000, seed=3), name)


if __name__ == "__main__":
    unittest.main()
