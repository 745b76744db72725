"""Keeping passwords out of what joblocks prints, logs and raises.

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

import re
from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from sqlalchemy import URL

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
