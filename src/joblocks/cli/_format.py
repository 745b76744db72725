"""What the ``joblocks`` command line reads and prints: durations, times, tables, JSON.

Only the standard library is imported here, so that parsing the command line stays
cheap; the lock library is imported by the commands that need it.
"""

from __future__ import annotations

import json
import json.encoder
import math
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from itertools import islice
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._db.connections import JobLock

#: Multipliers of the duration units, in milliseconds.
UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
#: Longest duration accepted (the library's limit): 366 days.
MAX_DURATION_MS = 366 * 86_400_000

_encode_string = json.encoder.encode_basestring  # ensure_ascii=False: UTF-8 kept

_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)")
_EXAMPLES = "e.g. 500ms, 30s, 5m, 2h, 1d, 1h30m"


def parse_duration(text: str, *, allow_zero: bool = False) -> int:
    """Milliseconds in ``text``: ``500ms``, ``30s``, ``5m``, ``2h``, ``1d``, ``1h30m``, ``1500``.

    A plain number is milliseconds. Fractions are allowed (``1.5s``) and rounded up to
    a whole millisecond. Raises ``ValueError`` with a readable message for anything
    else, for zero unless ``allow_zero``, and above 366 days.
    """
    if not isinstance(text, str):
        raise TypeError(f"a duration must be given as text, not {type(text).__name__}")
    spec = text.strip().lower()
    if re.fullmatch(r"\d+", spec):
        ms = float(int(spec))
    else:
        ms = 0.0
        pos = 0
        for match in _PART.finditer(spec):
            if match.start() != pos:
                break
            ms += float(match.group(1)) * UNITS_MS[match.group(2)]
            pos = match.end()
        if pos == 0 or pos != len(spec):
            raise ValueError(f"{text!r} is not a duration ({_EXAMPLES})")
    if ms == 0 and not allow_zero:
        raise ValueError(f"{text!r}: the duration must be positive")
    if ms > MAX_DURATION_MS:
        raise ValueError(f"{text!r}: the duration must be at most 366d")
    return math.ceil(ms)


def format_duration(ms: float) -> str:
    """A short human duration: ``850ms``, ``42s``, ``9m58s``, ``2h05m``, ``3d4h``."""
    ms = max(0, int(ms))
    if ms < 1_000:
        return f"{ms}ms"
    seconds = ms // 1_000
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    return f"{secs}s"


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a ``Z``: ``2024-05-01T12:00:03.250Z``."""
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def human_time(moment: datetime) -> str:
    """UTC to the second, for tables: ``2024-05-01 12:00:03Z``."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def printable(text: str) -> str:
    """``text`` with control characters escaped, so one value stays on one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


def remaining_ms(lock: JobLock) -> int:
    """Milliseconds left on the lease when the row was read (0 once expired)."""
    return int(lock.remaining.total_seconds() * 1000)


def lock_state(lock: JobLock) -> str:
    """``"held"`` or ``"expired"``, by the database's clock when the row was read."""
    return "expired" if lock.expired else "held"


def lock_json(lock: JobLock) -> dict[str, Any]:
    """The documented JSON object of one lock row (see docs/cli.md)."""
    return {
        "key": lock.key,
        "holder": lock.holder,
        "state": lock_state(lock),
        "acquired_at": iso(lock.acquired_at),
        "expires_at": iso(lock.expires_at),
        "remaining_ms": remaining_ms(lock),
        "token": int(lock.fence),
        "read_at": iso(lock.read_at),
    }


def lock_fields(lock: JobLock) -> list[tuple[str, str]]:
    """One lock as (label, value) pairs for ``peek``'s text output."""
    left = remaining_ms(lock)
    return [
        ("key", printable(lock.key)),
        ("holder", printable(lock.holder)),
        ("state", lock_state(lock)),
        ("acquired", human_time(lock.acquired_at)),
        ("expires", human_time(lock.expires_at)),
        ("remaining", format_duration(left) if left > 0 else "-"),
        ("token", str(lock.fence)),
    ]


LIST_COLUMNS = ("KEY", "HOLDER", "ACQUIRED", "EXPIRES", "REMAINING", "TOKEN", "STATE")


def lock_row(lock: JobLock) -> list[str]:
    """One lock as the cells of a ``list`` table row."""
    left = remaining_ms(lock)
    return [
        printable(lock.key),
        printable(lock.holder),
        human_time(lock.acquired_at),
        human_time(lock.expires_at),
        format_duration(left) if left > 0 else "-",
        str(lock.fence),
        lock_state(lock),
    ]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned with two spaces; the last column is not padded."""
    widths = _widths([len(h) for h in header], rows)
    return "\n".join(_line(row, widths) for row in [list(header), *rows])


def _widths(widths: list[int], rows: Sequence[Sequence[str]]) -> list[int]:
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    return widths


def _line(row: Sequence[str], widths: Sequence[int]) -> str:
    cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
    return "  ".join([*cells, row[-1]]).rstrip()


#: Rows the CLI reads and prints per page (``list``): what it holds in memory at once.
PAGE_ROWS = 1_000


def stream_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], page: int = PAGE_ROWS
) -> int:
    """Print :func:`table` page by page, holding one page at a time; the rows printed.

    Columns are as wide as the header and the first page need (so a table of up to
    ``page`` rows is exactly :func:`table`'s); a later page whose cells are wider
    widens them from there on. Nothing (not even the header) is printed without rows.
    """
    source = iter(rows)
    widths: list[int] | None = None
    shown = 0
    while True:
        chunk = list(islice(source, page))
        if not chunk:
            return shown
        lines = []
        if widths is None:
            widths = [len(h) for h in header]
            _widths(widths, chunk)
            lines.append(_line(header, widths))
        else:
            _widths(widths, chunk)
        lines.extend(_line(row, widths) for row in chunk)
        out("\n".join(lines))
        sys.stdout.flush()
        shown += len(chunk)


def stream_json_array(values: Iterable[Any], page: int = PAGE_ROWS) -> int:
    """Print a JSON array of ``values`` as it goes, exactly as ``out(dump_json(list))``
    would; the number of values. One page of values is held at a time."""
    shown = 0
    source = iter(values)
    while True:
        chunk = [_element(value) for value in islice(source, page)]
        if not chunk:
            break
        sys.stdout.write(("[\n  " if shown == 0 else ",\n  ") + ",\n  ".join(chunk))
        sys.stdout.flush()
        shown += len(chunk)
    sys.stdout.write("[]\n" if shown == 0 else "\n]\n")
    sys.stdout.flush()
    return shown


def _element(value: Any) -> str:
    """``dump_json(value)`` indented as an element of an array (two more spaces)."""
    if isinstance(value, dict) and value:
        # A flat object of strings and integers (a lock): written out directly, as
        # json.dumps(indent=2) would, which runs its pure-Python encoder when indenting.
        parts = []
        for name, item in value.items():
            if isinstance(item, str):
                text = _encode_string(item)
            elif isinstance(item, int) and not isinstance(item, bool):
                text = int.__repr__(item)
            else:
                break
            parts.append(f"    {_encode_string(name)}: {text}")
        else:
            return "{\n" + ",\n".join(parts) + "\n  }"
    # JSON escapes newlines inside strings: every "\n" here is between tokens.
    return dump_json(value).replace("\n", "\n  ")


def fields(pairs: Sequence[tuple[str, str]]) -> str:
    """``label  value`` lines, labels padded to one width."""
    width = max((len(label) for label, _ in pairs), default=0)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in pairs)


def dump_json(value: Any) -> str:
    """JSON as the CLI prints it: indented, keys in the documented order, UTF-8 kept."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def out(text: str) -> None:
    """Print a line (or lines) on stdout."""
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    """Print a line on stderr, prefixed with ``joblocks:``, passwords masked."""
    from .._util.validate import mask_text

    sys.stderr.write(f"joblocks: {mask_text(text)}\n")
    sys.stderr.flush()
