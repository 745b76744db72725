"""A TCP relay in a process of its own that can stop forwarding while keeping its
sockets open: what a hung pooler or load balancer does to a database connection.

:class:`Relay` starts ``python tests/support/relay.py TARGET_PORT`` and talks to it over
its stdin/stdout: ``stall`` (stop passing data either way, keep every socket open and
keep accepting connections, forwarding nothing), ``refuse`` (close every connection and
each new one at once: a server that went away) and ``resume``; each is acknowledged
before the method returns, so a test knows the relay's state from then on.
``--stall-after SECONDS`` stalls it by itself that long after it started (the fault of
a ``joblocks run`` a test starts through it).

Nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

#: How long :class:`Relay` waits for the relay process to start or acknowledge (s).
CONTROL_TIMEOUT_S = 30.0


class Relay:
    """A relay process forwarding 127.0.0.1:``port`` to 127.0.0.1:``target``."""

    def __init__(self, target: int, stall_after_s: float | None = None) -> None:
        argv = [sys.executable, str(Path(__file__).resolve()), str(target)]
        if stall_after_s is not None:
            argv += ["--stall-after", str(stall_after_s)]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.port = int(self._reply("listening "))

    def _reply(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            if not selector.select(CONTROL_TIMEOUT_S):
                raise RuntimeError(f"the relay did not answer {prefix.strip()!r} in time")
        finally:
            selector.close()
        line = self.proc.stdout.readline()
        if not line.startswith(prefix):
            raise RuntimeError(f"the relay said {line!r}, expected {prefix!r}")
        return line[len(prefix) :].strip()

    def _command(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        self._reply(word + ("d" if word.endswith("e") else "ed"))

    def stall(self) -> None:
        """Stop forwarding (sockets stay open); returns once the relay has stalled."""
        self._command("stall")

    def refuse(self) -> None:
        """Close every connection through the relay, and each new one at once."""
        self._command("refuse")

    def resume(self) -> None:
        """Forward again (new connections)."""
        self._command("resume")

    def close(self) -> None:
        """End the relay process (its sockets close)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(CONTROL_TIMEOUT_S)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _serve(target: int, stall_after_s: float | None) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "control")
    peers: dict[socket.socket, socket.socket] = {}
    stalled = False
    refusing = False
    stall_at = None if stall_after_s is None else time.monotonic() + stall_after_s
    print(f"listening {listener.getsockname()[1]}", flush=True)

    def close(sock: socket.socket) -> None:
        other = peers.pop(sock, None)
        for one in (sock, other):
            if one is None:
                continue
            peers.pop(one, None)
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(one)
            one.close()

    def set_stalled(value: bool) -> None:
        nonlocal stalled
        stalled = value
        for sock in list(peers):
            with contextlib.suppress(KeyError, ValueError):
                if value:
                    selector.unregister(sock)
                else:
                    selector.register(sock, selectors.EVENT_READ, "data")

    while True:
        timeout = None if stall_at is None else max(0.0, stall_at - time.monotonic())
        events = selector.select(timeout)
        if stall_at is not None and time.monotonic() >= stall_at:
            stall_at = None
            set_stalled(True)
        for key, _ in events:
            if key.data == "control":
                word = sys.stdin.readline().strip()
                if not word:
                    return  # the test process went away
                refusing = word == "refuse"
                if refusing:
                    for sock in list(peers):
                        close(sock)
                set_stalled(word == "stall")
                print(word + ("d" if word.endswith("e") else "ed"), flush=True)
            elif key.data == "accept":
                try:
                    client, _ = listener.accept()
                except BlockingIOError:
                    continue
                if refusing:
                    client.close()
                    continue
                upstream = socket.create_connection(("127.0.0.1", target), timeout=5)
                for one, other in ((client, upstream), (upstream, client)):
                    one.setblocking(True)
                    peers[one] = other
                    if not stalled:
                        selector.register(one, selectors.EVENT_READ, "data")
            else:
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock not in peers:
                    continue
                try:
                    data = sock.recv(65536)
                    if data:
                        peers[sock].sendall(data)
                        continue
                except OSError:
                    pass
                close(sock)


if __name__ == "__main__":
    args = sys.argv[1:]
    after = None
    if "--stall-after" in args:
        at = args.index("--stall-after")
        after = float(args[at + 1])
        del args[at : at + 2]
    _serve(int(args[0]), after)
