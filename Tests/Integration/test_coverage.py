"""Every method api/openrpc.json declares is called by name in at least one test.

A method no test calls can break without a test failing. This reads the method names
of api/openrpc.json and looks for a call of each in the sources of the suites
(Tests/Integration, clients/python/tests, clients/node/test, Tests/ for Swift): ``call("NAME"``, ``request("NAME"``,
``req("NAME"``, ``send("NAME"`` and the like, ``"method": "NAME"`` in a message
written out, or ``("NAME", {…})`` in a batch. A method merely listed (in a table of
names, or a loop over ``rpc.discover``) does not count. Needs no server.
"""

import json
import re
import unittest

from support import REPO

SPEC = REPO / "api" / "openrpc.json"
SUITES = [
    (REPO / "Tests" / "Integration", "*.py"),
    (REPO / "clients" / "python" / "tests", "*.py"),
    (REPO / "clients" / "node" / "test", "*.js"),
    (REPO / "Tests", "*.swift"),
]
THIS_FILE = __file__.rsplit("/", 1)[-1]


NAME = r"[\"']([A-Za-z][\w.]*)[\"']"
CALLS = [
    # c.call("x", …), c.request("x"), req("x", 1, …), c.send("x", …) (Swift), notify,
    # failureReason("x", …) (Swift).
    re.compile(r"\b(?:call|request|req|notify|send|failureReason)\(\s*" + NAME),
    # {"method": "x"} in a hand-written message (Python, Swift), {method: 'x'} (JS).
    re.compile(r"[\"']?\bmethod[\"']?\s*:\s*" + NAME),
    # ("x", {…}) / ("x", None) / ("x", [ … in a batch or send_lines.
    re.compile(r"\(\s*" + NAME + r"\s*,\s*(?:\{|None\b|\[|dict\()"),
]


def called_names(text):
    """The method names ``text`` calls in one of the ways of ``CALLS``."""
    return {m.group(1) for p in CALLS for m in p.finditer(text)}


def test_sources():
    """(path relative to the repository, text) of every test source but this file."""
    out = []
    for folder, glob in SUITES:
        for path in sorted(folder.rglob(glob)):
            if path.name == THIS_FILE or "Fixtures" in path.parts or "__pycache__" in path.parts:
                continue
            out.append((str(path.relative_to(REPO)), path.read_text(encoding="utf-8", errors="replace")))
    return out


class EveryMethodHasATest(unittest.TestCase):

    def test_every_documented_method_is_called_by_a_test(self):
        methods = [m["name"] for m in json.loads(SPEC.read_text())["methods"]]
        self.assertGreater(len(methods), 30, "api/openrpc.json lists too few methods to be the real one")
        sources = test_sources()
        self.assertTrue(sources)
        called = set()
        for _, text in sources:
            called |= called_names(text)
        uncalled = [name for name in methods if name not in called]
        self.assertEqual(uncalled, [], "methods of api/openrpc.json that no test calls")

    def test_the_patterns_see_the_ways_tests_call(self):
        # The scan itself: each way of calling counts, and a mere mention does not.
        counted = ['c.call("create", {"request": "a"})', "await c.call('create')",
                   'line(req("create", 1, {}))', 'send_lines(c, ("create", {"request": "x"}))',
                   '["method": "create", "id": 1]', 'try c.send("create")', "{ method: 'create' }"]
        for text in counted:
            self.assertEqual(called_names(text), {"create"}, text)
        for text in ('names = ["create", "open"]', 'self.need("create")', '# create is called elsewhere',
                     'c.call(m["name"])', 'assertEqual("create", got)'):
            self.assertEqual(called_names(text), set(), text)


if __name__ == "__main__":
    unittest.main()
