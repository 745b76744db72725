"""What the ``joblocks`` commands share: exit codes, errors, the database and the model,
the parser class, the argument types (durations, keys, names) and :func:`add_command`."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from ._format import parse_duration

if TYPE_CHECKING:
    from sqlalchemy import URL

    from .._sync.model import JobLockModel

#: Success (``run``: the command's own exit code is used instead).
EXIT_OK = 0
#: A negative answer: ``peek`` found no row, ``release`` released nothing, ``doctor``
#: found a problem.
EXIT_NO = 1
#: Bad usage: unknown option, bad duration, bad key, missing command.
EXIT_USAGE = 2
#: The database failed: unreachable, missing table or driver, permission denied.
EXIT_BACKEND = 3
#: ``run``: the lock was lost while the command ran, and the command was terminated.
EXIT_LOST = 75
#: ``run``: the command was found but could not be executed.
EXIT_CANNOT_EXECUTE = 126
#: ``run``: the command was not found.
EXIT_NOT_FOUND = 127
#: An unexpected internal error (a bug: please report it, with ``--debug`` output).
EXIT_INTERNAL = 70

#: Where the database URL came from, as ``joblocks where`` names it.
SOURCE_NAMES = {"argument": "--url", "JOBLOCKS_URL": "JOBLOCKS_URL", "default": "default"}


def describe_source(source: str | None) -> str:
    """Where the database URL came from, in words (``where`` and ``doctor`` say the same)."""
    return {
        "--url": "given with --url",
        "JOBLOCKS_URL": "from the environment variable JOBLOCKS_URL",
        "default": "the per-user SQLite file (neither --url nor JOBLOCKS_URL is set)",
    }.get(source or "", str(source))


class CliError(Exception):
    """A failure reported as one line on stderr, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_BACKEND) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def resolve_url(args: argparse.Namespace) -> tuple[URL, str]:
    """The database URL to use and where it came from (``--url``, ``JOBLOCKS_URL``, ``default``)."""
    from .._db.engines import resolve

    given: str | None = getattr(args, "url", None)
    if given is not None and not given.strip():
        raise CliError("--url is empty", EXIT_USAGE)
    url, source = resolve(given, "--url")
    return url, SOURCE_NAMES.get(source, source)


def check_backend(url: URL) -> None:
    """Refuse databases joblocks does not support, before loading any driver."""
    from .._sql.dialects import SUPPORTED_BACKENDS, UNSUPPORTED

    backend = url.get_backend_name()
    if backend not in SUPPORTED_BACKENDS:
        raise CliError(f"{UNSUPPORTED}{backend!r}", EXIT_USAGE)


def table_options(args: argparse.Namespace) -> tuple[str, str | None]:
    """``--table`` and ``--schema`` (defaults: ``job_locks``, the connection's schema)."""
    from .._sql.schema import JOB_LOCKS_TABLE_NAME

    table: str = getattr(args, "table", None) or JOB_LOCKS_TABLE_NAME
    schema: str | None = getattr(args, "schema", None)
    return table, schema


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL (None for other databases and ``file:`` URIs)."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def require_sqlite_file(url: URL) -> None:
    """Refuse to create an empty SQLite file as a side effect of a read-only command."""
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise CliError(
            f"the database file {path} does not exist: nothing has taken a lock there yet "
            "(`joblocks init` or `joblocks run` creates it)"
        )


def open_model(
    args: argparse.Namespace,
    *,
    create_table: bool,
    must_exist: bool = False,
    timeout_ms: int | None = None,
) -> JobLockModel:
    """The model of the configured database and table.

    ``must_exist`` refuses a SQLite file that does not exist yet, instead of letting
    SQLite create an empty one. ``timeout_ms``: the model's per-call time-out (None:
    its default).
    """
    from .._sync.model import JobLockModel

    url, _source = resolve_url(args)
    check_backend(url)
    if must_exist:
        require_sqlite_file(url)
    table, schema = table_options(args)
    return JobLockModel(
        url,
        table_name=table,
        schema=schema,
        create_table=create_table,
        runs_table_name=getattr(args, "runs_table", None),
        timeout=timeout_ms,
    )


def operator() -> str:
    """``user@host`` of whoever runs this command, for logs and holders: the user name
    of the effective uid (not ``USER``/``LOGNAME``, which anyone can set)."""
    import socket

    user = _effective_user()
    host = socket.gethostname() or "localhost"
    return f"{user}@{host}"


def _effective_user() -> str:
    if not hasattr(os, "geteuid"):  # Windows: no uids, only the login name
        import getpass

        try:
            return getpass.getuser()
        except Exception:
            return "unknown"
    import pwd

    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # no name for this uid (e.g. a container's random uid)
        return f"uid{uid}"


# -- parsing ----------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (and exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


#: Where the documentation site describes the JSON output (the site's pages are not in
#: the wheel; the mkdocs site has no fixed host, so this is the page path within it).
DOCS_JSON_SECTION = "command-line page, section 'JSON output' (cli/#json-output)"

#: How durations are written on the command line (``run --help``, errors, docs/cli.md).
DURATION_UNITS = "ms milliseconds, s seconds, m minutes, h hours, d days"
DURATION_HELP = "a number with a lower-case unit: 500ms, 30s, 10m, 2h, 1d, 1h30m"
#: The options that take a duration (their values may look like options: ``-5s``).
DURATION_OPTIONS = (
    "--ttl",
    "--wait",
    "--min-hold",
    "--expired-for",
    "--max-hold",
    "--jitter",
    "--timeout",
)


def check_duration_text(text: str, allow_zero: bool) -> int:
    """Milliseconds in ``text``, which must carry a lower-case unit (``10s``, ``10m``,
    ``500ms``); a ``ValueError`` with a hint for a bare number, an upper-case unit or
    a negative duration."""
    spec = text.strip()
    bare = re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)", spec)
    if (spec.startswith("-") and spec[1:2].isdigit()) or spec.startswith("-."):
        raise ValueError(
            f"{text!r} is negative: a duration must be "
            f"{'0 or more' if allow_zero else 'positive'} ({DURATION_HELP})"
        )
    if bare and float(spec) != 0:
        raise ValueError(
            f"{text!r} has no unit: write e.g. {spec}s, {spec}m or {spec}ms ({DURATION_UNITS})"
        )
    if spec != spec.lower() and re.fullmatch(r"[0-9.]+[A-Za-z0-9.]*", spec):
        raise ValueError(
            f"{text!r}: units are lower-case (m is minutes, ms milliseconds, "
            "s seconds, h hours, d days)"
        )
    return parse_duration(spec, allow_zero=allow_zero)


def duration(allow_zero: bool) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return check_duration_text(text, allow_zero)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "duration"
    return parse


def checked(check: Callable[[str], str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            return check(text)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def key_type(text: str) -> str:
    from .._util.validate import lock_key

    return lock_key(text, "the key")


def row_key_type(text: str) -> str:
    """A key, or a counted lease's place (``export␟2``): for ``peek`` and ``release``."""
    from .._util.validate import row_key

    return row_key(text, "the key")


def holder_type(text: str) -> str:
    from .._util.validate import holder

    return holder(text, "the holder")


def table_name_type(text: str) -> str:
    from .._util.validate import MAX_TABLE_NAME, identifier

    return identifier(text, "the table name", MAX_TABLE_NAME)


def schema_name_type(text: str) -> str:
    from .._util.validate import identifier

    return identifier(text, "the schema name")


def exit_code(text: str) -> int:
    try:
        code = int(text)
    except ValueError:
        code = -1
    if not 0 <= code <= 255:
        raise argparse.ArgumentTypeError(f"{text!r} is not an exit code (0 to 255)")
    return code


def add_command(
    sub: Any,
    common: argparse.ArgumentParser,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    text: str,
    **kw: Any,
) -> Any:
    """Add the subcommand ``name`` to ``sub`` (the top-level parser's subparsers), with
    the database options of ``common``; ``main`` calls ``handler(args)`` for it."""
    p = sub.add_parser(
        name,
        help=text,
        description=text,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kw,
    )
    p.set_defaults(handler=handler)
    return p
