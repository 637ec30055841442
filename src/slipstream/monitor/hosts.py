"""The HTTP servers' guard against DNS rebinding: a page on any web site can make a browser
send requests to 127.0.0.1 under a host name of its own. A server bound to a loopback address
answers only to the names of the loopback (`127.0.0.1`, `localhost`, `[::1]`) with its own
port; anything else gets 421. A server bound elsewhere (`--bind 0.0.0.0`, told so on
purpose) answers to any name."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_HOST = re.compile(r"(\[[^\]]+\]|[^:\[\]]+)(?::(\d{1,5}))?")

MISDIRECTED = "421 Misdirected Request"
REFUSAL = b'{"error": "this server answers to 127.0.0.1, localhost and [::1] only"}'


def host_allowed(header: str | None, bind: str, port: int) -> bool:
    """Whether a request with this `Host` header may be served by a server on `bind:port`."""
    if bind.strip("[]").lower() not in LOOPBACK:
        return True
    match = _HOST.fullmatch((header or "").strip())
    if match is None:
        return False
    name = match.group(1).strip("[]").lower()
    return name in LOOPBACK and int(match.group(2) or 80) == port


def guarded(app: Callable[..., Iterable[bytes]], bind: str, port: Callable[[], int]) -> Any:
    """A WSGI app that refuses requests whose Host is not the server's (see host_allowed)."""

    def guarded_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if not host_allowed(environ.get("HTTP_HOST"), bind, port()):
            start_response(MISDIRECTED, [("Content-Type", "application/json")])
            return [REFUSAL]
        return app(environ, start_response)

    return guarded_app
