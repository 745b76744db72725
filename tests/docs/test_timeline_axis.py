"""The timeline page in headless Chromium: one time axis shared by every key, runs of
very different lengths (3 ms and 1 h), keys that are names of JavaScript's object
prototype (``constructor``, ``__proto__``, ``toString``), outcomes and durations as
text, a legend, and all of it drawn with no JavaScript in the page.

Pixels of a screenshot: the 1 h bar spans most of the axis, the 3 ms bar is a few
pixels wide but painted. The DOM Chromium dumps: every key, every duration and
outcome as text. Skipped when chromium is missing, except in CI.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

from sqlalchemy import update

import joblocks
from joblocks._core.ledger import ledger_of
from joblocks._core.plain import Run
from joblocks.cli._html import COLOURS, render
from tests.docs.test_timeline_browser import chromium, dump_dom, png_pixels
from tests.support.cli import run_cli

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)


def _run(key: str, start_ms: int, took_ms: int | None, outcome: str | None, **more: object) -> Run:
    started = T0 + timedelta(milliseconds=start_ms)
    return Run(
        id=start_ms,
        key=key,
        holder=f"cron@{key}",
        host="vm-a",
        pid=4242,
        token=start_ms + 1,
        started_at=started,
        ended_at=None if took_ms is None else started + timedelta(milliseconds=took_ms),
        duration=None if took_ms is None else timedelta(milliseconds=took_ms),
        outcome=outcome,  # type: ignore[arg-type]
        error=None if outcome != "error" else "exit status 2",
        slot=None,
        schedule=None,
        timezone=None,
        **more,  # type: ignore[arg-type]
    )


HOUR = 3_600_000
RUNS = [
    _run("constructor", 0, 3, "ok"),  # 3 ms
    _run("__proto__", 2_000, HOUR, "error"),  # 1 h
    _run("toString", 1_000, None, None, abandoned=True),  # no end, lease gone
]
NOW = round((T0 + timedelta(milliseconds=2_000 + HOUR)).timestamp() * 1000)


class Text(HTMLParser):
    """The visible text of the page (no <style>, <script> or <title>) and its bars."""

    def __init__(self) -> None:
        super().__init__()
        self.skip = 0
        self.text: list[str] = []
        self.keys: list[str] = []
        self.scripts = 0
        self.bars: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag in ("style", "script", "title"):
            self.skip += 1
        # Anything that would run: a script, an event handler, a javascript: link.
        self.scripts += tag == "script" or any(
            name.startswith("on") or value.lower().startswith("javascript:")
            for name, value in found.items()
        )
        if "data-key" in found and "key" in found.get("class", "").split():
            self.keys.append(found["data-key"])
        if "bar" in found.get("class", "").split():
            self.bars.append(found)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title"):
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.text.append(data)


def screenshot(browser: str, page: Path, profile: Path, shot: Path) -> None:
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--user-data-dir={profile}",
            "--proxy-server=127.0.0.1:9",  # no network
            "--proxy-bypass-list=<-loopback>",
            "--window-size=1200,900",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(profile)},
    )
    assert done.returncode == 0, done.stderr[-2000:]


def segments(
    row: list[tuple[int, int, int]], colour: tuple[int, int, int]
) -> list[tuple[int, int]]:
    """(start x, length) of every horizontal run of exactly ``colour`` in ``row``."""
    found, start = [], None
    for x, pixel in enumerate([*row, (-1, -1, -1)]):
        if pixel == colour and start is None:
            start = x
        elif pixel != colour and start is not None:
            found.append((start, x - start))
            start = None
    return found


def rgb(name: str) -> tuple[int, int, int]:
    value = COLOURS[name]
    return (int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16))


def test_shared_axis_in_chromium(tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "axis.html"
    page.write_text(render(RUNS, NOW), encoding="utf-8")
    shot = tmp_path / "axis.png"
    screenshot(browser, page, tmp_path / "chromium", shot)
    width, _height, rows = png_pixels(shot)

    def widest(name: str) -> tuple[int, int]:
        """(length, x) of the widest run of the outcome's colour in any row."""
        colour = rgb(name)
        return max(((n, x) for row in rows for x, n in segments(row, colour)), default=(0, 0))

    long_bar, long_x = widest("error")
    short_bar, short_x = widest("ok")
    dead_bar, _ = widest("abandoned")
    # The hour spans most of the track (the page is 1200 px wide, hosts take ~200).
    assert long_bar > 0.6 * width, (long_bar, width)
    assert dead_bar > 0.6 * width, dead_bar  # drawn up to now
    # The 3 ms run: painted, a few pixels wide (its bar's minimum), at the axis start;
    # the ok swatches (legend, table) are square, ~12 px wide.
    short = [
        (x, n)
        for row in rows
        for x, n in segments(row, rgb("ok"))
        if n <= 6 and abs(x - long_x) < 0.01 * width
    ]
    assert short, "no narrow green bar at the start of the shared axis"
    assert short_bar < 20, short_bar  # nothing green is wide: no full-width 3 ms bar
    assert short_x >= 0


def test_page_text_without_javascript(tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "text.html"
    source = render(RUNS, NOW)
    page.write_text(source, encoding="utf-8")
    dom = dump_dom(browser, page, tmp_path / "chromium")
    for parsed in (source, dom):  # as written, and as Chromium built it
        text = Text()
        text.feed(parsed)
        assert text.scripts == 0  # nothing to run: the page is drawn already
        assert sorted(text.keys) == ["__proto__", "constructor", "toString"]
        visible = " ".join(" ".join(text.text).split())
        for key in ("constructor", "__proto__", "toString"):
            assert key in visible
        # Outcomes and durations as text, without hovering.
        assert "3ms" in visible
        assert "1h00m" in visible
        assert "no end recorded" in visible
        for outcome in ("ok", "error", "abandoned"):
            assert f" {outcome} " in f" {visible} "
        assert "exit status 2" in visible
        # The legend names every outcome.
        for outcome in COLOURS:
            assert outcome in visible
        # The scale: tick labels of one axis (the same ticks under every key).
        assert "2026-12-01 03:00" in visible
        for label in ("03:10", "03:20", "03:50", "04:00"):
            assert visible.count(label) >= 3, label  # one axis per key section, same ticks
        assert {bar["data-outcome"] for bar in text.bars} == {"ok", "error", "abandoned"}


def test_prototype_keys_from_the_command_line(tmp_path: Path) -> None:
    """Real runs of keys named after Object.prototype's members, through the CLI."""
    browser = chromium()
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    model = joblocks.JobLockModel(url, record=True)
    keys = ("constructor", "__proto__", "toString", "hasOwnProperty")
    try:
        for key in keys:
            joblocks.run_with_lock(key, 60_000, lambda: None, model=model)
        runs = ledger_of(model).table
        with model.engine.connect() as conn:  # two hosts for one key
            conn.execute(update(runs).where(runs.c.key == "__proto__").values(host="vm-b"))
    finally:
        model.dispose()
    page = tmp_path / "runs.html"
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    done = run_cli("--url", url, "history", "--html", str(page), env=env)
    assert done.returncode == 0, done.stderr
    text = Text()
    text.feed(dump_dom(browser, page, tmp_path / "chromium"))
    assert sorted(text.keys) == sorted(keys)
    assert [bar["data-outcome"] for bar in text.bars] == ["ok"] * 4
