"""Headless Chromium (Debian's ``chromium``) driven over the Chrome DevTools Protocol,
for tests that look at a page as a browser renders it.

The browser is started with ``--remote-debugging-pipe``: the protocol runs over two
pipes (Chromium reads commands on its fd 3, writes answers and events on its fd 4, each
message one JSON text ended by a NUL byte), so there is no port to pick or race for and
nothing else on the machine can talk to it. Standard library only.

Every wait has a deadline; ``close()`` ends the browser by its pid (SIGTERM, then
SIGKILL) and removes its temporary profile.
"""

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

START_DEADLINE = 30.0


def chromium_binary():
    """The path of Debian's chromium, or None (``make test-deps`` installs it)."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(Exception):
    pass


class HeadlessChromium:
    """One headless Chromium with one page (a tab) attached, flattened sessions."""

    def __init__(self, width=1280, height=900):
        binary = chromium_binary()
        if binary is None:
            raise BrowserError("chromium is not installed: run `make test-deps` (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="xhrpc-chromium-", dir="/tmp")
        # Commands go from us to Chromium's fd 3; its answers come from its fd 4.
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        argv = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--user-data-dir=" + self.profile, "--remote-debugging-pipe",
                "--window-size=%d,%d" % (width, height), "about:blank"]

        def wire_fds():
            # Through fresh descriptors first, in case a pipe end is itself 3 or 4.
            # dup2 makes 3 and 4 inheritable; Python's own descriptors are not, so
            # nothing else of this process reaches the browser (close_fds=False is
            # needed: subprocess closes the descriptors it did not open after this).
            r, w = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                     close_fds=False, preexec_fn=wire_fds, start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 1
        self.events = []
        self.session = None
        try:
            target = self.command("Target.createTarget", {"url": "about:blank"}, timeout=START_DEADLINE)["targetId"]
            self.session = self.command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.command("Page.enable", session=True)
            self.command("Runtime.enable", session=True)
        except Exception:
            self.close()
            raise

    # -- the protocol ------------------------------------------------------

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no message from chromium in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 16)
                if not chunk:
                    raise BrowserError("chromium closed its pipe (exit %r): %s" % (self.proc.poll(), self.stderr_text()))
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def command(self, method, params=None, session=False, timeout=15.0):
        """Sends one command (to the page's session with ``session=True``) and returns
        its result; events read meanwhile are kept in ``events``."""
        id = self._next_id
        self._next_id += 1
        message = {"id": id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == id:
                if "error" in m:
                    raise BrowserError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    # -- the page ----------------------------------------------------------

    def navigate(self, url, timeout=15.0):
        """Loads ``url`` and waits until its load event."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        result = self.command("Page.navigate", {"url": url}, session=True, timeout=timeout)
        if result.get("errorText"):
            raise BrowserError("navigating to %s: %s" % (url, result["errorText"]))
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read_message(deadline))

    def evaluate(self, expression, timeout=15.0):
        """The value of a JavaScript expression in the page (awaited if a promise)."""
        result = self.command("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                   "awaitPromise": True}, session=True, timeout=timeout)
        if "exceptionDetails" in result:
            raise BrowserError("%s: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def wait_for(self, expression, timeout=20.0, interval=0.05, what=None):
        """Evaluates ``expression`` until it gives a truthy value, and returns that; fails
        after ``timeout`` seconds, saying what the page showed last."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError("timed out waiting for %s; the page showed:\n%s" % (
                    what or expression, self.evaluate("document.body ? document.body.innerText : ''")))
            time.sleep(interval)

    def screenshot(self, path):
        """Saves a PNG of the page at ``path``."""
        data = self.command("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def console_messages(self):
        """Console API calls and exceptions the page reported, as text."""
        out = []
        for e in self.events:
            if e.get("method") == "Runtime.consoleAPICalled":
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"]))
            elif e.get("method") == "Runtime.exceptionThrown":
                out.append(str(e["params"]["exceptionDetails"]))
        return out

    def stderr_text(self, limit=4000):
        self.stderr.seek(0)
        return self.stderr.read()[-limit:].decode("utf-8", "replace")

    def close(self):
        """Ends the browser (its process group, by the pid we started) and cleans up."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)
