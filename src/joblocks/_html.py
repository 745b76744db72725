"""``joblocks history --html FILE``: the run ledger as one self-contained page.

A timeline per key: one lane per host, one bar per run from its start to its end (a
run in progress reaches "now"), coloured by outcome. The page carries its data as JSON
in a ``<script type="application/json">`` and draws itself with inline JavaScript and
CSS: no network, no external assets (it opens from a file, offline).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ._ledger import Run

#: Bar colours by outcome (``running``: no outcome yet).
COLOURS = {
    "ok": "#2e7d32",
    "error": "#c62828",
    "lost": "#ef6c00",
    "skipped": "#9e9e9e",
    "running": "#1565c0",
}


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else round(moment.timestamp() * 1000)


def run_data(run: Run) -> dict[str, Any]:
    return {
        "key": run.key,
        "host": run.host,
        "pid": run.pid,
        "holder": run.holder,
        "token": run.token,
        "start": _ms(run.started_at),
        "end": _ms(run.ended_at),
        "slot": _ms(run.slot),
        "outcome": run.outcome or "running",
        "error": run.error,
    }


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .2em; }
h2 { font-size: 1.05em; margin: 1.4em 0 .3em; }
.meta { color: #666; margin-bottom: 1em; }
.legend span { display: inline-block; margin-right: 1.2em; }
.legend i { display: inline-block; width: .9em; height: .9em; margin-right: .3em;
  vertical-align: -.1em; border-radius: 2px; }
.lane { display: flex; align-items: center; margin: 2px 0; }
.lane .host { width: 14em; flex: none; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; color: #444; padding-right: .5em; }
.lane .track { position: relative; flex: 1; height: 18px; background: #f3f3f3;
  border-radius: 3px; }
.bar { position: absolute; top: 2px; height: 14px; min-width: 3px; border-radius: 2px; }
.axis { display: flex; justify-content: space-between; margin-left: 14em;
  color: #777; font-size: .85em; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<div class="meta" id="meta"></div>
<div class="legend" id="legend"></div>
<div id="timeline"></div>
<script type="application/json" id="runs">__DATA__</script>
<script>
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("runs").textContent);
  var colours = data.colours, now = data.now, runs = data.runs;
  function iso(ms) { return new Date(ms).toISOString().replace(".000Z", "Z"); }
  var legend = document.getElementById("legend");
  Object.keys(colours).forEach(function (outcome) {
    var item = document.createElement("span"), swatch = document.createElement("i");
    swatch.style.backgroundColor = colours[outcome];
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(outcome));
    legend.appendChild(item);
  });
  var root = document.getElementById("timeline");
  document.getElementById("meta").textContent = runs.length
    ? runs.length + " runs, up to " + iso(now) + " (database time, UTC)"
    : "no runs recorded";
  var keys = {};
  runs.forEach(function (run) { (keys[run.key] = keys[run.key] || []).push(run); });
  Object.keys(keys).sort().forEach(function (key) {
    var list = keys[key];
    var lo = Math.min.apply(null, list.map(function (r) { return r.start; }));
    var hi = Math.max.apply(null, list.map(function (r) { return r.end === null ? now : r.end; }));
    var span = Math.max(hi - lo, 1);
    var section = document.createElement("section");
    section.className = "key";
    section.setAttribute("data-key", key);
    var title = document.createElement("h2");
    title.textContent = key;
    section.appendChild(title);
    var hosts = {};
    list.forEach(function (run) { (hosts[run.host] = hosts[run.host] || []).push(run); });
    Object.keys(hosts).sort().forEach(function (host) {
      var lane = document.createElement("div");
      lane.className = "lane";
      lane.setAttribute("data-host", host);
      var label = document.createElement("div");
      label.className = "host";
      label.textContent = host;
      var track = document.createElement("div");
      track.className = "track";
      hosts[host].forEach(function (run) {
        var end = run.end === null ? now : run.end;
        var bar = document.createElement("div");
        bar.className = "bar";
        bar.setAttribute("data-outcome", run.outcome);
        bar.style.left = (100 * (run.start - lo) / span) + "%";
        bar.style.width = (100 * (end - run.start) / span) + "%";
        bar.style.backgroundColor = colours[run.outcome] || "#000";
        bar.title = run.outcome + ": " + iso(run.start) + " for " + (end - run.start) +
          " ms, " + run.holder + " pid " + run.pid +
          (run.token === null ? "" : ", token " + run.token) +
          (run.error ? "\\n" + run.error : "");
        track.appendChild(bar);
      });
      lane.appendChild(label);
      lane.appendChild(track);
      section.appendChild(lane);
    });
    var axis = document.createElement("div");
    axis.className = "axis";
    [lo, hi].forEach(function (ms) {
      var tick = document.createElement("span");
      tick.textContent = iso(ms);
      axis.appendChild(tick);
    });
    section.appendChild(axis);
    root.appendChild(section);
  });
})();
</script>
</body>
</html>
"""


def render(runs: Sequence[Run], now_ms: int, title: str = "joblocks run history") -> str:
    """The page for ``runs`` (``now_ms``: the database's now, where running bars end)."""
    data = {"now": now_ms, "colours": COLOURS, "runs": [run_data(run) for run in runs]}
    # Inside <script>: no "</" can end it early, whatever a key or an error says.
    payload = json.dumps(data, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e")
    return _PAGE.replace("__TITLE__", html.escape(title)).replace("__DATA__", payload)


def generated_title(now_ms: int) -> str:
    moment = datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc)
    return f"joblocks run history, {moment.strftime('%Y-%m-%d %H:%M')}Z"
