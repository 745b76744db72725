"""``joblocks history --html FILE``: the run ledger as one self-contained page.

The page is drawn here, in Python, as plain HTML and CSS: it needs no JavaScript and
no network (it opens from a file, offline, in any browser or mail reader). Every key
is drawn against **one time axis shared by the whole page**, with tick labels, so bar
lengths compare across keys: a lane per host, a bar per run from its start to its end
(a run with no end reaches "now"), coloured by outcome, with a legend. Below each
key's lanes, a table lists its runs with their start, duration, outcome, host, pid,
token and error as text: nothing needs hovering.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone

from .._core.plain import Run
from .._db.connections import from_ms
from ._format import format_duration

#: Bar colours by outcome (``running``: no end yet; ``abandoned``: no end, and its
#: lease is gone: its process died).
COLOURS = {
    "ok": "#2e7d32",
    "error": "#c62828",
    "lost": "#ef6c00",
    "skipped": "#9e9e9e",
    "running": "#1565c0",
    "abandoned": "#6a1b9a",
}

#: What the legend says of each outcome.
MEANINGS = {
    "ok": "ok",
    "error": "error (raised, or the command exited non-zero)",
    "lost": "lost (the lease was lost while it ran)",
    "skipped": "skipped (held elsewhere)",
    "running": "running (drawn up to now)",
    "abandoned": "abandoned (its process died: no end recorded, lease gone; drawn up to now)",
}

#: Tick spacings of the time axis, in ms (then whole weeks).
_STEPS = (
    *(1, 2, 5, 10, 20, 50, 100, 200, 500),
    *(1_000, 2_000, 5_000, 10_000, 15_000, 30_000),
    *(60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000),
    *(3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000),
    *(86_400_000, 172_800_000, 604_800_000),
)
_DAY = 86_400_000
#: A bar at least this wide (% of the axis) also carries its outcome and duration.
_LABELLED = 9.0


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _end_ms(run: Run, now_ms: int) -> int:
    return now_ms if run.ended_at is None else max(_ms(run.ended_at), _ms(run.started_at))


def duration_text(ms: float) -> str:
    """A short duration: ``3ms``, ``850ms``, ``4.2s``, ``9m58s``, ``2h05m``, ``3d4h``
    (the command line's :func:`format_duration`, with tenths of a second under 10 s)."""
    if 1_000 <= ms < 10_000:
        return f"{int(ms) / 1000:.1f}".rstrip("0").rstrip(".") + "s"
    return format_duration(ms)


def _stamp(ms: int, with_ms: bool = True) -> str:
    moment = from_ms(ms)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return (text + f".{ms % 1000:03d}" if with_ms else text) + "Z"


def ticks(lo: int, hi: int, most: int = 8) -> tuple[int, list[int]]:
    """A readable tick spacing for ``[lo, hi]`` (epoch ms) and the ticks in it."""
    span = max(hi - lo, 1)
    step = next((s for s in _STEPS if span / s <= most), 0)
    if not step:
        week = _STEPS[-1]
        step = week * -(-span // (most * week))
    first = -(-lo // step) * step
    return step, list(range(first, hi + 1, step))


def tick_label(ms: int, step: int, previous: int | None) -> str:
    """``03:10``, ``03:10:05``, ``03:10:05.250`` by the spacing, with the date where it
    changes (and on the first tick)."""
    moment = from_ms(ms)
    if step >= _DAY:
        return moment.strftime("%Y-%m-%d")
    text = moment.strftime("%H:%M" if step >= 60_000 else "%H:%M:%S")
    if step < 1_000:
        text += f".{ms % 1000:03d}"
    if previous is None or from_ms(previous).date() != moment.date():
        text = moment.strftime("%Y-%m-%d ") + text
    return text


def _pct(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") + "%"


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .2em; }
h2 { font-size: 1.05em; margin: 1.6em 0 .3em; }
.meta { color: #555; margin-bottom: .6em; }
.legend { margin-bottom: .8em; }
.legend span { display: inline-block; margin-right: 1.2em; }
.legend i, td i { display: inline-block; width: .9em; height: .9em; margin-right: .3em;
  vertical-align: -.1em; border-radius: 2px; }
.lane { display: flex; align-items: center; margin: 2px 0; }
.lane .host { width: 200px; flex: none; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; color: #444; padding-right: .5em; box-sizing: border-box; }
.track { position: relative; flex: 1; height: 20px; background: #f3f3f3; }
.grid { position: absolute; top: 0; bottom: 0; width: 1px; background: #d8d8d8; }
.bar { position: absolute; top: 2px; height: 16px; min-width: 3px; overflow: hidden;
  color: #fff; font-size: 11px; line-height: 16px; white-space: nowrap; }
.bar b { font-weight: normal; padding-left: 3px; }
.axis { position: relative; margin-left: 200px; height: 1.5em; color: #555;
  font-size: .8em; }
.axis span { position: absolute; top: 0; transform: translateX(-50%); white-space: nowrap; }
.axis span.first { transform: none; }
table.runs { border-collapse: collapse; margin: .4em 0 0 200px; font-size: .9em; }
table.runs th, table.runs td { text-align: left; padding: 1px .8em 1px 0;
  vertical-align: top; }
table.runs th { color: #555; font-weight: 600; }
td.num { font-variant-numeric: tabular-nums; }
"""


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _axis(lo: int, span: int, step: int, marks: list[int]) -> str:
    parts = []
    previous = None
    for i, mark in enumerate(marks):
        cls = ' class="first"' if i == 0 and mark == lo else ""
        left = _pct(100 * (mark - lo) / span)
        label = tick_label(mark, step, previous)
        parts.append(f'<span{cls} style="left: {left}">{_esc(label)}</span>')
        previous = mark
    return f'<div class="axis" aria-hidden="true">{"".join(parts)}</div>'


def _bar(run: Run, lo: int, span: int, now_ms: int) -> str:
    start, end = _ms(run.started_at), _end_ms(run, now_ms)
    took = end - start
    state = run.state
    width = 100 * took / span
    said = f"{state}, {duration_text(took)}"
    if run.ended_at is None:
        said += " so far" if state == "running" else " until now, no end recorded"
    detail = (
        f"{said}; started {_stamp(start)}; {run.holder} on {run.host}, pid {run.pid}"
        + ("" if run.token is None else f", token {run.token}")
        + ("" if not run.error else f"\n{run.error}")
    )
    label = f"<b>{_esc(said)}</b>" if width >= _LABELLED else ""
    return (
        f'<div class="bar" data-outcome="{_esc(state)}" data-start="{start}" '
        f'data-duration-ms="{took}" title="{_esc(detail)}" '
        f'style="left: {_pct(100 * (start - lo) / span)}; width: {_pct(width)}; '
        f'background-color: {COLOURS.get(state, "#000")}">{label}</div>'
    )


def _runs_table(runs: list[Run], now_ms: int) -> str:
    rows = []
    for run in sorted(runs, key=lambda r: (_ms(r.started_at), r.id), reverse=True):
        start, end = _ms(run.started_at), _end_ms(run, now_ms)
        state = run.state
        took = duration_text(end - start)
        if run.ended_at is None:
            took += " so far" if state == "running" else " (no end recorded)"
        swatch = f'<i style="background-color: {COLOURS.get(state, "#000")}"></i>'
        cells = [
            f'<td class="num">{_esc(_stamp(start))}</td>',
            f'<td class="num duration">{_esc(took)}</td>',
            f'<td class="outcome">{swatch}{_esc(state)}</td>',
            f"<td>{_esc(run.host)}</td>",
            f'<td class="num">{run.pid}</td>',
            f'<td class="num">{"-" if run.token is None else run.token}</td>',
            f"<td>{_esc(run.holder)}</td>",
            f"<td>{_esc(run.error or '')}</td>",
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    head = "".join(
        f"<th>{name}</th>"
        for name in ("started (UTC)", "duration", "outcome", "host", "pid", "token", "holder")
    )
    return (
        f'<table class="runs"><thead><tr>{head}<th>error</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def render(runs: Sequence[Run], now_ms: int, title: str = "joblocks run history") -> str:
    """The page for ``runs`` (``now_ms``: the database's now, epoch ms, where bars of
    runs with no end stop)."""
    legend = "".join(
        f'<span data-outcome="{name}"><i style="background-color: {colour}"></i>'
        f"{_esc(MEANINGS[name])}</span>"
        for name, colour in COLOURS.items()
    )
    body: list[str] = []
    if not runs:
        meta = "no runs recorded"
    else:
        lo = min(_ms(run.started_at) for run in runs)
        hi = max(_end_ms(run, now_ms) for run in runs)
        span = max(hi - lo, 1)
        step, marks = ticks(lo, lo + span)
        axis = _axis(lo, span, step, marks)
        grid = "".join(
            f'<div class="grid" style="left: {_pct(100 * (mark - lo) / span)}"></div>'
            for mark in marks
        )
        by_key: dict[str, list[Run]] = {}
        for run in runs:
            by_key.setdefault(run.key, []).append(run)
        meta = (
            f"{len(runs)} run{'s' if len(runs) != 1 else ''} of {len(by_key)} "
            f"key{'s' if len(by_key) != 1 else ''}, from {_stamp(lo)} to {_stamp(hi)} "
            f"({duration_text(hi - lo)}; database time, UTC). One time axis for the whole "
            f"page, a tick every {duration_text(step)}: bar lengths compare across keys."
        )
        for key in sorted(by_key):
            listed = by_key[key]
            by_host: dict[str, list[Run]] = {}
            for run in listed:
                by_host.setdefault(run.host, []).append(run)
            lanes = "".join(
                f'<div class="lane" data-host="{_esc(host)}">'
                f'<div class="host" title="{_esc(host)}">{_esc(host)}</div>'
                f'<div class="track">{grid}'
                + "".join(_bar(run, lo, span, now_ms) for run in by_host[host])
                + "</div></div>"
                for host in sorted(by_host)
            )
            body.append(
                f'<section class="key" data-key="{_esc(key)}"><h2>{_esc(key)}</h2>'
                f"{lanes}{axis}{_runs_table(listed, now_ms)}</section>"
            )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_esc(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f'<h1>{_esc(title)}</h1>\n<div class="meta" id="meta">{_esc(meta)}</div>\n'
        f'<div class="legend" id="legend">{legend}</div>\n'
        f'<div id="timeline">{"".join(body)}</div>\n</body>\n</html>\n'
    )


def generated_title(now_ms: int) -> str:
    moment = datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc)
    return f"joblocks run history, {moment.strftime('%Y-%m-%d %H:%M')}Z"
