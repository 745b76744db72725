"""The arguments of ``joblocks run``: its parser, and the split of the command after ``--``."""

from __future__ import annotations

import argparse
from typing import Any, Callable, NoReturn

from ._common import (
    DURATION_HELP,
    DURATION_UNITS,
    EXIT_USAGE,
    add_command,
    checked,
    duration,
    exit_code,
    key_type,
)


def register(
    sub: Any, common: argparse.ArgumentParser, *, run: Callable[[argparse.Namespace], int]
) -> None:
    """Add ``run`` to the subcommands ``sub`` (see :func:`joblocks.cli.build_parser`)."""
    p = add_command(
        sub,
        common,
        "run",
        run,
        "run a command only if the lock is had; exit with the command's exit code",
        usage="joblocks run KEY --ttl DURATION [options] -- COMMAND [ARG ...]",
        epilog="Keep-alive renews the lock while the command runs (every ttl/3), so the "
        "ttl only\nbounds how long a crashed run blocks others. If the lock is lost "
        "anyway, the\ncommand gets SIGTERM and joblocks exits with 75 (--on-lost "
        "continue: a warning only).\n\n--schedule CRON: one start per slot of the schedule "
        "(the period between two\nfire times, by the database's clock); a start whose "
        "slot was already run exits\nwith --skip-exit-code (0).\n\n"
        "The command's environment also has JOBLOCKS_KEY, JOBLOCKS_TOKEN (the fencing "
        "token\nof this grant), JOBLOCKS_HOLDER and JOBLOCKS_URL (the database, password "
        "included),\nso a shell job can fence its own writes.\n\n"
        "Durations (--ttl, --wait, --min-hold, --max-hold, --jitter, --timeout) are "
        f"{DURATION_HELP}\n({DURATION_UNITS}).\nA bare number (--ttl 10) is refused: "
        "write 10s, 10m or 10ms.",
    )
    p.add_argument("key", type=checked(key_type), metavar="KEY", help="the lock key")
    p.add_argument(
        "--ttl",
        type=duration(False),
        required=True,
        metavar="DURATION",
        help="lease length, e.g. 10m, 30s or 1h (unit required: ms, s, m, h, d); with "
        "keep-alive, how long a crashed holder blocks others",
    )
    p.add_argument(
        "--keepalive",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="renew the lease while the command runs (default: on)",
    )
    p.add_argument(
        "--wait",
        type=duration(True),
        metavar="DURATION",
        help="when the lock is held elsewhere, wait up to this long for it to be "
        "released (or to expire), retrying with backoff, then run, late; e.g. 30s "
        "(default: give up at once)",
    )
    p.add_argument(
        "--max-hold",
        type=duration(False),
        metavar="DURATION",
        help="kill-after: a command still running after this long gets SIGTERM, and "
        "SIGKILL if it outlives a grace period (10s, or ttl/3 if shorter); the lock is "
        "held until it has ended (default: no limit)",
    )
    p.add_argument(
        "--jitter",
        type=duration(True),
        metavar="DURATION",
        help="sleep a random time between 0 and this before trying for the lock, so "
        "machines whose clocks agree do not all start at once (default: 0)",
    )
    p.add_argument(
        "--timeout",
        type=duration(False),
        metavar="DURATION",
        help="bound each database call (connecting, each wait for a reply, SQLite's "
        "wait for another writer) (default: 5s)",
    )
    p.add_argument(
        "--min-hold",
        type=duration(True),
        metavar="DURATION",
        help="keep the row until acquired + this (e.g. 1m), even after the command ended",
    )
    p.add_argument(
        "--conflict-exit-code",
        type=exit_code,
        default=0,
        metavar="N",
        help="exit code when the lock is held elsewhere (default: 0, so cron stays quiet)",
    )
    p.add_argument(
        "--schedule",
        metavar="CRON",
        help="the job's cron schedule, e.g. '*/5 * * * *': at most one start per slot "
        "across every replica; a start whose slot was already run is skipped",
    )
    p.add_argument(
        "--timezone",
        metavar="TZ",
        help="the IANA time zone of --schedule, e.g. Europe/Berlin (default: UTC)",
    )
    p.add_argument(
        "--skip-exit-code",
        type=exit_code,
        default=0,
        metavar="N",
        help="exit code when --schedule's slot was already run (default: 0)",
    )
    p.add_argument(
        "--on-lost",
        choices=("terminate", "continue"),
        default="terminate",
        help="lock lost while the command runs: SIGTERM it and exit 75 (default), or only warn",
    )
    p.add_argument(
        "--liveness",
        choices=("ttl", "session"),
        default="ttl",
        help="session: a crashed holder (its process gone) is taken over at once, "
        "not after its ttl (default: ttl)",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no message when the lock is held elsewhere"
    )
    p.add_argument(
        "--record",
        nargs="?",
        const=True,
        default=None,
        metavar="all",
        type=record_type,
        help="write the run to the run ledger (job_runs; see joblocks history/status); "
        "--record all: also a start that found the lock held, as skipped",
    )
    p.add_argument(
        "--max-holders",
        type=max_holders,
        metavar="N",
        help="a counted lock: run if fewer than N runs hold KEY (default: one at a time)",
    )


def record_type(text: str) -> str:
    """``--record``'s one optional value: ``all``."""
    if text != "all":
        raise argparse.ArgumentTypeError(f"{text!r}: give --record alone, or --record all")
    return text


def max_holders(text: str) -> int:
    """``--max-holders``: an int from 1 to 1000."""
    from .._core.options import check_max_holders as validate

    try:
        return validate(int(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def split_command(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """Parse ``joblocks run`` words: everything after the first ``--`` is the command
    (``args.argv``); a command without ``--`` before it is a usage error with a hint."""
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
    if args.schedule is not None or args.timezone is not None:
        from .._core.options import schedule_option

        try:
            args.schedule = schedule_option(args.schedule, args.timezone)
        except (TypeError, ValueError) as exc:
            _run_usage(parser, str(exc).replace("schedule=", "--schedule"))
    args.argv = tail
    return args


def _run_usage(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.exit(EXIT_USAGE, f"joblocks run: error: {message} (see `joblocks run --help`)\n")
