"""Checks of user input, done before any database work; and what joblocks shows of it.

Every check raises ``TypeError`` (wrong type) or ``ValueError`` (wrong value) with a
message that names the argument.

Passwords are kept out of what joblocks prints, logs and raises.

Everything that shows a database URL goes through :func:`mask_url`; free text that may
contain one (a driver's error message, the text the ledger keeps) through
:func:`mask_text`. Both hide:

- the password of a URL (``postgresql://app:***@db/app``), also when the URL does not
  parse (then whatever stands between ``user:`` and the last ``@`` before the host);
- the value of every query parameter whose name, ignoring case, contains one of
  :data:`SECRET_WORDS` (``password``, ``passwd``, ``pwd``, ``secret``, ``token``): libpq's
  ``password`` and ``sslpassword``, PyMySQL's ``passwd`` and ``ssl_key_password``,
  ODBC's ``PWD``, ``auth_token`` ...

A URL that parses is shown readably: query values keep their ``:``, ``,`` and ``/``
(``?host=a:5432,b:5432``, not ``a%3A5432%2Cb%3A5432``).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Union
from urllib.parse import quote

if TYPE_CHECKING:
    from sqlalchemy import URL


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


__all__ = ["MASK", "SECRET_WORDS", "is_secret_name", "mask_text", "mask_url"]

#: What stands in for a hidden value.
MASK = "***"

#: A query parameter (or ``name=value`` pair in a text) is a secret when its name,
#: ignoring case, contains one of these.
SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token")

_SECRET_NAME = "|".join(SECRET_WORDS)

# ``user:password@`` of a URL inside a text (the password runs to the last ``@`` before
# a space or quote, so that an unescaped ``@`` in it is hidden too).
_USERINFO_IN_TEXT = re.compile(r"([A-Za-z][\w+.-]*://[^:/@\s'\"]*:)([^\s'\"]*)@")
# What stands for a password in the examples of the messages themselves.
_PLACEHOLDERS = frozenset({MASK, "password"})
# ``user:password@`` at the start of a text that is meant to be one URL, after its
# ``scheme://`` (or at the very start when it has none).
_USERINFO_AFTER_SCHEME = re.compile(r"^(.*?://[^:/@]*:).*@", re.S)
_USERINFO_AT_START = re.compile(r"^([^:/@]*:).*@", re.S)
# ``name=value`` where the name contains a secret word; the value ends at a space,
# ``&``, ``;``, ``,`` or a quote (or is itself quoted, as in a libpq connection string),
# and a ``:`` that ends it is the text's, not the value's (``?password=x: refused``).
_PAIR = re.compile(
    rf"(?i)([\w.-]*(?:{_SECRET_NAME})[\w.-]*\s*=\s*)"
    r"('[^']*'|\"[^\"]*\"|(?:[^\s&;,'\"]*[^\s&;,'\":])?)"
)


def is_secret_name(name: str) -> bool:
    """Whether a query parameter called ``name`` holds a secret (see :data:`SECRET_WORDS`)."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def mask_text(text: str) -> str:
    """``text`` with the password of every URL in it and the value of every secret
    ``name=value`` pair replaced by ``***``."""
    text = _USERINFO_IN_TEXT.sub(_hide_userinfo, text)
    return _PAIR.sub(rf"\1{MASK}", text)


def _hide_userinfo(match: re.Match[str]) -> str:
    if match.group(2) in _PLACEHOLDERS:
        return match.group(0)
    return f"{match.group(1)}{MASK}@"


def _mask_unparsed(text: str) -> str:
    userinfo = _USERINFO_AFTER_SCHEME if "://" in text else _USERINFO_AT_START
    return mask_text(userinfo.sub(rf"\1{MASK}@", text))


def mask_url(url: str | URL) -> str:
    """The URL as text with its password and secret query parameters replaced by
    ``***``; a text that does not parse as a URL is masked as text (its
    ``user:secret@`` part included)."""
    from sqlalchemy import make_url

    if isinstance(url, str):
        text = url
        try:
            url = make_url(text.strip())
        except Exception:
            return _mask_unparsed(text)
    try:
        return _render(url)
    except Exception:
        return _mask_unparsed(str(url.render_as_string(hide_password=True)))


def _render(url: URL) -> str:
    text = url.drivername + "://"
    if url.username is not None:
        text += quote(url.username, safe=" +")
        if url.password is not None:
            text += ":" + MASK
        text += "@"
    if url.host is not None:
        text += f"[{url.host}]" if ":" in url.host else url.host
    if url.port is not None:
        text += f":{url.port}"
    if url.database is not None:
        text += "/" + quote(url.database, safe=" +/:")
    if url.query:
        pairs = []
        for name in sorted(url.query):
            raw = url.query[name]
            for value in (raw,) if isinstance(raw, str) else raw:
                shown = MASK if is_secret_name(name) else quote(value, safe=":,/[]")
                pairs.append(f"{quote(name, safe='')}={shown}")
        text += "?" + "&".join(pairs)
    return text
