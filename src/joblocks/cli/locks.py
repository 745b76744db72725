"""The commands that look after the lock table: list, peek, release, prune, init, where."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from ._common import (
    DOCS_JSON_SECTION,
    EXIT_NO,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_command,
    checked,
    duration,
    holder_type,
    open_model,
    operator,
    resolve_url,
    row_key_type,
    sqlite_file,
)
from ._format import (
    LIST_COLUMNS,
    PAGE_ROWS,
    dump_json,
    err,
    fields,
    format_duration,
    lock_fields,
    lock_json,
    lock_row,
    out,
    printable,
    stream_json_array,
    stream_table,
)


def cmd_list(args: argparse.Namespace) -> int:
    """``joblocks list``: the held locks (``--all``: every row), as a table or JSON.

    A SQLite file that does not exist yet (a fresh machine) has no locks: the list is
    empty, and the file is not created. Rows are read and printed a page at a time
    (:data:`PAGE_ROWS`), so the memory used does not grow with the table.
    """
    path = sqlite_file(resolve_url(args)[0])
    if path is not None and not path.exists():
        if args.json:
            out(dump_json([]))
        else:
            out("no locks" if args.all else "no held locks (--all shows expired rows too)")
        return EXIT_OK
    model = open_model(args, create_table=False, must_exist=True)
    try:
        locks = model.iter_locks("all" if args.all else "held", batch_size=PAGE_ROWS)
        if args.json:
            stream_json_array(lock_json(lock) for lock in locks)
        elif not stream_table(LIST_COLUMNS, (lock_row(lock) for lock in locks)):
            out("no locks" if args.all else "no held locks (--all shows expired rows too)")
    finally:
        model.dispose()
    return EXIT_OK


def cmd_peek(args: argparse.Namespace) -> int:
    """``joblocks peek``: one row in any state; exit 1 when there is none (also when
    the SQLite file does not exist yet: it is not created)."""
    path = sqlite_file(resolve_url(args)[0])
    from .._core.places import group_size

    holders: list[Any] = []
    if path is not None and not path.exists():
        lock = None
    else:
        model = open_model(args, create_table=False, must_exist=True)
        try:
            lock = model.peek(args.key)
            if lock is not None and group_size(lock.holder) is not None:
                holders = model.holders(args.key)
        finally:
            model.dispose()
    if args.json:
        shown = None if lock is None else lock_json(lock)
        if shown is not None and holders:
            shown["holders"] = [lock_json(place) for place in holders]
        out(dump_json(shown))
    elif lock is not None:
        out(fields(lock_fields(lock)))
        if holders:
            # A key used with max_holders: its row is the group row, its holders the
            # rows of its places (docs/concepts.md, "Several holders").
            live = sum(1 for place in holders if not place.expired)
            out(f"\nholders ({live} held of {group_size(lock.holder)} places):")
            stream_table(LIST_COLUMNS, (lock_row(place) for place in holders))
    if lock is None:
        if not args.json:
            err(f"no lock row for {printable(repr(args.key))}")
        return EXIT_NO
    return EXIT_OK


def cmd_release(args: argparse.Namespace) -> int:
    """``joblocks release``: as ``--holder``, or ``--force`` (logged); exit 1 if nothing went."""
    key: str = args.key
    shown = printable(repr(key))
    model = open_model(args, create_table=False, must_exist=True)
    try:
        if args.force:
            row = model.peek(key)
            if not model.delete(key):
                err(f"no lock row for {shown}: nothing to release")
                return EXIT_NO
            was = (
                "its holder unknown"
                if row is None
                else f"held by {printable(repr(row.holder))}, token {row.fence}, "
                f"{'expired' if row.expired else 'held'}"
            )
            logging.getLogger("joblocks").warning(
                "joblocks: lock %s force-released by %s (%s)", shown, operator(), was
            )
            out(f"released {shown} (forced)")
            return EXIT_OK
        if model.release(key, args.holder):
            out(f"released {shown}")
            return EXIT_OK
        row = model.peek(key)
    finally:
        model.dispose()
    if row is None:
        err(f"no lock row for {shown}: nothing to release")
    else:
        err(
            f"not released: {shown} is held by {printable(repr(row.holder))}, not "
            f"{printable(repr(args.holder))} (--force breaks it whoever holds it)"
        )
    return EXIT_NO


def cmd_prune(args: argparse.Namespace) -> int:
    """``joblocks prune``: delete lock rows expired for longer than ``--expired-for``, and
    run-ledger rows of runs started more than ``--runs-older-than`` ago (db time).

    The library's :meth:`~joblocks.JobLockModel.prune` and
    :meth:`~joblocks.JobLockModel.prune_runs`: batches of short statements.
    """
    ms: int | None = args.expired_for
    runs_ms: int | None = args.runs_older_than
    if ms is None and runs_ms is None:
        raise CliError(
            "prune: give --expired-for (lock rows), --runs-older-than (run-ledger rows), or both",
            EXIT_USAGE,
        )
    if args.dry_run and runs_ms is not None:
        raise CliError(
            "prune: --dry-run counts lock rows only (not with --runs-older-than)", EXIT_USAGE
        )
    model = open_model(args, create_table=False, must_exist=True)
    try:
        if ms is not None:
            count = model.prune(ms, dry_run=args.dry_run)
            rows = "row" if count == 1 else "rows"
            verb = "would delete" if args.dry_run else "deleted"
            out(f"{verb} {count} lock {rows} expired for more than {format_duration(ms)}")
        if runs_ms is not None:
            deleted = model.prune_runs(runs_ms)
            rows = "row" if deleted == 1 else "rows"
            out(
                f"deleted {deleted} ledger {rows} of runs started more than "
                f"{format_duration(runs_ms)} ago"
            )
    finally:
        model.dispose()
    return EXIT_OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``list``, ``peek``, ``release`` and ``prune`` to the subcommands ``sub``."""
    ls = add_command(sub, common, "list", cmd_list, "list the held locks (--all: expired rows too)")
    ls.add_argument("--all", action="store_true", help="include expired rows")
    ls.add_argument(
        "--json",
        action="store_true",
        help=f"print JSON (its keys: the docs site's {DOCS_JSON_SECTION})",
    )

    peek = add_command(
        sub, common, "peek", cmd_peek, "show one lock row, held or expired (exit 1: no row)"
    )
    peek.add_argument("key", type=checked(row_key_type), metavar="KEY")
    peek.add_argument("--json", action="store_true", help="print JSON (null when no row)")

    release = add_command(
        sub,
        common,
        "release",
        cmd_release,
        "release a lock: as its holder, or by force whoever holds it",
    )
    release.add_argument("key", type=checked(row_key_type), metavar="KEY")
    who = release.add_mutually_exclusive_group(required=True)
    who.add_argument(
        "--holder", type=checked(holder_type), help="release only if this holder holds it"
    )
    who.add_argument(
        "--force",
        action="store_true",
        help="delete the row whoever holds it (logged with your user and host)",
    )

    prune = add_command(
        sub, common, "prune", cmd_prune, "delete rows that expired more than a while ago"
    )
    prune.add_argument(
        "--expired-for",
        type=duration(True),
        metavar="DURATION",
        help="delete lock rows whose expiry is older than this, e.g. 7d or 12h (by the "
        "database's clock)",
    )
    prune.add_argument(
        "--runs-older-than",
        type=duration(True),
        metavar="DURATION",
        help="delete run-ledger rows (job_runs) of runs started more than this ago, e.g. "
        "30d, in batches (same as `history --prune`)",
    )
    prune.add_argument("--dry-run", action="store_true", help="only count them")
