"""The ``joblocks`` command line: run a command under a lock, and look after the lock table.

Installed as the ``joblocks`` script and runnable as ``python -m joblocks``. See
``docs/cli.md`` (or ``joblocks --help``) for every command, the JSON formats and the
exit codes.

The package, one module per group of commands; each module adds its own subcommands
with a ``register(sub, common)`` function, which :func:`build_parser` calls in turn:

- this module: the top-level parser and its database options, splitting the command
  line, :func:`main` (logging, one-line errors, exit codes);
- :mod:`.run`: ``run``, a command under a lock (signals, keep-alive, a lost lock);
- :mod:`.locks`: ``list``, ``peek``, ``release``, ``prune``, the commands that read or
  change lock rows (all through :class:`joblocks.JobLockModel`, no SQL of their own);
- :mod:`.setup`: ``init``, ``doctor``, ``where``, the commands about the set-up
  (the doctor's checks are in :mod:`.doctor`);
- :mod:`._common`: what they share (exit codes, the database and model from the
  options, the argument types for durations, keys and names);
- :mod:`._hints`: the advice added to a database error, by its kind;
- :mod:`._format`: durations, times, tables and JSON for the output.

Imports are kept lazy: parsing the command line needs only the standard library, and
each command imports the parts of the library it uses. ``joblocks run`` (the command
cron starts) builds a parser with ``run`` alone and does not import the other commands'
modules (see :func:`main`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import Callable

from .._version import __version__
from . import run
from ._common import (
    DURATION_OPTIONS,
    EXIT_BACKEND,
    EXIT_INTERNAL,
    EXIT_NO,
    EXIT_USAGE,
    CliError,
    Parser,
    checked,
    schema_name_type,
    table_name_type,
)
from ._format import err

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


# -- the parser -------------------------------------------------------------------------


def build_parser(run_only: bool = False) -> argparse.ArgumentParser:
    """The ``joblocks`` argument parser (global options work before or after the command).

    ``run_only``: the ``run`` subcommand alone (what :func:`main` uses for a plain
    ``joblocks [database options] run ...``, whose parsing, help and errors are those of
    the full parser); the other commands' modules are then not imported.
    """
    common = Parser(add_help=False)
    glob = common.add_argument_group("database options")
    glob.add_argument(
        "--url",
        default=argparse.SUPPRESS,
        help="database URL (default: $JOBLOCKS_URL, else the per-user SQLite file)",
    )
    glob.add_argument(
        "--table",
        type=checked(table_name_type),
        default=argparse.SUPPRESS,
        help="lock table name (default: job_locks)",
    )
    glob.add_argument(
        "--runs-table",
        type=checked(table_name_type),
        default=argparse.SUPPRESS,
        help="run ledger table name (default: job_runs beside job_locks, <name>_runs "
        "beside <name>_locks)",
    )
    glob.add_argument(
        "--schema",
        type=checked(schema_name_type),
        default=argparse.SUPPRESS,
        help="schema of the lock table (default: the connection's)",
    )
    glob.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks and debug logging",
    )
    parser = Parser(
        prog="joblocks",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"joblocks {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run.register(sub, common)
    if not run_only:
        from . import history, locks, setup

        locks.register(sub, common)
        setup.register(sub, common)
        history.register(sub, common)
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
    return run.split_command(parser, words)


_VALUE_OPTIONS = ("--url", "--table", "--runs-table", "--schema")


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


# -- main -------------------------------------------------------------------------------


def _plain_run(words: Sequence[str]) -> bool:
    """Whether ``words`` are ``run ...`` with only the database options (written in full)
    or ``--debug`` before it: no ``--help``, ``--version`` or abbreviated option that
    the top-level parser would act on, so the parser of ``run`` alone parses them as
    the full one does."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _VALUE_OPTIONS:
            skip = True
        elif word == "--debug" or ("=" in word and word.split("=", 1)[0] in _VALUE_OPTIONS):
            continue
        else:
            return word == "run"
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see ``docs/cli.md``)."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(run_only=_plain_run(words))
    args = parse_args(parser, words)
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
    from .._util.errors import LockBackendError, LockError
    from ._hints import backend_hint

    if isinstance(exc, LockBackendError):
        err(f"{exc}{backend_hint(exc)}")
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
