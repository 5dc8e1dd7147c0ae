"""``upload`` and ``download``, the server-side transfers, against the fixture upstream.

A download writes ``NAME.part`` below ``--download-root`` (0600, folders 0700) and
renames it to ``NAME`` only when the body is whole with a 2xx status; ``resume: true``
continues a part with ``Range`` and ``If-Range`` (the validator kept in
``NAME.part.meta``). The upstream's ``/ranged/N`` serves pattern bytes by offset with an
ETag and byte ranges, and echoes the ``Range`` and ``If-Range`` it received in
``X-Seen-Range`` / ``X-Seen-If-Range``. Every wait has a deadline.
"""

import asyncio
import base64
import hashlib
import json
import os
import shutil
import socket
import stat
import tempfile
import time
import unittest

from support import ServerTestCase, XhrpcServer, pattern, req
from test_fetch_serializers import parse_multipart
from xhrpc import AsyncClient, RPCError

N = 300_001
ETAG = '"p%ds0"' % N
FOUR_GIB = 1 << 32


def sha(data):
    return hashlib.sha256(data).hexdigest()


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def run_transfer(c, method, params, timeout=60):
    """Starts ``method`` with a progress subscription in one batch; returns its result,
    the DONE notification's params, the progress params in order, and the response
    headers (lower-case names); the request is released."""
    name = params["request"]
    started, sub = c.batch([(method, params), ("subscribe", {"request": name, "events": ["progress"]})])
    if "error" in started:
        raise RPCError(started["error"]["code"], started["error"]["message"], started["error"].get("data"))
    progress = []
    deadline = time.monotonic() + timeout
    while True:
        msg = c.wait_notification(lambda m: (m.get("params") or {}).get("request") == name,
                                  max(0.1, deadline - time.monotonic()))
        if msg["method"] == "onProgress":
            progress.append(msg["params"])
        elif msg["params"]["state"] == 5:
            done = msg["params"]
            break
    text = c.call("getAllResponseHeaders", {"request": name})
    headers = {}
    for line in text.split("\n"):
        if ": " in line:
            k, v = line.split(": ", 1)
            headers[k.lower()] = v
    c.call("unsubscribe", {"subscription": sub["result"]["subscription"]})
    c.call("release", {"request": name})
    c._discard_notifications(name)
    return started["result"], done, progress, headers


class TransferRoots:
    """A download root and an upload root in a fresh folder, with an outside folder
    and symbolic links that lead out."""

    def __init__(self):
        self.base = tempfile.mkdtemp(prefix="xhrpc-py-transfers-", dir="/tmp")
        self.down = os.path.join(self.base, "down")
        self.up = os.path.join(self.base, "up")
        self.outside = os.path.join(self.base, "outside")
        for d in (self.down, self.up, self.outside):
            os.makedirs(d)
        with open(os.path.join(self.outside, "victim"), "wb") as f:
            f.write(b"outside\n")
        os.symlink(self.outside, os.path.join(self.down, "dir-out"))
        os.symlink(os.path.join(self.outside, "victim"), os.path.join(self.down, "file-out"))
        os.symlink(os.path.join(self.outside, "victim"), os.path.join(self.down, "part-out.part"))
        os.symlink(os.path.join(self.outside, "victim"), os.path.join(self.up, "link-out"))

    def args(self):
        return ("--download-root", self.down, "--upload-root", self.up)

    def outside_listing(self):
        with open(os.path.join(self.outside, "victim"), "rb") as f:
            return sorted(os.listdir(self.outside)), f.read()


class TransferCase(ServerTestCase):
    UPSTREAM = True

    @classmethod
    def setUpClass(cls):
        cls.roots = TransferRoots()
        cls.addClassCleanup(shutil.rmtree, cls.roots.base, True)
        cls.SERVER_ARGS = cls.roots.args()
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.c = self.connect()
        self.n = 0

    def name(self):
        self.n += 1
        return "%s-%d" % (self._testMethodName[-40:], self.n)

    def target(self, rel):
        return os.path.join(self.roots.down, rel)

    def download(self, url_path, rel, **extra):
        params = {"request": self.name(), "url": self.upstream.url(url_path), "path": rel}
        params.update(extra)
        return run_transfer(self.c, "download", params)

    def leave_part(self, rel, cut):
        """An earlier attempt cut after ``cut`` bytes: the part and its meta stay."""
        _, done, _, _ = self.download("/ranged/%d?cut=%d" % (N, cut), rel)
        self.assertEqual(done["status"], 0, done)
        self.assertEqual(os.path.getsize(self.target(rel) + ".part"), cut)
        self.assertFalse(os.path.exists(self.target(rel)))
        with open(self.target(rel) + ".part.meta") as f:
            self.assertEqual(json.load(f)["etag"], ETAG)
        self.assertEqual(mode(self.target(rel) + ".part.meta"), 0o600)


class Download(TransferCase):
    def test_byte_exact_with_modes_and_progress(self):
        result, done, progress, _ = self.download("/ranged/%d?seed=0" % N, "a/b/file.bin")
        self.assertEqual(result["path"], "a/b/file.bin")
        self.assertEqual((done["status"], done["stateName"]), (200, "DONE"))
        path = self.target("a/b/file.bin")
        self.assertEqual(file_sha(path), pattern.pattern_sha256(N))
        self.assertEqual(mode(path), 0o600)
        self.assertEqual(mode(self.target("a")), 0o700)
        self.assertEqual(mode(self.target("a/b")), 0o700)
        self.assertEqual(sorted(os.listdir(self.target("a/b"))), ["file.bin"])
        self.assertTrue(progress, "no progress")
        self.assertEqual((progress[-1]["totalBytesReceived"], progress[-1]["totalBytesExpectedToReceive"]), (N, N))

    def test_part_until_complete_then_abort_keeps_it(self):
        name = self.name()
        self.c.call("download", {"request": name, "path": "slow.bin",
                                 "url": self.upstream.url("/ranged/%d?chunk=1000&delay=50" % N)})
        self.c.wait_notification(lambda m: m["params"].get("request") == name and m["params"]["state"] == 3, 20)
        self.assertTrue(os.path.exists(self.target("slow.bin.part")))
        self.assertFalse(os.path.exists(self.target("slow.bin")))
        self.assertEqual(mode(self.target("slow.bin.part")), 0o600)
        self.assertIs(self.c.call("abort", {"request": name}), True)
        self.assertEqual(self.c.call("getState", {"request": name})["stateName"], "DONE")
        # The body went to the file: the receive buffer says so with nothing in it.
        self.assertEqual(self.c.call("getReceiveBuffer", {"request": name}),
                         {"data": "", "encoding": "base64", "bytes": 0, "done": True})
        self.c.call("release", {"request": name})
        self.assertTrue(os.path.exists(self.target("slow.bin.part")))
        self.assertFalse(os.path.exists(self.target("slow.bin")))

    def test_a_download_whose_files_overlap_another_running_one_is_busy(self):
        # A download of NAME writes NAME.part and NAME.part.meta: a download of
        # NAME.part renamed its own part over the first's, whose rename then put the
        # second's bytes at NAME and reported DONE 200 (the files tester's F1). Any file
        # in common, either way round, is busy.
        first = self.name()
        self.c.call("download", {"request": first, "path": "overlap.bin",
                                 "url": self.upstream.url("/ranged/%d?chunk=1000&delay=50" % N)})
        for other in ("overlap.bin.part", "overlap.bin.part.meta"):
            with self.assertRaises(RPCError) as e:
                self.c.call("download", {"request": self.name(), "path": other, "url": self.upstream.url("/ranged/10")})
            self.assertEqual(e.exception.reason, "busy", other)
        self.c.call("release", {"request": first})
        self.c._discard_notifications(first)
        second = self.name()
        self.c.call("download", {"request": second, "path": "under.bin.part",
                                 "url": self.upstream.url("/ranged/%d?chunk=1000&delay=50" % N)})
        with self.assertRaises(RPCError) as e:
            self.c.call("download", {"request": self.name(), "path": "under.bin", "url": self.upstream.url("/ranged/10")})
        self.assertEqual(e.exception.reason, "busy")
        self.c.call("release", {"request": second})
        self.c._discard_notifications(second)

    def test_a_path_being_downloaded_is_busy(self):
        first = self.name()
        self.c.call("download", {"request": first, "path": "twice.bin",
                                 "url": self.upstream.url("/ranged/%d?chunk=1000&delay=50" % N)})
        with self.assertRaises(RPCError) as e:
            self.c.call("download", {"request": self.name(), "path": "twice.bin", "url": self.upstream.url("/ranged/10")})
        self.assertEqual(e.exception.reason, "busy")
        # A taken handle is refused before the file is touched.
        with self.assertRaises(RPCError) as e:
            self.c.call("download", {"request": first, "path": "other.bin", "url": self.upstream.url("/ranged/10")})
        self.assertEqual(e.exception.reason, "already_exists")
        self.assertFalse(os.path.exists(self.target("other.bin.part")))
        self.c.call("release", {"request": first})
        self.c._discard_notifications(first)
        # Released: the path is free again.
        _, done, _, _ = self.download("/ranged/10", "twice.bin")
        self.assertEqual(done["status"], 200)

    def test_non_2xx_is_not_renamed(self):
        _, done, _, _ = self.download("/status/404", "missing.bin")
        self.assertEqual(done["status"], 404)
        self.assertFalse(os.path.exists(self.target("missing.bin")))
        self.assertEqual(os.path.getsize(self.target("missing.bin.part")), 0)

    def test_dot_dot_and_absolute_paths_are_refused(self):
        self.refused(("../outside/x", "a/../../outside/x", "new/../../outside/x", self.roots.outside + "/x"))

    def test_symbolic_links_are_refused(self):
        # In the middle, as the name, as the name's .part.
        self.refused(("dir-out/x", "dir-out/new/x", "file-out", "part-out"))

    def refused(self, paths):
        """Each path is path_not_allowed, and nothing is written inside or outside."""
        before = self.roots.outside_listing()
        down_before = sorted(os.listdir(self.roots.down))
        for rel in paths:
            with self.subTest(rel=rel):
                with self.assertRaises(RPCError) as e:
                    self.c.call("download", {"request": self.name(), "url": self.upstream.url("/ranged/10"),
                                             "path": rel})
                self.assertEqual(e.exception.code, -32602)
                self.assertEqual(e.exception.reason, "path_not_allowed")
        self.assertEqual(self.roots.outside_listing(), before)
        self.assertEqual(sorted(os.listdir(self.roots.down)), down_before)
        self.assertEqual(self.c.call("list"), [])

    def test_resume_with_206_and_if_range(self):
        self.leave_part("resumed.bin", 70_000)
        _, done, progress, headers = self.download("/ranged/%d" % N, "resumed.bin", resume=True)
        self.assertEqual(done["status"], 206)
        self.assertEqual(headers["x-seen-range"], "bytes=70000-")
        self.assertEqual(headers["x-seen-if-range"], ETAG)
        self.assertEqual(file_sha(self.target("resumed.bin")), pattern.pattern_sha256(N))
        self.assertFalse(os.path.exists(self.target("resumed.bin.part.meta")))
        # The totals count the whole file, the kept 70000 bytes included.
        self.assertTrue(all(p["totalBytesReceived"] >= 70_000 for p in progress), progress)
        self.assertEqual((progress[-1]["totalBytesReceived"], progress[-1]["totalBytesExpectedToReceive"]), (N, N))
        # bytesReceived counts what moved: the kept bytes are not counted again.
        self.assertEqual(sum(p["bytesReceived"] for p in progress), N - 70_000)

    def test_the_caller_hears_progress_without_subscribing(self):
        name = self.name()
        self.c.call("download", {"request": name, "url": self.upstream.url("/ranged/%d" % N), "path": "heard.bin"})
        progress = []
        deadline = time.monotonic() + 60
        while True:
            msg = self.c.wait_notification(lambda m: (m.get("params") or {}).get("request") == name,
                                           max(0.1, deadline - time.monotonic()))
            if msg["method"] == "onProgress":
                progress.append(msg["params"])
            elif msg["params"]["state"] == 5:
                break
        self.assertTrue(progress, "the caller heard no progress")
        self.assertEqual(sum(p["bytesReceived"] for p in progress), N)
        self.assertEqual(progress[-1]["totalBytesReceived"], N)
        self.c.call("release", {"request": name})
        self.c._discard_notifications(name)

    def test_resume_restarts_when_the_server_answers_200(self):
        for i, query in enumerate(("ignore_range=1", "etag=changed")):
            with self.subTest(query=query):
                rel = "restart-%d.bin" % i
                self.leave_part(rel, 50_000)
                _, done, progress, headers = self.download("/ranged/%d?%s" % (N, query), rel, resume=True)
                self.assertEqual(done["status"], 200)
                self.assertEqual(headers["x-seen-range"], "bytes=50000-")
                self.assertEqual(file_sha(self.target(rel)), pattern.pattern_sha256(N))
                self.assertEqual(progress[-1]["totalBytesExpectedToReceive"], N)

    def test_mismatched_content_range_fails(self):
        self.leave_part("shifted.bin", 40_000)
        _, done, _, _ = self.download("/ranged/%d?shift=5" % N, "shifted.bin", resume=True)
        self.assertEqual(done["status"], 0)
        self.assertIn("resumed at byte 40005", done["statusText"])
        self.assertEqual(os.path.getsize(self.target("shifted.bin.part")), 40_000)
        self.assertFalse(os.path.exists(self.target("shifted.bin")))

    def test_416_for_a_complete_part_renames_it(self):
        with open(self.target("whole.bin.part"), "wb") as f:
            f.write(pattern.pattern_bytes(N))
        with open(self.target("whole.bin.part.meta"), "w") as f:
            json.dump({"etag": ETAG}, f)
        _, done, _, headers = self.download("/ranged/%d" % N, "whole.bin", resume=True)
        self.assertEqual(done["status"], 416)
        self.assertEqual(headers["x-seen-range"], "bytes=%d-" % N)
        self.assertEqual(file_sha(self.target("whole.bin")), pattern.pattern_sha256(N))

    def test_totals_beyond_4_gib_from_a_sparse_part(self):
        tail = 70_000
        size = FOUR_GIB + tail
        with open(self.target("huge.bin.part"), "wb") as f:
            f.truncate(FOUR_GIB)
        with open(self.target("huge.bin.part.meta"), "w") as f:
            json.dump({"etag": '"p%ds0"' % size}, f)
        _, done, progress, headers = self.download("/ranged/%d" % size, "huge.bin", resume=True)
        self.assertEqual(done["status"], 206, done)
        self.assertEqual(headers["x-seen-range"], "bytes=%d-" % FOUR_GIB)
        path = self.target("huge.bin")
        self.assertEqual(os.path.getsize(path), size)
        with open(path, "rb") as f:
            f.seek(FOUR_GIB)
            self.assertEqual(f.read(), b"".join(pattern.iter_pattern(tail, 0, offset=FOUR_GIB)))
        self.assertEqual((progress[-1]["totalBytesReceived"], progress[-1]["totalBytesExpectedToReceive"]),
                         (size, size))
        os.unlink(path)


class OnlyRegularFilesWithOneLink(TransferCase):
    """A FIFO, a folder, or a hard link to a file elsewhere, as the name, its ``.part``
    or its ``.part.meta``, is ``path_not_allowed``: never opened (a FIFO opened for
    writing would block the whole daemon), never written, never chmod'ed."""

    def outside_file(self, name, data=b"outside, keep me\n", mode=0o644):
        path = os.path.join(self.roots.outside, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        return path

    def assertRefused(self, rel, resume=False):
        with self.assertRaises(RPCError) as e:
            self.c.call("download", {"request": self.name(), "url": self.upstream.url("/ranged/10"), "path": rel,
                                     "resume": resume})
        self.assertEqual((e.exception.code, e.exception.reason), (-32602, "path_not_allowed"), rel)
        self.assertEqual(self.c.call("list"), [])

    def unblock_fifo(self, path):
        """Cleanup for a daemon stuck opening the FIFO (the fault): give it its peer."""
        def unblock():
            for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
                try:
                    os.close(os.open(path, flags))
                except OSError:
                    pass
        self.addCleanup(unblock)

    def test_a_fifo_is_refused_and_the_daemon_keeps_serving(self):
        for rel, leaf, resume in (("fifo-a.bin", "fifo-a.bin.part", False), ("fifo-b.bin", "fifo-b.bin.part.meta", True),
                                  ("fifo-c.bin", "fifo-c.bin", False)):
            with self.subTest(leaf=leaf):
                if leaf.endswith(".meta"):
                    with open(self.target(rel + ".part"), "wb") as f:
                        f.write(b"kept")
                fifo = self.target(leaf)
                os.mkfifo(fifo, 0o600)
                self.unblock_fifo(fifo)
                # Sent without waiting: the answer to another connection's call proves
                # the loop is not stuck in open(2), whatever the download's answer.
                self.c.send(req("download", 71, {"request": self.name(), "url": self.upstream.url("/ranged/10"),
                                                 "path": rel, "resume": resume}))
                other = self.connect()
                self.assertEqual(other.call("server.info", timeout=10)["name"], "xhrpcd")
                answer = self.c.read_message(10)
                self.assertEqual((answer["id"], answer["error"]["code"], answer["error"]["data"]["reason"]),
                                 (71, -32602, "path_not_allowed"), answer)
                self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
                self.assertEqual(self.c.call("list"), [])

    def test_a_hard_link_is_refused_and_the_file_it_shares_is_untouched(self):
        for rel, leaf in (("linked-a.bin", "linked-a.bin.part"), ("linked-b.bin", "linked-b.bin.part.meta"),
                          ("linked-c.bin", "linked-c.bin")):
            with self.subTest(leaf=leaf):
                outside = self.outside_file(leaf + ".victim")
                os.link(outside, self.target(leaf))
                if leaf.endswith(".meta"):
                    with open(self.target(rel + ".part"), "wb") as f:
                        f.write(b"kept")
                self.assertRefused(rel, resume=leaf.endswith(".meta"))
                with open(outside, "rb") as f:
                    self.assertEqual(f.read(), b"outside, keep me\n")
                self.assertEqual(mode(outside), 0o644)
                self.assertEqual(os.lstat(outside).st_nlink, 2)

    def test_a_folder_as_the_name_is_refused(self):
        os.mkdir(self.target("a-folder.bin"))
        self.assertRefused("a-folder.bin")
        self.assertFalse(os.path.exists(self.target("a-folder.bin.part")))
        self.assertEqual(os.listdir(self.target("a-folder.bin")), [])

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give the part another owner")
    def test_a_part_of_another_user_is_refused(self):
        part = self.target("theirs.bin.part")
        with open(part, "wb") as f:
            f.write(b"theirs")
        os.chown(part, 4321, 4321)
        os.chmod(part, 0o644)
        self.assertRefused("theirs.bin", resume=True)
        with open(part, "rb") as f:
            self.assertEqual(f.read(), b"theirs")
        self.assertEqual((mode(part), os.lstat(part).st_uid), (0o644, 4321))

    def test_a_failed_rename_fails_the_request_and_keeps_the_part(self):
        """A folder made at the name during the body: the rename fails, so the request
        does (status 0, the reason), and nothing is called done that is not on disk."""
        name = self.name()
        rel = "late-folder.bin"
        n = 20_000
        self.c.batch([("download", {"request": name, "path": rel,
                                    "url": self.upstream.url("/ranged/%d?chunk=1000&delay=100" % n)}),
                      ("subscribe", {"request": name, "events": ["progress"]})])
        self.c.wait_notification(lambda m: m["method"] == "onProgress" and m["params"]["request"] == name
                                 and m["params"]["totalBytesReceived"] > 0, 30)
        os.mkdir(self.target(rel))
        done = self.c.wait_notification(lambda m: m["method"] == "onStateChange" and m["params"]["request"] == name
                                        and m["params"]["state"] == 5, 30)["params"]
        self.assertEqual(done["status"], 0, done)
        self.assertIn("Cannot move 'late-folder.bin.part' to 'late-folder.bin'", done["statusText"])
        self.assertEqual(os.path.getsize(self.target(rel + ".part")), n)
        self.assertEqual(os.listdir(self.target(rel)), [])
        self.c.call("release", {"request": name})
        self.c._discard_notifications(name)

    def test_upload_sendwithfile_and_multipart_refuse_the_same(self):
        """A FIFO, a folder, a socket, a device, a symbolic link and a hard link in the
        upload root: refused by all three with one error, and nothing is sent."""
        os.mkfifo(os.path.join(self.roots.up, "a-fifo"), 0o600)
        self.unblock_fifo(os.path.join(self.roots.up, "a-fifo"))
        os.makedirs(os.path.join(self.roots.up, "a-folder"), exist_ok=True)
        if not os.path.exists(os.path.join(self.roots.up, "hard-link")):
            os.link(self.outside_file("shared"), os.path.join(self.roots.up, "hard-link"))
        others = []
        if not os.path.exists(os.path.join(self.roots.up, "a-socket")):
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.addCleanup(listener.close)
            listener.bind(os.path.join(self.roots.up, "a-socket"))
        others.append("a-socket")
        if os.geteuid() == 0:
            if not os.path.exists(os.path.join(self.roots.up, "a-device")):
                os.mknod(os.path.join(self.roots.up, "a-device"), stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's
            others.append("a-device")
        url = self.upstream.url("/echo")
        for rel in ["a-fifo", "a-folder", "hard-link", "link-out", "../outside/victim", self.roots.up + "/hard-link"] + others:
            with self.subTest(rel=rel):
                calls = [("upload", {"url": url, "path": rel}),
                         ("upload", {"url": url, "multipart": [{"name": "f", "path": rel}]})]
                for method, params in calls:
                    got = self.c.request(method, params)
                    self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32602, "path_not_allowed"),
                                     (method, got))
                r = self.name()
                self.c.call("create", {"request": r})
                self.c.call("open", {"request": r, "method": "PUT", "url": url, "subscribe": False})
                got = self.c.request("sendWithFile", {"request": r, "path": rel})
                self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32602, "path_not_allowed"), got)
                got = self.c.request("addMultipartPart", {"request": r, "name": "f", "path": rel})
                self.assertEqual((got["error"]["code"], got["error"]["data"]["reason"]), (-32602, "path_not_allowed"), got)
                self.assertEqual(self.c.call("getState", {"request": r})["stateName"], "OPENED")
                self.c.call("release", {"request": r})
        self.assertEqual(self.c.call("list"), [])


class CancelAndResume(TransferCase):
    def test_an_abort_mid_body_then_resume_completes_the_file(self):
        name = self.name()
        rel = "cancelled.bin"
        self.c.batch([("download", {"request": name, "path": rel,
                                    "url": self.upstream.url("/ranged/%d?chunk=4096&delay=100" % N)}),
                      ("subscribe", {"request": name, "events": ["progress"]})])
        self.c.wait_notification(lambda m: m["method"] == "onProgress" and m["params"]["request"] == name
                                 and m["params"]["totalBytesReceived"] > 0, 30)
        self.assertIs(self.c.call("abort", {"request": name}), True)
        self.c.call("release", {"request": name})
        self.c._discard_notifications(name)
        kept = os.path.getsize(self.target(rel + ".part"))
        self.assertTrue(0 < kept < N, kept)
        _, done, progress, headers = self.download("/ranged/%d" % N, rel, resume=True)
        self.assertEqual((done["status"], headers["x-seen-range"]), (206, "bytes=%d-" % kept))
        self.assertEqual(file_sha(self.target(rel)), pattern.pattern_sha256(N))
        self.assertFalse(os.path.exists(self.target(rel + ".part")))
        self.assertEqual(progress[-1]["totalBytesReceived"], N)


class Upload(TransferCase):
    SIZE = 200_003

    def test_a_file_that_shrinks_while_it_is_sent_fails_the_request(self):
        # libcurl took pread's 0 for the end of a body whose Content-Length the origin
        # still waited for: upload {path} and sendWithFile stayed in SENT for ever,
        # each holding a transfer slot (the files tester's F2). The origin here reads
        # the head and 64 KiB, waits while the test cuts the file, then reads the rest.
        import threading
        for method in ("upload", "sendWithFile"):
            with self.subTest(method=method):
                name = "shrinks-%s.bin" % method
                path = os.path.join(self.roots.up, name)
                with open(path, "wb") as f:
                    f.write(b"A" * 8_000_000)
                listener = socket.socket()
                listener.bind(("127.0.0.1", 0))
                listener.listen(1)
                listener.settimeout(30)
                self.addCleanup(listener.close)
                took_some, cut = threading.Event(), threading.Event()

                def origin():
                    conn, _ = listener.accept()
                    with conn:
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
                        conn.settimeout(30)
                        got = 0
                        while got < 65536:
                            data = conn.recv(65536)
                            if not data:
                                return
                            got += len(data)
                        took_some.set()
                        cut.wait(30)
                        while conn.recv(1 << 20):
                            pass

                t = threading.Thread(target=origin, daemon=True)
                t.start()
                url = "http://127.0.0.1:%d/put" % listener.getsockname()[1]
                r = self.name()
                if method == "upload":
                    self.c.call("upload", {"request": r, "url": url, "path": name, "method": "PUT"})
                else:
                    self.c.batch([("create", {"request": r}), ("open", {"request": r, "method": "PUT", "url": url}),
                                  ("sendWithFile", {"request": r, "path": name})])
                self.assertTrue(took_some.wait(30), "the origin got no body")
                os.truncate(path, 100_000)
                cut.set()
                done = self.c.wait_notification(
                    lambda m: m.get("method") == "onStateChange" and m["params"].get("request") == r
                    and m["params"].get("state") == 5, 30)
                status = self.c.call("getStatus", {"request": r})
                text = self.c.call("getStatusText", {"request": r})
                self.assertEqual(status, 0, done)
                self.assertIn("shrank while it was sent", text)
                self.c.call("release", {"request": r})
                self.c._discard_notifications(r)
                t.join(30)

    def echo_of(self, params):
        name = params["request"]
        started, sub = self.c.batch([("upload", params), ("subscribe", {"request": name, "events": ["progress"]})])
        self.assertEqual(started["result"], {"request": name})
        progress = []
        while True:
            m = self.c.wait_notification(lambda m: m["params"].get("request") == name, 30)
            if m["method"] == "onProgress":
                progress.append(m["params"])
            elif m["params"]["state"] == 5:
                break
        self.assertEqual(m["params"]["status"], 200)
        body = base64.b64decode(self.c.call("getReceiveBuffer", {"request": name})["data"])
        self.c.call("unsubscribe", {"subscription": sub["result"]["subscription"]})
        self.c.call("release", {"request": name})
        self.c._discard_notifications(name)
        return json.loads(body), progress

    def test_file_from_the_upload_root(self):
        data = pattern.pattern_bytes(self.SIZE, 5)
        with open(os.path.join(self.roots.up, "up.bin"), "wb") as f:
            f.write(data)
        echo, progress = self.echo_of({"request": self.name(), "url": self.upstream.url("/echo"), "path": "up.bin"})
        self.assertEqual((echo["method"], echo["bodyLength"], echo["bodySha256"]), ("POST", self.SIZE, sha(data)))
        self.assertEqual((progress[-1]["totalBytesWritten"], progress[-1]["totalBytesExpectedToWrite"]),
                         (self.SIZE, self.SIZE))

    def test_the_file_is_closed_at_done_not_at_release(self):
        path = os.path.join(self.roots.up, "held.bin")
        with open(path, "wb") as f:
            f.write(b"held " * 1000)
        name = self.name()
        self.c.call("upload", {"request": name, "url": self.upstream.url("/echo"), "path": "held.bin"})
        self.c.wait_notification(lambda m: m["params"].get("request") == name and m["params"].get("state") == 5, 30)

        def open_files():
            fds = "/proc/%d/fd" % self.server.proc.pid
            out = []
            for fd in os.listdir(fds):
                try:
                    out.append(os.readlink(os.path.join(fds, fd)))
                except OSError:
                    pass
            return out

        self.assertEqual(self.c.call("getState", {"request": name})["stateName"], "DONE")
        self.assertNotIn(path, open_files())
        self.c.call("release", {"request": name})
        self.c._discard_notifications(name)

    def test_data_base64_with_method_and_headers(self):
        data = bytes(range(256)) * 3
        echo, _ = self.echo_of({"request": self.name(), "url": self.upstream.url("/echo"), "method": "PUT",
                                "dataBase64": base64.b64encode(data).decode(), "headers": {"X-Up": "1"}})
        self.assertEqual((echo["method"], base64.b64decode(echo["bodyBase64"])), ("PUT", data))
        self.assertEqual(echo["headers"]["x-up"], "1")

    def test_multipart_parts_with_a_file_from_the_upload_root(self):
        data = pattern.pattern_bytes(self.SIZE, 7)
        with open(os.path.join(self.roots.up, "part.bin"), "wb") as f:
            f.write(data)
        echo, progress = self.echo_of({"request": self.name(), "url": self.upstream.url("/echo"), "multipart": [
            {"name": "title", "value": "h\u00e9llo"},
            {"name": "file", "filename": "part.bin", "contentType": "application/x-test", "path": "part.bin"}]})
        self.assertEqual(echo["method"], "POST")
        body = base64.b64decode(echo["bodyBase64"])
        parts = parse_multipart(echo["headers"]["content-type"], body)
        self.assertEqual([(p[0], p[1], p[4]) for p in parts],
                         [("title", None, "h\u00e9llo".encode()), ("file", "part.bin", data)])
        self.assertEqual(parts[1][2], "application/x-test")
        self.assertEqual(progress[-1]["totalBytesWritten"], len(body))

    def test_exactly_one_body(self):
        for extra in ({}, {"dataBase64": "", "multipart": [{"name": "a", "value": "b"}]},
                      {"path": "x", "dataBase64": ""}, {"multipart": []}):
            with self.subTest(extra=extra):
                with self.assertRaises(RPCError) as e:
                    self.c.call("upload", dict({"url": self.upstream.url("/echo")}, **extra))
                self.assertEqual(e.exception.code, -32602)
        self.assertEqual(self.c.call("list"), [])

    def test_a_multipart_part_escaping_the_upload_root_is_refused(self):
        with self.assertRaises(RPCError) as e:
            self.c.call("upload", {"url": self.upstream.url("/echo"),
                                   "multipart": [{"name": "f", "path": "../outside/victim"}]})
        self.assertEqual((e.exception.code, e.exception.reason), (-32602, "path_not_allowed"))
        self.assertEqual(self.c.call("list"), [])

    def test_escaping_path_is_refused(self):
        for rel in ("../outside/victim", "link-out", self.roots.outside + "/victim"):
            with self.subTest(rel=rel):
                with self.assertRaises(RPCError) as e:
                    self.c.call("upload", {"url": self.upstream.url("/echo"), "path": rel})
                self.assertEqual((e.exception.code, e.exception.reason), (-32602, "path_not_allowed"))
        self.assertEqual(self.c.call("list"), [])

    def test_client_helpers(self):
        data = b"client helper " * 1000
        seen = []
        r = self.c.upload(self.upstream.url("/echo"), data=data, on_progress=seen.append)
        self.assertEqual(r["status"], 200)
        self.assertEqual(seen[-1]["totalBytesWritten"], len(data))
        r = self.c.upload(self.upstream.url("/echo"), multipart=[{"name": "a", "value": "b"}])
        self.assertEqual(r["status"], 200)
        with self.assertRaises(TypeError):
            self.c.upload(self.upstream.url("/echo"), data=b"x", multipart=[{"name": "a", "value": "b"}])
        seen = []
        r = self.c.server_download(self.upstream.url("/ranged/%d?seed=2" % N), "helper/x.bin", on_progress=seen.append)
        self.assertEqual((r["status"], r["path"]), (200, "helper/x.bin"))
        self.assertEqual(file_sha(self.target("helper/x.bin")), pattern.pattern_sha256(N, 2))
        self.assertEqual(seen[-1]["totalBytesReceived"], N)
        self.assertTrue(all(p["request"] == r["request"] for p in seen))
        self.assertEqual(self.c.call("list"), [])


class AsyncHelpers(TransferCase):
    def test_async_upload_and_server_download(self):
        async def main():
            c = await AsyncClient.connect_unix(self.server.socket_path)
            try:
                seen = []

                async def note(p):
                    seen.append(p)

                r = await c.upload(self.upstream.url("/echo"), data=b"async " * 5000, on_progress=note)
                self.assertEqual(r["status"], 200)
                self.assertEqual(seen[-1]["totalBytesWritten"], 30000)
                r = await c.server_download(self.upstream.url("/ranged/%d?seed=4" % N), "async.bin")
                self.assertEqual((r["status"], r["path"]), (200, "async.bin"))
                self.assertEqual(await c.call("list"), [])
            finally:
                await c.close()

        asyncio.run(asyncio.wait_for(main(), 60))
        self.assertEqual(file_sha(self.target("async.bin")), pattern.pattern_sha256(N, 4))


class WithoutDownloadRoot(ServerTestCase):
    def test_download_is_refused(self):
        c = self.connect()
        with self.assertRaises(RPCError) as e:
            c.call("download", {"url": "http://127.0.0.1:9/x", "path": "x"})
        self.assertEqual(e.exception.reason, "forbidden")
        self.assertIn("--download-root", str(e.exception))


class ResumeAfterSigterm(TransferCase):
    """SIGTERM with --drain-seconds 0 aborts the download at once; the part stays."""

    @classmethod
    def server_args(cls):
        return cls.SERVER_ARGS + ("--drain-seconds", "0")
    def test_resume_in_a_new_server_after_sigterm(self):
        name = self.name()
        rel = "sigterm.bin"
        self.c.batch([("download", {"request": name, "path": rel,
                                    "url": self.upstream.url("/ranged/%d?chunk=4096&delay=200" % N)}),
                      ("subscribe", {"request": name, "events": ["progress"]})])
        self.c.wait_notification(lambda m: m["method"] == "onProgress" and m["params"]["request"] == name
                                 and m["params"]["totalBytesReceived"] > 0, 30)
        self.assertEqual(self.server.stop(), 0)
        kept = os.path.getsize(self.target(rel + ".part"))
        self.assertTrue(0 < kept < N, kept)
        self.assertFalse(os.path.exists(self.target(rel)))
        again = XhrpcServer(args=self.server_args()).start()
        self.addCleanup(again.stop)
        c = again.connect()
        self.addCleanup(c.close)
        _, done, progress, headers = run_transfer(c, "download", {
            "request": "again", "url": self.upstream.url("/ranged/%d" % N), "path": rel, "resume": True})
        self.assertEqual(done["status"], 206)
        self.assertEqual(headers["x-seen-range"], "bytes=%d-" % kept)
        self.assertEqual(file_sha(self.target(rel)), pattern.pattern_sha256(N))
        self.assertEqual(progress[-1]["totalBytesReceived"], N)
        # The class's server is gone: a fresh one for tearDownClass and _check_alive.
        type(self).server = XhrpcServer(args=self.server_args()).start()
