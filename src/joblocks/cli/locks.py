"""The commands that look after the lock table: list, peek, release, prune, init, where."""

from __future__ import annotations

import argparse
import logging
import os

from ._cli_common import (
    EXIT_BACKEND,
    EXIT_NO,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    check_backend,
    describe_source,
    open_model,
    operator,
    resolve_url,
    sqlite_file,
    table_options,
)
from ._cli_format import (
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
from ._version import __version__


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
    if path is not None and not path.exists():
        lock = None
    else:
        model = open_model(args, create_table=False, must_exist=True)
        try:
            lock = model.peek(args.key)
        finally:
            model.dispose()
    if args.json:
        out(dump_json(None if lock is None else lock_json(lock)))
    elif lock is not None:
        out(fields(lock_fields(lock)))
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
    """``joblocks prune``: delete rows expired for longer than ``--expired-for`` (db time).

    The library's :meth:`~joblocks.JobLockModel.prune`: batches of short statements.
    """
    ms: int = args.expired_for
    model = open_model(args, create_table=False, must_exist=True)
    try:
        count = model.prune(ms, dry_run=args.dry_run)
    finally:
        model.dispose()
    rows = "row" if count == 1 else "rows"
    verb = "would delete" if args.dry_run else "deleted"
    out(f"{verb} {count} lock {rows} expired for more than {format_duration(ms)}")
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    """``joblocks init``: create the table and its fencing counter, or print their DDL."""
    if args.sql:
        out(ddl_script(args))
        return EXIT_OK
    from sqlalchemy import inspect

    from ._errors import LockTableMismatch, translate

    url, _source = resolve_url(args)
    path = sqlite_file(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    model = open_model(args, create_table=False)
    try:
        locks = model.table
        with translate("inspect", model.database):
            existed = inspect(model.engine).has_table(locks.name, schema=locks.schema)
        model.create_table()
    except LockTableMismatch as exc:
        raise CliError(
            f"table {locks.fullname} on {model.database} is not a joblocks lock table: "
            f"{'; '.join(exc.problems)}. Nothing was created (name another table with "
            "--table, or rename that one)",
            EXIT_BACKEND,
        ) from exc
    finally:
        model.dispose()
    counter = "fencing counter" if model.engine.dialect.name == "sqlite" else "fencing sequence"
    if existed:
        out(f"table {locks.fullname} already exists on {model.database} ({counter} checked)")
    else:
        out(f"created table {locks.fullname} and its {counter} on {model.database}")
    return EXIT_OK


def ddl_script(args: argparse.Namespace) -> str:
    """The DDL of the lock table and its fencing counter, for the configured database.

    Needs no connection and no driver: the dialect comes from the URL alone.
    """
    from sqlalchemy import MetaData
    from sqlalchemy.schema import CreateSequence, CreateTable, SetTableComment

    from ._schema import build_table, fence_counter_name, fence_sequence, sqlite_counter_ddl

    url, _source = resolve_url(args)
    check_backend(url)
    backend = url.get_backend_name()
    try:
        dialect = url.get_dialect()()
    except Exception as exc:
        raise CliError(f"cannot load SQLAlchemy's {backend} dialect: {exc}") from exc
    name, schema = table_options(args)
    if backend == "sqlite":
        if schema not in (None, "main"):
            raise CliError(
                f"--schema: SQLite keeps the lock table in the main database; got {schema!r}",
                EXIT_USAGE,
            )
        schema = None
    locks = build_table(MetaData(), name, schema)
    statements: list[str] = []
    if backend != "sqlite":
        statements.append(str(CreateSequence(fence_sequence(locks)).compile(dialect=dialect)))
    statements.append(str(CreateTable(locks).compile(dialect=dialect)))
    if locks.comment and dialect.supports_comments and not dialect.inline_comments:
        statements.append(str(SetTableComment(locks).compile(dialect=dialect)))
    if backend == "sqlite":
        statements.extend(sqlite_counter_ddl(locks.name, fence_counter_name(locks.name)))
    family = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(backend, "MariaDB")
    header = (
        f"-- joblocks {__version__}: lock table {locks.fullname} and its fencing "
        f"{'counter' if backend == 'sqlite' else 'sequence'} for {family}"
    )
    body = "\n\n".join(_statement(text) for text in statements)
    return f"{header}\n\n{body}"


def _statement(text: str) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines()]
    # MySQL's table options follow the closing parenthesis without a space: ")COMMENT=".
    lines = [") " + line[1:] if line.startswith(")") and len(line) > 1 else line for line in lines]
    return "\n".join(lines) + ";"


def cmd_where(args: argparse.Namespace) -> int:
    """``joblocks where``: the database and table the commands use, and why."""
    from ._engines import ENV_URL, mask

    url, source = resolve_url(args)
    name, schema = table_options(args)
    shown = mask(url)
    why = describe_source(source)
    if source == "--url" and os.environ.get(ENV_URL):
        why += f" ({ENV_URL} is set too, and overridden)"
    if args.json:
        info = {
            "url": shown,
            "source": source,
            "backend": url.get_backend_name(),
            "table": name,
            "schema": schema,
        }
        out(dump_json(info))
        return EXIT_OK
    table_text = name if schema is None else f"{schema}.{name}"
    out(fields([("database", shown), ("source", why), ("table", table_text)]))
    return EXIT_OK
