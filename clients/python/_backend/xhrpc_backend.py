"""The PEP 517 build backend of the xhrpc Python package, on the standard library only.

Why not setuptools: a fresh venv (``python3 -m venv``) has pip and, before Python
3.12, setuptools, but never ``wheel``, which setuptools before 70.1 needs to build
a wheel; so ``pip install ./clients/python`` would have to download a build tool
from PyPI.  The package is pure Python, and a pure-Python wheel is a zip file with
three small text files (PEP 427), so this module builds it and ``pip install``
works with no network, with or without build isolation, on any Python >= 3.9.

It reads the ``[project]`` table of pyproject.toml (with ``tomllib`` where there is
one, else with the small reader below, which the package's tests check against
``tomllib``), packs the files of the package directory named like the project
(``*.py`` and ``py.typed``), and refuses to build when ``__version__`` in the
package's ``__init__.py`` differs from the project's version.  The archives are
reproducible: sorted entries, fixed timestamps and modes.

Hooks: ``build_wheel``, ``build_sdist``, ``prepare_metadata_for_build_wheel`` and the
``get_requires_*`` pair (nothing is required).  There is no ``build_editable``: for
work on the client itself put ``clients/python`` on ``PYTHONPATH`` instead.
"""

import base64
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry
_SDIST_TIME = 315532800             # the same moment, for tar


# ---- pyproject.toml ---------------------------------------------------------------

class TOMLSubsetError(ValueError):
    """pyproject.toml uses TOML this reader does not know; it says where."""


def parse_toml_subset(text):
    """The TOML that pyproject.toml uses: tables, bare or quoted (dotted) keys, basic
    strings, integers, booleans, arrays and inline tables.  Anything else raises
    ``TOMLSubsetError`` naming the line, rather than being misread."""
    parser = _Parser(text)
    return parser.document()


class _Parser:
    def __init__(self, text):
        self.s = text
        self.i = 0

    def fail(self, what):
        line = self.s.count("\n", 0, self.i) + 1
        raise TOMLSubsetError("pyproject.toml line %d: %s (the build backend reads a subset of TOML)"
                              % (line, what))

    def skip(self, newlines):
        """Skip blanks and comments, and newlines too when ``newlines``."""
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            else:
                return

    def document(self):
        root = {}
        table = root
        while True:
            self.skip(newlines=True)
            if self.i >= len(self.s):
                return root
            if self.s[self.i] == "[":
                self.i += 1
                if self.s.startswith("[", self.i):
                    self.fail("arrays of tables are not supported")
                keys = self.key()
                self.skip(newlines=False)
                if not self.s.startswith("]", self.i):
                    self.fail("expected ] after a table name")
                self.i += 1
                table = root
                for k in keys:
                    table = table.setdefault(k, {})
                    if not isinstance(table, dict):
                        self.fail("table %s redefines a value" % ".".join(keys))
            else:
                keys = self.key()
                self.skip(newlines=False)
                if not self.s.startswith("=", self.i):
                    self.fail("expected = after a key")
                self.i += 1
                self.skip(newlines=False)
                self.assign(table, keys, self.value())
            self.skip(newlines=False)
            if self.i < len(self.s) and self.s[self.i] not in "\r\n":
                self.fail("unexpected text after a value")

    def assign(self, table, keys, value):
        for k in keys[:-1]:
            table = table.setdefault(k, {})
        if keys[-1] in table:
            self.fail("key %s defined twice" % ".".join(keys))
        table[keys[-1]] = value

    def key(self):
        keys = []
        while True:
            self.skip(newlines=False)
            if self.s.startswith('"', self.i):
                keys.append(self.string())
            else:
                m = re.compile(r"[A-Za-z0-9_-]+").match(self.s, self.i)
                if not m:
                    self.fail("expected a key")
                keys.append(m.group())
                self.i = m.end()
            self.skip(newlines=False)
            if not self.s.startswith(".", self.i):
                return keys
            self.i += 1

    def string(self):
        if self.s.startswith('"""', self.i):
            self.fail("multi-line strings are not supported")
        m = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(self.s, self.i)
        if not m:
            self.fail("unterminated string")
        self.i = m.end()
        # TOML's basic-string escapes are JSON's (bar \U, refused by json too).
        try:
            return json.loads(m.group())
        except ValueError:
            self.fail("bad escape in a string")

    def value(self):
        c = self.s[self.i:self.i + 1]
        if c == '"':
            return self.string()
        if c == "[":
            self.i += 1
            items = []
            while True:
                self.skip(newlines=True)
                if self.s.startswith("]", self.i):
                    self.i += 1
                    return items
                items.append(self.value())
                self.skip(newlines=True)
                if self.s.startswith(",", self.i):
                    self.i += 1
                elif not self.s.startswith("]", self.i):
                    self.fail("expected , or ] in an array")
        if c == "{":
            self.i += 1
            table = {}
            self.skip(newlines=False)
            if self.s.startswith("}", self.i):
                self.i += 1
                return table
            while True:
                keys = self.key()
                if not self.s.startswith("=", self.i):
                    self.fail("expected = in an inline table")
                self.i += 1
                self.skip(newlines=False)
                self.assign(table, keys, self.value())
                self.skip(newlines=False)
                if self.s.startswith("}", self.i):
                    self.i += 1
                    return table
                if not self.s.startswith(",", self.i):
                    self.fail("expected , or } in an inline table")
                self.i += 1
        m = re.compile(r"(true|false|[+-]?[0-9]+)(?=[\s,\]}#]|$)").match(self.s, self.i)
        if not m:
            self.fail("unsupported value")
        self.i = m.end()
        word = m.group(1)
        if word in ("true", "false"):
            return word == "true"
        return int(word)


def read_pyproject(root=ROOT):
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        return parse_toml_subset(data.decode("utf-8"))
    return tomllib.loads(data.decode("utf-8"))


class _Project:
    """What the archives need from ``[project]``, checked."""

    def __init__(self, root=ROOT):
        project = read_pyproject(root).get("project", {})
        self.root = root
        self.name = project["name"]
        self.version = project["version"]
        self.package = self.name.replace("-", "_")
        if project.get("dependencies"):
            raise ValueError("this backend writes no Requires-Dist: the package uses the standard library only")
        self.project = project
        init = os.path.join(root, self.package, "__init__.py")
        with open(init, encoding="utf-8") as f:
            m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
        if not m or m.group(1) != self.version:
            raise ValueError("%s has __version__ %s but pyproject.toml says %s: make them equal" % (
                init, m.group(1) if m else "(none)", self.version))

    @property
    def dist_name(self):
        return "%s-%s" % (self.package, self.version)

    def metadata(self):
        p = self.project
        lines = ["Metadata-Version: 2.1", "Name: " + self.name, "Version: " + self.version]
        if "description" in p:
            lines.append("Summary: " + p["description"])
        lic = p.get("license")
        if isinstance(lic, dict) and "text" in lic:
            lines.append("License: " + lic["text"])
        if p.get("keywords"):
            lines.append("Keywords: " + ",".join(p["keywords"]))
        lines += ["Classifier: " + c for c in p.get("classifiers", [])]
        if "requires-python" in p:
            lines.append("Requires-Python: " + p["requires-python"])
        body = ""
        readme = p.get("readme")
        if readme:
            lines.append("Description-Content-Type: text/markdown")
            with open(os.path.join(self.root, readme), encoding="utf-8") as f:
                body = f.read()
        return ("\n".join(lines) + "\n\n" + body).encode("utf-8")

    def package_files(self):
        """(path in the archive, bytes) of the package, sorted."""
        out = []
        top = os.path.join(self.root, self.package)
        for name in sorted(os.listdir(top)):
            if name.endswith(".py") or name == "py.typed":
                with open(os.path.join(top, name), "rb") as f:
                    out.append(("%s/%s" % (self.package, name), f.read()))
        return out

    def wheel_meta_files(self):
        info = self.dist_name + ".dist-info"
        wheel = ("Wheel-Version: 1.0\nGenerator: xhrpc_backend\nRoot-Is-Purelib: true\n"
                 "Tag: py3-none-any\n").encode()
        return [(info + "/METADATA", self.metadata()), (info + "/WHEEL", wheel)]


# ---- archives -----------------------------------------------------------------------

def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _zip_entry(z, path, data, mode=0o644):
    info = zipfile.ZipInfo(path, date_time=_ZIP_TIME)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _Project()
    files = project.package_files() + project.wheel_meta_files()
    record_path = project.dist_name + ".dist-info/RECORD"
    record = "".join("%s,%s,%d\n" % (p, _record_hash(d), len(d)) for p, d in files) + record_path + ",,\n"
    basename = project.dist_name + "-py3-none-any.whl"
    target = os.path.join(wheel_directory, basename)
    with zipfile.ZipFile(target + ".tmp", "w") as z:
        for path, data in files:
            _zip_entry(z, path, data)
        _zip_entry(z, record_path, record.encode())
    os.replace(target + ".tmp", target)
    return basename


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _Project()
    for path, data in project.wheel_meta_files():
        full = os.path.join(metadata_directory, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    return project.dist_name + ".dist-info"


def build_sdist(sdist_directory, config_settings=None):
    project = _Project()
    files = [("PKG-INFO", project.metadata())]
    for name in ("pyproject.toml", project.project.get("readme") or "README.md",
                 "_backend/xhrpc_backend.py"):
        with open(os.path.join(project.root, name), "rb") as f:
            files.append((name, f.read()))
    files += project.package_files()
    basename = project.dist_name + ".tar.gz"
    target = os.path.join(sdist_directory, basename)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data in sorted(files):
            info = tarfile.TarInfo("%s/%s" % (project.dist_name, path))
            info.size = len(data)
            info.mtime = _SDIST_TIME
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    with open(target + ".tmp", "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=_SDIST_TIME, filename="") as gz:
            gz.write(raw.getvalue())
    os.replace(target + ".tmp", target)
    return basename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
