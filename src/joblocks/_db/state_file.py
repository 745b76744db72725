"""The per-user SQLite file: where it is, and that only its user can touch it.

The default file (``$XDG_STATE_HOME/joblocks/locks.db``) holds the locks of one user's
jobs and the ledger's error texts. Its directory is created ``0700`` and the file
``0600``, whatever the umask; SQLite gives its ``-wal``, ``-shm`` and ``-journal``
files the mode of the database file. A directory or file that is owned by another
user, or writable by group or others, is refused (another user could swap the file
and run the same job beside ours); one of ours that is merely readable by others
(as older versions created them) is tightened to ``0700``/``0600``.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from .._util.errors import LockBackendError

__all__ = ["default_sqlite_path", "prepare_default_file"]

#: The files SQLite keeps beside a database file.
SIDE_FILES = ("-wal", "-shm", "-journal")


def default_sqlite_path() -> Path:
    """The per-user SQLite file used when nothing is configured.

    ``$XDG_STATE_HOME/joblocks/locks.db`` (``~/.local/state/joblocks/locks.db`` when it
    is unset, empty or a relative path, which the XDG base directory specification says
    to ignore) on Linux and macOS; ``%LOCALAPPDATA%\\joblocks\\locks.db`` on Windows.
    Always an absolute path.
    """
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        xdg = os.environ.get("XDG_STATE_HOME") or ""
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return (base / "joblocks" / "locks.db").absolute()


def _refuse(path: Path, problem: str, fix: str) -> LockBackendError:
    return LockBackendError("open the per-user lock file", str(path), f"{problem}; {fix}")


def _check_owned(path: Path, info: os.stat_result, what: str, private_mode: int) -> None:
    """Refuse ``path`` unless this user owns it and only this user may write it;
    drop the group's and others' read bits of one of ours."""
    euid = os.geteuid()
    if info.st_uid != euid:
        raise _refuse(
            path,
            f"the {what} is owned by uid {info.st_uid}, not by this user (uid {euid})",
            "another user could swap the lock file: use a directory of your own "
            "(XDG_STATE_HOME, or --url/JOBLOCKS_URL)",
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        who = {0o022: "its group and others", 0o020: "its group", 0o002: "others"}
        raise _refuse(
            path,
            f"the {what} is writable by {who[mode & 0o022]} (mode {mode:04o})",
            "another user could swap the lock file: check it, then "
            f"`chmod {private_mode:o} {path}`",
        )
    if mode & 0o077:
        os.chmod(path, mode & 0o700)


def prepare_default_file(path: Path) -> None:
    """Create the default file's directory (``0700``) and the file (``0600``) when they
    do not exist, and refuse them (a :class:`~joblocks.LockBackendError` naming the
    path and the problem) when another user owns them or may write them."""
    if sys.platform == "win32" or not hasattr(os, "geteuid"):
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    directory = path.parent
    if not directory.exists():
        directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(directory, 0o700)  # mkdir's mode is reduced by the umask only
    _check_owned(directory, os.stat(directory), "directory", 0o700)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
    for name in (path, *(path.with_name(path.name + side) for side in SIDE_FILES)):
        try:
            info = os.stat(name)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(name, "it is not a regular file", "remove it")
        _check_owned(name, info, "file", 0o600)
