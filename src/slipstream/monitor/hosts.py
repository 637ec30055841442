"""The HTTP servers' guards.

Against DNS rebinding: a page on any web site can make a browser send requests to 127.0.0.1
under a host name of its own. A server bound to a loopback address (all of 127.0.0.0/8, and
::1) answers only to the names of the loopback (`localhost`, any 127.x.y.z, `[::1]`) with its
own port; anything else gets 421. A server bound elsewhere (`--bind 0.0.0.0`, told so on
purpose) answers to any name.

Against idle and vanished clients (`BoundedServer`): at most MAX_CONNECTIONS connections are
served at once (one thread each; one more is closed at once), a connection that sends nothing
for IDLE_TIMEOUT seconds is closed, and a client that goes away mid-answer (BrokenPipeError,
ConnectionResetError, a timeout) is a debug line in the log, never a traceback in the run's
terminal."""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

logger = logging.getLogger(__name__)

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
#: connections served at once by each server (each holds a thread while open)
MAX_CONNECTIONS = 32
#: seconds a connection may stay silent (a request line, headers, the next request)
IDLE_TIMEOUT = 10.0
#: what a client's leaving looks like to the server: never worth a traceback
CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


def is_loopback(name: str) -> bool:
    """`localhost`, any address of 127.0.0.0/8, or ::1 (brackets allowed)."""
    name = name.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


_HOST = re.compile(r"(\[[^\]]+\]|[^:\[\]]+)(?::(\d{1,5}))?")

MISDIRECTED = "421 Misdirected Request"
REFUSAL = b'{"error": "this server answers to localhost, 127.x.y.z and [::1] only"}'


def host_allowed(header: str | None, bind: str, port: int) -> bool:
    """Whether a request with this `Host` header may be served by a server on `bind:port`."""
    if not is_loopback(bind):
        return True
    match = _HOST.fullmatch((header or "").strip())
    if match is None:
        return False
    return is_loopback(match.group(1)) and int(match.group(2) or 80) == port


class BoundedServer:
    """A mixin before `ThreadingMixIn`'s server classes: bounded threads, no client's
    disconnect printed. The handler sets `timeout = IDLE_TIMEOUT` (socketserver applies it
    to the connection's socket)."""

    max_connections = MAX_CONNECTIONS
    daemon_threads = True
    request_queue_size = 128  # listen backlog: socketserver's 5 makes a burst wait for SYN retries

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(self.max_connections)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):  # full: close it now, keep no thread
            logger.debug("%s: %d connections open, closed", client_address, MAX_CONNECTIONS)
            self.shutdown_request(request)  # type: ignore[attr-defined]
            return
        slot = _Slot(self._slots)

        def serve() -> None:
            try:  # ThreadingMixIn's: finish the request, handle_error, shut it down
                self.process_request_thread(request, client_address)  # type: ignore[attr-defined]
            finally:
                slot.release()

        try:
            threading.Thread(target=serve, daemon=True).start()
        except BaseException:  # no thread, or SIGTERM's KeyboardInterrupt while it started
            slot.release()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        error = sys.exc_info()[1]
        if isinstance(error, CLIENT_GONE):
            logger.debug("%s went away: %r", client_address, error)
        else:  # one line in the log, not socketserver's traceback on the run's terminal
            logger.warning("a request from %s failed: %r", client_address, error)


class _Slot:
    """One connection's slot, released once by whichever comes first: its thread's end, or
    an exception in the server's thread while starting it (a KeyboardInterrupt can land after
    the thread has served and released; a second release must not replace it)."""

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        self._slots = slots
        self._lock = threading.Lock()
        self._held = True

    def release(self) -> None:
        with self._lock:
            if self._held:
                self._held = False
                self._slots.release()


def guarded(app: Callable[..., Iterable[bytes]], bind: str, port: Callable[[], int]) -> Any:
    """A WSGI app that refuses requests whose Host is not the server's (see host_allowed)."""

    def guarded_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if not host_allowed(environ.get("HTTP_HOST"), bind, port()):
            start_response(MISDIRECTED, [("Content-Type", "application/json")])
            return [REFUSAL]
        return app(environ, start_response)

    return guarded_app
