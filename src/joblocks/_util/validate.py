"""Checks of user input, done before any database work.

Every check raises ``TypeError`` (wrong type) or ``ValueError`` (wrong value) with a
message that names the argument.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Union

#: Longest lock key, in UTF-8 bytes (the ``id`` column holds 512 bytes on every database).
MAX_KEY_BYTES = 512
#: Longest holder, in UTF-8 bytes.
MAX_HOLDER_BYTES = 255
#: Longest accepted duration (ttl, wait, ...): 366 days.
MAX_DURATION_MS = 366 * 24 * 3600 * 1000
#: Longest table name: leaves room for the ``_fence_seq`` suffix within every
#: database's identifier limit (PostgreSQL: 63 bytes).
MAX_TABLE_NAME = 48

Duration = Union[int, float, timedelta]
"""Milliseconds (``30_000``) or a ``datetime.timedelta``."""

#: Separates a key from its place number in the row id of a counted lease's place
#: (U+241F, SYMBOL FOR UNIT SEPARATOR): ``"export␟1"``. Not allowed in a lock key.
PLACE_MARK = "\u241f"

_RESERVED_PREFIXES = ("sqlite_", "pg_")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _text(value: object, name: str, max_bytes: int, forbidden: str = "") -> str:
    """The full check of a key or holder (what :func:`lock_key` and :func:`holder`
    decide in one test for ASCII text); ``forbidden``: a character it must not hold."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value or not value.strip():
        raise ValueError(f"{name} must not be empty or whitespace only")
    if "\x00" in value:
        raise ValueError(f"{name} must not contain NUL characters")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} is not valid Unicode text (lone surrogate)") from exc
    if size > max_bytes:
        raise ValueError(f"{name} is {size} bytes in UTF-8; the limit is {max_bytes}")
    if forbidden and forbidden in value:
        raise ValueError(
            f"{name} must not contain U+241F ({forbidden}): it separates a counted lease's "
            "key from its place number in the rows of its places"
        )
    return value


# lock_key and holder: the common case in one test, in the function itself (this runs
# for every argument of every call): ASCII text is as many UTF-8 bytes as characters,
# and cannot hold a lone surrogate. Anything else gets the full check.


def lock_key(value: object, name: str = "lock_key") -> str:
    """Validate a lock key: a non-blank str without NUL or U+241F (:data:`PLACE_MARK`),
    at most 512 UTF-8 bytes."""
    return _short_text(value, name, MAX_KEY_BYTES, PLACE_MARK)


def row_key(value: object, name: str = "lock_key") -> str:
    """Validate the id of a row to read, release or delete: a lock key, or the row id
    of a counted lease's place (``key`` + :data:`PLACE_MARK` + place number)."""
    return _short_text(value, name, MAX_KEY_BYTES)


def holder(value: object, name: str = "holder") -> str:
    """Validate a holder id: a non-blank str without NUL, at most 255 UTF-8 bytes."""
    return _short_text(value, name, MAX_HOLDER_BYTES)


def _short_text(value: object, name: str, limit: int, forbidden: str = "") -> str:
    """:func:`_text`, with ASCII text decided in one test (``forbidden`` is not ASCII)."""
    if (
        type(value) is str
        and value.isascii()
        and len(value) <= limit
        and "\x00" not in value
        and value
        and not value.isspace()
    ):
        return value
    return _text(value, name, limit, forbidden)


def unknown_keyword(
    where: str, name: str, known: Iterable[str], what: str = "keyword argument"
) -> TypeError:
    """The ``TypeError`` for a keyword argument ``name`` that ``where`` (the public
    name of the class or function) does not take, suggesting the closest of ``known``."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    if not close and name.lower() in {k.lower() for k in known}:
        close = [k for k in known if k.lower() == name.lower()]
    hint = f": did you mean {close[0]}=?" if close else ""
    return TypeError(f"{where} got an unexpected {what} {name!r}{hint}")


def duration_ms(value: object, name: str, *, allow_zero: bool = False) -> int:
    """Convert a duration (ms or timedelta) to whole milliseconds, rounding up."""
    if type(value) is int and (0 if allow_zero else 1) <= value <= MAX_DURATION_MS:
        return value  # the common case, in one test
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise TypeError(
            f"{name} must be milliseconds (int or float) or a datetime.timedelta, "
            f"not {type(value).__name__}"
        )
    if isinstance(value, int) and abs(value) > MAX_DURATION_MS:
        # Checked before float(): an int beyond a float's range would overflow.
        raise ValueError(
            f"{name} must be {'>= 0' if allow_zero else 'positive'} and at most 366 days "
            f"({MAX_DURATION_MS} ms), got {value!r}"
        )
    ms = value.total_seconds() * 1000.0 if isinstance(value, timedelta) else float(value)
    if math.isnan(ms) or math.isinf(ms):
        raise ValueError(f"{name} must be a finite duration, got {value!r}")
    if ms < 0 or (ms == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else 'positive'}, got {value!r}")
    if ms > MAX_DURATION_MS:
        raise ValueError(f"{name} must be at most 366 days ({MAX_DURATION_MS} ms), got {value!r}")
    return math.ceil(ms)


def identifier(value: object, name: str, max_length: int = 63) -> str:
    """Validate a table or schema name: a plain SQL identifier (letters, digits, _)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not _IDENTIFIER.match(value):
        raise ValueError(
            f"{name} must be a plain identifier (letters, digits and _, not starting "
            f"with a digit), got {value!r}"
        )
    if len(value) > max_length:
        raise ValueError(f"{name} must be at most {max_length} characters, got {len(value)}")
    if value.lower().startswith(_RESERVED_PREFIXES):
        raise ValueError(
            f"{name} must not start with one of {_RESERVED_PREFIXES} (names the databases "
            f"reserve for their catalogs), got {value!r}"
        )
    return value


#: The states a lock row is in, by the database's clock: ``"held"`` (its lease has not
#: run out) or ``"expired"``; ``"all"`` selects both. ``"live"`` is accepted for ``"held"``.
STATES = ("all", "held", "expired")


def state(value: object, name: str = "state") -> str:
    """Validate a state filter: ``"all"``, ``"held"`` (alias ``"live"``) or ``"expired"``."""
    if value == "live":
        return "held"
    if not isinstance(value, str) or value not in STATES:
        raise ValueError(
            f"{name} must be 'all', 'held' (or its alias 'live') or 'expired', got {value!r}"
        )
    return value


#: Largest ``batch_size`` accepted (rows per page or per prune statement).
MAX_BATCH_SIZE = 100_000


def batch_size(value: object, name: str = "batch_size") -> int:
    """Validate a number of rows per page or batch: an int from 1 to 100 000."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_BATCH_SIZE:
        raise ValueError(f"{name} must be from 1 to {MAX_BATCH_SIZE}, got {value!r}")
    return value


def prune_options(expired_for: object, batch_size_: object, dry_run: object) -> tuple[int, int]:
    """``prune``'s arguments, checked (both faces): (expired_for in ms, batch size)."""
    age_ms = duration_ms(expired_for, "expired_for", allow_zero=True)
    size = batch_size(batch_size_)
    if not isinstance(dry_run, bool):
        raise TypeError(f"dry_run must be a bool, not {type(dry_run).__name__}")
    return age_ms, size
