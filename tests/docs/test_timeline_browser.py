"""``joblocks history --html``: the page as a real browser shows it (headless Chromium).

Real runs are recorded in a SQLite ledger, the command writes the page, and Debian's
``chromium`` loads it from the file with the network off and dumps the DOM it built.
The test checks what is drawn: a section per key, a lane per host, a bar per run,
each bar's colour by outcome; and a screenshot's pixels: long bars of the outcomes'
colours, in one lane per host. Skipped when chromium is missing, except
in CI (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

import joblocks
from joblocks._core.ledger import ledger_of
from joblocks.cli._html import COLOURS
from tests.support.cli import run_cli
from tests.support.matrix import unavailable


def _rgb(colour: str) -> str:
    if not colour.startswith("#"):
        return colour
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
    done = run_cli("--url", url, "history", "--html", str(page), env=env)
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
        assert _rgb(bar["colour"]) == _rgb(COLOURS[bar["outcome"]]), bar
        assert bar["width"].endswith("%")
    assert {lane: sorted(outcomes) for lane, outcomes in lanes.items()} == {
        ("cleanup", "vm-b"): ["ok"],
        ("report", "vm-a"): ["error", "lost", "ok"],
        ("report", "vm-b"): ["ok", "skipped"],
    }


def test_empty_history_page(tmp_path: Path) -> None:
    browser = chromium()
    from joblocks.cli._html import render

    page = tmp_path / "empty.html"
    page.write_text(render([], 0), encoding="utf-8")
    dom = dump_dom(browser, page, tmp_path / "chromium")
    assert "no runs recorded" in dom
    drawn: Any = Drawn()
    drawn.feed(dom)
    assert drawn.bars == []


def png_pixels(path: Path) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """Width, height and RGB rows of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    import struct
    import zlib

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8
    assert interlace == 0
    channels = {2: 3, 6: 4}[colour]
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[list[tuple[int, int, int]]] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        rows.append([tuple(line[x : x + 3]) for x in range(0, stride, channels)])  # type: ignore[misc]
        previous = line
    return width, height, rows


def test_timeline_screenshot_pixels(tmp_path: Path) -> None:
    """The painted page: long green and red bars in two different lanes (hosts)."""
    from datetime import datetime, timedelta, timezone

    from joblocks._core.plain import Run
    from joblocks.cli._html import render

    browser = chromium()
    t0 = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)

    def run(start_s: int, end_s: int, host: str, outcome: str) -> Run:
        return Run(
            id=start_s,
            key="report",
            holder="h",
            host=host,
            pid=1,
            token=start_s,
            started_at=t0 + timedelta(seconds=start_s),
            ended_at=t0 + timedelta(seconds=end_s),
            duration=timedelta(seconds=end_s - start_s),
            outcome=outcome,  # type: ignore[arg-type]
            error=None,
            slot=None,
            schedule=None,
            timezone=None,
        )

    runs = [run(0, 40, "vm-a", "ok"), run(60, 100, "vm-b", "error")]
    page = tmp_path / "pixels.html"
    page.write_text(render(runs, int((t0 + timedelta(seconds=100)).timestamp() * 1000)))
    shot = tmp_path / "shot.png"
    profile = tmp_path / "chromium"
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
            "--window-size=1000,400",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(profile)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    _width, _height, rows = png_pixels(shot)

    def colour(name: str) -> tuple[int, int, int]:
        value = COLOURS[name]
        return (int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16))

    def bar_rows(name: str) -> set[int]:
        """Rows where the colour runs wider than a legend swatch: a bar."""
        wanted = colour(name)
        return {y for y, row in enumerate(rows) if sum(px == wanted for px in row) > 100}

    ok, error, lost = bar_rows("ok"), bar_rows("error"), bar_rows("lost")
    assert ok, "no green bar painted"
    assert error, "no red bar painted"
    assert not lost  # the orange is in the legend only
    assert not ok & error  # two hosts: two lanes
    assert min(error) > max(ok)  # vm-a's lane above vm-b's
