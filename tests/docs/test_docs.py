"""Every Python example in the README and the docs runs.

Each page's ```python blocks run in order in one fresh namespace (a later block may use
what an earlier one defined), in a subprocess, with ``JOBLOCKS_URL`` pointing at a
throwaway SQLite file and the working directory a temporary folder. A page may give
setup that readers need not see in an HTML comment::

    <!-- docs-test-setup
    from sqlalchemy import ...
    -->

and placeholder database URLs in examples (``postgresql://app@db/app`` and the like,
host ``db``) are pointed at the throwaway SQLite file. Blocks with top-level ``await``
run inside an event loop. A block fenced as ```python-no-run is shown but not run —
used only for snippets that cannot run here (none of the API examples).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

_BLOCK = re.compile(
    r"^```python[ \t]*\n(?P<code>.*?)^```|<!--[ \t]*docs-test-setup[ \t]*\n(?P<setup>.*?)-->",
    re.DOTALL | re.MULTILINE,
)
_PLACEHOLDER_URL = re.compile(
    r"""(["'])(?:postgresql|mysql|mariadb)(?:\+\w+)?://[^"']*@db[/:][^"']*\1"""
)

RUNNER = """
import ast, asyncio, os, sys, types
source = sys.stdin.read()
blocks = source.split("\\n# ---- block ----\\n")
namespace = {"__name__": "__docs__"}
for number, block in enumerate(blocks):
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    code = compile(block, f"<block {number}>", "exec", flags=flags)
    if code.co_flags & 0x80:  # CO_COROUTINE: top-level await
        result = eval(code, namespace)
        asyncio.run(result)
    else:
        exec(code, namespace)
print("ok")
"""


def blocks_of(page: Path) -> list[str]:
    found = []
    for match in _BLOCK.finditer(page.read_text(encoding="utf-8")):
        code = match.group("code") if match.group("code") is not None else match.group("setup")
        found.append(_PLACEHOLDER_URL.sub("os.environ['JOBLOCKS_URL']", textwrap.dedent(code)))
    return found


# Pages whose examples are files of a real project, run by a test of their own.
TESTED_ELSEWHERE = {
    "docs/integrations/alembic.md": (
        "tests/contrib/alembic/test_alembic.py runs its env.py and steps"
    ),
}

PAGES_WITH_CODE = [
    p for p in PAGES if blocks_of(p) and str(p.relative_to(ROOT)) not in TESTED_ELSEWHERE
]


def test_pages_tested_elsewhere_are_read_by_their_test() -> None:
    for page, test in TESTED_ELSEWHERE.items():
        test_file = ROOT / test.split()[0]
        assert Path(page).name in test_file.read_text(encoding="utf-8"), (page, test)


@pytest.mark.parametrize(
    "page", PAGES_WITH_CODE, ids=[str(p.relative_to(ROOT)) for p in PAGES_WITH_CODE]
)
def test_examples_run(page: Path, tmp_path: Path) -> None:
    blocks = ["import os", *blocks_of(page)]
    env = {
        **__import__("os").environ,
        "JOBLOCKS_URL": f"sqlite:///{tmp_path / 'docs.db'}",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT / "examples"),
    }
    out = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input="\n# ---- block ----\n".join(blocks),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, f"{page.name}:\n{out.stderr[-3000:]}"
    assert out.stdout.strip().endswith("ok")
