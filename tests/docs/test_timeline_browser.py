"""``joblocks history --html``: the page as a real browser shows it (headless Chromium).

Real runs are recorded in a SQLite ledger, the command writes the page, and Debian's
``chromium`` loads it from the file with the network off and dumps the DOM after the
page's script ran. The test checks what is drawn: a section per key, a lane per host,
a bar per run, each bar's colour by outcome. Skipped when chromium is missing, except
in CI (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

import joblocks
from joblocks._html import COLOURS
from joblocks._ledger import ledger_of
from tests.support.matrix import unavailable


def _rgb(colour: str) -> str:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"


class Drawn(HTMLParser):
    """The sections, lanes and bars of the dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.key: str | None = None
        self.host: str | None = None
        self.bars: list[dict[str, str]] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        for name in ("src", "href"):
            if found.get(name):
                self.external.append(found[name])
        classes = found.get("class", "").split()
        if "key" in classes:
            self.key = found["data-key"]
        elif "lane" in classes:
            self.host = found["data-host"]
        elif "bar" in classes:
            style = {
                part.split(":", 1)[0].strip(): part.split(":", 1)[1].strip()
                for part in found.get("style", "").split(";")
                if ":" in part
            }
            self.bars.append(
                {
                    "key": self.key or "",
                    "host": self.host or "",
                    "outcome": found["data-outcome"],
                    "colour": style.get("background-color", ""),
                    "width": style.get("width", ""),
                }
            )


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    assert found is not None
    return found


def dump_dom(browser: str, page: Path, profile: Path) -> str:
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            # No network: a page that needed one would draw nothing.
            "--proxy-server=127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(profile)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def record_runs(url: str) -> None:
    """report: ok, error, lost (host vm-a), ok (host vm-b), a skip; cleanup: ok."""
    model = joblocks.JobLockModel(url, record="all")
    try:
        joblocks.run_with_lock("report", 60_000, lambda: None, model=model)

        def fail() -> None:
            raise RuntimeError("no </script> here")

        with pytest.raises(RuntimeError):
            joblocks.run_with_lock("report", 60_000, fail, model=model)
        held = model.try_lease("report", 60_000)
        assert held is not None
        model.delete("report")
        with pytest.raises(joblocks.LeaseLost):
            held.ensure_held()
        held.release()
        ledger = ledger_of(model).table
        # The runs so far stand in for replica vm-a; the next ones for vm-b.
        with model.engine.connect() as conn:
            conn.execute(update(ledger).values(host="vm-a"))
        joblocks.run_with_lock("report", 60_000, lambda: None, model=model)
        other = model.try_lease("report", 60_000, holder="someone-else", record=False)
        assert other is not None
        assert not joblocks.run_with_lock("report", 60_000, lambda: None, model=model)  # skip
        other.release()
        joblocks.run_with_lock("cleanup", 60_000, lambda: None, model=model)
        with model.engine.connect() as conn:
            conn.execute(update(ledger).where(ledger.c.host != "vm-a").values(host="vm-b"))
    finally:
        model.dispose()


def test_timeline_in_chromium(tmp_path: Path) -> None:
    browser = chromium()
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    record_runs(url)
    page = tmp_path / "history.html"
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "joblocks", "--url", url, "history", "--html", str(page)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote 6 runs" in done.stdout
    text = page.read_text(encoding="utf-8")
    assert "</script> here" not in text  # escaped inside the data block
    drawn = Drawn()
    drawn.feed(dump_dom(browser, page, tmp_path / "chromium"))
    assert drawn.external == []  # no stylesheet, script or image fetched from anywhere
    lanes: dict[tuple[str, str], list[str]] = {}
    for bar in drawn.bars:
        lanes.setdefault((bar["key"], bar["host"]), []).append(bar["outcome"])
        assert bar["colour"] == _rgb(COLOURS[bar["outcome"]]), bar
        assert bar["width"].endswith("%")
    assert {lane: sorted(outcomes) for lane, outcomes in lanes.items()} == {
        ("cleanup", "vm-b"): ["ok"],
        ("report", "vm-a"): ["error", "lost", "ok"],
        ("report", "vm-b"): ["ok", "skipped"],
    }


def test_empty_history_page(tmp_path: Path) -> None:
    browser = chromium()
    from joblocks._html import render

    page = tmp_path / "empty.html"
    page.write_text(render([], 0), encoding="utf-8")
    dom = dump_dom(browser, page, tmp_path / "chromium")
    assert "no runs recorded" in dom
    drawn: Any = Drawn()
    drawn.feed(dom)
    assert drawn.bars == []
