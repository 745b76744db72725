"""A griffe extension for the docs site: reST markup in docstrings, as Markdown.

joblocks's docstrings are written in the Sphinx style (``:param x:`` fields, which
mkdocstrings' ``docstring_style: sphinx`` reads), and their prose uses Sphinx roles
(``:meth:`Lease.release```) and literal blocks (a paragraph ending in ``::``). The
docstring text is rendered as Markdown, where neither means anything, so this
extension rewrites them before mkdocstrings parses the docstrings:

- ``:meth:`~joblocks.Lease.release``` → ```release()```: a role becomes inline code
  (``~`` keeps the last name; ``title <target>`` keeps the title; functions and
  methods get ``()``, as Sphinx shows them);
- ``Quick use::`` and the indented block after it → ``Quick use:`` and a fenced
  block (``python`` when it parses as Python, else ``text``); a ``::`` alone on its
  line goes.

Configured in mkdocs.yml (``extensions:`` of the python handler); ``mkdocs build``
runs from the project's root, where this path is found.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:py:)?(?P<role>[a-z]+):`(?P<text>[^`]+)`")
CALLABLE = {"meth", "func"}


def _role(match: re.Match[str]) -> str:
    text = match.group("text").strip()
    titled = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^>]+)>", text)
    if titled:
        return f"`{titled.group('title')}`"
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    if match.group("role") in CALLABLE and not text.endswith(")"):
        text += "()"
    return f"`{text}`"


def _language(source: str) -> str:
    """``python`` for a block that parses as Python, else ``text``."""
    try:
        compile(source, "<docstring>", "exec", flags=0x2000, dont_inherit=True)
    except SyntaxError:
        return "text"
    return "python"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def markdown(text: str) -> str:
    """``text`` (a docstring) with Sphinx roles and ``::`` literal blocks in Markdown."""
    lines = ROLE.sub(_role, text).split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        if not stripped.endswith("::") or stripped.endswith(":::"):
            out.append(line)
            i += 1
            continue
        base = _indent(line)
        head = stripped[:-2].rstrip()
        if head.strip():
            out.append(head + ":")
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        block: list[str] = []
        while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > base):
            block.append(lines[j])
            j += 1
        while block and not block[-1].strip():
            block.pop()
        if not block:
            i += 1
            continue
        pad = " " * base
        source = textwrap.dedent("\n".join(block))
        code = source.split("\n")
        out += [
            "",
            pad + "```" + _language(source),
            *(pad + c if c else "" for c in code),
            pad + "```",
            "",
        ]
        i = j
    return "\n".join(out)


class SphinxRoles(Extension):
    """Rewrite every docstring's reST roles and literal blocks as Markdown."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
