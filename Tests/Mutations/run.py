#!/usr/bin/env python3
"""make mutation-check: proves that each security invariant of docs/security/SECURITY.md is
guarded by a test that fails when the invariant is gone.

Every mutation in mutations.json is a patch (made with `git diff` against the tree) that
switches one invariant off, with the tests that guard it: Python test ids (run from
Tests/Integration with the scratch tree's xhrpcd) and `swift test --filter` patterns. For
each one this script, in one scratch worktree of the committed HEAD
(.build-mutation/tree, whose own .build stays between mutations and runs, so every
build after the first is incremental):

1. applies the patch (one that no longer applies is a failure of the check: the code it
   removes has moved, and the patch must be made again);
2. builds only what the guards need: `swift build --product xhrpcd` for Python guards,
   `swift build --build-tests` when a Swift test guards it (a patch that does not
   compile proves nothing, so that is a failure too);
3. runs only the guarding tests: the mutation is killed when they fail, and survives
   when they pass;
4. puts the tree back to HEAD.

First, docs/security/SECURITY.md must list every mutation (a row ending with the patch's number
that names its guards). Before the first mutation, every guard runs once on the
unmutated tree and must pass, or the table would mean nothing. The script prints one
line per mutation (invariant, killed or survived, seconds) and exits non-zero when any
mutation survives, does not apply or does not build, or when a guard fails on the
unmutated tree.

    python3 Tests/Mutations/run.py                # all of them
    python3 Tests/Mutations/run.py --only 07 tls  # those whose patch name contains one of the words
    python3 Tests/Mutations/run.py --list         # the manifest, nothing run

Each mutation's output is kept in .build-mutation/logs/<patch>.log. Standard library only.

The scratch tree builds from nothing the first time (about three minutes of the ten a
cold run takes on two cores). Starting it from a copy of the main tree's .build does not
work: SwiftPM's build records and module caches hold absolute paths, and the copy fails
to build ("missing required module 'SwiftShims'").
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "mutations.json"
SCRATCH_NAME = ".build-mutation"
# The longest one mutation's (or the baseline's) tests may take: a mutant that makes a
# guard hang past its own deadlines is caught here and counts as killed.
TEST_TIMEOUT = 600
BUILD_TIMEOUT = 1800


def git(*args, cwd, check=True, capture=True):
    p = subprocess.run(["git", *args], cwd=cwd, text=True,
                       stdout=subprocess.PIPE if capture else None, stderr=subprocess.STDOUT if capture else None)
    if check and p.returncode != 0:
        raise SystemExit("git %s failed in %s:\n%s" % (" ".join(args), cwd, p.stdout))
    return p.stdout.strip() if capture else ""


def load_manifest():
    with open(MANIFEST) as f:
        entries = json.load(f)["mutations"]
    seen = set()
    for e in entries:
        for key in ("patch", "invariant"):
            if not isinstance(e.get(key), str) or not e[key]:
                raise SystemExit("mutations.json: an entry without %r: %r" % (key, e))
        e.setdefault("python", [])
        e.setdefault("swift", [])
        if not e["python"] and not e["swift"]:
            raise SystemExit("mutations.json: %s names no guarding test" % e["patch"])
        if e["patch"] in seen:
            raise SystemExit("mutations.json: %s is listed twice" % e["patch"])
        seen.add(e["patch"])
        if not (HERE / e["patch"]).is_file():
            raise SystemExit("mutations.json: %s does not exist in %s" % (e["patch"], HERE))
    return entries


def check_security_doc(repo, entries):
    """docs/security/SECURITY.md lists every mutation: a table row whose last cell is the patch's
    number and which names each of its guards (the test file and the class or test).
    Returns the mismatches, in words."""
    doc = repo / "docs" / "security" / "SECURITY.md"
    try:
        text = doc.read_text()
    except OSError as e:
        return ["cannot read %s: %s" % (doc, e)]
    rows = {}
    for row in text.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")] if row.startswith("|") else []
        if len(cells) >= 3 and re.fullmatch(r"\d+", cells[-1]):
            rows[int(cells[-1])] = row
    problems = []
    for e in entries:
        number = int(re.match(r"\d+", e["patch"]).group())
        row = rows.get(number)
        if row is None:
            problems.append("%s: no row of docs/security/SECURITY.md ends with %d" % (e["patch"], number))
            continue
        if "the same" in row:  # "… the same two tests": the row above names them
            row = rows.get(number - 1, "") + row
        for test in e["python"]:
            parts = test.split(".")  # test_file.Class[.test]
            if parts[0] + ".py" not in row or ".".join(parts[1:]) not in row:
                problems.append("%s: its row in docs/security/SECURITY.md does not name %s" % (e["patch"], test))
        for pattern in e["swift"]:
            if pattern not in row:
                problems.append("%s: its row in docs/security/SECURITY.md does not name %s" % (e["patch"], pattern))
    return problems


class Scratch:
    """The scratch worktree: HEAD exactly, plus its own .build."""

    def __init__(self, repo):
        self.repo = repo
        self.root = repo / SCRATCH_NAME
        self.tree = self.root / "tree"
        self.logs = self.root / "logs"
        self.head = git("rev-parse", "HEAD", cwd=repo)

    def prepare(self):
        self.root.mkdir(exist_ok=True)
        if self.logs.exists():
            shutil.rmtree(self.logs)
        self.logs.mkdir()
        git("worktree", "prune", cwd=self.repo)
        if (self.tree / ".git").exists():
            git("checkout", "--quiet", "--detach", "--force", self.head, cwd=self.tree)
        else:
            if self.tree.exists():
                shutil.rmtree(self.tree)
            git("worktree", "add", "--quiet", "--detach", str(self.tree), self.head, cwd=self.repo)
        self.reset()

    def reset(self):
        """Back to HEAD: tracked files restored, untracked ones removed; .build (ignored) stays."""
        git("reset", "--quiet", "--hard", self.head, cwd=self.tree)
        git("clean", "-q", "-fd", cwd=self.tree)
        dirty = git("status", "--porcelain", cwd=self.tree)
        if dirty:
            raise SystemExit("the scratch tree %s is not HEAD after a reset:\n%s" % (self.tree, dirty))

    def apply(self, patch):
        """(ok, output) of `git apply` of the patch file."""
        p = subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=self.tree, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return p.returncode == 0, p.stdout


def run_logged(argv, cwd, log, timeout, env=None):
    """Runs argv with its output appended to ``log``; (exit code or "timeout", seconds)."""
    t0 = time.monotonic()
    with open(log, "a") as f:
        f.write("\n$ (cd %s && %s)\n" % (cwd, " ".join(argv)))
        f.flush()
        p = subprocess.Popen(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env, start_new_session=True)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = "timeout"
            f.write("\n[run.py] killed after %d s\n" % timeout)
        # Whatever the command left in its process group goes too: a mutant can make a
        # server that a test expected to refuse to start run on (and a guard that stops
        # at its first failure leaves it there).
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()
    return code, time.monotonic() - t0


def build(scratch, log, with_tests):
    """Builds xhrpcd, and the test bundle when Swift tests are to run; True when it built."""
    argv = ["swift", "build", "--build-tests"] if with_tests else ["swift", "build", "--product", "xhrpcd"]
    code, _ = run_logged(argv, scratch.tree, log, BUILD_TIMEOUT)
    return code == 0


def swift_ran_tests(log_text_after):
    """How many tests Swift Testing reports it ran in the output (None if it says nothing)."""
    m = re.findall(r"Test run with (\d+) tests?", log_text_after)
    return int(m[-1]) if m else None


def run_guards(scratch, log, python_ids, swift_filters, failfast):
    """Runs the guarding tests; (all passed, detail). With ``failfast`` the first
    failure stops them (a mutant needs only one)."""
    passed = True
    details = []
    if python_ids:
        env = dict(os.environ, XHRPCD=str(scratch.tree / ".build" / "debug" / "xhrpcd"), PYTHONDONTWRITEBYTECODE="1")
        argv = [sys.executable, "-m", "unittest"] + (["-f"] if failfast else []) + list(python_ids)
        start = log.stat().st_size if log.exists() else 0
        code, _ = run_logged(argv, scratch.tree / "Tests" / "Integration", log, TEST_TIMEOUT, env=env)
        if code != 0:
            passed = False
            details.append("python: %s" % ("timed out" if code == "timeout" else "failed"))
        else:
            # A guard that skipped itself (test_principals' uid test runs as root only)
            # guards nothing in this run: say so.
            with open(log, errors="replace") as f:
                f.seek(start)
                skipped = re.findall(r"^OK \(skipped=(\d+)\)", f.read(), re.M)
            if skipped:
                details.append("python: %s skipped" % skipped[-1])
        if not passed and failfast:
            return passed, details
    if swift_filters:
        start = log.stat().st_size if log.exists() else 0
        argv = ["swift", "test", "--skip-build", "--disable-xctest"]
        for f in swift_filters:
            argv += ["--filter", f]
        code, _ = run_logged(argv, scratch.tree, log, TEST_TIMEOUT)
        with open(log, errors="replace") as f:
            f.seek(start)
            ran = swift_ran_tests(f.read())
        if code != 0:
            passed = False
            details.append("swift: %s" % ("timed out" if code == "timeout" else "failed"))
        elif not ran:
            # A filter that matches nothing passes vacuously: never count that as a pass.
            passed = False
            details.append("swift: the filters matched no test")
    return passed, details


def tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None,
                    help="run the mutations whose patch file name contains one of these words")
    ap.add_argument("--list", action="store_true", help="print the manifest and exit")
    ap.add_argument("--skip-baseline", action="store_true",
                    help="do not run the guards on the unmutated tree first (for working on one patch only)")
    args = ap.parse_args()

    entries = load_manifest()
    if args.only:
        entries = [e for e in entries if any(w in e["patch"] for w in args.only)]
        if not entries:
            raise SystemExit("no mutation matches %s" % args.only)
    if args.list:
        for e in entries:
            print("%-40s %s\n%42s%s" % (e["patch"], e["invariant"], "", " ".join(e["python"] + ["swift:" + s for s in e["swift"]])))
        return 0

    repo = Path(git("rev-parse", "--show-toplevel", cwd=HERE))
    problems = check_security_doc(repo, load_manifest())
    if problems:
        print("docs/security/SECURITY.md and Tests/Mutations/mutations.json disagree:\n  " + "\n  ".join(problems))
        return 1
    scratch = Scratch(repo)
    started = time.monotonic()
    print("mutation-check: %d mutations, scratch worktree %s at %s" % (len(entries), scratch.tree, scratch.head[:12]),
          flush=True)
    scratch.prepare()

    any_swift = any(e["swift"] for e in entries)
    if not args.skip_baseline:
        log = scratch.logs / "baseline.log"
        t0 = time.monotonic()
        if not build(scratch, log, any_swift):
            print("the unmutated tree does not build; see %s\n%s" % (log, tail(log)))
            return 1
        python_ids = sorted({t for e in entries for t in e["python"]})
        # A test named on its own and through its class would run twice, the second time
        # on the class's server the first one already used: keep the class only.
        python_ids = [t for t in python_ids if not any(t.startswith(o + ".") for o in python_ids)]
        swift_filters = sorted({t for e in entries for t in e["swift"]})
        ok, details = run_guards(scratch, log, python_ids, swift_filters, failfast=False)
        print("baseline: every guard on the unmutated tree: %s (%.0f s)" % (
            ("pass" if ok else "FAIL") + "".join("; " + d for d in details), time.monotonic() - t0), flush=True)
        if not ok:
            print("a guard fails without any mutation, so no mutation can be judged; see %s\n%s" % (log, tail(log)))
            return 1

    rows = []
    for e in entries:
        name = e["patch"]
        log = scratch.logs / (Path(name).stem + ".log")
        t0 = time.monotonic()
        ok, out = scratch.apply(HERE / name)
        if not ok:
            outcome, detail = "NOT APPLIED", out.strip().splitlines()[-1] if out.strip() else ""
            with open(log, "a") as f:
                f.write(out)
        elif not build(scratch, log, bool(e["swift"])):
            outcome, detail = "NOT BUILT", "see " + str(log)
        else:
            passed, details = run_guards(scratch, log, e["python"], e["swift"], failfast=True)
            outcome, detail = (("survived", "; ".join(["the guards passed"] + details)) if passed
                               else ("killed", "; ".join(details)))
        scratch.reset()
        seconds = time.monotonic() - t0
        rows.append((name, e["invariant"], outcome, seconds, detail))
        print("  %-8s %5.0f s  %s  (%s)" % (outcome, seconds, e["invariant"], name), flush=True)
        if outcome != "killed":
            print("      %s; log: %s" % (detail, log))

    width = max(len(r[1]) for r in rows)
    print("\n%-*s   %-11s %s" % (width, "invariant", "outcome", "seconds"))
    for name, invariant, outcome, seconds, _ in rows:
        print("%-*s → %-11s %5.0f" % (width, invariant, outcome, seconds))
    bad = [r for r in rows if r[2] != "killed"]
    print("\n%d of %d mutations killed, %d not (%s); %.0f s in all" % (
        len(rows) - len(bad), len(rows), len(bad), ", ".join(r[0] for r in bad) or "none", time.monotonic() - started))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
