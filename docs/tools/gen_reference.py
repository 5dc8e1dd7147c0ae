#!/usr/bin/env python3
"""Writes docs/reference/methods.md from api/openrpc.json (Python 3 standard library only).

    python3 docs/tools/gen_reference.py            # rewrite docs/reference/methods.md
    python3 docs/tools/gen_reference.py --check    # exit 1 if the committed page is stale
    python3 docs/tools/gen_reference.py --out -    # print the page

The page lists every method (its summary, parameters with type, required, default and
description, its result and its errors), the notifications (`x-notifications`), the
questions the server asks an interceptor (`x-server-requests`), the application errors
and the shared schemas, in the document's order. `make docs` runs it; `make docs-check`
(part of `make test`) runs it with --check.
"""

import argparse
import difflib
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(REPO, "api", "openrpc.json")
PAGE = os.path.join(REPO, "docs", "reference", "methods.md")

# Constraints shown after a type, in this order: (key, how it reads).
CONSTRAINTS = [("minimum", "≥ {}"), ("exclusiveMinimum", "> {}"), ("maximum", "≤ {}"),
               ("minItems", "at least {} item(s)"), ("pattern", "matching `{}`")]


def anchor(title):
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped,
    spaces as '-'."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


def ref_name(ref):
    """'#/components/schemas/RetryPolicy' -> 'RetryPolicy'."""
    return ref.rsplit("/", 1)[-1]


def code(value):
    """A JSON value as inline code."""
    return "`%s`" % json.dumps(value, ensure_ascii=False)


def type_of(schema):
    """A schema's type in words, for a table cell: `string`, `"a"` or `"b"`, array of
    [RetryPolicy](#retrypolicy), `true`, any."""
    if not schema:
        return "any"
    if "$ref" in schema:
        name = ref_name(schema["$ref"])
        return "[%s](#%s)" % (name, anchor(name))
    if "const" in schema:
        return code(schema["const"])
    if "enum" in schema:
        return " or ".join(code(v) for v in schema["enum"])
    if "oneOf" in schema or "anyOf" in schema:
        return " or ".join(type_of(s) for s in schema.get("oneOf") or schema["anyOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        text = " or ".join(kind)
    elif kind == "array":
        text = "array of " + type_of(schema.get("items", {}))
    elif kind == "object" and "additionalProperties" in schema and not schema.get("properties"):
        extra = schema["additionalProperties"]
        text = "object of " + (type_of(extra) if isinstance(extra, dict) else "any")
    else:
        text = kind or "any"
    limits = [fmt.format(schema[key]) for key, fmt in CONSTRAINTS if key in schema]
    return text + (" (%s)" % ", ".join(limits) if limits else "")


def describe(outer, schema):
    """The description of a parameter or member: its own and its schema's, once. When one
    begins with the other, the longer is kept."""
    texts = [t.strip() for t in (outer.get("description"), schema.get("description")) if t and t.strip()]
    if len(texts) == 2:
        a, b = texts
        if b.startswith(a.rstrip(".")) or a == b:
            return b
        if a.startswith(b.rstrip(".")):
            return a
        return a + " " + b
    return texts[0] if texts else ""


def cell(text):
    """Text safe inside a table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def rows(name, schema, required, depth=0):
    """Table rows for one parameter or member, and for its object members below it as
    `name.member` (two levels at most)."""
    default = code(schema["default"]) if "default" in schema else ""
    out = ["| `%s` | %s | %s | %s | %s |" % (name, cell(type_of(schema)), "yes" if required else "",
                                             cell(default), cell(describe({}, schema)))]
    props = schema.get("properties") if schema.get("type") == "object" else None
    if props and depth < 2:
        needed = set(schema.get("required", []))
        for member, sub in props.items():
            out.extend(rows("%s.%s" % (name, member), sub, member in needed, depth + 1))
    return out


TABLE_HEAD = ["| name | type | required | default | description |", "|---|---|---|---|---|"]


def param_table(params):
    """The table of a method's or notification's parameters (an `object`-typed member
    is followed by its members)."""
    if not params:
        return ["No parameters."]
    out = list(TABLE_HEAD)
    for p in params:
        schema = dict(p.get("schema", {}))
        if p.get("description"):
            schema["description"] = describe(p, schema)
        out.extend(rows(p["name"], schema, p.get("required", False)))
    return out


def result_lines(result):
    """The result: its name and type, its description, and the table of its members when
    it is an object with named members."""
    schema = result.get("schema", {})
    out = ["**Result** `%s`: %s" % (result.get("name", "result"), type_of(schema))]
    text = describe(result, schema)
    if text:
        out[0] += ". " + text
    props = schema.get("properties")
    if props:
        needed = set(schema.get("required", []))
        out += [""] + list(TABLE_HEAD)
        for member, sub in props.items():
            out.extend(rows(member, sub, member in needed))
    return out


def error_lines(errors, known):
    """The errors a method declares, by reason word and code, linked to the error table."""
    if not errors:
        return []
    words = []
    for e in errors:
        e = known.get(ref_name(e["$ref"]), {}) if "$ref" in e else e
        reason = e.get("data", {}).get("reason", "")
        words.append("[`%s`](#%s) (%s)" % (reason, anchor(reason), e.get("code")))
    return ["**Errors**: " + ", ".join(words) + "."]


def entry(item, heading, known, summary_key="summary"):
    """One method, notification or question: its heading, text, parameters, result, errors."""
    out = ["### `%s`" % heading, ""]
    text = item.get(summary_key) or item.get("description") or ""
    if item.get("summary") and item.get("description") and summary_key == "summary":
        text = item["summary"] + " " + item["description"]
    if text:
        out += [text.strip(), ""]
    out += param_table(item.get("params", [])) + [""]
    if "result" in item:
        out += result_lines(item["result"]) + [""]
    errors = error_lines(item.get("errors", []), known)
    if errors:
        out += errors + [""]
    return out


def render(spec):
    """The whole page, as text."""
    known = spec.get("components", {}).get("errors", {})
    methods = spec.get("methods", [])
    notes = spec.get("x-notifications", [])
    questions = spec.get("x-server-requests", [])
    schemas = spec.get("components", {}).get("schemas", {})
    info = spec.get("info", {})
    out = [
        "# Methods and notifications",
        "",
        "For client authors looking up a call: every method, notification and interceptor "
        "question of the protocol, with its parameters, result and errors.",
        "",
        "<!-- Generated by docs/tools/gen_reference.py from api/openrpc.json: do not edit; "
        "change api/openrpc.json and run `make docs`. -->",
        "",
        "This page is [`api/openrpc.json`](../../api/openrpc.json) (OpenRPC %s, %s %s), "
        "which the `rpc.discover` method also returns, written out for reading. The guide "
        "explains the concepts: [requests](../guide/requests.md), "
        "[fetch and transfers](../guide/fetch-and-transfers.md), [sockets](../guide/sockets.md), "
        "[interception and retries](../guide/interception-and-retries.md)."
        % (spec.get("openrpc", "?"), info.get("title", ""), info.get("version", "")),
        "",
    ]
    if info.get("description"):
        out += [info["description"].strip(), ""]
    out += ["## Contents", ""]
    out.append("- [Methods](#methods): " + ", ".join("[`%s`](#%s)" % (m["name"], anchor(m["name"])) for m in methods))
    out.append("- [Notifications](#notifications): " + ", ".join("[`%s`](#%s)" % (n["name"], anchor(n["name"])) for n in notes))
    out.append("- [Questions to an interceptor](#questions-to-an-interceptor): "
               + ", ".join("[`%s`](#%s)" % (q["name"], anchor(q["name"])) for q in questions))
    out.append("- [Errors](#errors), [Schemas](#schemas)")
    out += ["", "## Methods", ""]
    for m in methods:
        out += entry(m, m["name"], known)
    out += ["## Notifications", "", "Sent by the server without an id; a client does not answer them.", ""]
    for n in notes:
        out += entry(n, n["name"], known, summary_key="description")
    out += ["## Questions to an interceptor", "",
            "JSON-RPC requests from the server to the connection that called "
            "`intercept.register` (ids are strings beginning `srv-`); the client answers "
            "each with a response of the same id.", ""]
    for q in questions:
        out += entry(q, q["name"], known, summary_key="description")
    out += ["## Errors", "",
            "Application errors carry a stable `data.reason` word; the standard JSON-RPC "
            "errors (-32700, -32600, -32601, -32602, -32603) are described above.", "",
            "| reason | code | when |", "|---|---|---|"]
    for name, e in known.items():
        reason = e.get("data", {}).get("reason", name)
        out.append('| <a id="%s"></a>`%s` | %s | %s |' % (anchor(reason), reason, e.get("code"), cell(e.get("message", ""))))
    out += ["", "## Schemas", ""]
    for name, s in schemas.items():
        out += ["### %s" % name, ""]
        if s.get("description"):
            out += [s["description"].strip(), ""]
        if s.get("properties"):
            needed = set(s.get("required", []))
            out += list(TABLE_HEAD)
            for member, sub in s["properties"].items():
                out.extend(rows(member, sub, member in needed))
            out.append("")
        elif "description" not in s:
            out += ["Type: " + type_of(s), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=SPEC, help="the OpenRPC document (default api/openrpc.json)")
    ap.add_argument("--out", default=PAGE, help="where to write the page; '-' for standard output")
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it; exit 1 if it differs")
    args = ap.parse_args(argv)
    with open(args.spec, encoding="utf-8") as f:
        text = render(json.load(f))
    if args.check:
        try:
            with open(args.out, encoding="utf-8") as f:
                current = f.read()
        except OSError as e:
            current = ""
            print("gen_reference: cannot read %s: %s" % (args.out, e), file=sys.stderr)
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), args.out, "generated", lineterm="", n=1)
            print("\n".join(list(diff)[:40]), file=sys.stderr)
            print("gen_reference: %s is not what api/openrpc.json gives: run `make docs`" % os.path.relpath(args.out, REPO), file=sys.stderr)
            return 1
        return 0
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
