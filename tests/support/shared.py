"""Throwaway servers shared by the workers of a parallel run (pytest-xdist).

Without xdist, every session fixture of a server starts it in the pytest process
(:func:`tests.support.matrix.server_or_skip`). With ``-n N`` the servers of
:data:`tests.support.matrix.SHARED_SERVERS` are started once for the whole run by a
:class:`Keeper` in the controlling process, the first time a worker asks for one, and
every worker gets the same server (tests keep apart by tables of their own). Workers
reach the keeper through a Unix socket in a directory of the run's own (mode 0700)
whose path they receive in ``workerinput``.

The servers keep the guarantees of :mod:`tests.support.servers`: each is started by a
thread of the keeper that lives until the end of the run and then stops it, so its
parent-death signal ends the server when the controlling process ends however it ends
(SIGKILL included); SIGTERM unwinds the controller like Ctrl-C, and its cleanup stops
them. A worker gets a :class:`SharedServer`, which refuses ``kill``/``start``/``stop``:
a test that restarts a server needs one of its own (``own_server``), or runs without
a keeper: in one process (``-n 0``), or as the races and reliability scenarios do with
``-n N`` on the command line, in workers that each start servers of their own
(``tests/conftest.py``, ``pytest_cmdline_main``).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from . import servers
from .servers import Server, ServerUnavailable

#: Key of ``workerinput`` holding the keeper's socket path.
WORKERINPUT_KEY = "joblocks_server_keeper"
#: Seconds a worker waits for a server (another worker's may be starting first).
REQUEST_TIMEOUT = 600.0

Recipe = Callable[[Path, Callable[[str], Server]], Server]


@dataclasses.dataclass(eq=False)
class SharedServer(Server):
    """A server of the run's keeper, as a worker sees it: address and directories;
    the keeper starts and stops it."""

    shared_pid: int | None = None

    @property
    def pid(self) -> int | None:
        return self.shared_pid

    def is_running(self) -> bool:
        return True

    def start(self) -> None:
        raise RuntimeError(self._refusal("start"))

    def kill(self) -> None:
        raise RuntimeError(self._refusal("kill"))

    def stop(self) -> None:
        raise RuntimeError(self._refusal("stop"))

    def _refusal(self, what: str) -> str:
        return (
            f"{what}(): {self.name} on port {self.port} is shared by every worker of this "
            "parallel run; start a server of the test's own, or run with -n 0"
        )


class _Slot:
    """One server of the keeper: the thread that starts it, keeps it and stops it."""

    def __init__(self, name: str, start: Callable[[Path], Server]) -> None:
        self.name = name
        self.ready = threading.Event()
        self.finish = threading.Event()
        self.server: Server | None = None
        self.unavailable: str | None = None
        self.error: str | None = None
        self._start = start
        self.thread = threading.Thread(target=self._run, name=f"joblocks-server-{name}")
        # The parent-death signal follows the thread that forks the server: this one
        # lives until the run ends (servers._parent_death_signal).
        self.thread.lives_for_the_run = True  # type: ignore[attr-defined]
        self.thread.daemon = True
        self.thread.start()

    def _run(self) -> None:
        tmp = Path(tempfile.mkdtemp(prefix=f"joblocks-{self.name}-"))
        try:
            try:
                self.server = self._start(tmp)
            except ServerUnavailable as exc:
                self.unavailable = f"{self.name} unavailable: {exc}"
            except BaseException as exc:
                self.error = f"{self.name} failed to start: {type(exc).__name__}: {exc}"
            self.ready.set()
            self.finish.wait()
            if self.server is not None:
                self.server.stop()
        finally:
            self.ready.set()
            shutil.rmtree(tmp, ignore_errors=True)

    def reply(self) -> dict[str, object]:
        if self.server is None:
            return {"unavailable": self.unavailable} if self.unavailable else {"error": self.error}
        s = self.server
        return {
            "server": {
                "name": s.name,
                "port": s.port,
                "url": s.url,
                "data_dir": str(s.data_dir),
                "log_file": str(s.log_file),
                "root_dir": str(s.root_dir),
                "socket_dir": str(s.socket_dir),
                "pid": s.pid,
            }
        }


class Keeper:
    """Starts the shared servers on demand in the controlling process; :meth:`close`
    stops them, the last started first."""

    def __init__(self, recipes: dict[str, Recipe]) -> None:
        self._recipes = recipes
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.Lock()
        self._dir = Path(tempfile.mkdtemp(prefix="joblocks-keeper-"))
        if len(str(self._dir)) > 90:  # Unix socket paths are short
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = Path(tempfile.mkdtemp(prefix="joblocks-keeper-", dir="/tmp"))
        self.address = str(self._dir / "keeper.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.address)
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self._closed = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, name="joblocks-keeper", daemon=True)
        self._acceptor.start()

    def get(self, name: str) -> _Slot:
        """The slot of ``name``, started if it was not (its dependencies first)."""
        with self._lock:
            slot = self._slots.get(name)
            if slot is None:
                recipe = self._recipes[name]
                slot = _Slot(name, lambda tmp: recipe(tmp, self._need))
                self._slots[name] = slot
        slot.ready.wait()
        return slot

    def _need(self, name: str) -> Server:
        slot = self.get(name)
        if slot.server is None:
            if slot.unavailable:
                raise ServerUnavailable(slot.unavailable)
            raise servers.ServerStartError(slot.error or name)
        return slot.server

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                name = _read_line(conn)
                if name not in self._recipes:
                    reply: dict[str, object] = {"error": f"no shared server named {name!r}"}
                else:
                    reply = self.get(name).reply()
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass

    def close(self) -> None:
        self._closed.set()
        self._acceptor.join(timeout=5)
        self._listener.close()
        with self._lock:
            slots = list(self._slots.values())
        for slot in reversed(slots):
            slot.finish.set()
            slot.thread.join(timeout=servers._SHUTDOWN_TIMEOUT + 10)
        shutil.rmtree(self._dir, ignore_errors=True)


def start_keeper(recipes: dict[str, Recipe]) -> Keeper:
    """A keeper for this process (the controller of an xdist run). From the main thread:
    SIGTERM then unwinds the run like Ctrl-C, so its cleanup stops the servers."""
    servers._unwind_on_sigterm()
    return Keeper(recipes)


def ask(address: str, name: str) -> Server | str:
    """The shared server ``name`` from the keeper at ``address``, or why it is
    unavailable (a string). Raises ServerStartError if it failed to start."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(REQUEST_TIMEOUT)
        conn.connect(address)
        conn.sendall(name.encode() + b"\n")
        reply = json.loads(_read_line(conn))
    if "unavailable" in reply:
        return str(reply["unavailable"])
    if "error" in reply:
        raise servers.ServerStartError(str(reply["error"]))
    fields = reply["server"]
    return SharedServer(
        name=fields["name"],
        port=int(fields["port"]),
        url=fields["url"],
        data_dir=Path(fields["data_dir"]),
        log_file=Path(fields["log_file"]),
        root_dir=Path(fields["root_dir"]),
        socket_dir=Path(fields["socket_dir"]),
        _argv=[],
        _user=None,
        _ready=lambda server: None,
        _stop_signal=signal.SIGTERM,
        shared_pid=fields["pid"],
    )


def _read_line(conn: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()
