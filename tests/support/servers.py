"""Throwaway PostgreSQL and MariaDB servers for the test suite.

Besides single servers: a 3-node MariaDB Galera cluster (:func:`start_galera`) and a
PostgreSQL primary with a streaming standby (:func:`start_postgres_pair`), for the
replicated-database scenarios of ``tests/reliability/test_replicated.py``.

Each server runs from its own temporary data directory on a free port on
127.0.0.1, detached in its own session, and is tuned for speed, not
durability. Only the standard library is needed to start and stop servers;
readiness checks use the ``psycopg`` / ``pymysql`` drivers.

Typical use::

    try:
        pg = start_postgres(tmp_path)
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    ...
    pg.kill()   # simulate a crash (SIGKILL), data dir kept
    pg.start()  # same port, same data dir, crash recovery
    pg.stop()   # fast shutdown, data dir removed

Running as root, the servers run as the ``postgres`` / ``mysql`` system
users; otherwise as the current user.

A server never outlives the process that started it. Being in a session of its
own, it gets no signal from the terminal or from a kill of pytest's process
group, so three things stop it, from the gentlest:

- ``stop()`` (pytest's session cleanup, see ``tests/support/matrix.py``), and
  an ``atexit`` hook for any server still running when the interpreter exits;
- a SIGTERM handler, installed when the first server starts, that raises
  KeyboardInterrupt (as Ctrl-C does): without it SIGTERM ends Python at once,
  running neither pytest's cleanup nor ``atexit``;
- on Linux, the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG)``, set
  in the server's process before it executes the server): the server gets its
  own shutdown signal when the thread that started it ends, however it ends
  (SIGKILL, ``os._exit``, a crash, a timeout of the job). Its data directory is
  then left behind in the temporary directory.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "GALERA_PROVIDER",
    "MARIADB_DATABASE",
    "STARTUP_TIMEOUT",
    "GaleraCluster",
    "PostgresPair",
    "Server",
    "ServerStartError",
    "ServerUnavailable",
    "start_galera",
    "start_mariadb",
    "start_pgbouncer",
    "start_postgres",
    "start_postgres_pair",
]

STARTUP_TIMEOUT = 30.0
"""Seconds to wait for a server to accept connections."""

MARIADB_DATABASE = "joblocks_test"
"""Database created on every MariaDB server and named in its URL."""

_SHUTDOWN_TIMEOUT = 30.0
_INIT_TIMEOUT = 120.0
"""Seconds for initdb / mariadb-install-db."""
_POLL_INTERVAL = 0.05
# Unix socket paths are limited to 107 bytes; PostgreSQL adds ".s.PGSQL.NNNNN".
_MAX_SOCKET_DIR_LEN = 80


class ServerUnavailable(Exception):
    """The server cannot be started here (binaries or driver missing).

    ``str(exc)`` / ``exc.reason`` says why; callers typically skip on it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ServerStartError(RuntimeError):
    """The binaries exist but the server failed to initialise or start.

    The message includes the tail of the server's log file.
    """


@dataclasses.dataclass(eq=False)
class Server:
    """A running (or killed) throwaway database server."""

    name: str
    """``"postgres"``, ``"mariadb"`` or ``"pgbouncer"``."""
    port: int
    url: str
    """SQLAlchemy URL for the test database."""
    data_dir: Path
    log_file: Path
    root_dir: Path
    """Directory holding data_dir and log_file; removed by stop()."""
    socket_dir: Path
    _argv: list[str] = dataclasses.field(repr=False)
    _user: str | None = dataclasses.field(repr=False)
    _ready: Callable[[Server], None] = dataclasses.field(repr=False)
    _stop_signal: signal.Signals = dataclasses.field(repr=False)
    _proc: subprocess.Popen[bytes] | None = dataclasses.field(default=None, repr=False)
    _owner: int = dataclasses.field(default=0, repr=False)
    """PID of the process that started the server (a forked child does not own it)."""

    @property
    def pid(self) -> int | None:
        """PID of the server's main process, or None when not running."""
        return self._proc.pid if self.is_running() and self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server on its port and data dir; wait until it is ready."""
        if self.is_running():
            raise RuntimeError(f"{self.name} on port {self.port} is already running")
        if not self.data_dir.is_dir():
            raise RuntimeError(f"{self.name}: data dir {self.data_dir} is gone")
        _unwind_on_sigterm()
        self._owner = os.getpid()
        _RUNNING.add(self)  # before it exists: no moment where it runs untracked
        try:
            with self.log_file.open("ab") as log:
                log.write(f"\n=== starting: {' '.join(self._argv)}\n".encode())
                log.flush()
                self._proc = subprocess.Popen(
                    self._argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.root_dir,
                    # Its own session: a Ctrl-C meant for pytest does not reach it
                    # (the test set-up stops it, after the tests that use it).
                    start_new_session=True,
                    preexec_fn=_parent_death_signal(self._stop_signal),
                    **_as_user(self._user),
                )
        except BaseException:
            _RUNNING.discard(self)
            raise
        try:
            self._ready(self)
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL the server and all its processes; keep the data dir."""
        proc = self._proc
        if proc is None:
            return
        # The server leads its own process group (start_new_session=True);
        # killing the group also kills PostgreSQL backends, which would
        # otherwise outlive the postmaster and block a restart. Only while
        # the leader is unreaped is its PID (= the group ID) surely ours.
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=_SHUTDOWN_TIMEOUT)
            _wait_group_gone(proc.pid, _SHUTDOWN_TIMEOUT)
        self._forget()

    def stop(self) -> None:
        """Shut down fast, wait for exit, and remove the data directory."""
        proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, self._stop_signal)
            try:
                proc.wait(timeout=_SHUTDOWN_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
            self._forget()
        shutil.rmtree(self.root_dir, ignore_errors=True)
        if self.socket_dir != self.root_dir / "sock":
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    def _forget(self) -> None:
        self._proc = None
        _RUNNING.discard(self)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


_RUNNING: set[Server] = set()


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_RUNNING):
        if server._owner != os.getpid():
            # Inherited by a forked child: the server is its parent's. (Its Popen
            # would report it exited, and stop() would remove its data dir.)
            continue
        try:
            server.stop()
        except BaseException:
            with contextlib.suppress(BaseException):
                server.kill()


# ------------------------------------------------- when the run ends otherwise

_SIGTERM_OWNER = 0
"""PID of the process whose SIGTERM handler raises KeyboardInterrupt (0: none)."""


def _unwind_on_sigterm() -> None:
    """Make SIGTERM unwind the main thread like Ctrl-C, so cleanups and atexit run.

    Under pytest, KeyboardInterrupt ends the session: fixtures are torn down and the
    session's cleanups stop the servers; a script's ``finally`` blocks run. Installed
    only from the main thread and only over the default disposition (a handler of
    the program's own is left alone).
    """
    global _SIGTERM_OWNER
    if os.getpid() == _SIGTERM_OWNER:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, _on_sigterm):
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    _SIGTERM_OWNER = os.getpid()


def _on_sigterm(signum: int, frame: object) -> None:
    if os.getpid() != _SIGTERM_OWNER:
        # A forked child inherited the handler (e.g. a multiprocessing "fork" pool
        # worker being terminated): die of the signal, as without the handler.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise KeyboardInterrupt(f"signal {signum} (SIGTERM)")


_PR_SET_PDEATHSIG = 1


def _parent_death_signal(sig: signal.Signals) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send ``sig`` to the server when the
    thread starting it ends (Linux; None elsewhere or off the main thread).

    It runs in the child after Popen has switched to the server user (a change of
    user clears the setting, so it must come after) and survives the exec. The
    setting follows the *thread* that forked: from another thread, a server would
    be stopped when that thread ends, so only the main thread's servers get it.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()
    number = int(sig)

    def arm() -> None:  # in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, number, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before it was armed
            os._exit(1)

    return arm


# --------------------------------------------------------------- PostgreSQL


def start_postgres(base_dir: Path, settings: dict[str, str] | None = None) -> Server:
    """Initialise and start a PostgreSQL server under ``base_dir``.

    URL: ``postgresql+psycopg://postgres@127.0.0.1:PORT/postgres`` (trust auth).
    ``settings`` are extra server settings passed as ``-c name=value`` over the
    defaults of the test servers, e.g. ``{"default_transaction_isolation":
    "serializable"}`` or ``{"max_connections": "12"}``.
    Raises ServerUnavailable if the binaries or psycopg are missing,
    ServerStartError if it fails to start.
    """
    bindir = _find_pg_bindir()
    if bindir is None:
        raise ServerUnavailable(
            "PostgreSQL binaries (initdb, postgres) not found on PATH or in "
            "/usr/lib/postgresql/*/bin"
        )
    _require_module("psycopg")
    user = _server_user("postgres")
    root, sock = _make_dirs(base_dir, "postgres", user)
    data = root / "data"
    log = root / "server.log"
    _run_logged(
        [
            str(bindir / "initdb"),
            f"--pgdata={data}",
            "--auth=trust",
            "--username=postgres",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ],
        log,
        user,
        root,
        "initdb",
    )
    port = _free_port()
    server = Server(
        name="postgres",
        port=port,
        url=f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres",
        data_dir=data,
        log_file=log,
        root_dir=root,
        socket_dir=sock,
        _argv=[
            str(bindir / "postgres"),
            f"-D{data}",
            f"-p{port}",
            f"-k{sock}",
            *(f"-c{name}={value}" for name, value in {**_PG_SETTINGS, **(settings or {})}.items()),
        ],
        _user=user,
        _ready=_wait_postgres,
        _stop_signal=signal.SIGINT,  # "fast" shutdown
    )
    _first_start(server)
    return server


_PG_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    # synchronous_commit stays on: with fsync=off a commit costs only a
    # write(2), and it makes every committed transaction survive kill().
    # With it off, commits from the last ~200 ms vanish on kill()/start().
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "timezone": "UTC",
    "log_timezone": "UTC",
}


def _find_pg_bindir() -> Path | None:
    candidates: list[Path] = []
    found = shutil.which("postgres")
    if found:
        candidates.append(Path(os.path.realpath(found)).parent)
    versioned = glob.glob("/usr/lib/postgresql/*/bin")
    versioned.sort(key=lambda p: _version_key(p), reverse=True)
    candidates += [Path(p) for p in versioned]
    for cand in candidates:
        if all(os.access(cand / exe, os.X_OK) for exe in ("initdb", "postgres")):
            return cand
    return None


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path))


def _wait_postgres(server: Server) -> None:
    import psycopg

    def attempt() -> None:
        psycopg.connect(
            host="127.0.0.1",
            port=server.port,
            user="postgres",
            dbname="postgres",
            connect_timeout=2,
        ).close()

    _poll_ready(server, attempt)


# ---------------------------------------------------------------- PgBouncer


def start_pgbouncer(base_dir: Path, postgres: Server, pool_mode: str, pool_size: int) -> Server:
    """Start Debian's PgBouncer in front of ``postgres`` (a server of :func:`start_postgres`).

    ``pool_mode`` is ``"transaction"`` or ``"session"``; every database/user pair gets
    ``pool_size`` server connections, so clients really share them. URL: the
    PostgreSQL URL with PgBouncer's port (trust auth). Raises ServerUnavailable if
    the binary is missing, ServerStartError if it fails to start.
    """
    if pool_mode not in ("transaction", "session"):
        raise ValueError(f"pool_mode must be 'transaction' or 'session', got {pool_mode!r}")
    exe = _find_exe("pgbouncer")
    if exe is None:
        raise ServerUnavailable("pgbouncer not found on PATH or in /usr/sbin, /usr/bin")
    _require_module("psycopg")
    user = _server_user("postgres")
    root, sock = _make_dirs(base_dir, f"pgbouncer-{pool_mode}", user)
    config = root / "pgbouncer.ini"
    users = root / "userlist.txt"
    log = root / "server.log"  # its stderr: the server user need not write to it
    port = _free_port()
    users.write_text('"postgres" ""\n')
    config.write_text(
        "[databases]\n"
        f"* = host=127.0.0.1 port={postgres.port}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        f"unix_socket_dir = {sock}\n"
        "auth_type = trust\n"
        f"auth_file = {users}\n"
        "admin_users = postgres\n"
        f"pool_mode = {pool_mode}\n"
        f"default_pool_size = {pool_size}\n"
        "min_pool_size = 0\n"
        "reserve_pool_size = 0\n"
        "max_client_conn = 1000\n"
        "max_db_connections = 0\n"
        "server_lifetime = 3600\n"
        "query_wait_timeout = 60\n"
        f"pidfile = {root / 'pgbouncer.pid'}\n"
    )
    if user is not None:
        pw = pwd.getpwnam(user)
        for path in (config, users):
            os.chown(path, pw.pw_uid, pw.pw_gid)
    server = Server(
        name="pgbouncer",
        port=port,
        url=postgres.url.replace(f":{postgres.port}/", f":{port}/"),
        data_dir=root,
        log_file=log,
        root_dir=root,
        socket_dir=sock,
        _argv=[str(exe), str(config)],
        _user=user,
        _ready=_wait_postgres,
        _stop_signal=signal.SIGTERM,  # immediate shutdown (SIGINT waits for clients)
    )
    _first_start(server)
    return server


# ------------------------------------------------------------------ MariaDB


def start_mariadb(base_dir: Path, options: list[str] | None = None) -> Server:
    """Initialise and start a MariaDB server under ``base_dir``.

    URL: ``mysql+pymysql://root@127.0.0.1:PORT/joblocks_test``; root has no
    password over TCP. ``options`` are extra server options, e.g.
    ``["--transaction-isolation=SERIALIZABLE"]``. Raises ServerUnavailable if the
    binaries or pymysql are missing, ServerStartError if it fails to start.
    """
    mariadbd = _find_exe("mariadbd", "mysqld")
    install_db = _find_exe("mariadb-install-db", "mysql_install_db")
    if mariadbd is None or install_db is None:
        raise ServerUnavailable(
            "MariaDB binaries (mariadbd, mariadb-install-db) not found on PATH "
            "or in /usr/sbin, /usr/bin"
        )
    _require_module("pymysql")
    user = _server_user("mysql")
    root, sock = _make_dirs(base_dir, "mariadb", user)
    data = root / "data"
    log = root / "server.log"
    # Options shared by the bootstrap (install-db passes them to mariadbd).
    common = [
        # Its own temporary files under its root (owned by the server user): TMPDIR
        # may point to a directory that user cannot write to.
        f"--tmpdir={root}",
        "--innodb-log-file-size=16M",
        "--innodb-buffer-pool-size=64M",
        "--character-set-server=utf8mb4",
        "--collation-server=utf8mb4_unicode_ci",
    ]
    install = [
        str(install_db),
        "--no-defaults",
        f"--datadir={data}",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        "--skip-name-resolve",
        *common,
    ]
    _run_logged(install, log, user, root, "mariadb-install-db")
    port = _free_port()
    server = Server(
        name="mariadb",
        port=port,
        url=f"mysql+pymysql://root@127.0.0.1:{port}/{MARIADB_DATABASE}",
        data_dir=data,
        log_file=log,
        root_dir=root,
        socket_dir=sock,
        _argv=[
            str(mariadbd),
            "--no-defaults",  # must come first
            f"--datadir={data}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--socket={sock / 'mysqld.sock'}",
            f"--pid-file={root / 'mariadbd.pid'}",
            "--skip-name-resolve",
            "--max-connections=300",
            # Log written (not flushed) at commit: survives kill(), not an OS crash.
            "--innodb-flush-log-at-trx-commit=2",
            "--skip-innodb-doublewrite",
            "--default-time-zone=+00:00",
            *common,
            *(options or []),
        ],
        _user=user,
        _ready=_wait_mariadb,
        _stop_signal=signal.SIGTERM,
    )
    _first_start(server)
    try:
        _setup_mariadb(server)
    except BaseException:
        server.stop()  # the caller never gets the server to stop it
        raise
    return server


def _wait_mariadb(server: Server) -> None:
    import pymysql  # type: ignore[import-untyped, unused-ignore]

    path = str(server.socket_dir / "mysqld.sock")

    def attempt() -> None:
        # pymysql leaks its socket (ResourceWarning) when connecting to a unix
        # socket fails, so probe it with a socket of our own first.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(2)
            probe.connect(path)
        pymysql.connect(
            unix_socket=path,
            user="root",
            connect_timeout=2,
        ).close()

    _poll_ready(server, attempt)


def _setup_mariadb(server: Server) -> None:
    """Make root@127.0.0.1 password-less with all grants; create the test DB."""
    import pymysql  # type: ignore[import-untyped, unused-ignore]

    conn = pymysql.connect(unix_socket=str(server.socket_dir / "mysqld.sock"), user="root")
    try:
        with conn.cursor() as cur:
            for stmt in (
                "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'",
                "ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY ''",
                "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
                f"CREATE DATABASE IF NOT EXISTS `{MARIADB_DATABASE}`",
            ):
                cur.execute(stmt)
        conn.commit()
    finally:
        conn.close()
    # Check the URL's route: TCP, root, no password.
    pymysql.connect(
        host="127.0.0.1",
        port=server.port,
        user="root",
        database=MARIADB_DATABASE,
        connect_timeout=5,
    ).close()


# ------------------------------------------------------------------ helpers


def _find_exe(*names: str) -> Path | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found)
        for d in ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"):
            cand = Path(d) / name
            if os.access(cand, os.X_OK):
                return cand
    return None


def _require_module(name: str) -> None:
    try:
        __import__(name)
    except ImportError as exc:
        raise ServerUnavailable(f"Python driver {name!r} not installed") from exc


def _server_user(name: str) -> str | None:
    """System user to run the server as: ``name`` when root, else None (us)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(name)
    except KeyError as exc:
        raise ServerUnavailable(f"system user {name!r} does not exist") from exc
    return name


def _as_user(user: str | None) -> dict[str, Any]:
    if user is None:
        return {}
    pw = pwd.getpwnam(user)
    env = dict(os.environ, HOME=pw.pw_dir, USER=user, LOGNAME=user)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [], "env": env}


def _make_dirs(base_dir: Path, name: str, user: str | None) -> tuple[Path, Path]:
    """Create ROOT (for data/ and the log) and a socket dir; return both."""
    base_dir = Path(base_dir).resolve()
    base_dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base_dir))
    sock = root / "sock"
    if len(str(sock)) <= _MAX_SOCKET_DIR_LEN:
        sock.mkdir()
    else:
        sock = Path(tempfile.mkdtemp(prefix=f"jl-{name}-", dir="/tmp"))
    if user is not None:
        pw = pwd.getpwnam(user)
        for d in (root, sock):
            os.chown(d, pw.pw_uid, pw.pw_gid)
            d.chmod(0o700)
            _make_traversable(d.parent)
    return root, sock


def _make_traversable(path: Path) -> None:
    """Add o+x to path and its ancestors so a server user can reach below.

    Needed for e.g. pytest's /tmp/pytest-of-root (mode 0700).
    """
    for d in (path, *path.parents):
        mode = d.stat().st_mode
        if mode & 0o001:
            continue
        if d.stat().st_uid == os.geteuid():
            d.chmod((mode & 0o7777) | 0o001)


def _run_logged(argv: list[str], log: Path, user: str | None, cwd: Path, what: str) -> None:
    with log.open("ab") as out:
        out.write(f"=== {' '.join(argv)}\n".encode())
        out.flush()
        try:
            rc = subprocess.call(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                timeout=_INIT_TIMEOUT,
                **_as_user(user),
            )
        except subprocess.TimeoutExpired:
            rc = -1
            out.write(f"\n=== {what}: no exit after {_INIT_TIMEOUT:.0f}s, killed\n".encode())
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise ServerStartError(f"{what} failed with exit code {rc}:\n{tail}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def _first_start(server: Server) -> None:
    """Start a new server; if another process grabbed its port, try another."""
    for attempt in range(3):
        try:
            server.start()
            return
        except ServerStartError:
            if attempt == 2 or not _port_in_use(server.port):
                server.stop()
                raise
        new = _free_port()
        if server.name == "pgbouncer":  # the port is in its configuration file
            config = Path(server._argv[-1])
            text = config.read_text()
            config.write_text(
                text.replace(f"listen_port = {server.port}\n", f"listen_port = {new}\n")
            )
        server._argv = [_swap_port(a, server.port, new) for a in server._argv]
        server.url = server.url.replace(f":{server.port}/", f":{new}/")
        server.port = new


def _swap_port(arg: str, old: int, new: int) -> str:
    if arg == f"-p{old}":
        return f"-p{new}"
    if arg == f"--port={old}":
        return f"--port={new}"
    return arg


def _poll_ready(server: Server, attempt: Callable[[], None]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    last: Exception | None = None
    while time.monotonic() < deadline:
        proc = server._proc
        if proc is None or proc.poll() is not None:
            code = None if proc is None else proc.returncode
            raise ServerStartError(
                f"{server.name} exited during startup (code {code}); "
                f"log {server.log_file}:\n{server.log_tail()}"
            )
        try:
            attempt()
            return
        except Exception as exc:  # any failure means: not ready yet
            last = exc
        time.sleep(_POLL_INTERVAL)
    raise ServerStartError(
        f"{server.name} on port {server.port} not ready after "
        f"{STARTUP_TIMEOUT:.0f}s (last error: {last!r}); "
        f"log {server.log_file}:\n{server.log_tail()}"
    )


def _wait_group_gone(pgid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(_POLL_INTERVAL)


# ----------------------------------------------------------- MariaDB Galera

GALERA_PROVIDER = "/usr/lib/galera/libgalera_smm.so"
"""The galera-4 package's replication provider."""

_CLUSTER_TIMEOUT = 180.0
"""Seconds for a Galera node to join and reach ``Synced`` (an rsync SST included)."""


@dataclasses.dataclass(eq=False)
class GaleraCluster:
    """A MariaDB Galera cluster of throwaway nodes on loopback (see :func:`start_galera`).

    Each node is a :class:`Server` (``nodes[i].url`` reaches node ``i``); killing a
    node with ``kill()`` is a crash, and :meth:`rejoin` starts it again as a joiner.
    """

    nodes: list[Server]
    gcomm_ports: list[int]

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def rejoin(self, index: int) -> None:
        """Start the (killed or stopped) node ``index`` again; it joins the others."""
        node = self.nodes[index]
        node._argv = [a for a in node._argv if a != "--wsrep-new-cluster"]
        node.start()

    def bootstrap_survivor(self, index: int) -> None:
        """Make node ``index``, alone after the others crashed, a primary component again."""
        import pymysql  # type: ignore[import-untyped, unused-ignore]

        conn = pymysql.connect(
            unix_socket=str(self.nodes[index].socket_dir / "mysqld.sock"), user="root"
        )
        try:
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'")
        finally:
            conn.close()
        _wait_galera_synced(self.nodes[index])

    def stop(self) -> None:
        """Stop every node (the joiners first) and remove their directories."""
        failed: BaseException | None = None
        for node in reversed(self.nodes):
            try:
                node.stop()
            except BaseException as exc:  # stop the others all the same
                failed = failed or exc
                with contextlib.suppress(BaseException):
                    node.kill()
        if failed is not None:
            raise failed


def start_galera(base_dir: Path, size: int = 3) -> GaleraCluster:
    """Start a MariaDB Galera cluster of ``size`` nodes on 127.0.0.1 under ``base_dir``.

    Node 1 bootstraps the cluster (``--wsrep-new-cluster``); the others join it and
    receive its data by an rsync state transfer. Every node has its own ports for
    clients, Galera replication, incremental (IST) and snapshot (SST) transfer, and
    its own data directory; URLs as :func:`start_mariadb`'s. Raises ServerUnavailable
    if MariaDB, the galera-4 provider, rsync or pymysql are missing,
    ServerStartError if a node fails to start or join.
    """
    mariadbd = _find_exe("mariadbd", "mysqld")
    install_db = _find_exe("mariadb-install-db", "mysql_install_db")
    if mariadbd is None or install_db is None:
        raise ServerUnavailable("MariaDB binaries (mariadbd, mariadb-install-db) not found")
    if not os.path.exists(GALERA_PROVIDER):
        raise ServerUnavailable(f"Galera provider {GALERA_PROVIDER} not found (galera-4)")
    for tool in ("rsync", "wsrep_sst_rsync"):
        if _find_exe(tool) is None:
            raise ServerUnavailable(f"{tool} not found (needed for the rsync state transfer)")
    _require_module("pymysql")
    user = _server_user("mysql")
    ports = [(_free_port(), _free_port(), _free_port(), _free_port()) for _ in range(size)]
    cluster_address = "gcomm://" + ",".join(f"127.0.0.1:{p[1]}" for p in ports)
    nodes: list[Server] = []
    cluster = GaleraCluster(nodes=nodes, gcomm_ports=[p[1] for p in ports])
    try:
        for index, (port, gcomm, ist, sst) in enumerate(ports):
            root, sock = _make_dirs(base_dir, f"galera{index + 1}", user)
            data = root / "data"
            log = root / "server.log"
            common = [
                f"--tmpdir={root}",
                "--innodb-log-file-size=16M",
                "--innodb-buffer-pool-size=64M",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci",
            ]
            _run_logged(
                [
                    str(install_db),
                    "--no-defaults",
                    f"--datadir={data}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                    *common,
                ],
                log,
                user,
                root,
                "mariadb-install-db",
            )
            argv = [
                str(mariadbd),
                "--no-defaults",
                f"--datadir={data}",
                f"--port={port}",
                "--bind-address=127.0.0.1",
                f"--socket={sock / 'mysqld.sock'}",
                f"--pid-file={root / 'mariadbd.pid'}",
                "--skip-name-resolve",
                "--max-connections=300",
                "--innodb-flush-log-at-trx-commit=2",
                "--skip-innodb-doublewrite",
                "--default-time-zone=+00:00",
                "--binlog-format=ROW",
                "--default-storage-engine=InnoDB",
                "--innodb-autoinc-lock-mode=2",
                "--wsrep-on=ON",
                f"--wsrep-provider={GALERA_PROVIDER}",
                f"--wsrep-cluster-address={cluster_address}",
                "--wsrep-cluster-name=joblocks_test",
                f"--wsrep-node-name=node{index + 1}",
                "--wsrep-node-address=127.0.0.1",
                f"--wsrep-node-incoming-address=127.0.0.1:{port}",
                "--wsrep-provider-options="
                f"gmcast.listen_addr=tcp://127.0.0.1:{gcomm};"
                f"ist.recv_addr=127.0.0.1:{ist};"
                "gcache.size=64M;evs.suspect_timeout=PT5S;evs.inactive_timeout=PT10S",
                "--wsrep-sst-method=rsync",
                f"--wsrep-sst-receive-address=127.0.0.1:{sst}",
                *common,
                *(["--wsrep-new-cluster"] if index == 0 else []),
            ]
            node = Server(
                name=f"galera{index + 1}",
                port=port,
                url=f"mysql+pymysql://root@127.0.0.1:{port}/{MARIADB_DATABASE}",
                data_dir=data,
                log_file=log,
                root_dir=root,
                socket_dir=sock,
                _argv=argv,
                _user=user,
                _ready=_wait_galera_node,
                _stop_signal=signal.SIGTERM,
            )
            nodes.append(node)
            node.start()
            if index == 0:
                _setup_mariadb(node)
                # A restart of node 1 joins the others, as any node's does.
                node._argv = [a for a in argv if a != "--wsrep-new-cluster"]
        for node in nodes:
            _wait_galera_synced(node, size)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _galera_status(server: Server) -> dict[str, str]:
    import pymysql  # type: ignore[import-untyped, unused-ignore]

    path = str(server.socket_dir / "mysqld.sock")
    # pymysql leaks its socket when connecting to a unix socket fails: probe it first.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        probe.connect(path)
    conn = pymysql.connect(unix_socket=path, user="root", connect_timeout=2)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW STATUS LIKE 'wsrep_%'")
            return {str(name): str(value) for name, value in cur.fetchall()}
    finally:
        conn.close()


def _wait_galera_node(server: Server) -> None:
    """Ready when the node takes connections and is Synced with a primary component."""
    _wait_galera_synced(server)


def _wait_galera_synced(server: Server, size: int | None = None) -> None:
    deadline = time.monotonic() + _CLUSTER_TIMEOUT
    last: object = None
    path = server.socket_dir / "mysqld.sock"
    while time.monotonic() < deadline:
        proc = server._proc
        if proc is None or proc.poll() is not None:
            code = None if proc is None else proc.returncode
            raise ServerStartError(
                f"{server.name} exited during startup (code {code}); "
                f"log {server.log_file}:\n{server.log_tail()}"
            )
        try:
            if path.exists():
                status = _galera_status(server)
                last = {
                    k: status.get(k)
                    for k in (
                        "wsrep_ready",
                        "wsrep_local_state_comment",
                        "wsrep_cluster_status",
                        "wsrep_cluster_size",
                    )
                }
                if (
                    status.get("wsrep_ready") == "ON"
                    and status.get("wsrep_local_state_comment") == "Synced"
                    and status.get("wsrep_cluster_status") == "Primary"
                    and (size is None or status.get("wsrep_cluster_size") == str(size))
                ):
                    return
        except Exception as exc:  # not ready yet
            last = exc
        time.sleep(0.2)
    raise ServerStartError(
        f"{server.name} on port {server.port} not synced after {_CLUSTER_TIMEOUT:.0f}s "
        f"(last: {last!r}); log {server.log_file}:\n{server.log_tail()}"
    )


# ------------------------------------------------ PostgreSQL primary + standby


@dataclasses.dataclass(eq=False)
class PostgresPair:
    """A PostgreSQL primary and a streaming standby (see :func:`start_postgres_pair`)."""

    primary: Server
    standby: Server
    synchronous: bool

    def promote_standby(self) -> None:
        """Promote the standby (``pg_ctl promote``) and wait until it takes writes."""
        bindir = _find_pg_bindir()
        assert bindir is not None
        _run_logged(
            [str(bindir / "pg_ctl"), "promote", "-w", "-t", "120", f"-D{self.standby.data_dir}"],
            self.standby.log_file,
            self.standby._user,
            self.standby.root_dir,
            "pg_ctl promote",
        )
        import psycopg

        deadline = time.monotonic() + _CLUSTER_TIMEOUT
        while True:
            with psycopg.connect(
                host="127.0.0.1", port=self.standby.port, user="postgres", dbname="postgres"
            ) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            if row is not None and not row[0]:
                return
            if time.monotonic() > deadline:
                raise ServerStartError("the promoted standby is still in recovery")
            time.sleep(0.1)

    def stop(self) -> None:
        for server in (self.standby, self.primary):
            server.stop()


def start_postgres_pair(base_dir: Path, synchronous: bool) -> PostgresPair:
    """Start a PostgreSQL primary and a standby cloned from it by ``pg_basebackup -R``.

    The standby streams the primary's WAL. With ``synchronous`` the primary's
    ``synchronous_standby_names`` is ``'*'``: a commit returns once the standby has
    flushed it; without, the standby lags as it may. Both are :class:`Server` objects
    (``primary.kill()`` crashes the primary; :meth:`PostgresPair.promote_standby`
    promotes the standby). Raises ServerUnavailable / ServerStartError as
    :func:`start_postgres`.
    """
    primary = start_postgres(base_dir, {"wal_level": "replica", "max_wal_senders": "5"})
    try:
        bindir = _find_pg_bindir()
        assert bindir is not None
        user = primary._user
        root, sock = _make_dirs(base_dir, "postgres-standby", user)
        data = root / "data"
        log = root / "server.log"
        _run_logged(
            [
                str(bindir / "pg_basebackup"),
                "-h127.0.0.1",
                f"-p{primary.port}",
                "-Upostgres",
                f"-D{data}",
                "-R",
                "-Xstream",
                "--checkpoint=fast",
                "--no-sync",
            ],
            log,
            user,
            root,
            "pg_basebackup",
        )
        port = _free_port()
        standby = Server(
            name="postgres-standby",
            port=port,
            url=f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres",
            data_dir=data,
            log_file=log,
            root_dir=root,
            socket_dir=sock,
            _argv=[
                str(bindir / "postgres"),
                f"-D{data}",
                f"-p{port}",
                f"-k{sock}",
                *(f"-c{name}={value}" for name, value in _PG_SETTINGS.items()),
                "-ccluster_name=standby",
            ],
            _user=user,
            _ready=_wait_postgres,
            _stop_signal=signal.SIGINT,
        )
        _first_start(standby)
    except BaseException:
        primary.stop()
        raise
    pair = PostgresPair(primary=primary, standby=standby, synchronous=synchronous)
    try:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1",
            port=primary.port,
            user="postgres",
            dbname="postgres",
            autocommit=True,
        ) as conn:
            if synchronous:
                conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                conn.execute("SELECT pg_reload_conf()")
            want = "sync" if synchronous else "async"
            deadline = time.monotonic() + _CLUSTER_TIMEOUT
            while True:
                row = conn.execute("SELECT state, sync_state FROM pg_stat_replication").fetchone()
                if row is not None and row[0] == "streaming" and row[1] == want:
                    break
                if time.monotonic() > deadline:
                    raise ServerStartError(f"standby not streaming ({want}): {row!r}")
                time.sleep(0.1)
    except BaseException:
        pair.stop()
        raise
    return pair
