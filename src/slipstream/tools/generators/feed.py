"""`slipstream feed`: a line server for the socket source, so the quick example runs without nc.

Waits for a client (Spark's socket source), then sends the lines of FILE (or standard input, as
typed) to every connected client. Binds 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from slipstream.core.words import count


class LineServer:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self._server = socket.create_server((host, port), reuse_port=False)
        self.port = self._server.getsockname()[1]
        self._clients: list[socket.socket] = []
        self._lock = threading.Lock()
        self._connected = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self._clients.append(conn)
            self._connected.set()

    def wait_for_client(self, timeout: float | None = None) -> bool:
        return self._connected.wait(timeout)

    def send(self, lines: Iterable[str]) -> int:
        sent = 0
        for line in lines:
            data = (line.rstrip("\n") + "\n").encode()
            with self._lock:
                alive = []
                for client in self._clients:
                    try:
                        client.sendall(data)
                        alive.append(client)
                    except OSError:
                        client.close()
                self._clients = alive
            sent += 1
        return sent

    def close(self) -> None:
        self._server.close()
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients = []


def serve(
    port: int,
    file: Path | None,
    host: str = "127.0.0.1",
    out: TextIO = sys.stderr,
    stdin: TextIO = sys.stdin,
) -> int:
    server = LineServer(port, host)
    print(
        f"feed: listening on {host}:{server.port}; waiting for a client "
        "(e.g. slipstream run wordcount --source socket)",
        file=out,
        flush=True,
    )
    try:
        server.wait_for_client()
        if file is not None:
            with open(file) as handle:
                n = server.send(handle)
            print(
                f"feed: sent {count(n, 'line')} from {file}; Ctrl-C to stop", file=out, flush=True
            )
            threading.Event().wait()
        else:
            print("feed: type lines; Ctrl-D or Ctrl-C to stop", file=out, flush=True)
            server.send(stdin)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
