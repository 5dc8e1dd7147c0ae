#!/usr/bin/env python3
"""Checks the repository's Markdown pages (Python 3 standard library only).

    python3 docs/tools/check_docs.py

1. Every relative link of README.md, docs/**/*.md, Benchmarks/README.md and
   clients/*/README.md resolves: the file or directory exists, and a `#fragment` names a
   heading of the target page (GitHub's anchors: lower case, punctuation dropped,
   spaces as '-', '-1', '-2' for repeats) or an `<a id>` in it. Links to other sites
   are not fetched.
2. Every page of docs/ says whom it is for in its first line of text (the line after
   its title begins "For ").
3. Every file git tracks names only pages of docs/ that exist (`docs/....md` in a
   comment, a test or a manifest): a page that moved leaves no stale path behind.

Exits 1 and lists the faults when there are any. `make docs-check` runs it.
"""

import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = ["README.md", "Benchmarks/README.md", "docs/**/*.md", "clients/*/README.md"]
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def strip_code(text):
    """The page without fenced code blocks and inline code spans, whose brackets are
    not links."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """The fragments a page answers: its headings' anchors and its `<a id>`/`name`s."""
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found, seen = set(), {}
        fenced = False
        for line in text.split("\n"):
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else "%s-%d" % (base, n))
        found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
        cache[path] = found
    return cache[path]


def pages():
    found = []
    for pattern in PAGES:
        found.extend(sorted(glob.glob(os.path.join(REPO, pattern), recursive=True)))
    return found


def check_links(path):
    """The faults of one page's links, in words."""
    with open(path, encoding="utf-8") as f:
        text = strip_code(f.read())
    faults = []
    for lineno, line in enumerate(text.split("\n"), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            file_part, _, fragment = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = "%s:%d: %s" % (os.path.relpath(path, REPO), lineno, target)
            if not os.path.exists(dest):
                faults.append(where + ": no such file")
            elif fragment and os.path.isfile(dest) and dest.endswith(".md") and fragment not in anchors(dest):
                faults.append(where + ": no such heading")
    return faults


def check_audience(path):
    """A docs/ page's first line of text after its title (HTML comments aside) must say
    whom it is for."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"<!--.*?-->", "", f.read(), flags=re.S)  # a generated page's note
    lines = [l for l in text.split("\n") if l.strip()]
    if len(lines) < 2 or not lines[0].startswith("# ") or not lines[1].startswith("For "):
        return ["%s: the line after the title must say whom the page is for (\"For ...\")" % os.path.relpath(path, REPO)]
    return []


DOC_PATH = re.compile(r"(?<![\w/.-])docs/[\w+-][\w./+-]*?\.md\b")


def tracked_files():
    """The files git tracks (none outside a git checkout)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [os.path.join(REPO, f) for f in out.decode().split("\0") if f]


def check_doc_paths(path):
    """The `docs/....md` paths a file names that do not exist, in words."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return []
    faults = []
    for lineno, line in enumerate(text.split("\n"), 1):
        for name in DOC_PATH.findall(line):
            if not os.path.isfile(os.path.join(REPO, name)):
                faults.append("%s:%d: names %s, which does not exist" % (os.path.relpath(path, REPO), lineno, name))
    return faults


def main():
    faults = []
    for path in tracked_files():
        faults.extend(check_doc_paths(path))
    for path in pages():
        faults.extend(check_links(path))
        if os.path.relpath(path, REPO).startswith("docs" + os.sep):
            faults.extend(check_audience(path))
    for fault in faults:
        print("check_docs: " + fault, file=sys.stderr)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
