"""Helpers of the reliability suite: figures, statistics and the faults themselves.

Everything that injects a fault undoes it in a ``finally``: the iptables rules
(:func:`dropped`), the tmpfs mounts (:func:`small_tmpfs`), the TCP proxy
(:class:`TcpProxy`). Nothing here sends a packet anywhere but 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
RESULTS_ENV = "JOBLOCKS_RELIABILITY_RESULTS"


def unavailable(reason: str) -> None:
    """Skip locally; in CI (``CI=true``) nothing may skip, so fail instead."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: reliability scenarios must run)")
    pytest.skip(reason)


def tool(name: str) -> str:
    """The full path of a command, also looked up in the sbin directories."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which(name, path=path)
    return found or name


def need_root_tool(*tools: str) -> None:
    """The scenario injects its fault with these commands, as root."""
    if os.geteuid() != 0:
        unavailable("fault injection needs root")
    for name in tools:
        if not os.path.isabs(tool(name)):
            unavailable(f"{name!r} not found (its Debian package is installed by .ci/run)")


# -- figures -----------------------------------------------------------------------------


class Reporter:
    """Prints a scenario's figures (shown with ``-s``) and appends them as one JSON line
    to the file named by ``JOBLOCKS_RELIABILITY_RESULTS`` when it is set."""

    def __init__(self, test: str, size: str) -> None:
        self.test = test
        self.size = size

    def __call__(self, scenario: str, backend: str, **figures: Any) -> None:
        text = ", ".join(f"{name}={_show(value)}" for name, value in figures.items())
        print(f"\n[reliability] {scenario} [{backend}, {self.size}]: {text}")
        path = os.environ.get(RESULTS_ENV)
        if not path:
            return
        line = {
            "scenario": scenario,
            "backend": backend,
            "size": self.size,
            "test": self.test,
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "figures": figures,
        }
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, (list, tuple)) and len(value) > 8:
        return f"[{', '.join(_show(v) for v in value[:4])}, …, {_show(value[-1])}]"
    return str(value)


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return float(ordered[rank - 1])


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


# -- a TCP proxy on loopback, so that a fault on its port touches only our connections ------


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target``, one thread for all sockets.

    The connection-cut scenario drops packets on the proxy's port with iptables: only
    the connections made through it are cut, the database server and every other
    client of it keep working.
    """

    def __init__(self, target: int) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            for key, _ in self._selector.select(timeout=0.1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept()
                else:
                    self._pump(sock)
        for sock in list(self._peers):
            self._close(sock)
        self._selector.close()
        self._listener.close()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
        except OSError:
            client.close()
            return
        for one, other in ((client, upstream), (upstream, client)):
            one.setblocking(True)
            one.settimeout(5)
            self._peers[one] = other
            self._selector.register(one, selectors.EVENT_READ, None)

    def _pump(self, sock: socket.socket) -> None:
        other = self._peers.get(sock)
        if other is None:
            return
        try:
            data = sock.recv(65536)
            if data:
                other.sendall(data)
                return
        except OSError:
            pass
        self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        other = self._peers.pop(sock, None)
        for one in (sock, other):
            if one is None:
                continue
            self._peers.pop(one, None)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(one)
            one.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(10)


# -- iptables -------------------------------------------------------------------------------


@contextlib.contextmanager
def dropped(port: int, direction: str) -> Iterator[None]:
    """Drop loopback TCP packets to (``"request"``) or from (``"reply"``) ``port``.

    ``request`` loses what a client sends to the port (its statement never reaches
    the server); ``reply`` loses what comes back (the statement runs and commits, the
    client never hears of it). The rule is removed in a ``finally``.
    """
    flag = {"request": "--dport", "reply": "--sport"}[direction]
    rule = [
        "INPUT",
        "-s",
        "127.0.0.1",
        "-d",
        "127.0.0.1",
        "-p",
        "tcp",
        flag,
        str(port),
        "-m",
        "comment",
        "--comment",
        f"joblocks-reliability-{os.getpid()}",
        "-j",
        "DROP",
    ]
    iptables = tool("iptables")
    subprocess.run([iptables, "-w", "5", "-I", *rule], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run([iptables, "-w", "5", "-D", *rule], check=True, capture_output=True)


# -- file systems ---------------------------------------------------------------------------


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``path`` (created), unmounted in a ``finally``."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [tool("mount"), "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            remount(path, "rw")
        subprocess.run([tool("umount"), "-l", str(path)], check=True, capture_output=True)


def remount(path: Path, mode: str) -> None:
    """``mount -o remount,ro`` (or ``rw``) of the file system on ``path``."""
    subprocess.run(
        [tool("mount"), "-o", f"remount,{mode}", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )


def fill(path: Path) -> int:
    """Write a file of zeros into ``path`` until the file system is full; its size."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    written = 0
    block = b"\0" * 4096
    try:
        while True:
            try:
                written += os.write(fd, block)
            except OSError:
                # The last partial page, then nothing at all.
                try:
                    written += os.write(fd, b"\0" * 512)
                except OSError:
                    return written
    finally:
        os.close(fd)


# -- processes --------------------------------------------------------------------------------


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of a process in MiB (from /proc)."""
    with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def open_fds(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def spans_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether the closed intervals ``a`` and ``b`` share more than an end point."""
    return max(a[0], b[0]) < min(a[1], b[1])


def summary(values: Iterable[float]) -> dict[str, float]:
    data = list(values)
    return {
        "p50": round(percentile(data, 50), 2),
        "p99": round(percentile(data, 99), 2),
        "max": round(max(data), 2) if data else math.nan,
    }
