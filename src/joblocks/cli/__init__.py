"""The ``joblocks`` command line: run a command under a lock, and look after the lock table.

Installed as the ``joblocks`` script and runnable as ``python -m joblocks``. See
``docs/cli.md`` (or ``joblocks --help``) for every command, the JSON formats and the
exit codes.

Imports are kept lazy: parsing the command line needs only the standard library, and
each command imports the parts of the library it uses.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, Callable, NoReturn

from ._cli_common import EXIT_BACKEND, EXIT_INTERNAL, EXIT_NO, EXIT_USAGE, CliError, backend_hint
from ._cli_format import err, parse_duration
from ._version import __version__

__all__ = ["build_parser", "main"]

DESCRIPTION = """\
Keep a scheduled job to one instance at a time, across processes and machines, with a
lease row in a database you already run (SQLite by default, PostgreSQL, MariaDB)."""

EXAMPLES = """\
examples:
  # run the job only if no other machine runs it now (cron, every 5 minutes)
  joblocks --url postgresql://app@db/app run cleanup --ttl 10m -- /usr/local/bin/cleanup

  # wait up to 30 s for the lock instead of skipping; keep the row 1 min after the end
  joblocks run report --ttl 1h --wait 30s --min-hold 1m -- ./report.sh --daily

  # which locks are held, and by whom
  joblocks list                 joblocks list --all --json
  joblocks peek cleanup         joblocks peek cleanup --json

  # break a lock whose holder is gone (logged with your user and host)
  joblocks release cleanup --force

  # the table: create it, or print its DDL for a reviewed migration
  joblocks init                 joblocks --url postgresql://app@db/app init --sql

  # check the set-up; show which database is used and why
  joblocks doctor               joblocks where

The database is --url, else $JOBLOCKS_URL, else a per-user SQLite file.
Durations: a number with a unit, lower-case: 500ms, 30s, 5m, 2h, 1d, 1h30m (ms
milliseconds, s seconds, m minutes, h hours, d days; a bare number is refused).
Exit codes: 0 ok; 1 no (peek: no row, release: nothing released, doctor: problem);
2 usage; 3 database error; run: the command's code, 128+N when it died by signal N,
the conflict code (default 0) when the lock is held elsewhere, 75 lock lost."""


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (and exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


# -- argument types ---------------------------------------------------------------------


#: Where the documentation site describes the JSON output (the site's pages are not in
#: the wheel; the mkdocs site has no fixed host, so this is the page path within it).
DOCS_JSON_SECTION = "command-line page, section 'JSON output' (cli/#json-output)"

#: How durations are written on the command line (``run --help``, errors, docs/cli.md).
DURATION_UNITS = "ms milliseconds, s seconds, m minutes, h hours, d days"
DURATION_HELP = "a number with a lower-case unit: 500ms, 30s, 10m, 2h, 1d, 1h30m"
#: The options that take a duration (their values may look like options: ``-5s``).
DURATION_OPTIONS = ("--ttl", "--wait", "--min-hold", "--expired-for")


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


def _duration(allow_zero: bool) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return check_duration_text(text, allow_zero)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "duration"
    return parse


def _checked(check: Callable[[str], str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            return check(text)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _key(text: str) -> str:
    from ._validate import lock_key

    return lock_key(text, "the key")


def _holder(text: str) -> str:
    from ._validate import holder

    return holder(text, "the holder")


def _table_name(text: str) -> str:
    from ._validate import MAX_TABLE_NAME, identifier

    return identifier(text, "the table name", MAX_TABLE_NAME)


def _schema_name(text: str) -> str:
    from ._validate import identifier

    return identifier(text, "the schema name")


def _exit_code(text: str) -> int:
    try:
        code = int(text)
    except ValueError:
        code = -1
    if not 0 <= code <= 255:
        raise argparse.ArgumentTypeError(f"{text!r} is not an exit code (0 to 255)")
    return code


# -- the parser -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``joblocks`` argument parser (global options work before or after the command)."""
    common = _Parser(add_help=False)
    glob = common.add_argument_group("database options")
    glob.add_argument(
        "--url",
        default=argparse.SUPPRESS,
        help="database URL (default: $JOBLOCKS_URL, else the per-user SQLite file)",
    )
    glob.add_argument(
        "--table",
        type=_checked(_table_name),
        default=argparse.SUPPRESS,
        help="lock table name (default: job_locks)",
    )
    glob.add_argument(
        "--schema",
        type=_checked(_schema_name),
        default=argparse.SUPPRESS,
        help="schema of the lock table (default: the connection's)",
    )
    glob.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks and debug logging",
    )
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="joblocks",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=fmt,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"joblocks {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, handler: Callable[[argparse.Namespace], int], text: str, **kw: Any
    ) -> Any:
        p = sub.add_parser(
            name, help=text, description=text, parents=[common], formatter_class=fmt, **kw
        )
        p.set_defaults(handler=handler)
        return p

    run = command(
        "run",
        _cmd_run,
        "run a command only if the lock is had; exit with the command's exit code",
        usage="joblocks run KEY --ttl DURATION [options] -- COMMAND [ARG ...]",
        epilog="Keep-alive renews the lock while the command runs (every ttl/3), so the "
        "ttl only\nbounds how long a crashed run blocks others. If the lock is lost "
        "anyway, the\ncommand gets SIGTERM and joblocks exits with 75 (--on-lost "
        "continue: a warning only).\n\nDurations (--ttl, --wait, --min-hold) are "
        f"{DURATION_HELP}\n({DURATION_UNITS}).\nA bare number (--ttl 10) is refused: "
        "write 10s, 10m or 10ms.",
    )
    run.add_argument("key", type=_checked(_key), metavar="KEY", help="the lock key")
    run.add_argument(
        "--ttl",
        type=_duration(False),
        required=True,
        metavar="DURATION",
        help="lease length, e.g. 10m, 30s or 1h (unit required: ms, s, m, h, d); with "
        "keep-alive, how long a crashed holder blocks others",
    )
    run.add_argument(
        "--keepalive",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="renew the lease while the command runs (default: on)",
    )
    run.add_argument(
        "--wait",
        type=_duration(True),
        metavar="DURATION",
        help="wait this long for the lock, e.g. 30s (default: give up at once)",
    )
    run.add_argument(
        "--min-hold",
        type=_duration(True),
        metavar="DURATION",
        help="keep the row until acquired + this (e.g. 1m), even after the command ended",
    )
    run.add_argument(
        "--conflict-exit-code",
        type=_exit_code,
        default=0,
        metavar="N",
        help="exit code when the lock is held elsewhere (default: 0, so cron stays quiet)",
    )
    run.add_argument(
        "--on-lost",
        choices=("terminate", "continue"),
        default="terminate",
        help="lock lost while the command runs: SIGTERM it and exit 75 (default), or only warn",
    )
    run.add_argument(
        "-q", "--quiet", action="store_true", help="no message when the lock is held elsewhere"
    )

    ls = command("list", _cmd_list, "list the held locks (--all: expired rows too)")
    ls.add_argument("--all", action="store_true", help="include expired rows")
    ls.add_argument(
        "--json",
        action="store_true",
        help=f"print JSON (its keys: the docs site's {DOCS_JSON_SECTION})",
    )

    peek = command("peek", _cmd_peek, "show one lock row, held or expired (exit 1: no row)")
    peek.add_argument("key", type=_checked(_key), metavar="KEY")
    peek.add_argument("--json", action="store_true", help="print JSON (null when no row)")

    release = command(
        "release", _cmd_release, "release a lock: as its holder, or by force whoever holds it"
    )
    release.add_argument("key", type=_checked(_key), metavar="KEY")
    who = release.add_mutually_exclusive_group(required=True)
    who.add_argument(
        "--holder", type=_checked(_holder), help="release only if this holder holds it"
    )
    who.add_argument(
        "--force",
        action="store_true",
        help="delete the row whoever holds it (logged with your user and host)",
    )

    prune = command("prune", _cmd_prune, "delete rows that expired more than a while ago")
    prune.add_argument(
        "--expired-for",
        type=_duration(True),
        required=True,
        metavar="DURATION",
        help="delete rows whose expiry is older than this, e.g. 7d or 12h (by the "
        "database's clock)",
    )
    prune.add_argument("--dry-run", action="store_true", help="only count them")

    init = command("init", _cmd_init, "create the lock table, or print its DDL")
    init.add_argument(
        "--sql",
        action="store_true",
        help="print the DDL for the configured database instead (no connection needed)",
    )

    doctor = command("doctor", _cmd_doctor, "check the database, table, fencing and clocks")
    doctor.add_argument("--json", action="store_true", help="print JSON")

    where = command("where", _cmd_where, "show which database is used, and why")
    where.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _join_negative_durations(words: list[str]) -> list[str]:
    """``--ttl -5s`` as ``--ttl=-5s`` (before any ``--``), so that argparse hands the
    value to the duration check, which says it is negative, instead of reading it as
    an unknown option."""
    joined: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return joined + words[i:]
        following = words[i + 1] if i + 1 < len(words) else ""
        if word in DURATION_OPTIONS and re.match(r"-\.?\d", following):
            joined.append(f"{word}={following}")
            i += 2
            continue
        joined.append(word)
        i += 1
    return joined


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv``; for ``run``, everything after the first ``--`` is the command."""
    words = _join_negative_durations(list(argv))
    if _command_of(words) != "run":
        return parser.parse_args(words)
    tail: list[str] | None = None
    if "--" in words:
        cut = words.index("--")
        words, tail = words[:cut], words[cut + 1 :]
    args, extra = parser.parse_known_args(words)
    hint = "put the command after --, e.g. joblocks run KEY --ttl 10m -- /bin/job"
    if extra and not extra[0].startswith("-"):
        _run_usage(parser, hint)
    if extra:
        _run_usage(parser, f"unrecognized arguments: {' '.join(extra)}")
    if tail is None:
        _run_usage(parser, hint)
    if not tail:
        _run_usage(parser, "the command to run is missing after --")
    args.argv = tail
    return args


_VALUE_OPTIONS = ("--url", "--table", "--schema")


def _command_of(words: Sequence[str]) -> str | None:
    """The command word: the first word that is neither an option nor an option's value."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--":
            return None
        elif word in _VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def _run_usage(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.exit(EXIT_USAGE, f"joblocks run: error: {message} (see `joblocks run --help`)\n")


# -- main -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see ``docs/cli.md``)."""
    parser = build_parser()
    args = parse_args(parser, sys.argv[1:] if argv is None else argv)
    debug = bool(getattr(args, "debug", False))
    restore = _setup_logging(debug)
    try:
        code: int = args.handler(args)
        return code
    except CliError as exc:
        err(exc.message)
        _trace(debug)
        return exc.code
    except BrokenPipeError:
        # The reader went away (`joblocks list | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_NO
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return _report(exc, debug)
    finally:
        restore()


def _report(exc: Exception, debug: bool) -> int:
    from ._errors import LockBackendError, LockError

    if isinstance(exc, LockBackendError):
        err(f"{exc}{backend_hint(exc.detail)}")
        code = EXIT_BACKEND
    elif isinstance(exc, LockError):
        err(str(exc))
        code = EXIT_BACKEND
    elif isinstance(exc, (ValueError, TypeError, LookupError)):
        # Bad input found by the library (e.g. an in-memory SQLite URL).
        err(str(exc))
        code = EXIT_USAGE
    else:
        err(
            f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback, "
            "and please report it)"
        )
        code = EXIT_INTERNAL
    _trace(debug)
    return code


def _trace(debug: bool) -> None:
    if debug:
        import traceback

        traceback.print_exc()


def _setup_logging(debug: bool) -> Callable[[], None]:
    """Send the library's log records (lost leases, forced releases) to stderr."""
    import logging

    log = logging.getLogger("joblocks")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    saved = (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if debug else logging.WARNING)
    log.propagate = False

    def restore() -> None:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]

    return restore


# -- commands ---------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from ._cli_run import run

    return run(args)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from ._cli_doctor import doctor

    return doctor(args)


def _cmd_list(args: argparse.Namespace) -> int:
    from ._cli_commands import cmd_list

    return cmd_list(args)


def _cmd_peek(args: argparse.Namespace) -> int:
    from ._cli_commands import cmd_peek

    return cmd_peek(args)


def _cmd_release(args: argparse.Namespace) -> int:
    from ._cli_commands import cmd_release

    return cmd_release(args)


def _cmd_prune(args: argparse.Namespace) -> int:
    from ._cli_commands import cmd_prune

    return cmd_prune(args)


def _cmd_init(args: argparse.Namespace) -> int:
    from ._cli_commands import cmd_init

    return cmd_init(args)


def _cmd_where(args: argparse.Namespace) -> int:
    from ._cli_commands import cmd_where

    return cmd_where(args)
