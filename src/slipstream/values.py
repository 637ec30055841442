"""Value parsers shared by settings (`config.py`) and pipeline parameters (`Param`).

Each takes what a flag, an environment variable or a TOML key gave (text, number, bool, table)
and returns the typed value, or raises ValueError whose text says what is allowed."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from slipstream.specs import parse_duration

T = TypeVar("T")

#: the NAME of `NAME=VALUE`: a Python identifier (so a path or URL with `=` is not mistaken)
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def positive_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a positive integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError("a positive integer") from None
    if number <= 0 or (isinstance(value, float) and value != number):
        raise ValueError("a positive integer")
    return number


def positive_number(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("a positive number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("a positive number") from None
    if not number > 0 or number == float("inf"):
        raise ValueError("a positive number")
    return number


def port(value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError("a TCP port 0-65535") from None
    if not 0 <= number <= 65535 or isinstance(value, bool):
        raise ValueError("a TCP port 0-65535")
    return number


def choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError("one of " + ", ".join(allowed))
        return text

    return parse


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("true or false")


_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/")


def path(value: Any) -> Path:
    """A local path; `file:///abs/path` is taken as /abs/path. Other URIs (s3a://, hdfs://,
    gs://) are refused: checkpoint locks, `reset` and the outputs' marks work on the local file
    system only, and a URI read as a local path would land in a folder named `s3a:`."""
    text = str(value).strip()
    if not text:
        raise ValueError("a path")
    scheme = _SCHEME.match(text)
    if scheme and scheme.group("scheme").lower() == "file":
        parsed = urllib.parse.urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"a local path (file:// on host {parsed.netloc!r} is not local)")
        text = urllib.parse.unquote(parsed.path)
    elif scheme:
        raise ValueError(
            f"a local path: {scheme.group('scheme')}:// paths are not supported (locks, reset "
            "and output marks work on the local file system); use a local or mounted folder"
        )
    return Path(text).expanduser()


def text(value: Any) -> str:
    out = str(value).strip()
    if not out:
        raise ValueError("a non-empty text")
    return out


def connect_url(value: Any) -> str:
    """A Spark Connect URL: sc://HOST[:PORT][/;param=value...]."""
    url = str(value).strip()
    host = url[5:].split("/", 1)[0].split(":", 1)[0] if url.startswith("sc://") else ""
    if not host:
        raise ValueError("a Spark Connect URL such as sc://127.0.0.1:15002")
    return url


def duration(value: Any) -> timedelta:
    return parse_duration(value)


def optional_duration(value: Any) -> timedelta | None:
    """A duration, or `none`/`off` for no value (e.g. no slide: tumbling windows)."""
    if value is None or str(value).strip().lower() in ("none", "off", ""):
        return None
    return parse_duration(value)


def conf(value: Any) -> dict[str, str]:
    """`--conf key=value` (repeatable) or a TOML table."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    items = [value] if isinstance(value, str) else list(value)
    out: dict[str, str] = {}
    for item in items:
        key, sep, val = str(item).partition("=")
        if not sep or not key.strip():
            raise ValueError("key=value pairs, e.g. spark.sql.shuffle.partitions=8")
        out[key.strip()] = val.strip()
    return out


def named(parse: Callable[[Any], T]) -> Callable[[Any], dict[str, T]]:
    """`VALUE` or `NAME=VALUE`, repeatable (or a TOML table of NAME = VALUE) -> {NAME: value};
    a bare VALUE is stored under the name "" (it applies to every input or output that takes
    one). NAME must be an identifier, so `postgresql://h/db?sslmode=require` or `data/day=1`
    stay whole values."""

    def parse_named(value: Any) -> dict[str, T]:
        if isinstance(value, Mapping):
            return {str(k): parse(v) for k, v in value.items()}
        items = [value] if isinstance(value, str | Path) or not _iterable(value) else list(value)
        out: dict[str, T] = {}
        for item in items:
            name, sep, rest = str(item).partition("=")
            if sep and NAME.match(name.strip()):
                out[name.strip()] = parse(rest)
            else:
                out[""] = parse(item)
        return out

    return parse_named


def _iterable(value: Any) -> bool:
    return isinstance(value, list | tuple)
