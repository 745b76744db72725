"""Setting up: ``init`` (create the lock table, or print its DDL), ``doctor`` (check the
set-up; the checks live in :mod:`joblocks.cli.doctor`) and ``where`` (which database is
used, and why)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .._version import __version__
from ._common import (
    EXIT_BACKEND,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_command,
    check_backend,
    describe_source,
    open_model,
    resolve_url,
    sqlite_file,
    table_options,
)
from ._format import dump_json, fields, out


def cmd_init(args: argparse.Namespace) -> int:
    """``joblocks init``: create the table and its fencing counter, or print their DDL."""
    if args.sql:
        out(ddl_script(args))
        return EXIT_OK
    from sqlalchemy import inspect

    from .._util.errors import LockTableMismatch, translate

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
    from .._sql.dialects import profile

    kind = profile(model.engine.dialect).fence_kind
    counter = "fencing counter" if kind == "counter" else "fencing sequence"
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

    from .._sql.dialects import profile
    from .._sql.schema import build_table, ddl_statements

    url, _source = resolve_url(args)
    check_backend(url)
    backend = url.get_backend_name()
    name, schema = table_options(args)

    if profile(backend).single_file:
        if schema not in (None, "main"):
            raise CliError(
                f"--schema: SQLite keeps the lock table in the main database; got {schema!r}",
                EXIT_USAGE,
            )
        schema = None
    locks = build_table(MetaData(), name, schema)
    try:
        statements = ddl_statements(backend, locks)
    except Exception as exc:
        raise CliError(f"cannot load SQLAlchemy's {backend} dialect: {exc}") from exc
    prof = profile(backend)
    header = (
        f"-- joblocks {__version__}: lock table {locks.fullname} and its fencing "
        f"{prof.fence_kind} for {prof.label}"
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
    from .._db.engines import ENV_URL
    from .._util.validate import mask_url

    url, source = resolve_url(args)
    name, schema = table_options(args)
    path = sqlite_file(url)
    if path is not None:  # a relative path is relative to where each command runs
        url = url.set(database=str(path.absolute()))
    shown = mask_url(url)
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


def cmd_doctor(args: argparse.Namespace) -> int:
    """``joblocks doctor [URL]`` (:func:`joblocks.cli.doctor.doctor`, imported only when
    run); the URL may be given as the argument instead of ``--url``."""
    from .doctor import doctor

    given = getattr(args, "doctor_url", None)
    if given is not None:
        if getattr(args, "url", given) != given:
            raise CliError("give the database URL once: as the argument or as --url", EXIT_USAGE)
        args.url = given
    return doctor(args)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``init``, ``doctor`` and ``where`` to the subcommands ``sub``."""
    init = add_command(sub, common, "init", cmd_init, "create the lock table, or print its DDL")
    init.add_argument(
        "--sql",
        action="store_true",
        help="print the DDL for the configured database instead (no connection needed)",
    )

    doc = add_command(
        sub, common, "doctor", cmd_doctor, "check the database, table, fencing and clocks"
    )
    doc.add_argument(
        "doctor_url",
        nargs="?",
        metavar="URL",
        help="database URL to check (the same as --url)",
    )
    doc.add_argument("--json", action="store_true", help="print JSON")

    where = add_command(sub, common, "where", cmd_where, "show which database is used, and why")
    where.add_argument("--json", action="store_true", help="print JSON")
