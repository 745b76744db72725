"""The docs site as built by ``mkdocs build --strict`` and shown by headless Chromium.

Every page has a title and a heading, and its text shows no reST markup (no
``:meth:``/``:class:``/``:func:`` roles, no ``::`` of a literal block) outside code;
each nav entry is there once; the API page has a heading naming each object it
documents; the command line page's list of commands names every command it
documents. The docs extra installs what the build needs.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.docs.test_timeline_browser import chromium, dump_dom
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
ROLE = re.compile(r":(?:py:)?(?:meth|class|func|attr|exc|mod|data|obj|const|ref|any):`?")
LITERAL_MARK = re.compile(r"(?m)(?:^\s*::\s*$|\S::\s*$)")


class Page(HTMLParser):
    """A page's title, headings (level, id, text), nav links and text outside code."""

    SKIPPED = frozenset({"script", "style", "code", "pre", "title", "svg"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.headings: list[tuple[int, str, str]] = []
        self.text: list[str] = []
        self.nav_links: list[str] = []
        self._skip: list[str] = []
        self._in_title = False
        self._heading: tuple[int, str, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "title":
            self._in_title = True
        if tag in self.SKIPPED:
            self._skip.append(tag)
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = (int(tag[1]), found.get("id", ""), [])
        if tag == "a" and "md-nav__link" in found.get("class", "").split():
            self.nav_links.append(found.get("href", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self.SKIPPED and self._skip and self._skip[-1] == tag:
            self._skip.pop()
        if self._heading is not None and tag == f"h{self._heading[0]}":
            level, ident, parts = self._heading
            self.headings.append((level, ident, " ".join("".join(parts).split())))
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._heading is not None:
            self._heading[2].append(data)
        if not self._skip:
            self.text.append(data)


def parse(source: str) -> Page:
    page = Page()
    page.feed(source)
    return page


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def pages(site: Path) -> list[Path]:
    found = sorted(p for p in site.rglob("index.html") if "assets" not in p.parts)
    assert len(found) > 20
    return found


def raw_markup(text: str) -> list[str]:
    """reST roles and ``::`` literal-block marks in ``text``, with some context."""
    hits = [text[max(0, m.start() - 30) : m.end() + 30] for m in ROLE.finditer(text)]
    hits += [text[max(0, m.start() - 30) : m.end()] for m in LITERAL_MARK.finditer(text)]
    return hits


def test_every_page_titled_and_free_of_rest_markup(site: Path) -> None:
    problems: dict[str, list[str]] = {}
    for path in pages(site):
        name = str(path.relative_to(site))
        page = parse(path.read_text(encoding="utf-8"))
        # "<page> - joblocks"; the home page: the site's name.
        title = page.title.strip()
        if not title or (name != "index.html" and not title.endswith(" - joblocks")):
            problems.setdefault(name, []).append(f"title {page.title!r}")
        if not any(level == 1 and text for level, _id, text in page.headings):
            problems.setdefault(name, []).append("no h1")
        problems.setdefault(name, []).extend(raw_markup("\n".join(page.text)))
    assert {name: found for name, found in problems.items() if found} == {}


def test_nav_entries_unique(site: Path) -> None:
    import yaml

    config = yaml.safe_load(
        re.sub(r"!!python/\S+", "", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    )

    def entries(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [e for item in nav for e in entries(item)]
        if isinstance(nav, dict):
            return [e for value in nav.values() for e in entries(value)]
        return []

    files = entries(config["nav"])
    assert len(files) == len(set(files)), sorted(f for f in files if files.count(f) > 1)
    every_page = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert set(files) == every_page  # every page reachable
    # And as built: the primary navigation links each page once.
    links = parse((site / "index.html").read_text(encoding="utf-8")).nav_links
    pages_linked = [link.split("#")[0] for link in links if "#" not in link]
    assert len(pages_linked) >= len(files) - 1
    repeated = {link for link in pages_linked if pages_linked.count(link) > 1}
    assert repeated == set(), repeated


def test_api_headings_name_what_they_document(site: Path) -> None:
    source = (ROOT / "docs/reference/api.md").read_text(encoding="utf-8")
    page = parse((site / "reference/api/index.html").read_text(encoding="utf-8"))
    ids = {ident: text for _level, ident, text in page.headings}
    directives = re.findall(r"(?m)^::: (\S+)((?:\n    .*)*)", source)
    assert len(directives) > 10
    for target, options in directives:
        if "show_root_heading: false" in options:
            members = re.search(r"members: \[(.*?)\]", options)
            assert members is not None
            for member in members.group(1).split(","):
                name = member.strip()
                assert ids.get(f"{target}.{name}", "").startswith(name), name
        else:
            assert target in ids, target
            assert target.rsplit(".", 1)[-1] in ids[target]


def test_cli_page_lists_every_command(site: Path) -> None:
    source = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    commands = source.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"(?m)^### (\w+)$", commands)
    assert {"history", "status", "run", "doctor"} <= set(documented)
    contents = source.split("- [Commands](#commands):", 1)[1].split("\n- ", 1)[0]
    assert sorted(re.findall(r"\]\(#([\w-]+)\)", contents)) == sorted(documented)
    # Each of them is a command of the program.
    done = run_cli("--help")
    assert done.returncode == 0
    for command in documented:
        assert re.search(rf"\b{command}\b", done.stdout), command


def test_pages_in_chromium(site: Path, tmp_path: Path) -> None:
    """The pages as a browser builds them: titled, no reST markup in what it shows."""
    browser = chromium()
    for name in ("reference/api/index.html", "cli/index.html", "howto/multi-tenant/index.html"):
        dom = dump_dom(browser, site / name, tmp_path / "chromium")
        page = parse(dom)
        assert page.title.strip().endswith(" - joblocks"), name
        assert raw_markup("\n".join(page.text)) == [], name
        assert any(level == 1 for level, _id, _text in page.headings), name
    api = dump_dom(browser, site / "reference/api/index.html", tmp_path / "chromium")
    assert "<code>release()</code>" in html.unescape(api)  # a :meth: role, as code


def test_docs_extra() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    docs = re.search(r"(?m)^docs = \[(.*)\]$", pyproject)
    assert docs is not None
    names = {re.split(r"[<>=\[ ]", req.strip().strip('"'))[0] for req in docs.group(1).split(",")}
    assert {"mkdocs", "mkdocs-material", "mkdocstrings"} <= names
    test = pyproject.split("\ntest = [", 1)[1].split("]\n", 1)[0]
    assert '"joblocks[docs]"' in test
    assert "site/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "pip install -e '.[docs]'" in (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def test_multi_tenant_howto_runs_as_written() -> None:
    """No hidden set-up: what the page shows defines every name it uses (its blocks
    run in tests/docs/test_docs.py)."""
    source = (ROOT / "docs/howto/multi-tenant.md").read_text(encoding="utf-8")
    assert "docs-test-setup" not in source
    assert 'url_a = "' in source
